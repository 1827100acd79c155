"""Family-wise confidence of the verdict (audit.stats.verdict): the reported best bound and the
violation verdict hold at the confidence they print, across every bound that competed."""

from __future__ import annotations

import math

import pytest

from audit.stats.lower_bound import ESTIMATE, SECONDARY, LowerBound
from audit.stats.outcome import BestBound, Bound
from audit.stats.verdict import Family, best_valid_bound, claim_verdict


def _row(eps: float, confidence: float, role: str = "", method: str = "one-run") -> Bound:
    return LowerBound(method=method, epsilon=eps, confidence=confidence, n=100, valid=role != ESTIMATE, details={},
                      role=role).block()


def _best(row: Bound, size: int, confidence: float) -> BestBound:
    return BestBound.of(row, Family(size=size, confidence=confidence))


def test_family_member_confidence_is_bonferroni() -> None:
    assert Family(size=1, confidence=0.95).member_confidence == pytest.approx(0.95)
    assert Family(size=5, confidence=0.95).member_confidence == pytest.approx(0.99)
    with pytest.raises(ValueError):
        Family(size=0, confidence=0.95)


def test_best_bound_ignores_secondary_and_estimates_and_states_the_family() -> None:
    family = Family(size=2, confidence=0.9)
    rows = [_row(0.4, 0.95), _row(0.7, 0.95), _row(3.0, 0.9, SECONDARY), _row(9.0, 0.9, ESTIMATE, "gdp")]
    best = best_valid_bound(rows, family)
    assert isinstance(best, BestBound) and best.epsilon == 0.7 and best.family_size == 2
    assert best.family_confidence == 0.9 and best.statement == rows[1].statement
    assert best_valid_bound([_row(3.0, 0.9, SECONDARY)], family) is None


def test_a_competing_bound_at_the_wrong_confidence_is_refused() -> None:
    with pytest.raises(ValueError, match="family of 5"):
        best_valid_bound([_row(0.5, 0.95)], Family(size=5, confidence=0.95))


def test_claim_verdict_prints_the_family() -> None:
    best = _best(_row(2.0, 0.99), 5, 0.95)
    verdict = claim_verdict(best, 1.0, 1e-5)
    assert verdict.status == "violation" and "95% confidence, family of 5" in verdict.text
    assert claim_verdict(None, 1.0, 1e-5).status == "consistent"
    assert math.isfinite(float(best.epsilon))


def test_no_claim_verdict_never_says_a_zero_bound_proves_a_leak() -> None:
    zero = _best(_row(0.0, 0.95), 12, 0.95)
    text = claim_verdict(zero, None, 1e-5, ceiling=2.31).text
    assert "certify no leakage" in text and "proves" not in text and "of a possible 2.31" in text
    leak = _best(_row(1.5, 0.95), 12, 0.95)
    assert "proves it leaks at least epsilon = 1.500" in claim_verdict(leak, None, 1e-5).text
