"""Claims to and from JSON: :meth:`PrivacyClaim.to_dict` output back to a claim object."""

from __future__ import annotations

from typing import Any

from audit.errors import UserError
from audit.theory.claims import (
    ApproxDPClaim,
    DiscretePairClaim,
    GaussianClaim,
    LaplaceClaim,
    Neighbouring,
    PrivacyClaim,
    PureDPClaim,
    RandomizedResponseClaim,
)
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.rdp import RDPClaim, ZCDPClaim

__all__ = ["claim_from_dict"]


def claim_from_dict(d: dict[str, Any]) -> PrivacyClaim:
    """Rebuild a claim from ``PrivacyClaim.to_dict()`` output (PLD claims other than DP-SGD cannot be
    rebuilt from parameters and raise UserError).

    Args:
        d: a dict as ``PrivacyClaim.to_dict()`` writes it (``type`` and ``params`` at least).

    Returns:
        The claim.

    Raises:
        UserError: a type that cannot be rebuilt from its parameters.
    """
    kind = d.get("type")
    p = dict(d.get("params", {}))
    nb = Neighbouring.of(d.get("neighbouring", Neighbouring.ADD_REMOVE))
    if kind == "approx_dp":
        return ApproxDPClaim(p["epsilon"], p["delta"], neighbouring=nb)
    if kind == "pure_dp":
        return PureDPClaim(p["epsilon"], neighbouring=nb)
    if kind == "gdp":
        return GaussianClaim(p["mu"], neighbouring=nb)
    if kind == "laplace":
        return LaplaceClaim(p["epsilon"], neighbouring=nb)
    if kind == "randomized_response":
        return RandomizedResponseClaim(p["epsilon"], p.get("k", 2), neighbouring=nb)
    if kind == "rdp":
        return RDPClaim(p["orders"], p["rdp"], neighbouring=nb)
    if kind == "discrete_pair":
        return DiscretePairClaim(p["p"], p["q"], neighbouring=nb)
    if kind == "zcdp":
        return ZCDPClaim(p["rho"], neighbouring=nb)
    if kind == "dpsgd":
        opts = d.get("accountant_options", {})
        return DPSGDClaim(p["noise_multiplier"], p["sample_rate"], p["steps"], accountant=d.get("accountant", "pld"),
                          value_discretization_interval=opts.get("value_discretization_interval", 1e-4),
                          neighbouring=nb)
    raise UserError(f"cannot rebuild a privacy claim of type {kind!r} from JSON")
