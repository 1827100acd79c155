"""Renyi DP and zero-concentrated DP: conversions to (eps, delta) and the claims they define
[Mironov 2017; Bun & Steinke 2016; Canonne, Kamath, Steinke 2020, Prop. 12]. Sources:
docs/references.md, "Renyi DP and zCDP".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from audit.errors import UserError
from audit.theory import dp_accounting_adapter as backend
from audit.theory.checks import check_delta, scalar_or_array
from audit.theory.claims import Neighbouring, PrivacyClaim

__all__ = ["rdp_to_dp_delta", "rdp_to_dp_epsilon", "RDPClaim", "zcdp_to_dp_epsilon", "ZCDPClaim"]


def _rdp_log_delta(orders: np.ndarray, rdp: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """log delta(eps) from RDP curve, vectorised over eps: min over orders of
    (a - 1)(r - eps + ln(1 - 1/a)) - ln a   [Canonne, Kamath, Steinke 2020, Prop. 12; as in
    dp_accounting.rdp.compute_delta], also min with the KL bound 0.5 ln(1 - e^-r) for every order.
    """
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    finite = np.isfinite(rdp) & (rdp >= 0)
    o = orders[finite]
    r = rdp[finite]
    if o.size == 0:
        return np.zeros_like(eps)
    with np.errstate(divide="ignore"):
        kl = np.where(r > 0, 0.5 * np.log1p(-np.exp(-r)), -np.inf)
    out = np.full(eps.shape, np.min(kl))
    big = o > 1.01
    if np.any(big):
        ob, rb = o[big], r[big]
        vals = (ob[None, :] - 1.0) * (rb[None, :] - eps[:, None] + np.log1p(-1.0 / ob)[None, :]) - np.log(ob)[None, :]
        out = np.minimum(out, np.min(vals, axis=1))
    return np.minimum(out, 0.0)


def rdp_to_dp_delta(orders: Sequence[float], rdp: Sequence[float], epsilon: ArrayLike) -> float | np.ndarray:
    """RDP -> (eps, delta): delta(eps) [Canonne, Kamath, Steinke 2020, Prop. 12], vectorised.

    Args:
        orders: the Renyi orders a > 1.
        rdp: the RDP value at each order.
        epsilon: eps >= 0, a scalar or an array.

    Returns:
        delta(eps): a float for a scalar, an array for an array.
    """
    e = np.asarray(epsilon, dtype=np.float64).reshape(-1)
    return scalar_or_array(epsilon, np.exp(_rdp_log_delta(np.asarray(orders), np.asarray(rdp), e)))


def rdp_to_dp_epsilon(orders: Sequence[float], rdp: Sequence[float], delta: float,
                      conversion: str = "improved") -> float:
    """RDP -> (eps, delta): eps(delta).

    ``conversion="improved"``: min_a r_a + ln(1 - 1/a) - ln(delta a)/(a - 1) [Canonne, Kamath,
    Steinke 2020, Prop. 12; via dp_accounting.rdp.compute_epsilon] -- what current accountants report.
    ``conversion="classic"``: min_a r_a + ln(1/delta)/(a - 1) [Mironov 2017, Prop. 3] -- the older,
    looser conversion behind historical figures such as "MNIST eps = 3.01".

    Args:
        orders: the Renyi orders.
        rdp: the RDP value at each order.
        delta: the target delta.
        conversion: ``"improved"`` or ``"classic"``.

    Returns:
        eps(delta), minimised over the orders (inf where no order gives a finite value).

    Raises:
        UserError: an unknown conversion.
    """
    delta = check_delta(delta)
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    if conversion == "improved":
        return backend.rdp_epsilon(orders, rdp, delta)
    if conversion == "classic":
        if delta <= 0.0:
            return 0.0 if np.all(rdp == 0) else math.inf
        ok = orders > 1.0
        vals = rdp[ok] + math.log(1.0 / delta) / (orders[ok] - 1.0)
        return float(max(0.0, np.min(vals))) if vals.size else math.inf
    raise UserError(f"unknown RDP conversion {conversion!r}; use 'improved' or 'classic'")


class RDPClaim(PrivacyClaim):
    """A Renyi-DP curve (orders, rdp values) [Mironov 2017], converted to (eps, delta) with the
    improved conversion of Canonne, Kamath, Steinke 2020 (Prop. 12). The tradeoff is the dual of
    that profile: a valid lower bound on the true curve (conservative).

    Args:
        orders: the Renyi orders, each > 1.
        rdp: the RDP value at each order, of the same length.
        neighbouring: the neighbouring relation, a Neighbouring or its string.
        accountant: the name of the accountant the description states.
        label: how the description names the guarantee.

    Raises:
        UserError: empty or unequal arrays, or an order <= 1.
    """

    kind = "rdp"

    def __init__(self, orders: Sequence[float], rdp: Sequence[float],
                 neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
                 accountant: str = "RDP (Canonne-Kamath-Steinke conversion)",
                 label: str = "RDP curve") -> None:
        self.orders = np.asarray(orders, dtype=np.float64).reshape(-1)
        self.rdp = np.asarray(rdp, dtype=np.float64).reshape(-1)
        if self.orders.shape != self.rdp.shape or self.orders.size == 0:
            raise UserError("RDP orders and values must be non-empty arrays of the same length")
        if np.any(self.orders <= 1.0):
            raise UserError("RDP orders must be > 1")
        self.neighbouring = Neighbouring.of(neighbouring)
        self.accountant = accountant
        self.label = label

    def delta_array(self, eps: np.ndarray) -> np.ndarray:
        return np.exp(_rdp_log_delta(self.orders, self.rdp, eps))

    def epsilon(self, delta: float, conversion: str = "improved") -> float:
        return rdp_to_dp_epsilon(self.orders, self.rdp, delta, conversion=conversion)

    def params(self) -> dict[str, Any]:
        return {"orders": self.orders.tolist(), "rdp": self.rdp.tolist()}

    @property
    def description(self) -> str:
        return f"{self.label}, {self.neighbouring} neighbours ({self.accountant})"


def _zcdp_orders() -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(1.02, 10.0, 200), np.logspace(1.0, 5.0, 200)]))


def zcdp_to_dp_epsilon(rho: float, delta: float, conversion: str = "improved") -> float:
    """rho-zCDP -> (eps, delta).

    ``"simple"``: eps = rho + 2 sqrt(rho ln(1/delta)) [Bun & Steinke 2016, Prop. 1.3];
    ``"improved"``: inf over orders a > 1 of rho a + ln(1 - 1/a) - ln(delta a)/(a - 1)
    [Canonne, Kamath, Steinke 2020, Prop. 12 applied to D_a <= rho a], minimised over a continuum.

    Args:
        rho: the zCDP parameter, >= 0.
        delta: the target delta.
        conversion: ``"improved"`` or ``"simple"``.

    Returns:
        eps(delta).

    Raises:
        UserError: a negative rho or an unknown conversion.
    """
    delta = check_delta(delta)
    rho = float(rho)
    if rho < 0:
        raise UserError(f"zCDP rho must be non-negative (got {rho})")
    if rho == 0:
        return 0.0
    if delta <= 0:
        return math.inf
    if conversion == "simple":
        return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if conversion != "improved":
        raise UserError(f"unknown zCDP conversion {conversion!r}; use 'improved' or 'simple'")

    def g(la: float) -> float:  # epsilon at order alpha = 1 + e^la (la: log(alpha - 1))
        alpha = 1.0 + math.exp(la)
        return rho * alpha + math.log1p(-1.0 / alpha) - math.log(delta * alpha) / (alpha - 1.0)
    grid = np.log(np.unique(np.concatenate([np.linspace(1.02, 20.0, 900), np.logspace(np.log10(20.0), 6, 600)])) - 1.0)
    vals = np.array([g(x) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return float(max(0.0, min(vals[i], res.fun)))


class ZCDPClaim(RDPClaim):
    """rho-zCDP [Bun & Steinke 2016]: D_a <= rho a for every order a > 1; converted to (eps, delta)
    through RDP (Canonne, Kamath, Steinke 2020, Prop. 12) over a dense continuum of orders.

    Args:
        rho: the zCDP parameter, >= 0.
        neighbouring: the neighbouring relation, a Neighbouring or its string.

    Raises:
        UserError: a negative rho.
    """

    kind = "zcdp"

    def __init__(self, rho: float, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> None:
        rho = float(rho)
        if not rho >= 0:
            raise UserError(f"zCDP rho must be non-negative (got {rho!r})")
        self.rho = rho
        orders = _zcdp_orders()
        super().__init__(orders, rho * orders, neighbouring=neighbouring,
                         accountant="zCDP via RDP conversion", label=f"{rho:g}-zCDP")

    def epsilon(self, delta: float, conversion: str = "improved") -> float:
        """On the claim's order grid (consistent with its delta(eps)); zcdp_to_dp_epsilon optimises
        over a continuum of orders and is at most this value.

        Args:
            delta: the target delta.
            conversion: ``"simple"`` (:func:`zcdp_to_dp_epsilon`), or ``"improved"`` or ``"classic"`` on the
                order grid (:func:`rdp_to_dp_epsilon`).

        Returns:
            eps(delta).
        """
        if conversion == "simple":
            return zcdp_to_dp_epsilon(self.rho, delta, conversion="simple")
        return super().epsilon(delta, conversion=conversion)

    def params(self) -> dict[str, Any]:
        return {"rho": self.rho}
