"""The gate's checks as registered parts: each declares its name, its deciding order, its share of the
accounting check's alpha, the mechanisms it can test, and how it runs on the recorded evidence
(docs/references.md, "Configuration checks"; the shape of Opacus's ``register_module_validator`` and of
dp_accounting's ``supports(event)``: an accountant declines what it does not know).

A :class:`GateCheck` is registered once, by the module that implements it (:func:`register`). From the registry:

* **the alpha split** (:func:`alpha_split`): the accounting check's ``alpha`` divided among the registered
  statistical checks that apply to the declared mechanism, in proportion to their shares, in one place, before
  any data is seen; a loop that runs exactly as declared is flagged with probability at most ``alpha``
  (Bonferroni over the shares, each check keeping within its own).
* **the deciding order** (:func:`deciding_rank`): facts read from the code before statistical tests; the
  first violation in this order is the one the verdict names.
* **which checks apply** (``applies``): a check written for one family of mechanisms (the Poisson dispersion
  test; the tests of a declared cyclic, truncated or balls-in-bins participation) does not run, and takes no
  alpha, where another registered check tests the declared mechanism's law in its place.
* **what a check cannot test** (:func:`unsupported_finding`): a check whose ``supports`` declines the declared
  mechanism (:class:`audit.theory.declared_mechanism.DeclaredMechanism`) does not run; its finding says
  could-not-read with the reason, so the block is "could-not-read" (exit 2 under ``--fail-above-claim``),
  never a violation and never "as claimed".

Checks without a ``run`` are registered for their order and share only: they run on another instrument's
evidence (the language-model checks of :mod:`audit.plugins.lm_checks` on the watched training).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from audit.stats.outcome import Finding
from audit.theory.declared_mechanism import DPSGD, DeclaredMechanism

__all__ = ["GateCheck", "register", "registered", "alpha_split", "deciding_rank", "unsupported_finding",
           "supports_everything", "only_dpsgd_participation", "only_independent_noise", "plain_poisson"]


def supports_everything(_mechanism: DeclaredMechanism) -> str:
    """Every mechanism: the check reads facts that do not depend on the participation or the noise."""
    return ""


def plain_poisson(mechanism: DeclaredMechanism) -> bool:
    """Whether the declared participation is plain Poisson sampling (no cycle, no cap)."""
    return getattr(mechanism.participation, "law", "") == "poisson"


def only_dpsgd_participation(mechanism: DeclaredMechanism) -> str:
    """Plain Poisson participation only ("" when supported, else why not)."""
    if plain_poisson(mechanism):
        return ""
    return ("it tests plain Poisson sampling, and the declared participation is "
            f"{mechanism.participation.describe()}")


def only_independent_noise(mechanism: DeclaredMechanism) -> str:
    """Independent noise at every step only ("" when supported, else why not)."""
    if mechanism.noise.independent:
        return ""
    return f"it tests fresh independent noise, and the declared noise is {mechanism.noise.describe()}"


@dataclass(frozen=True)
class GateCheck:
    """One check of the gate (module docstring).

    Attributes:
        name: its name (the ``check`` of its findings).
        order: its deciding order (smaller decides first).
        alpha_share: its weight in the alpha split (0: a fact read from the code, no test).
        run: how it runs on the evidence (:class:`audit.plugins.accounting.Evidence`): its findings; None for a
            check run by another instrument.
        supports: "" when it can test the declared mechanism, else why not.
        emits: the names of its findings besides ``name`` (the noise tests' ``noise-level``, ...).
        fix_unsupported: what the user can do when the mechanism is not supported.
        applies: whether it runs at all for a mechanism (module docstring; default: always).
    """

    name: str
    order: int
    alpha_share: float = 0.0
    run: Callable[[Any], Sequence[Finding]] | None = None
    supports: Callable[[DeclaredMechanism], str] = supports_everything
    emits: tuple[str, ...] = ()
    fix_unsupported: str = ""
    applies: Callable[[DeclaredMechanism], bool] = lambda _mechanism: True


_REGISTRY: dict[str, GateCheck] = {}


def register(check: GateCheck) -> GateCheck:
    """Register ``check`` (once per name: a second registration of a name is a programming error)."""
    if check.name in _REGISTRY and _REGISTRY[check.name] != check:
        raise ValueError(f"gate check {check.name!r} is registered twice")
    if check.alpha_share < 0:
        raise ValueError(f"gate check {check.name!r}: a negative alpha share")
    _REGISTRY[check.name] = check
    return check


def registered(mechanism: DeclaredMechanism = DPSGD) -> list[GateCheck]:
    """The registered checks that apply to ``mechanism``, in deciding order."""
    return sorted((c for c in _REGISTRY.values() if c.applies(mechanism)), key=lambda c: (c.order, c.name))


def alpha_split(alpha: float, mechanism: DeclaredMechanism = DPSGD) -> dict[str, float]:
    """The alpha of each registered statistical check that applies to ``mechanism``: ``alpha`` in proportion to
    their shares (module docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"the accounting check's alpha must lie in (0, 1) (got {alpha!r})")
    tests = [c for c in registered(mechanism) if c.alpha_share > 0]
    total = sum(c.alpha_share for c in tests)
    return {c.name: alpha * c.alpha_share / total for c in tests}


def deciding_rank(finding_check: str) -> int:
    """The deciding order of a finding's check (by the check that emits it; an unregistered name ranks last)."""
    for check in _REGISTRY.values():
        if finding_check == check.name or finding_check in check.emits:
            return check.order
    return max((c.order for c in _REGISTRY.values()), default=0) + 1


def unsupported_finding(check: GateCheck, reason: str) -> Finding:
    """The could-not-read finding of a check that cannot test the declared mechanism (module docstring)."""
    fix = check.fix_unsupported or "declare a mechanism this check can test, or audit with --one-run alone"
    return Finding.checked(check.name, False, True, f"Could not read: the {check.name} check cannot test the "
                           f"declared mechanism: {reason}. Fix: {fix}.", details={"unsupported": reason},
                           read=False)
