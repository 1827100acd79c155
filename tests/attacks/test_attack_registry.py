"""Membership attacks are declared once (:data:`attacks.names.ATTACK_SPECS`) and scored by registered
scorers (:func:`attacks.membership.register_scorer`), on records, on a trained model and on texts: every declared
attack has exactly one scorer for each kind of record it scores, an undeclared one cannot be registered, the
groups and reference-model needs follow the declarations, and an attack on texts runs only when the target has
what it needs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import attacks.lm_membership  # noqa: F401  (registers the scorers on texts)
import attacks.trained_membership  # noqa: F401  (registers the scorers on a trained model)
from attacks.lm_membership import TextInputs, run_text_attacks
from attacks.membership import SCORERS, register_scorer
from attacks.names import (
    ATTACK_GROUPS,
    ATTACK_SPECS,
    ATTACKS,
    RECORD_KINDS,
    REFERENCE_ATTACKS,
    TEXT_ATTACKS,
    TRAINED_ATTACKS,
    expand_attacks,
)


def test_every_declared_attack_has_one_scorer() -> None:
    for records in RECORD_KINDS:  # records, a trained model's and texts
        served = Counter(name for names in SCORERS[records] for name in names)
        assert served == Counter(name for name, spec in ATTACK_SPECS.items() if records in spec.records), records


def test_an_undeclared_attack_cannot_register() -> None:
    with pytest.raises(ValueError, match="ATTACK_SPECS"):
        register_scorer("no_such_attack")
    with pytest.raises(ValueError, match="on texts"):  # declared on records only
        register_scorer("confidence", records="texts")
    with pytest.raises(ValueError, match="on trained"):  # needs models trained on the audited records
        register_scorer("shadow", records="trained")


def test_groups_and_needs_follow_the_declarations() -> None:
    assert list(ATTACKS) == [name for name, spec in ATTACK_SPECS.items() if "records" in spec.records]
    assert ATTACK_GROUPS == {"lira": ("lira_online", "lira_offline"), "rmia": ("rmia_online", "rmia_offline"),
                             "all": tuple(ATTACKS)}
    assert REFERENCE_ATTACKS == ("lira_online", "lira_offline", "rmia_online", "rmia_offline")
    # a trained model: the offline attacks, each with the reference models it needs (LiRA fits a variance)
    assert TRAINED_ATTACKS == {"lira_offline": 2, "rmia_offline": 1, "loss": 0, "confidence": 0}
    assert expand_attacks("loss,rmia") == ("rmia_online", "rmia_offline", "loss")
    # loss is one attack on both, with its formula on texts described apart
    assert set(ATTACKS) & set(TEXT_ATTACKS) == {"loss"} and ATTACKS["loss"] != TEXT_ATTACKS["loss"]
    with pytest.raises(Exception, match="zlib"):  # an attack on texts only is no --attack choice
        expand_attacks("zlib")


def test_an_attack_on_texts_runs_when_the_target_has_what_it_needs() -> None:
    logp = [np.log(np.full(3, 0.5)), np.log(np.full(2, 0.25))]
    texts = ["abc", "de"]
    plain = run_text_attacks(TextInputs(texts=texts, logprobs=logp))
    assert list(plain) == ["loss", "zlib", "min_k"]
    np.testing.assert_allclose(plain["loss"], [np.log(0.5), np.log(0.25)])
    every = run_text_attacks(TextInputs(texts=texts, logprobs=logp, moments=[np.zeros((3, 2)) + [0, 1],
                                                                             np.zeros((2, 2)) + [0, 1]],
                                        base=logp, references=[logp, logp]))
    assert set(every) == set(TEXT_ATTACKS)
    np.testing.assert_allclose(every["llr_base"], 0.0)  # the target is its own base: no evidence
    np.testing.assert_allclose(every["reference"], 0.0)
