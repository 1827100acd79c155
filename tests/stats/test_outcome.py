"""The typed outcome (audit.stats.outcome) and the schema (audit/schemas/results.schema.json) name the same
keys: every key a schema definition names is a field of its block and every field is a key the schema
names, so neither can change without the other; and a block reads and writes its JSON object losslessly."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import pytest

from audit.schemas import results_schema
from audit.stats import outcome as o

#: Each block, the schema definitions whose keys it holds (a path of keys below ``$defs``; an int indexes a
#: list), and the ones whose ``required`` lists make its required fields (default: all of them).
LOCATIONS: dict[type, tuple[list[tuple], list[tuple] | None]] = {
    o.Verdict: ([("verdict",)], None),
    o.Ceiling: ([("ceiling",)], None),
    o.Curve: ([("curve",)], None),
    o.Bound: ([("bound",)], None),
    o.BestBound: ([("bound",), ("best_bound", "allOf", 1)], None),
    o.ErrorPoint: ([("point",)], None),
    o.Roc: ([("attack", "properties", "roc")], None),
    o.AttackMetrics: ([("attack",)], None),
    o.Table: ([("table",)], None),
    o.Family: ([("family",)], None),
    o.SplitCheck: ([("membership", "allOf", 1, "properties", "split_check")], None),
    o.Figure: ([("inversion", "properties", "figures", "items")], None),
    o.Game: ([("audit", "properties", "game"), ("dp", "allOf", 1, "properties", "game"),
              ("mechanism", "allOf", 1, "properties", "game")], []),
    o.ExpectedPerfect: ([("expected_perfect",)], None),
    o.LastIterate: ([("last_iterate",)], None),
    o.OneRun: ([("one_run",)], None),
    o.Finding: ([("finding",)], None),
    o.ConfigCheck: ([("config_check",)], None),
    o.EpsilonBound: ([("epsilon_bound",)], None),
    o.Inversion: ([("inversion", "properties", "inversion")], None),
    o.ExtractionMethod: ([("extraction", "properties", "extraction", "properties", "methods", "items")], None),
    o.Extraction: ([("extraction", "properties", "extraction")], None),
    o.ReconstructionPoint: ([("reconstruction", "properties", "reconstruction", "properties", "points", "items")],
                            None),
    o.Reconstruction: ([("reconstruction", "properties", "reconstruction")], None),
    o.SweepPoint: ([("sweep", "properties", "sweep", "items")], None),
    o.SweepRow: ([("sweep", "properties", "rows", "items")], None),
    o.Outcome: ([("envelope",), ("audit",), ("membership", "allOf", 1), ("dp", "allOf", 1),
                 ("mechanism", "allOf", 1), ("inversion",), ("extraction",), ("sweep",), ("reconstruction",),
                 ("config_check_run",)], [("envelope",)]),
    o.CompareRow: ([("compare", "properties", "rows", "items")], None),
    o.Comparison: ([("compare",)], None),
}


def _definition(path: tuple) -> dict:
    node = results_schema()["$defs"]
    for key in path:
        node = node[key]
    return node


@pytest.mark.parametrize("block", LOCATIONS, ids=lambda b: b.__name__)
def test_the_fields_are_the_keys_the_schema_names(block):
    where, required_at = LOCATIONS[block]
    named = set().union(*(set(_definition(p).get("properties", {})) | set(_definition(p).get("required", []))
                          for p in where))
    assert set(block.keys()) == named, (set(block.keys()) - named, named - set(block.keys()))
    required = set().union(*(set(_definition(p).get("required", [])) for p in
                             (where if required_at is None else required_at)))
    assert set(block.required_keys()) == required


def test_every_block_is_checked_against_the_schema():
    assert {getattr(o, name) for name in o.__all__} == set(LOCATIONS)


def test_a_block_reads_and_writes_its_object_losslessly():
    data = {"method": "gdp", "epsilon": "inf", "confidence": 0.95, "n": 10, "valid": True, "role": "verdict",
            "statement": "s", "attack": None, "details": {"mu_lb": 1.5}, "beyond": [1, 2]}
    bound = o.Bound.from_dict(data)
    assert bound.epsilon == math.inf and bound.attack is None and bound.details == {"mu_lb": 1.5}
    assert bound.extra == {"attack": None, "beyond": [1, 2]}  # an optional key written as null, an unnamed key
    assert bound.to_dict() == data | {"epsilon": math.inf}
    with pytest.raises(FrozenInstanceError):
        bound.n = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        o.Bound(method="gdp", epsilon=1.0, confidence=0.95, n=10, valid=True, role="verdict")  # no statement


def test_nested_blocks_are_typed():
    data = {"runs": ["a"], "figure": "f.png", "html": "c.html",
            "rows": [{"run": "a", "run_dir": "a", "target": "t", "attack": "loss", "auc": 0.5, "tpr_1": 0.0,
                      "tpr_01": 0.0, "advantage": 0.0, "epsilon_theory": None, "best_epsilon_lower_bound": "-inf",
                      "delta": None, "tpr_1_ci": None, "tpr_01_ci": None, "advantage_ci": None,
                      "advantage_dp_bound": None}]}
    comparison = o.Comparison.from_dict(data)
    (row,) = comparison.rows
    assert isinstance(row, o.CompareRow) and row.best_epsilon_lower_bound == -math.inf
    assert comparison.to_dict()["rows"][0]["best_epsilon_lower_bound"] == -math.inf
