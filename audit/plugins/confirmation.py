"""A gate a CI can pin: a violation found by statistical tests alone is confirmed on fresh evidence before it
fails the gate (docs/references.md, "Configuration checks"; issue 50).

The accounting check's statistical tests (:mod:`audit.plugins.gate_checks`, the checks with a share of alpha)
flag a loop that runs exactly as declared with probability at most ``alpha`` (5% by default). A CI that pins the
audit's seed would then be red on correct code one time in twenty at worst, for ever. So when every violation of
the check comes from statistical tests (no fact read from the code: clipping, records, world-dependence,
final-model, epsilon, or a fact a statistical check reads, marked ``details["fact"]``: a record outside its cycle
group, twice in one batch), the code is trained once more from another seed — fresh sampling and fresh noise,
independent of the first training — and the tests that fired run again on that training at their own level,
:data:`CONFIRM_ALPHA` split among them in proportion to their registered shares. A violation stands only when its
test rejects again; one that does not is kept as a note that names both outcomes.

**The rate.** The two trainings are independent and the second stage's tests hold their level whatever the first
stage chose to retest (their data are fresh), so a loop that runs as declared fails the gate with probability at
most ``alpha * CONFIRM_ALPHA``: 0.5% at the default confidence. A real mistake fails with probability
``p_1 p_2``, where ``p_2`` is the power of the same test at the larger level :data:`CONFIRM_ALPHA`: at least
``p_1^2``, so a catch of power 0.99 stays above 0.98.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from audit.plugins.gate_checks import GateCheck
from audit.stats.outcome import Finding

__all__ = ["CONFIRM_ALPHA", "confirmed"]

#: The confirming stage's level (module docstring): with the check's alpha 0.05, a correct loop fails at most 0.5%.
CONFIRM_ALPHA = 0.1


def _statistical(checks: Sequence[GateCheck]) -> dict[str, GateCheck]:
    """Each finding name a statistical check emits, to its check."""
    return {name: check for check in checks if check.alpha_share > 0 for name in (check.name, *check.emits)}


def confirmed(findings: Sequence[Finding], checks: Sequence[GateCheck],
              fresh: Callable[[dict[str, float]], Any]) -> tuple[list[Finding], bool]:
    """``findings`` with every violation confirmed on fresh evidence when all of them come from statistical tests
    (module docstring), and whether the confirming training ran. ``checks``: the registered checks that ran;
    ``fresh(alphas)``: the evidence of one more training from another seed, its tests at ``alphas``."""
    statistical = _statistical(checks)
    fired = [f for f in findings if f.violation]
    if not fired or any(f.check not in statistical or (f.details or {}).get("fact") for f in fired):
        return list(findings), False
    rerun = list({statistical[f.check].name: statistical[f.check] for f in fired}.values())
    total = sum(c.alpha_share for c in rerun)
    alphas = {c.name: CONFIRM_ALPHA * c.alpha_share / total for c in rerun}
    evidence = fresh(alphas)
    again = {f.check: f for check in rerun for f in check.run(evidence)}
    return [f if not f.violation else _judged(f, again.get(f.check), alphas[statistical[f.check].name])
            for f in findings], True


def _judged(first: Finding, second: Finding | None, alpha: float) -> Finding:
    """A first-stage violation after its test ran again at ``alpha`` on fresh evidence (``second``; None: its
    finding was not produced there)."""
    how = f"on fresh evidence (the code trained again from another seed, the test at alpha {alpha:.3g})"
    details = dict(first.details or {}) | {"confirmation": {
        "alpha": alpha, "confirmed": bool(second is not None and second.violation),
        "message": None if second is None else second.message}}
    if second is not None and second.violation:
        return replace(first, message=f"{first.message} Confirmed {how}: {second.message}", details=details)
    seen = "its finding was not produced" if second is None else second.message
    return Finding.checked(first.check, True, False, f"{first.message} Not confirmed {how}: {seen} A statistical "
                           "rejection that does not repeat on independent evidence is read as chance (the gate's "
                           "false-alarm rate: alpha x 0.1).", "", details)
