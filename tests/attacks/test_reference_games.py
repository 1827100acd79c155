"""Leave-one-reference-out calibration games must not tell membership through their make-up
(attacks.reference_games): with no membership signal at all, a game's AUC is 0.5."""

import numpy as np
from sklearn.metrics import roc_auc_score

from attacks.lira import lira_leave_one_out
from attacks.reference_games import balanced_subset


def _references(n: int, models: int, rng: np.random.Generator) -> np.ndarray:
    """Each candidate IN exactly half of the reference models, as the membership game trains them."""
    ref_in = np.zeros((models, n), bool)
    for i in range(n):
        ref_in[rng.permutation(models)[: models // 2], i] = True
    return ref_in


def test_balanced_subset_has_equal_counts_whatever_the_left_out_model():
    rng = np.random.default_rng(0)
    ref_in = _references(200, 6, rng)
    for j in range(6):
        others = np.delete(ref_in, j, axis=0)
        keep = balanced_subset(others)
        assert np.all((keep & others).sum(axis=0) == 2) and np.all((keep & ~others).sum(axis=0) == 2)


def test_lira_games_carry_no_membership_without_signal():
    """phi does not depend on membership, so every game's AUC is 0.5 up to sampling error (about
    0.008 at 2,500 + 2,500 candidates; the bound below is 5 of those). Averaging over all the other
    models instead gives online AUC about 0.42 at 4 reference models: the left-out model's membership
    shows in how many IN models the others hold."""
    rng = np.random.default_rng(1)
    n, models = 5000, 4
    ref_in = _references(n, models, rng)
    phi = rng.normal(0.0, 2.0, n) + rng.normal(0.0, 1.0, (models, n))
    games = lira_leave_one_out(phi, ref_in, "global")
    for kind, scores in games.items():
        aucs = [roc_auc_score(ref_in[j], scores[j]) for j in range(models)]
        assert abs(np.mean(aucs) - 0.5) < 0.04, (kind, aucs)
