"""Reconstruction robustness (ReRo): how likely any reconstruction attack can succeed against a claim.

An adversary who knows every record but the target and whose chance of reconstructing the target
*without* seeing the mechanism's output is ``kappa`` (its baseline: ``kappa = 1/n`` when guessing
which of ``n`` equally likely candidates was used) succeeds against an f-DP mechanism with
probability at most ``1 - f(kappa)`` [Hayes, Mahloujifar, Balle, NeurIPS 2023, "Bounding training
data reconstruction in DP-SGD"; Kaissis, Hayes, Ziller, Rueckert 2023]. For mu-GDP this is
``Phi(Phi^-1(kappa) + mu)``. Formulas and sources: docs/references.md, "Reconstruction robustness".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from audit.errors import UserError
from audit.theory.checks import scalar_or_array
from audit.theory.claims import GaussianClaim, PrivacyClaim

__all__ = ["rero_bound", "gaussian_rero_bound", "uniform_prior_kappa"]


def _as_kappa(kappa: ArrayLike) -> np.ndarray:
    """Baseline success probabilities as a float array; each must lie in (0, 1]."""
    try:
        k = np.asarray(kappa, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"kappa must be a number or an array of numbers in (0, 1] (got {kappa!r})") from None
    if k.size == 0 or np.any(~np.isfinite(k)) or np.any(k <= 0.0) or np.any(k > 1.0):
        raise UserError("kappa (the attack's success without the output) must lie in (0, 1]; e.g. 1/n for n candidates")
    return k


def uniform_prior_kappa(n_candidates: int) -> float:
    """``kappa = 1/n``: the baseline of guessing one of ``n`` equally likely candidates without the output
    [Hayes, Mahloujifar, Balle 2023; docs/references.md, "Reconstruction robustness"].

    Args:
        n_candidates: n, a positive integer.

    Returns:
        1/n.

    Raises:
        UserError: n is not a positive integer.
    """
    try:
        whole = not isinstance(n_candidates, bool) and int(n_candidates) == n_candidates >= 1
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise UserError(f"the number of candidates must be a positive integer (got {n_candidates!r})")
    return 1.0 / int(n_candidates)


def gaussian_rero_bound(mu: float, kappa: ArrayLike) -> float | np.ndarray:
    """ReRo bound of mu-GDP: ``Phi(Phi^-1(kappa) + mu)`` [Kaissis et al. 2023; Hayes, Mahloujifar, Balle
    2023], i.e. ``1 - G_mu(kappa)`` with ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)`` (Dong, Roth, Su 2019,
    Eq. (2.2)), evaluated directly (no cancellation in ``1 - G_mu``). docs/references.md, "Reconstruction
    robustness". ``mu = inf`` gives 1; ``mu = 0`` gives ``kappa``.

    Args:
        mu: the GDP parameter, >= 0 (inf allowed).
        kappa: the attack's success without the output, in (0, 1], a scalar or an array.

    Returns:
        The bound: a float for a scalar kappa, an array of its shape for an array.

    Raises:
        UserError: a negative mu or a kappa outside (0, 1].
    """
    mu = float(mu)
    if math.isnan(mu) or mu < 0.0:
        raise UserError(f"GDP mu must be non-negative (got {mu!r})")
    k = _as_kappa(kappa)
    if math.isinf(mu):
        return scalar_or_array(kappa, np.ones_like(k))
    with np.errstate(over="ignore", invalid="ignore"):
        out = special.ndtr(special.ndtri(k) + mu)  # ndtri(1) = inf gives 1
    return scalar_or_array(kappa, np.clip(out, k, 1.0))


def rero_bound(claim: PrivacyClaim, kappa: ArrayLike) -> float | np.ndarray:
    """Largest success probability of any reconstruction attack against ``claim`` whose success without
    the output is ``kappa``: ``1 - f(kappa)``, f the claim's tradeoff curve.

    Hayes, Mahloujifar, Balle, NeurIPS 2023 (the ReRo bound of an f-DP mechanism); for mu-GDP the closed
    form ``Phi(Phi^-1(kappa) + mu)`` (Kaissis et al. 2023), used for :class:`GaussianClaim`. Every other
    claim (DP-SGD by the PLD, RDP or GDP-CLT accountant, pure and approximate DP, Laplace, randomized
    response, zCDP, PLDs) uses its own ``claim.tradeoff``. docs/references.md, "Reconstruction robustness".

    Any tradeoff curve has ``f(a) <= 1 - a`` (the test that ignores the output), so the bound is at least
    ``kappa``; the result is clipped to ``[kappa, 1]`` against rounding of numerically computed curves.
    ``kappa`` may be a scalar (float returned) or an array (array of its shape returned).

    Args:
        claim: the privacy claim (anything with a tradeoff curve).
        kappa: the attack's success without the output, in (0, 1], a scalar or an array.

    Returns:
        The bound in [kappa, 1]: a float for a scalar kappa, an array of its shape for an array.

    Raises:
        UserError: a claim without a tradeoff curve or a kappa outside (0, 1].
    """
    tradeoff = getattr(claim, "tradeoff", None)
    if not callable(tradeoff):
        raise UserError(f"rero_bound needs a privacy claim with a tradeoff curve (got {type(claim).__name__})")
    k = _as_kappa(kappa)
    if isinstance(claim, GaussianClaim):
        return gaussian_rero_bound(claim.mu, kappa)
    f = np.asarray(tradeoff(k.reshape(-1)), dtype=np.float64).reshape(k.shape)
    return scalar_or_array(kappa, np.clip(1.0 - f, k, 1.0))
