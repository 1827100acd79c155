"""RunResults, what a runner hands RunContext.finish: a misnamed or mistyped entry fails where the runner builds
it (TypeError), not as a schema error when the run is written; finish writes its entries; an Unbounded judgement
writes no bound, its verdict, and the tradeoff curves as null only when asked."""

from __future__ import annotations

import pytest

from audit.io import read_json
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Curve, Family, Table, Verdict

HEADER = ResultsHeader(description="a target", delta=None, confidence=0.95, epsilon_theory=None)
VERDICT = Verdict(status="no-claim", text="no claim tested")
TABLE = Table(title="T", columns=["c"], rows=[[1]], caption="a table")


def test_a_misnamed_field_fails_where_it_is_written() -> None:
    with pytest.raises(TypeError, match="table"):
        RunResults(header=HEADER, judgement=Unbounded(verdict=VERDICT), table=(TABLE,))  # type: ignore[call-arg]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("tables", ({"title": "T", "columns": ["c"], "rows": [[1]]},), "tables holds a dict, not Table"),
    ("tables", [TABLE], "tables is a tuple of Table, not list"),
    ("attacks", {"loss": {"auc": 0.5}}, "attacks holds a dict, not AttackMetrics"),
    ("game", {"runs": 3}, "game holds a dict, not Game"),
    ("quick", "yes", "quick holds a str, not bool"),
    ("header", {"description": "a target"}, "header holds a dict, not ResultsHeader"),
])
def test_a_mistyped_field_fails_where_it_is_written(field, value, message) -> None:
    entries = {"header": HEADER, "judgement": Unbounded(verdict=VERDICT)} | {field: value}
    with pytest.raises(TypeError, match=message):
        RunResults(**entries)


def test_an_unbounded_judgement_is_checked_too() -> None:
    with pytest.raises(TypeError, match="verdict holds a dict"):
        Unbounded(verdict={"status": "no-claim", "text": "no claim tested"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no best estimate"):
        RunResults(header=HEADER, judgement=Unbounded(verdict=VERDICT), estimate=True)
    with pytest.raises(TypeError, match="cannot have one too"):
        Unbounded(verdict=VERDICT, null_curves=True, tradeoff=Curve(alpha=[0.0, 1.0], beta=[1.0, 0.0]))


def test_unbounded_writes_no_bound_its_verdict_and_null_curves_only_when_asked() -> None:
    assert Unbounded(verdict=VERDICT).blocks() == {"lower_bounds": [], "best_lower_bound": None, "verdict": VERDICT}
    family = Family(size=2, confidence=0.95)
    assert Unbounded(verdict=VERDICT, family=family, null_curves=True).blocks() == {
        "lower_bounds": [], "best_lower_bound": None, "verdict": VERDICT, "tradeoff": None,
        "lower_bound_tradeoff": None, "family": family}


def test_finish_writes_the_typed_results_entries(tmp_path) -> None:
    results = RunResults(header=HEADER, judgement=Unbounded(verdict=VERDICT, null_curves=True), attacks={},
                         tables=(TABLE,), quick=True, target="another name")
    ctx = RunContext(tmp_path, "example", "x", seed=3, quiet=True)
    with ctx:
        ctx.finish(results, {"command": "test"})
    written = read_json(ctx.run_dir / "results.json")
    assert written["target"] == "another name" and written["quick"] is True
    assert written["tradeoff"] is None and written["attacks"] == {} and written["tables"][0]["title"] == "T"
    assert "best_estimate" not in written and "family" not in written
