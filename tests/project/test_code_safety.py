"""Safe loading in the code itself: no pickle, joblib or pickled numpy loads, and every ``torch.load`` with
``weights_only=True`` (a tampered cache entry cannot run code: tests/e2e/test_reliability.py)."""

from __future__ import annotations

import re

from helpers import ROOT


def test_no_unsafe_deserialisation_in_the_code():
    sources = [p for d in ("audit", "targets", "attacks", "reports", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    for path in sources:
        text = path.read_text()
        assert not re.search(r"\bpickle\.loads?\(|\bjoblib\.load\(|allow_pickle\s*=\s*True", text), path
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path, call)
