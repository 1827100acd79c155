"""RunContext.finish writes results.json only through the typed outcome (audit.results_file): results that
follow the schema are read back into the same types (a kind without blocks of its own, as a new kind starts);
results that do not are a runner's bug, an audit that could not complete, and no results.json is written."""

from __future__ import annotations

import pytest

from audit.errors import AuditIncomplete
from audit.results_file import load_outcome
from audit.run_context import RunContext

ENVELOPE = {"verdict": {"status": "no-claim", "text": "no claim tested"}, "lower_bounds": [],
            "best_lower_bound": None, "epsilon_theory": None, "delta": None, "confidence": 0.95}


def test_results_are_written_as_the_typed_outcome(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with ctx:
        ctx.finish(ENVELOPE, {"command": "test"}, report=False)
    outcome = load_outcome(ctx.run_dir)
    assert outcome.kind == "example" and outcome.seed == 3 and outcome.verdict.status == "no-claim"


def test_results_that_do_not_follow_the_schema_are_an_incomplete_audit(tmp_path) -> None:
    ctx = RunContext(tmp_path, "example", "laplace_count", seed=3, quiet=True)
    with pytest.raises(AuditIncomplete, match="does not follow the results schema"):
        with ctx:
            ctx.finish({k: v for k, v in ENVELOPE.items() if k != "confidence"}, {"command": "test"}, report=False)
    assert not (ctx.run_dir / "results.json").exists()
