"""Correlated noise undone step by step (audit.stats.decorrelation): the noise tests of audit.stats.noise_check on
banded matrix-factorisation noise keep their level once the declared strategy is undone, and see a noising matrix
other than the declared one."""

import numpy as np
import pytest
from helpers import max_exceedances
from scipy import linalg

from audit.stats.decorrelation import ToeplitzDecorrelator, banded_sensitivity_reason, noise_scale
from audit.stats.noise_check import NoiseRecorder, check_noise

STRATEGY = (1.0, 0.6, 0.3, 0.1)  # the first column of a 4-banded lower-triangular Toeplitz C
CLIP, SIGMA, ALPHA = 1.0, 1.3, 0.05


def _mf_noise(rng: np.random.Generator, steps: int, d: int, noising: tuple[float, ...]) -> np.ndarray:
    """(steps, d) noise n = s C^{-1} Z of the strategy ``noising`` (its first column), s = sigma clip sens(C):
    what jax_privacy's matrix_factorization_privatizer adds, written with a dense solve (independent of the
    streaming code under test)."""
    column = np.zeros(steps)
    column[: min(len(noising), steps)] = noising[:steps]
    c = linalg.toeplitz(column, np.zeros(steps))
    z = rng.standard_normal((steps, d))
    return SIGMA * CLIP * noise_scale(STRATEGY) * linalg.solve_triangular(c, z, lower=True)


def _recorded(noise: np.ndarray) -> NoiseRecorder:
    half = noise.shape[1] // 2
    rec, undo = NoiseRecorder((half, noise.shape[1] - half)), ToeplitzDecorrelator(STRATEGY)
    for step in noise:
        rec.add(undo(step))
    return rec


def test_the_streaming_product_is_c_times_the_noise():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 5))
    undo = ToeplitzDecorrelator(STRATEGY)
    column = np.zeros(9)
    column[:4] = STRATEGY
    expected = linalg.toeplitz(column, np.zeros(9)) @ x
    np.testing.assert_allclose(np.stack([undo(row) for row in x]), expected, rtol=1e-12, atol=1e-12)
    assert noise_scale(STRATEGY) == pytest.approx(np.linalg.norm(STRATEGY))
    assert banded_sensitivity_reason(4, 4) == "" and "overlap" in banded_sensitivity_reason(4, 2)
    with pytest.raises(ValueError):
        ToeplitzDecorrelator((0.0, 1.0))


@pytest.mark.parametrize(("steps", "reps"), [(2, 60), (40, 40), (200, 12)])
def test_correct_banded_noise_is_flagged_at_most_at_alpha(steps, reps):
    """Noise of the declared strategy at the sigma the claim needs: every noise test together flags at most alpha
    (the Bonferroni split of check_noise), counted over seeded repetitions against Bin(reps, alpha)."""
    flagged = 0
    for rep in range(reps):
        rng = np.random.default_rng([steps, rep])
        rec, other = (_recorded(_mf_noise(rng, steps, 60, STRATEGY)) for _ in range(2))
        found = check_noise(rec, other, CLIP * noise_scale(STRATEGY), SIGMA, ALPHA)
        flagged += any(f.violation for f in found.findings)
    assert flagged <= max_exceedances(reps, ALPHA), flagged


def test_another_noising_matrix_than_the_declared_one_is_seen():
    """Noise of strategy (1, 1, 1, 1) where (1, 0.6, 0.3, 0.1) is declared: C n is then correlated across steps
    (the independence test), and independent noise declared as banded too."""
    for noising in ((1.0, 1.0, 1.0, 1.0), (1.0,)):
        caught = 0
        for rep in range(10):
            rng = np.random.default_rng([7, rep])
            rec, other = (_recorded(_mf_noise(rng, 40, 60, noising)) for _ in range(2))
            found = check_noise(rec, other, CLIP * noise_scale(STRATEGY), SIGMA, ALPHA)
            caught += any(f.violation for f in found.findings)
        assert caught == 10, noising
