"""Membership attacks (shadow, LiRA online/offline, loss, confidence) on synthetic targets whose
right answer is known, and the DP bound on membership advantage (a quick DP target end to end:
tests/e2e/membership/test_membership_attacks.py).

Synthetic worlds: every model's logit for a candidate's label is ``b_i + effect * IN + noise``
(other nine logits 0), where ``b_i`` is the candidate's difficulty. ``effect`` large = a model that
memorises its members; ``effect = 0`` = outputs independent of membership.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_softmax

from attacks.lira import lira_scores, logit_confidence
from attacks.membership import AttackInputs, run_attacks
from attacks.names import ATTACKS, expand_attacks
from audit.errors import UserError
from audit.stats.metrics import advantage_interval, attack_metrics, dp_advantage_bound
from audit.theory.claims import ApproxDPClaim

C = 10


def _log_probs(difficulty: np.ndarray, inside: np.ndarray, effect: float, rng: np.random.Generator) -> np.ndarray:
    """(..., n, C) log-probabilities with the label (class 0) logit ``b + effect * in + N(0, 0.5^2)``."""
    logits = np.zeros(inside.shape + (C,))
    logits[..., 0] = difficulty + effect * inside + 0.5 * rng.standard_normal(inside.shape)
    return log_softmax(logits, axis=-1)


def synthetic_inputs(effect: float, difficulty_sd: float, seed: int, m: int = 400, shadows: int = 4,
                     references: int = 8, population: int = 300) -> tuple[AttackInputs, np.ndarray]:
    """A target, shadow models on their own canaries, balanced reference models on the target's, and
    population samples (RMIA) that no model trained on."""
    rng = np.random.default_rng(seed)
    b_target = difficulty_sd * rng.standard_normal(m)
    b_shadow = difficulty_sd * rng.standard_normal(m)
    target_in = rng.random(m) < 0.5
    shadow_in = rng.random((shadows, m)) < 0.5
    reference_in = np.zeros((references, m), dtype=bool)
    for i in range(m):
        reference_in[rng.choice(references, references // 2, replace=False), i] = True
    labels = np.zeros(m, dtype=np.int64)
    b_pop = difficulty_sd * rng.standard_normal(population)

    def pop(models: int | None) -> np.ndarray:
        out = np.zeros(population if models is None else (models, population), dtype=bool)
        return _log_probs(b_pop, out, effect, rng)

    inputs = AttackInputs(
        n_classes=C, labels=labels, target_lp=_log_probs(b_target, target_in, effect, rng),
        shadow_labels=labels, shadow_lp=_log_probs(b_shadow, shadow_in, effect, rng), shadow_in=shadow_in,
        reference_lp=_log_probs(b_target, reference_in, effect, rng), reference_in=reference_in,
        population_labels=np.zeros(population, dtype=np.int64), population_lp=pop(None),
        reference_population_lp=pop(references), shadow_population_lp=pop(shadows))
    return inputs, target_in


def test_every_attack_near_perfect_on_memorising_model():
    inputs, target_in = synthetic_inputs(effect=25.0, difficulty_sd=1.0, seed=1)
    scored = run_attacks(tuple(ATTACKS), inputs)
    assert set(scored) == set(ATTACKS)
    for name, s in scored.items():
        metrics = attack_metrics(s.target, target_in)
        assert metrics.auc > 0.99, name
        assert metrics.tpr_at_fpr["0.01"] > 0.9, name
        assert s.calibration.shape == s.calibration_in.shape


def test_every_attack_near_chance_when_outputs_ignore_membership():
    inputs, target_in = synthetic_inputs(effect=0.0, difficulty_sd=2.0, seed=2)
    n1, n0 = int(target_in.sum()), int((~target_in).sum())
    sd = math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))  # null standard deviation of the AUC (Mann-Whitney)
    for name, s in run_attacks(tuple(ATTACKS), inputs).items():
        metrics = attack_metrics(s.target, target_in)
        assert abs(metrics.auc - 0.5) < 4 * sd, name
        # the true advantage is 0, so a valid 95% interval covers it (fixed seed)
        assert advantage_interval(s.target, target_in)[0] == 0.0, name


def test_lira_calibrates_per_example_difficulty():
    """Members gain 2 logits, but difficulties spread over +-4: a global loss threshold is weak,
    per-example Gaussians (LiRA) separate the two worlds by 4 noise standard deviations; RMIA's
    reference models remove the difficulty too."""
    inputs, target_in = synthetic_inputs(effect=2.0, difficulty_sd=4.0, seed=3)
    scored = run_attacks(("lira", "rmia", "loss"), inputs)
    for name in ("rmia_online", "rmia_offline"):
        assert attack_metrics(scored[name].target, target_in).auc > 0.85, name
    online = attack_metrics(scored["lira_online"].target, target_in)
    offline = attack_metrics(scored["lira_offline"].target, target_in)
    loss = attack_metrics(scored["loss"].target, target_in)
    assert online.auc > 0.95 and offline.auc > 0.95
    assert loss.auc < 0.75
    assert online.tpr_at_fpr["0.01"] > loss.tpr_at_fpr["0.01"] + 0.4


def test_lira_online_matches_gaussian_likelihood_ratio():
    ref_phi = np.array([[1.0, 5.0], [3.0, 7.0], [0.0, -1.0], [2.0, 1.0]])
    ref_in = np.array([[True, True], [True, True], [False, False], [False, False]])
    x = np.array([2.5, 0.0])
    out = lira_scores(x, ref_phi, ref_in, variance="per-example")
    from scipy.stats import norm

    mu_in, s_in = ref_phi[:2].mean(0), ref_phi[:2].std(0, ddof=1)
    mu_out, s_out = ref_phi[2:].mean(0), ref_phi[2:].std(0, ddof=1)
    expected = norm.logpdf(x, mu_in, s_in) - norm.logpdf(x, mu_out, s_out)
    np.testing.assert_allclose(out["online"], expected, rtol=1e-10)
    np.testing.assert_allclose(out["offline"], (x - mu_out) / s_out, rtol=1e-10)


def test_logit_confidence_is_stable_and_exact():
    lp = log_softmax(np.array([[40.0, 0.0, 0.0], [0.0, 1.0, 2.0]]), axis=-1)
    phi = logit_confidence(lp, np.array([0, 2]))
    p = np.exp(lp[1, 2])
    assert phi[0] == pytest.approx(40.0 - math.log(2.0), rel=1e-9)
    assert phi[1] == pytest.approx(math.log(p / (1 - p)), rel=1e-9)


@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.5, 0.0), (1.0, 1e-5), (3.0, 0.01), (8.0, 1e-5)])
def test_dp_advantage_bound_is_max_of_tradeoff(eps, delta):
    alpha = np.linspace(0.0, 1.0, 200001)
    beta = ApproxDPClaim(eps, delta).tradeoff(alpha) if eps > 0 else np.maximum(0.0, 1 - delta - alpha)
    numeric = float(np.max(1.0 - beta - alpha))  # max TPR - FPR over the f_{eps,delta} region
    assert dp_advantage_bound(eps, delta) == pytest.approx(numeric, abs=2e-5)
    if delta == 0:
        assert dp_advantage_bound(eps, 0.0) == pytest.approx(math.tanh(eps / 2))


def test_advantage_check_detects_a_false_claim():
    """A memorising model claimed to be 0.1-DP: the interval's lower end exceeds the bound."""
    inputs, target_in = synthetic_inputs(effect=25.0, difficulty_sd=1.0, seed=4)
    scores = run_attacks(("loss",), inputs)["loss"].target
    assert advantage_interval(scores, target_in)[0] > dp_advantage_bound(0.1, 1e-5)


def test_attack_names_and_errors():
    assert expand_attacks("lira") == ("lira_online", "lira_offline")
    assert expand_attacks("all") == tuple(ATTACKS)
    with pytest.raises(UserError):
        expand_attacks("nope")
    inputs, _ = synthetic_inputs(effect=1.0, difficulty_sd=1.0, seed=5)
    no_refs = AttackInputs(n_classes=inputs.n_classes, labels=inputs.labels, target_lp=inputs.target_lp,
                           shadow_labels=inputs.shadow_labels, shadow_lp=inputs.shadow_lp, shadow_in=inputs.shadow_in)
    with pytest.raises(UserError):
        run_attacks(("lira_online",), no_refs)
