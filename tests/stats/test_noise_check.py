"""The noise tests of the accounting check (audit.stats.noise_check) on synthetic recorders: a correct
Gaussian loop is flagged at most at each sub-test's share of alpha (Monte Carlo, fixed seeds, bound by the
0.999 quantile of Binomial(R, share)), and each planted mistake is caught by its test."""

import numpy as np
import pytest
from scipy import stats

from audit.stats.noise_check import ALPHA_SHARES, NoiseRecorder, check_noise, cosine_tail

SIZES, SIGMA, C, STEPS = (640, 10), 2.0, 1.0, 20
D = sum(SIZES)
SHARE = {"noise-level": ALPHA_SHARES["level-pooled"] + ALPHA_SHARES["level-step"],
         "noise-coverage": ALPHA_SHARES["coverage"],
         "noise-independence": ALPHA_SHARES["consecutive"] + ALPHA_SHARES["repeat"],
         "noise-cross-tensor": ALPHA_SHARES["cross-tensor"],
         "noise-distribution": ALPHA_SHARES["distribution"], "noise-seed": ALPHA_SHARES["seed"]}
#: The weight's coordinates of one input column (the zoo's 10 x 64 weight is 640 coordinates; column 3).
COLUMN = np.arange(10) * 64 + 3


def _run(rng, kind="gaussian", steps=STEPS, sigma=SIGMA):
    """One run's recorder: noise of ``kind`` at multiplier ``sigma`` for ``steps`` steps."""
    rec, once = NoiseRecorder(SIZES), rng.standard_normal(D) * sigma * C
    for _ in range(steps):
        if kind == "reused":
            noise = once
        elif kind == "laplace":  # variance 2 b^2 = sigma^2 C^2
            noise = rng.laplace(scale=sigma * C / np.sqrt(2), size=D)
        elif kind == "uniform":  # variance w^2 / 3 = sigma^2 C^2
            noise = rng.uniform(-1.0, 1.0, D) * np.sqrt(3) * sigma * C
        else:
            noise = rng.standard_normal(D) * sigma * C
        if kind == "no-bias-noise":
            noise = noise.copy()
            noise[SIZES[0]:] = 0.0
        if kind == "cross-tensor":  # the bias gets the weight's first noise values
            noise = noise.copy()
            noise[SIZES[0]:] = noise[:SIZES[1]]
        if kind == "partly-noised":  # one input column of the weight never noised (10 of 650 coordinates)
            noise = noise.copy()
            noise[COLUMN] = 0.0
        rec.add(noise)
    return rec


def _flagged(result):
    return {f.check for f in result.findings if f.violation}


@pytest.mark.parametrize("steps", [2, STEPS])
def test_a_correct_gaussian_loop_is_flagged_at_most_at_alpha(steps):
    """R pairs of correct runs at exactly the noise the claim needs (the level tests' boundary), at two steps
    and at 20: each check flags at most the 0.999 quantile of Bin(R, its share of alpha), the family at most
    Bin(R, alpha)'s."""
    runs, alpha = 200, 0.3
    counts = dict.fromkeys(SHARE, 0)
    family = 0
    for r in range(runs):
        rng = np.random.default_rng([r, 1, steps])
        flagged = _flagged(check_noise(_run(rng, steps=steps), _run(rng, steps=steps), C, SIGMA, alpha))
        for check in flagged:
            counts[check] += 1
        family += bool(flagged)
    for check, share in SHARE.items():
        assert counts[check] <= stats.binom.ppf(0.999, runs, alpha * share), (check, counts)
    assert family <= stats.binom.ppf(0.999, runs, alpha), counts


@pytest.mark.parametrize(("kind", "check"), [("no-bias-noise", "noise-level"), ("reused", "noise-independence"),
                                             ("laplace", "noise-distribution"), ("uniform", "noise-distribution"),
                                             ("cross-tensor", "noise-cross-tensor"),
                                             ("partly-noised", "noise-coverage")])
def test_each_planted_mistake_is_caught(kind, check):
    rng = np.random.default_rng(5)
    result = check_noise(_run(rng, kind), _run(rng, kind), C, SIGMA, 0.05)
    assert check in _flagged(result), result.findings


