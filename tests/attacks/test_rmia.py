"""RMIA (Zarifzadeh, Liu, Shokri 2024): the pairwise likelihood-ratio score against a population, its
online and offline p(x), calibration with one or two reference models, and the LiRA minimum."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax

from attacks.membership import AttackInputs, check_references, run_attacks
from attacks.rmia import A_GRID, balanced_log_marginal, choose_offline_a, leave_one_out, log_marginal, rmia_scores
from audit.errors import UserError
from audit.stats.metrics import auc

C = 10


def _lp(logit: np.ndarray) -> np.ndarray:
    """(..., n, C) log-probabilities whose label (class 0) logit is ``logit``, the others 0."""
    z = np.zeros(logit.shape + (C,))
    z[..., 0] = logit
    return log_softmax(z, axis=-1)


def test_score_counts_the_dominated_population_pairs():
    rng = np.random.default_rng(0)
    R, n, Z = 3, 20, 50
    ref = np.log(rng.uniform(0.05, 0.9, (R, n)))
    ref_in = rng.random((R, n)) < 0.5
    pop_ref = np.log(rng.uniform(0.05, 0.9, (R, Z)))
    target, pop_target = np.log(rng.uniform(0.05, 0.9, n)), np.log(rng.uniform(0.05, 0.9, Z))
    for a, gamma in ((None, 1.0), (0.3, 2.0)):
        got = rmia_scores(target, ref, ref_in, pop_target, pop_ref, a, gamma)
        # brute force, Eq. (3)-(5): p(x) online = mean over all models; offline (1+a)/2 p_OUT + (1-a)/2
        p_ref, pp_ref = np.exp(ref), np.exp(pop_ref)
        if a is None:
            px, pz = p_ref.mean(0), pp_ref.mean(0)
        else:
            px = (1 + a) / 2 * np.array([p_ref[~ref_in[:, i], i].mean() if (~ref_in[:, i]).any() else p_ref[:, i].mean()
                                         for i in range(n)]) + (1 - a) / 2
            pz = (1 + a) / 2 * pp_ref.mean(0) + (1 - a) / 2
        lr = (np.exp(target) / px)[:, None] / (np.exp(pop_target) / pz)[None, :]
        np.testing.assert_array_equal(np.floor(got * (Z + 1)), (lr >= gamma).sum(axis=1))
        # within a step the ratio orders the candidates: the score is strictly increasing in p_theta(x) / p(x)
        ratio = np.exp(target) / px
        assert (np.diff(got[np.argsort(ratio)]) > 0).all()


def test_offline_marginal_and_its_parameter_range():
    ref = np.log(np.array([[0.2, 0.6], [0.4, 0.8]]))
    ref_in = np.array([[False, True], [False, False]])
    got = np.exp(log_marginal(ref, ref_in, 0.5))
    np.testing.assert_allclose(got, [0.75 * 0.3 + 0.25, 0.75 * 0.8 + 0.25])
    np.testing.assert_allclose(np.exp(log_marginal(ref, ref_in, None)), [0.3, 0.7])
    with pytest.raises(UserError, match="offline parameter"):
        log_marginal(ref, ref_in, 1.5)


def _world(references: int, effect: float = 3.0, seed: int = 0, m: int = 400, shadows: int = 4):
    """Target, shadows and reference models whose label logit is difficulty + effect * IN + noise."""
    rng = np.random.default_rng(seed)
    diff_t, diff_s, diff_p = rng.normal(0, 2, m), rng.normal(0, 2, m), rng.normal(0, 2, 300)
    target_in = rng.random(m) < 0.5
    shadow_in = rng.random((shadows, m)) < 0.5
    ref_in = np.zeros((references, m), dtype=bool)
    for i in range(m):
        ref_in[rng.choice(references, references // 2, replace=False), i] = True

    def logits(diff, inside):
        return _lp(diff + effect * inside + 0.5 * rng.standard_normal(inside.shape))

    labels = np.zeros(m, dtype=np.int64)
    pop_labels = np.zeros(300, dtype=np.int64)
    inputs = AttackInputs(
        n_classes=C, labels=labels, target_lp=logits(diff_t, target_in), shadow_labels=labels,
        shadow_lp=logits(diff_s, shadow_in), shadow_in=shadow_in, reference_lp=logits(diff_t, ref_in),
        reference_in=ref_in, population_labels=pop_labels, population_lp=logits(diff_p, np.zeros(300, bool)),
        reference_population_lp=logits(diff_p, np.zeros((references, 300), bool)),
        shadow_population_lp=logits(diff_p, np.zeros((shadows, 300), bool)))
    return inputs, target_in


@pytest.mark.parametrize("references", [1, 2, 4])
def test_rmia_works_with_few_reference_models(references):
    inputs, target_in = _world(references)
    scored = run_attacks(("rmia",), inputs)
    assert set(scored) == {"rmia_online", "rmia_offline"}
    for name, s in scored.items():
        assert s.target.shape == target_in.shape and s.calibration.shape == s.calibration_in.shape
        assert auc(s.target, target_in) > 0.85, name
    off = scored["rmia_offline"]
    assert 0.0 <= off.parameters["a"] <= 1.0 and "largest mean AUC" in off.parameters["a_chosen_on"]
    # calibration never uses the target: one reference model -> the shadow games, else leave-one-reference-out
    assert ("shadow" if references == 1 else "reference") in off.calibrated_on
    # a per-example difficulty the loss attack cannot see: RMIA's reference models remove it
    assert auc(scored["rmia_offline"].target, target_in) > auc(inputs.target_lp[:, 0], target_in) + 0.1


def test_given_offline_parameter_is_used_and_independent_of_membership_when_no_effect():
    inputs, target_in = _world(4, effect=0.0)
    scored = run_attacks(("rmia_offline",), inputs, rmia_a=0.3)
    assert scored["rmia_offline"].parameters["a"] == 0.3
    assert abs(auc(scored["rmia_offline"].target, target_in) - 0.5) < 0.08


def test_leave_one_out_needs_two_models_and_lira_needs_four():
    with pytest.raises(UserError, match="at least 2 models"):
        leave_one_out(np.zeros((1, 3)), np.zeros((1, 3), bool), np.zeros((1, 5)), None)
    with pytest.raises(UserError, match="LiRA needs at least 4"):
        check_references(("lira_offline", "rmia_online"), 2)
    check_references(("rmia_online", "rmia_offline"), 1)
    inputs, _ = _world(2)
    with pytest.raises(UserError, match="LiRA needs at least 4"):
        run_attacks(("lira_offline",), inputs)


def test_balanced_marginal_uses_as_many_in_as_out_models():
    logp = np.log(np.array([[0.1, 0.5], [0.2, 0.5], [0.4, 0.5], [0.8, 0.5]]))
    member = np.array([[True, True], [True, True], [False, True], [True, True]])
    # column 0: one OUT model (row 2), so the first IN (row 0) joins it; column 1: no OUT model -> p(x) = 1
    np.testing.assert_allclose(balanced_log_marginal(logp, member), [np.log(0.25), 0.0])


def test_leave_one_reference_out_games_are_not_more_optimistic_than_the_target():
    """Each candidate IN exactly half of the reference models: in a leave-one-out game the others' plain
    mean holds one IN fewer exactly when the left-out model is a member, which leaks membership (mean
    calibration AUC 0.74 against the target's 0.67 in this simulation before the balanced marginal).
    With it the games may be a little weaker than the target (fewer reference models), never stronger
    beyond the AUC's sampling error (sd about 0.009 at 4,000 candidates; 0.02 slack)."""
    rng = np.random.default_rng(0)
    n, R, Z = 4000, 4, 1000
    difficulty = rng.normal(-2.0, 1.0, n)
    pop_difficulty = rng.normal(-2.0, 1.0, Z)

    def model(member):  # label log-probability: harder examples lower, +0.4 when trained on
        return np.minimum(difficulty + 0.4 * member + rng.normal(0.0, 0.5, n), 0.0)

    def population():
        return np.minimum(pop_difficulty + rng.normal(0.0, 0.5, Z), 0.0)

    ref_in = np.zeros((R, n), dtype=bool)
    for i in range(n):
        ref_in[rng.choice(R, R // 2, replace=False), i] = True
    refs = np.stack([model(ref_in[r]) for r in range(R)])
    pop_refs = np.stack([population() for _ in range(R)])
    target_in = rng.random(n) < 0.5
    target_auc = auc(rmia_scores(model(target_in), refs, ref_in, population(), pop_refs), target_in)
    games = leave_one_out(refs, ref_in, pop_refs, None)
    calibration_auc = np.mean([auc(s, m) for s, m in zip(games, ref_in, strict=True)])
    assert 0.6 < target_auc < 0.75
    assert calibration_auc <= target_auc + 0.02


def test_offline_a_on_games_over_random_subsets_counts_only_candidates_another_model_left_out():
    """Reference models on random subsets (a trained model's references): with two models, game j keeps the
    candidates the other model left out (members of j alone vs records in neither), so every score has an OUT
    model; a game left with one class is a one-line error."""
    rng = np.random.default_rng(0)
    R, n, Z = 2, 400, 200
    member = rng.random((R, n)) < 0.5
    logp = np.where(member, -0.1, -2.0) + 0.3 * rng.standard_normal((R, n))  # IN: a sure label; OUT: not
    pop = -2.0 + 0.3 * rng.standard_normal((R, Z))
    a, aucs = choose_offline_a(logp, member, pop, with_out_only=True)
    assert a in A_GRID and set(aucs) == set(A_GRID) and aucs[a] == max(aucs.values()) > 0.9
    with pytest.raises(UserError, match="no members or no non-members"):
        choose_offline_a(logp, np.ones((R, n), dtype=bool), pop, with_out_only=True)
