"""The one judgement of an audit's bounds (audit.stats.judgement.judge): the typed blocks every runner
writes, the same objects the verdict's functions give, the attack named on every bound."""

from __future__ import annotations

import numpy as np

from audit.stats.judgement import judge
from audit.stats.lower_bound import ESTIMATE, SECONDARY, LowerBound
from audit.stats.outcome import BestBound, Verdict
from audit.stats.verdict import Family, compare_with_claim
from audit.theory.claims import PureDPClaim

ALPHA = np.array([0.01, 0.5])


def _row(eps: float, role: str = "", method: str = "one-run", ceiling: float | None = None) -> dict:
    details = {} if ceiling is None else {"ceiling": ceiling}
    return LowerBound(method=method, epsilon=eps, confidence=0.95, n=100, valid=role != ESTIMATE,
                      details=details, role=role).to_dict()


def test_the_blocks_are_those_of_the_verdict_functions() -> None:
    rows = [_row(0.4, ceiling=2.0), _row(3.0, SECONDARY), _row(9.0, ESTIMATE, "gdp")]
    claim, family = PureDPClaim(1.0), Family(size=1, confidence=0.95)
    judged = judge(rows, claim=claim, delta=1e-5, alpha=ALPHA, family=family)
    blocks = judged.blocks(estimate=True, family=True)
    expected = compare_with_claim(rows, claim, 1e-5, ALPHA, family)
    assert isinstance(judged.best_lower_bound, BestBound) and isinstance(judged.verdict, Verdict)
    assert blocks["best_lower_bound"] == expected["best_lower_bound"]
    assert blocks["verdict"] == expected["verdict"] and blocks["ceiling"] == expected["ceiling"]
    assert blocks["epsilon_theory"] == expected["epsilon_theory"] is not None
    assert blocks["lower_bounds"] == rows
    assert blocks["best_estimate"]["epsilon"] == 9.0  # the largest of every role, labelled as an estimate
    assert blocks["family"] == {"size": 1, "confidence": 0.95}
    assert "family" not in judged.blocks() and "best_estimate" not in judged.blocks()


def test_the_attack_is_named_on_every_bound_and_the_best() -> None:
    judged = judge([_row(0.4), _row(0.2)], claim=None, delta=1e-5, alpha=ALPHA, family=Family(size=1, confidence=0.95))
    blocks = judged.for_attack("updates/dirac").blocks()
    assert [b["attack"] for b in blocks["lower_bounds"]] == ["updates/dirac"] * 2
    assert blocks["best_lower_bound"]["attack"] == "updates/dirac"
    assert blocks["verdict"]["status"] == "no-claim" and blocks["tradeoff"] is None


def test_a_runner_may_replace_the_verdict() -> None:
    judged = judge([_row(0.4)], claim=PureDPClaim(1.0), delta=1e-5, alpha=ALPHA, family=Family(size=1, confidence=0.95))
    replaced = judged.with_verdict(Verdict(status="violation", text="the check decided", source="config_check"))
    assert replaced.verdict.source == "config_check" and judged.verdict.status == "consistent"
    assert replaced.blocks()["verdict"] == {"status": "violation", "text": "the check decided",
                                            "source": "config_check"}
