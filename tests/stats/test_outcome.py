"""The typed outcome (audit.stats.outcome) is the source of the file format: every field of every block is
described (the generated schema carries the descriptions, audit.schemas.generate); a block reads and writes
its JSON object losslessly, a key no field names is refused from a run (strict) and kept, in ``extra``, only
from a file written by an older version."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import pytest

from audit.kind_table import kind_records
from audit.schemas.generate import block_schema
from audit.stats import outcome as o
from audit.stats.blocks import UnnamedKey
from audit.theory.last_iterate import last_iterate_epsilon

#: Every block of the format: the shared ones and each kind's own (``RunKind.detail``, in the kind's package).
BLOCKS = [getattr(o, name) for name in o.__all__] + [r.load("detail") for r in kind_records() if r.detail]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.__name__)
def test_every_field_is_a_described_key_of_its_definition(block):
    definition = block_schema(block)
    assert list(definition["properties"]) == list(block.keys())
    assert definition["required"] == list(block.required_keys())
    undescribed = [key for key, value in definition["properties"].items() if not value.get("description")]
    assert not undescribed, f"{block.__name__}: describe {undescribed} in its docstring's Attributes"


def test_a_block_reads_and_writes_its_object_losslessly():
    data = {"method": "gdp", "epsilon": "inf", "confidence": 0.95, "n": 10, "valid": True, "role": "verdict",
            "statement": "s", "attack": None, "details": {"mu_lb": 1.5}, "beyond": [1, 2]}
    bound = o.Bound.from_dict(data)
    assert bound.epsilon == math.inf and bound.attack is None and bound.details == {"mu_lb": 1.5}
    assert bound.nulls == {"attack"}  # an optional key written as null
    assert bound.extra == {"beyond": [1, 2]}  # a key of an older version's file
    assert bound.to_dict() == data | {"epsilon": math.inf}
    with pytest.raises(UnnamedKey, match="Bound has no field 'beyond'"):
        o.Bound.from_dict(data, strict=True)  # a run's results: every key is a named field
    with pytest.raises(UnnamedKey, match="Roc has no field 'auc'"):  # nested blocks too
        o.AttackMetrics.from_dict({"auc": 0.5, "tpr_at_fpr": {}, "tpr_at_fpr_ci": {},
                                   "roc": {"fpr": [], "tpr": [], "auc": 0.5}}, strict=True)
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


def test_the_envelope_is_at_most_twenty_fields_and_its_groups_are_written_flat():
    from dataclasses import fields

    named = [f.name for f in fields(o.Outcome) if f.name not in ("extra", "nulls")]
    assert len(named) <= 20, named
    data = {"schema_version": 4, "kind": "k", "target": "t", "seed": 0, "created": "2026-01-01T00:00:00Z",
            "host": {"python": "3.11", "platform": "p"}, "timing": {"total_s": 1.0}, "volatile": [],
            "verdict": {"status": "no-claim", "text": ""}, "lower_bounds": [], "best_lower_bound": None,
            "epsilon_theory": None, "delta": None, "confidence": 0.95, "params": {"a": 1},
            "ceiling": {"epsilon": None, "text": "c"}}
    outcome = o.Outcome.from_dict(data, strict=True)
    assert outcome.stamp.timing == {"total_s": 1.0} and outcome.audited.params == {"a": 1}
    assert outcome.judged.ceiling.text == "c" and outcome.detail is None
    assert outcome.to_dict() == data  # the groups' keys beside the envelope's, as the file holds them
    assert {"created", "params", "ceiling"} <= set(o.Outcome.keys()) and "stamp" not in o.Outcome.keys()


def test_a_finding_is_built_once_as_its_block():
    """A configuration check's result has one conversion to the block (``Finding.of``); a check not read has no
    problem, and is could-not-read only where it can void the accounting; an older file's finding (no ``read``,
    no ``decides``) is read."""
    from audit.theory.config_check import ConfigFinding

    found = o.Finding.of(ConfigFinding("epsilon", True, "above the claim", "claim more", {"epsilon": 2.0}), True)
    assert (found.problem, found.violation, found.decides, found.read, found.fix) == (True, True, True, True,
                                                                                       "claim more")
    assert found.to_dict()["details"] == {"epsilon": 2.0} and found.sentence() == "epsilon: above the claim Fix: " \
                                                                                  "claim more."
    note = o.Finding.of(ConfigFinding("world-dependence", True, "moved", "fix it"), False)
    assert note.problem and not note.violation and not note.unread
    unread = o.Finding.checked("rate", True, True, "Could not read: no batches.", read=False)
    assert not unread.problem and not unread.violation and unread.unread
    assert not o.Finding.checked("canary-ids", False, False, "Not checked.", read=False).unread
    assert not o.Finding.from_dict({"check": "noise-level", "message": "m", "problem": False}).unread


def test_the_last_iterate_reference_applies_to_add_remove_dpsgd_only():
    """:meth:`LastIterate.of`: the heuristic of audit.theory.last_iterate for readable add/remove DP-SGD parameters."""
    params = {"noise_multiplier": 1.0, "sample_rate": 0.05, "steps": 200}
    block = o.LastIterate.of(params, 1e-5, "add/remove one record")
    assert block.epsilon == pytest.approx(last_iterate_epsilon(1e-5, 1.0, 0.05, 200)) and block.text
    assert o.LastIterate.of(params, 1e-5, "replace one record") is None
    assert o.LastIterate.of({"epsilon": 1.0}, 1e-5) is None
    assert o.LastIterate.of(params, None) is None
    assert o.LastIterate.of(params | {"sample_rate": 1.5}, 1e-5) is None  # unreadable: none, no error
    assert o.LastIterate.of(params | {"steps": "many"}, 1e-5) is None
