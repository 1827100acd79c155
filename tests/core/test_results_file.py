"""The one loader and writer of results.json (audit.results_file): a load and a write give the same bytes;
a file that does not follow the schema is refused in one line that says where."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import FIXTURES

from audit.errors import UserError
from audit.results_file import load_outcome, outcome_of, write_outcome
from audit.stats.outcome import Outcome


def test_a_load_and_a_write_give_the_same_bytes(tmp_path):
    source = FIXTURES / "run_membership" / "results.json"
    outcome = load_outcome(source.parent)
    assert isinstance(outcome, Outcome) and outcome.kind == "membership"
    assert outcome.best_lower_bound.epsilon == json.loads(source.read_text())["best_lower_bound"]["epsilon"]
    write_outcome(tmp_path / "results.json", outcome)
    assert (tmp_path / "results.json").read_bytes() == source.read_bytes()


@pytest.mark.parametrize("change, where", [
    (lambda r: r.pop("verdict"), "at the top level: 'verdict' is a required property"),
    (lambda r: r["lower_bounds"][0].update(n="many"), "at lower_bounds/0/n: 'many' is not of type 'integer'"),
    (lambda r: r.update(schema_version=3), "at schema_version: 4 was expected"),
])
def test_a_file_off_the_schema_is_refused_in_one_line(tmp_path, change, where):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run_membership", run)
    results = json.loads((run / "results.json").read_text())
    change(results)
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(UserError) as caught:
        load_outcome(run)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400
    assert message.startswith(f"{run / 'results.json'} does not follow the results schema ({where}")


def test_a_file_that_is_not_json_or_missing_is_refused(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_outcome(tmp_path)
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        load_outcome(tmp_path)


def test_a_runner_dict_with_numpy_values_reads_as_its_file_does():
    np = pytest.importorskip("numpy")
    results = json.loads((FIXTURES / "run_membership" / "results.json").read_text())
    live = results | {"seed": np.int64(results["seed"]), "confidence": np.float64(results["confidence"])}
    assert outcome_of(live) == outcome_of(results)
