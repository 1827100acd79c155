"""DP-ERM output perturbation: exact minimiser, sensitivity, calibration (its audit: tests/kinds/mechanism/)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from audit.errors import UserError
from audit.theory.claims import GaussianClaim
from audit.theory.gaussian import analytic_gaussian_sigma
from targets.datasets import load_dataset
from targets.dperm import (
    DPERM,
    DPERM_TARGETS,
    binary_labels,
    crafted_canary,
    fit_logreg,
    make_dperm,
    predict_proba,
    prepare_features,
)


@pytest.fixture(scope="module")
def cancer():
    ds = load_dataset("breast_cancer")
    return ds.X.astype(np.float64), binary_labels("breast_cancer", ds.y)


def test_prepare_features_unit_ball():
    X = np.array([[3.0, 4.0], [0.0, 0.0], [1e-9, 0.0]])
    P = prepare_features(X)
    assert P.shape == (3, 3)
    assert np.all(np.linalg.norm(P, axis=1) <= 1 + 1e-12)
    assert np.allclose(P[0], [0.6 / math.sqrt(2), 0.8 / math.sqrt(2), 1 / math.sqrt(2)])
    assert np.allclose(P[1], [0, 0, 1 / math.sqrt(2)])


def test_binary_labels():
    y = binary_labels("digits", np.arange(10))
    assert list(y) == [-1] * 5 + [1] * 5
    assert list(binary_labels("breast_cancer", np.array([0, 1]))) == [-1, 1]
    with pytest.raises(UserError):
        binary_labels("mnist", np.array([0, 1, 2]))


def test_fit_matches_sklearn_and_is_a_stationary_point(cancer):
    X, y = cancer
    P = prepare_features(X)
    lam = 1e-2
    theta, g = fit_logreg(P, y, lam)
    assert g <= 1e-10
    # sklearn minimises 0.5 ||w||^2 + C sum loss, i.e. ours with lambda = 1 / (C n)
    sk = LogisticRegression(C=1.0 / (lam * len(y)), fit_intercept=False, tol=1e-12, max_iter=10_000)
    sk.fit(P, y)
    assert np.max(np.abs(sk.coef_[0] - theta)) < 1e-5
    acc = np.mean((predict_proba(theta, X) > 0.5) == (y > 0))
    assert acc > 0.9


def test_replacement_moves_minimiser_at_most_the_sensitivity(cancer):
    X, y = cancer
    lam = 1e-2
    n = len(y)
    base = fit_logreg(prepare_features(X), y, lam)[0]
    bound = 2 / (n * lam)
    rng = np.random.default_rng(0)
    shifts = []
    for _ in range(5):
        i = rng.integers(n)
        X2, y2 = X.copy(), y.copy()
        X2[i] = -X[rng.integers(n)] * 3
        y2[i] = -y2[i]
        shifts.append(np.linalg.norm(fit_logreg(prepare_features(X2), y2, lam)[0] - base))
    assert max(shifts) <= bound
    mech = make_dperm("dperm_breast_cancer")
    crafted = mech.minimiser_shift()
    assert crafted <= mech.sensitivity
    assert crafted > np.median(shifts)  # crafted canaries beat random replacements (docs/references.md, "Pitfalls")


def test_calibration_and_claim():
    erm = DPERM(1.0, 1e-5, 1e-2, n=500)
    assert erm.sensitivity == pytest.approx(2 / (500 * 1e-2))
    assert erm.sigma == pytest.approx(analytic_gaussian_sigma(1.0, 1e-5, erm.effective_sensitivity))
    assert erm.effective_sensitivity - erm.sensitivity < 1e-7
    claim = erm.claim
    assert isinstance(claim, GaussianClaim) and claim.neighbouring == "replace"
    assert claim.epsilon(1e-5) == pytest.approx(1.0, abs=1e-8)
    assert erm.nominal_claim.epsilon(1e-5) == pytest.approx(1.0)
    with pytest.raises(UserError):
        DPERM(1.0, 0.0, 1e-2, 10)
    with pytest.raises(UserError):
        DPERM(1.0, 1e-5, 0.0, 10)


def test_release_noise_has_the_calibrated_law(cancer):
    X, y = cancer
    erm = DPERM(2.0, 1e-5, 1e-1, n=len(y))
    theta = erm.minimiser(X, y)
    draws = erm.release(X, y, np.random.default_rng(1), n_draws=4000)
    resid = (draws - theta).reshape(-1)
    # sample variance of m = 124,000 N(0, sigma^2) values: relative sd sqrt(2/m) ~ 0.4%
    assert abs(resid.var() / erm.sigma ** 2 - 1) < 5 * math.sqrt(2 / resid.size)
    assert abs(resid.mean()) < 5 * erm.sigma / math.sqrt(resid.size)
    with pytest.raises(UserError):
        erm.minimiser(X[:-1], y[:-1])


def test_registered_targets_and_canary():
    assert set(DPERM_TARGETS) == {"dperm_digits", "dperm_breast_cancer"}
    X = np.zeros((20, 5))
    X[:, :4] = np.random.default_rng(0).random((20, 4))
    u = crafted_canary(X)
    assert abs(abs(u[4]) - 1) < 1e-9  # the unused coordinate
    with pytest.raises(UserError):
        make_dperm("dperm_mnist")
