"""Extraction (Tramèr et al. 2016; attacks.extraction): exact recovery with d + 1 queries, rounded outputs,
label-only baseline (``run extraction``: tests/e2e/extraction/test_extraction.py)."""


import numpy as np
import pytest

from attacks.extraction import (
    PredictionAPI,
    agreement,
    canonical,
    equation_solving,
    label_only_retraining,
    linear_features,
    relative_error,
    rounded_extraction,
    softmax,
    tv_distance,
    uniform_inputs,
)
from audit.errors import UserError

pytestmark = pytest.mark.usefixtures("one_thread")

#: Single-threaded BLAS: these problems are small, and on a loaded 2-core machine extra BLAS threads
#: slow them down tenfold.


@pytest.fixture(scope="module")
def digits_lr():
    """A softmax regression fitted to half of scikit-learn's digits (the victim), and the other half."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    clf = LogisticRegression(C=1.0, max_iter=500).fit(X[::2], y[::2])
    theta = np.hstack([clf.coef_, clf.intercept_[:, None]])
    return theta, X[1::2]


def _api(theta, decimals=None):
    return PredictionAPI(lambda X: softmax(linear_features(X) @ theta.T), theta.shape[1] - 1, theta.shape[0], decimals)


@pytest.mark.parametrize("classes", [2, 10])
def test_exact_recovery_with_d_plus_one_queries(digits_lr, classes):
    theta_full, X_test = digits_lr
    theta = theta_full[:classes] if classes == 10 else np.vstack([np.zeros(65), theta_full[3] - theta_full[8]])
    api = _api(theta)
    lo, hi = np.zeros(64), np.ones(64)
    stolen = equation_solving(api, linear_features, lo, hi, np.random.default_rng(0))
    assert stolen.queries == api.queries == 65  # d + 1
    assert relative_error(stolen.theta, canonical(theta)) < 1e-6
    unif = uniform_inputs(10_000, lo, hi, np.random.default_rng(1))
    for X in (X_test, unif):
        assert agreement(stolen.predict_proba(X), api(X)) == 1.0
        assert tv_distance(stolen.predict_proba(X), api(X)) < 1e-9


def test_fewer_than_d_plus_one_queries_is_a_user_error(digits_lr):
    with pytest.raises(UserError):
        equation_solving(_api(digits_lr[0]), linear_features, np.zeros(64), np.ones(64), np.random.default_rng(0), 64)


def test_rounded_outputs_least_squares_agreement(digits_lr):
    theta, X_test = digits_lr
    api = _api(theta, decimals=3)
    assert np.all(api(X_test[:5]) == np.round(api(X_test[:5]), 3))
    api.queries = 0
    lo, hi = np.zeros(64), np.ones(64)
    with pytest.raises(ValueError, match="rounded_extraction"):
        equation_solving(api, linear_features, lo, hi, np.random.default_rng(0))
    stolen = rounded_extraction(api, linear_features, lo, hi, np.random.default_rng(0))
    # doubling from 2 (d + 1) equation queries until stable, plus the probes that sized the query box
    d = stolen.details
    assert stolen.queries == api.queries == d["equation_queries"] + d["probe_queries"] and d["probe_queries"] >= 32
    assert d["converged"] and d["rounds"][0]["queries"] == 2 * 65 and d["rounds"][-1]["relative_change"] < 0.01
    assert d["equation_queries"] == 2 * 65 * 2 ** (len(d["rounds"]) - 1)
    exact = _api(theta)
    unif = uniform_inputs(10_000, lo, hi, np.random.default_rng(1))
    assert agreement(stolen.predict_proba(X_test), exact(X_test)) > 0.99
    assert agreement(stolen.predict_proba(unif), exact(unif)) > 0.99
    assert relative_error(stolen.theta, canonical(theta)) < 0.05
    # With exact outputs the same queries would solve exactly; rounding is what costs accuracy.
    assert relative_error(stolen.theta, canonical(theta)) > 1e-9


def test_label_only_baseline_counts_queries_and_is_worse(digits_lr):
    theta, X_test = digits_lr
    api = _api(theta)
    lo, hi = np.zeros(64), np.ones(64)
    base = label_only_retraining(api, linear_features, lo, hi, np.random.default_rng(0), 20 * 65)
    assert base.queries == api.queries == 1300
    exact = _api(theta)
    agree = agreement(base.predict_proba(X_test), exact(X_test))
    assert 0.6 < agree < 1.0
    # Labels carry no scale: the parameters are far from the victim's, unlike equation solving.
    assert relative_error(base.theta, canonical(theta)) > 0.1


def test_saturated_model_rounded_outputs_shrink_the_query_box():
    rng = np.random.default_rng(0)
    theta = np.vstack([np.zeros(101), rng.normal(0, 3.0, size=101)])  # logit ~ 15 on uniform inputs: one-hot
    api = _api(theta, decimals=3)
    X = uniform_inputs(200, np.zeros(100), np.ones(100), np.random.default_rng(3))
    assert (api(X).min(axis=1) == 0).mean() > 0.5
    stolen = rounded_extraction(api, linear_features, np.zeros(100), np.ones(100), np.random.default_rng(1))
    assert stolen.details["box_scale"] < 1.0
    X = uniform_inputs(2000, np.zeros(100), np.ones(100), np.random.default_rng(2))
    assert agreement(stolen.predict_proba(X), _api(theta)(X)) > 0.99


def test_saturated_ten_class_model_coarser_rounding_needs_more_queries():
    """A 10-class model whose rounded outputs on uniform inputs are one-hot (as MNIST's softmax
    regression): the unsaturated box and the doubling recover it at 2, 3 and 4 decimals, and coarser
    rounding needs more queries (at 2 decimals more than the cap of 64 (d + 1) for 1% stability)."""
    rng = np.random.default_rng(5)
    theta = np.hstack([rng.normal(0, 1.0, size=(10, 60)), rng.normal(0, 0.5, size=(10, 1))])
    lo, hi = np.zeros(60), np.ones(60)
    X = uniform_inputs(500, lo, hi, np.random.default_rng(3))
    assert (np.round(_api(theta)(X), 2) == 0).mean() > 0.5
    exact = _api(theta)
    queries = {}
    for decimals in (4, 3, 2):
        stolen = rounded_extraction(_api(theta, decimals), linear_features, lo, hi, np.random.default_rng(decimals))
        assert stolen.details["converged"] == (decimals > 2), decimals
        assert relative_error(stolen.theta, canonical(theta)) < 0.05
        assert agreement(stolen.predict_proba(X), exact(X)) > 0.99
        queries[decimals] = stolen.details["equation_queries"]
    assert queries[2] >= queries[3] >= queries[4] and queries[2] > queries[4]


def test_exact_api_with_underflowed_probability_is_user_error():
    theta = np.zeros((2, 3))
    theta[1] = [5000.0, 0.0, 0.0]
    api = _api(theta)
    with pytest.raises(UserError, match="--round"):
        equation_solving(api, linear_features, np.zeros(2), np.ones(2), np.random.default_rng(0))
