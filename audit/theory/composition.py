"""Composition and amplification: basic, advanced, RDP, PLD and GDP composition, and amplification
by Poisson subsampling. Sources: docs/references.md, "Composition".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from audit.errors import UserError
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import GaussianClaim
from audit.theory.pld import PLDClaim
from audit.theory.rdp import RDPClaim

__all__ = ["basic_composition", "advanced_composition", "compose_rdp", "compose_pld", "compose_gaussian",
           "amplify_by_subsampling"]


def basic_composition(epsilons: Sequence[float], deltas: Sequence[float]) -> tuple[float, float]:
    """Basic composition: (sum eps_i, sum delta_i) [Dwork & Roth 2014, Thm. 3.16].

    Args:
        epsilons: eps_i of each mechanism.
        deltas: delta_i of each mechanism, one per epsilon.

    Returns:
        (eps, delta) of the composition.

    Raises:
        UserError: a different number of deltas and epsilons.
    """
    e = [check_epsilon(x) for x in epsilons]
    d = [check_delta(x) for x in deltas]
    if len(e) != len(d):
        raise UserError("basic composition needs one delta per epsilon")
    return float(sum(e)), float(min(1.0, sum(d)))


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple[float, float]:
    """k-fold adaptive composition of (eps, delta)-DP is (eps', k delta + delta')-DP with
    eps' = eps sqrt(2 k ln(1/delta')) + k eps (e^eps - 1)  [Dwork, Rothblum, Vadhan 2010;
    Dwork & Roth 2014, Thm. 3.20].

    Args:
        epsilon: eps of each mechanism.
        delta: delta of each mechanism.
        k: the number of mechanisms composed, a positive integer.
        delta_prime: the slack delta' > 0.

    Returns:
        (eps', k delta + delta').

    Raises:
        UserError: k not a positive integer or delta' <= 0.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    delta_prime = check_delta(delta_prime, "delta_prime")
    if int(k) != k or k < 1:
        raise UserError(f"composition count k must be a positive integer (got {k!r})")
    if delta_prime <= 0:
        raise UserError("advanced composition needs delta_prime > 0")
    eps_p = epsilon * math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) + k * epsilon * math.expm1(epsilon)
    return float(eps_p), float(min(1.0, k * delta + delta_prime))


def compose_rdp(claims: Sequence[RDPClaim]) -> RDPClaim:
    """RDP composition: RDP values add order by order [Mironov 2017, Prop. 1]. All claims must share
    the orders.

    Args:
        claims: the RDP claims, at least one, all on the same orders.

    Returns:
        The RDP claim of the composition.

    Raises:
        UserError: no claim, or claims on different orders.
    """
    if not claims:
        raise UserError("compose_rdp needs at least one claim")
    orders = claims[0].orders
    for c in claims[1:]:
        if c.orders.shape != orders.shape or not np.allclose(c.orders, orders):
            raise UserError("RDP claims must use the same orders to be composed")
    total = np.sum([c.rdp for c in claims], axis=0)
    return RDPClaim(orders, total, neighbouring=claims[0].neighbouring,
                    label=f"composition of {len(claims)} RDP curves")


def compose_pld(claims: Sequence[PLDClaim]) -> PLDClaim:
    """PLD composition: privacy-loss distributions convolve [Koskela et al. 2020; Meiser & Mohammadi
    2018]; via dp_accounting's PrivacyLossDistribution.compose.

    Args:
        claims: the PLD claims, at least one.

    Returns:
        The PLD claim of the composition.

    Raises:
        UserError: no claim.
    """
    if not claims:
        raise UserError("compose_pld needs at least one claim")
    pld = claims[0].pld
    for c in claims[1:]:
        pld = pld.compose(c.pld)
    return PLDClaim(pld, neighbouring=claims[0].neighbouring, label=f"composition of {len(claims)} PLDs")


def compose_gaussian(mus: Sequence[float]) -> GaussianClaim:
    """GDP composition: G_mu1 x ... x G_muk = G_sqrt(sum mu_i^2) [Dong, Roth, Su 2019, Cor. 3.3].

    Args:
        mus: mu_i of each Gaussian-DP mechanism.

    Returns:
        The GDP claim with mu = sqrt(sum mu_i^2).
    """
    return GaussianClaim(math.sqrt(sum(float(m) ** 2 for m in mus)))


def amplify_by_subsampling(epsilon: float, delta: float, sample_rate: float) -> tuple[float, float]:
    """Poisson subsampling with rate q of an (eps, delta)-DP mechanism is
    (ln(1 + q (e^eps - 1)), q delta)-DP under add/remove [Balle, Barthe, Gaboardi 2018, Thm. 8;
    Li, Qardaji, Su 2012].

    Args:
        epsilon: eps of the mechanism.
        delta: delta of the mechanism.
        sample_rate: q, in [0, 1].

    Returns:
        (eps, delta) of the subsampled mechanism.

    Raises:
        UserError: q outside [0, 1].
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    q = float(sample_rate)
    if not (0.0 <= q <= 1.0):
        raise UserError(f"sample_rate must lie in [0, 1] (got {sample_rate!r})")
    return float(math.log1p(q * math.expm1(epsilon))), float(q * delta)
