"""The one judgement of an audit's bounds (audit.stats.judgement.judge): the typed blocks every runner
writes, the same objects the verdict's functions give, the attack named on every bound."""

from __future__ import annotations

import numpy as np

from audit.stats.judgement import judge
from audit.stats.lower_bound import ESTIMATE, SECONDARY, LowerBound
from audit.stats.outcome import BestBound, Bound, Verdict
from audit.stats.verdict import Family, audit_ceiling, best_valid_bound, claim_verdict
from audit.theory.claims import ApproxDPClaim, PureDPClaim

ALPHA = np.array([0.01, 0.5])


def _row(eps: float, role: str = "", method: str = "one-run", ceiling: float | None = None) -> Bound:
    details = {} if ceiling is None else {"ceiling": ceiling}
    return LowerBound(method=method, epsilon=eps, confidence=0.95, n=100, valid=role != ESTIMATE,
                      details=details, role=role).block()


def test_the_blocks_are_those_of_the_verdict_functions() -> None:
    rows = [_row(0.4, ceiling=2.0), _row(3.0, SECONDARY), _row(9.0, ESTIMATE, "gdp")]
    claim, family = PureDPClaim(1.0), Family(size=1, confidence=0.95)
    judged = judge(rows, claim=claim, delta=1e-5, alpha=ALPHA, family=family)
    blocks = judged.blocks(estimate=True, family=True)
    assert isinstance(judged.best_lower_bound, BestBound) and isinstance(judged.verdict, Verdict)
    assert judged.best_lower_bound == best_valid_bound(rows, family) and judged.best_lower_bound.epsilon == 0.4
    theory = float(claim.epsilon(1e-5))
    assert judged.verdict == claim_verdict(judged.best_lower_bound, theory, 1e-5, 2.0)
    assert judged.verdict.status == "consistent"
    assert judged.ceiling.epsilon == audit_ceiling(rows) == 2.0 and "certified 0.4" in judged.ceiling.text
    assert judged.epsilon_theory == theory and list(judged.tradeoff.beta) == list(claim.tradeoff(ALPHA))
    assert list(judged.lower_bound_tradeoff.beta) == list(ApproxDPClaim(0.4, 1e-5).tradeoff(ALPHA))
    assert judged.lower_bounds == tuple(rows) and blocks["lower_bounds"] == [r.to_dict() for r in rows]
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