@pytest.mark.parametrize("kind", ["cross-tensor", "partly-noised"])
@pytest.mark.parametrize("steps", [2, 50])
def test_epsilon_infinite_noise_mistakes_are_caught_every_time(kind, steps):
    """Power ~1 on the two mistakes of infinite epsilon the level tests miss, at the smallest alpha a check
    gives the noise (one-run mode: 0.025 / 3) and 2 or 50 steps: caught in each of 20 seeds. Reused noise gives
    a cosine of 1 at every step (Z infinite); a coordinate without noise sums to exactly 0, below any positive
    quantile of chi^2_T."""
    check = {"cross-tensor": "noise-cross-tensor", "partly-noised": "noise-coverage"}[kind]
    for seed in range(20):
        rng = np.random.default_rng([seed, 8])
        assert check in _flagged(check_noise(_run(rng, kind, steps), None, C, SIGMA, 0.025 / 3)), seed


def test_the_coverage_floor_is_the_chi_square_quantile():
    """The coverage floor is (sigma C)^2 times the alpha/8/d quantile of chi^2_T: a coordinate just above it
    passes, one just below is flagged."""
    rec = _run(np.random.default_rng(11), steps=4)
    floor = stats.chi2.ppf(0.05 * ALPHA_SHARES["coverage"] / D, 4) * (SIGMA * C) ** 2
    rec.coordinate_squares[7] = floor * 1.01
    assert "noise-coverage" not in _flagged(check_noise(rec, None, C, SIGMA, 0.05))
    rec.coordinate_squares[7] = floor * 0.99
    result = check_noise(rec, None, C, SIGMA, 0.05)
    assert "noise-coverage" in _flagged(result)
    assert result.findings[1].details["coordinates_below"] == [1, 0]


def test_too_little_noise_is_caught_and_sets_the_epsilon_s_sigma():
    """sigma x 0.95 everywhere: a level violation; the worst tensor's upper value stays below the claim's sigma
    (the configuration's epsilon is computed with it) and above the true 0.95 sigma."""
    rng = np.random.default_rng(6)
    result = check_noise(_run(rng, sigma=0.95 * SIGMA, steps=50), None, C, SIGMA, 0.05)
    assert "noise-level" in _flagged(result)
    assert 0.95 * SIGMA < result.sigma_upper < SIGMA


def test_a_tensor_without_noise_sets_the_upper_to_zero():
    result = check_noise(_run(np.random.default_rng(7), "no-bias-noise"), None, C, SIGMA, 0.05)
    assert result.sigma_upper == 0.0 and result.summary["worst_tensor"] == 1
    assert result.findings[0].details["tensors_below"] == [1]


def test_noise_of_a_constant_seed_is_caught_across_runs():
    """Two runs from 'different seeds' whose generator is seeded by the same constant."""
    a, b = _run(np.random.default_rng(9)), _run(np.random.default_rng(9))
    assert _flagged(check_noise(a, b, C, SIGMA, 0.05)) == {"noise-seed"}


def test_noise_repeating_every_epoch_is_caught_at_any_lag():
    """A generator reseeded at every epoch: fresh within an epoch, the same noise epoch after epoch (lag 10)."""
    rec, epoch = NoiseRecorder(SIZES), np.random.default_rng(3).standard_normal((10, D)) * SIGMA * C
    for t in range(30):
        rec.add(epoch[t % 10])
    result = check_noise(rec, None, C, SIGMA, 0.05)
    assert "noise-independence" in _flagged(result)
    assert any(r.get("rejected") for r in result.findings[2].details["repeat"])


def test_the_cosine_null_is_exact():
    """``P(R >= r)`` of two independent Gaussian directions in n = 3 dimensions is ``(1 - r) / 2``
    (Archimedes: the height of a uniform point on the sphere is uniform)."""
    np.testing.assert_allclose(cosine_tail(np.array([-0.5, 0.0, 0.3, 0.9]), 3), [0.75, 0.5, 0.35, 0.05], atol=1e-12)


def test_memory_per_step_does_not_grow_with_the_parameters():
    """Per step: two floats per tensor and the sketch; beyond that one step's noise (the previous), the
    per-coordinate sums of squares and the cross-tensor sums (2 K^2)."""
    small, large = NoiseRecorder((1000, 10)), NoiseRecorder((100_000, 10))
    rng = np.random.default_rng(0)
    for rec in (small, large):
        for _ in range(3):
            rec.add(rng.standard_normal(sum(rec.sizes)))
    per_step = [(r.nbytes() - 2 * 8 * sum(r.sizes) - 48 - 2 * 8 * 4) / 3 for r in (small, large)]
    assert per_step[0] == per_step[1] == 2 * 2 * 8 + (128 + 10) * 4  # 128 sketch coordinates of 256 // 2, all 10
