"""Gaussian-DP lower bounds: the assumptions of the mu bound that :mod:`audit.stats.thresholds`
reads off a test's error rates [Nasr et al. 2023, Sec. 4; :func:`audit.stats.rates.mu_from_rates`],
and the parametric fit for exactly Gaussian scores. The mu bound is rigorous; the epsilon read off
G_mu is a lower bound only when the mechanism's tradeoff is Gaussian, so those rows are estimates
unless the caller knows the pair is Gaussian. Sources: docs/references.md, "Gaussian DP".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.errors import UserError
from audit.stats.lower_bound import LowerBound
from audit.stats.rates import as_scores_members
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["GDP_ASSUMPTION", "GAUSSIAN_FIT_ASSUMPTION", "gaussian_fit_bound"]

GDP_ASSUMPTION = "epsilon assumes a Gaussian tradeoff; mu_lb is rigorous"

GAUSSIAN_FIT_ASSUMPTION = ("scores are Gaussian with equal variance in both worlds (exact for output perturbation "
                           "scored by a fixed projection); normal-approximation confidence bound on mu")


def gaussian_fit_bound(scores: ArrayLike, included: ArrayLike, delta: float, confidence: float) -> LowerBound:
    """Parametric mu bound when the score is Gaussian in both worlds with a common variance.

    ``mu_hat = (mean_in - mean_out) / s_pooled``; its standard error is
    ``sqrt(1/n_in + 1/n_out + mu_hat^2 / (2 (n_in + n_out - 2)))`` (delta method for the
    standardised mean difference, Hedges & Olkin 1985, Eq. 5.14), and
    ``mu_lb = mu_hat - z_confidence * se`` is a one-sided lower bound with asymptotic coverage
    ``confidence``. For a Gaussian mechanism scored by a fixed projection (DP-ERM output
    perturbation, white-box) the two worlds are exactly ``N(0, 1)`` and ``N(mu, 1)`` up to scale,
    so this uses all runs (no split: there is no threshold to choose) and every score (no
    thresholding loss), which makes it the most efficient estimate of mu. Epsilon =
    ``gaussian_epsilon(mu_lb, delta)``; ``valid=False`` (parametric assumption, see details). The
    details carry Shapiro–Wilk p-values of each world's scores (on at most 5,000 of them), a check of
    the assumption a reader can weigh (small p-values: the scores are not Gaussian).

    Args:
        scores: one score per run (higher: more likely the canary was in).
        included: whether each run included the canary.
        delta: the delta at which epsilon is read off G_mu_lb.
        confidence: the one-sided confidence of mu_lb.

    Returns:
        The bound (method ``"gaussian-fit"``, ``valid=False``), with mu_hat, mu_lb and the
        Shapiro–Wilk p-values in its details.

    Raises:
        UserError: fewer than 3 runs of either world.
    """
    s, inc = as_scores_members(scores, included)
    n1, n0 = int(inc.sum()), int((~inc).sum())
    if n1 < 3 or n0 < 3:
        raise UserError("the Gaussian fit needs at least 3 runs of each world; use more runs")
    a, b = s[inc], s[~inc]
    pooled = math.sqrt(((n1 - 1) * a.var(ddof=1) + (n0 - 1) * b.var(ddof=1)) / (n1 + n0 - 2))
    mu_hat = float((a.mean() - b.mean()) / pooled) if pooled > 0 else 0.0
    se = math.sqrt(1.0 / n1 + 1.0 / n0 + mu_hat ** 2 / (2.0 * (n1 + n0 - 2)))
    mu_lb = max(0.0, mu_hat - float(stats.norm.ppf(confidence)) * se)
    return LowerBound(method="gaussian-fit", epsilon=gaussian_epsilon(mu_lb, delta), confidence=confidence, n=n1 + n0,
                      valid=False, details={"mu_hat": mu_hat, "mu_se": se, "mu_lb": mu_lb, "n_pos": n1, "n_neg": n0,
                                            "delta": delta, "assumption": GAUSSIAN_FIT_ASSUMPTION,
                                            "shapiro_p_in": _shapiro_p(a), "shapiro_p_out": _shapiro_p(b)})


def _shapiro_p(x: np.ndarray) -> float | None:
    """Shapiro–Wilk p-value of (the first 5,000 of) ``x``; None for constant scores."""
    x = x[:5000]
    return None if np.ptp(x) == 0 else float(stats.shapiro(x).pvalue)
