"""A statistical violation confirmed on fresh evidence before it fails the gate (audit.plugins.confirmation)."""

from types import SimpleNamespace

import pytest

from audit.plugins.confirmation import CONFIRM_ALPHA, confirmed
from audit.plugins.gate_checks import GateCheck
from audit.stats.outcome import Finding


def _violation(name: str) -> Finding:
    return Finding.checked(name, True, True, f"{name} rejected.", f"fix {name}")


def _checks() -> list[GateCheck]:
    """A fact (clipping), two statistical checks (rate; noise, which emits noise-level): their second-stage
    outcome is read from the evidence they are given (``rejects``)."""
    def run(name: str):
        return lambda ev: [Finding.checked(name, ev.rejects[name], True, f"{name} again at {ev.alphas}.")]
    return [GateCheck("clipping", 50, run=run("clipping")), GateCheck("rate", 80, 1.0, run("rate")),
            GateCheck("noise", 90, 2.0, lambda ev: [Finding.checked("noise-level", ev.rejects["noise-level"], True,
                                                                    "level again.")], emits=("noise-level",))]


def test_a_statistical_violation_that_repeats_stands_and_one_that_does_not_becomes_a_note():
    seen = {}

    def fresh(alphas):
        seen.update(alphas)
        return SimpleNamespace(alphas=alphas, rejects={"rate": True, "noise-level": False, "clipping": False})

    ok = Finding.checked("sampling", False, True, "fine.")
    out, ran = confirmed([_violation("rate"), _violation("noise-level"), ok], _checks(), fresh)
    assert ran and seen == pytest.approx({"rate": CONFIRM_ALPHA / 3, "noise": CONFIRM_ALPHA * 2 / 3})
    rate, level, kept = out
    assert rate.violation and "Confirmed on fresh evidence" in rate.message and rate.fix == "fix rate"
    assert rate.details["confirmation"]["confirmed"]
    assert level.problem and not level.violation and not level.unread and "Not confirmed" in level.message
    assert kept is ok


def test_a_fact_violation_needs_no_confirmation_and_no_training():
    def fresh(_alphas):
        raise AssertionError("no confirming training when a fact decides")

    findings = [_violation("clipping"), _violation("rate")]
    out, ran = confirmed(findings, _checks(), fresh)
    assert not ran and out == findings
    assert confirmed([Finding.checked("rate", False, True, "fine.")], _checks(), fresh) == (
        [Finding.checked("rate", False, True, "fine.")], False)


def test_a_broken_fact_inside_a_statistical_check_needs_no_confirmation():
    """A record outside its cycle group is a fact the participation check reads (details["fact"]): the gate fails
    without training again."""
    def fresh(_alphas):
        raise AssertionError("a broken fact is not a chance event")

    fact = Finding.checked("rate", True, True, "a record at two residues.", "fix", {"fact": True})
    out, ran = confirmed([fact], _checks(), fresh)
    assert not ran and out == [fact]
