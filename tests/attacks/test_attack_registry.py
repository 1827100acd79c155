"""Membership attacks are declared once (:data:`attacks.names.ATTACK_SPECS`) and scored by registered
scorers (:func:`attacks.membership.register_scorer`): every declared attack has exactly one scorer, an
undeclared one cannot be registered, and the groups and reference-model needs follow the declarations."""

from __future__ import annotations

from collections import Counter

import pytest

from attacks.membership import SCORERS, register_scorer
from attacks.names import ATTACK_GROUPS, ATTACK_SPECS, ATTACKS, REFERENCE_ATTACKS, expand_attacks


def test_every_declared_attack_has_one_scorer() -> None:
    served = Counter(name for names in SCORERS for name in names)
    assert served == Counter(list(ATTACK_SPECS))


def test_an_undeclared_attack_cannot_register() -> None:
    with pytest.raises(ValueError, match="ATTACK_SPECS"):
        register_scorer("no_such_attack")


def test_groups_and_needs_follow_the_declarations() -> None:
    assert list(ATTACKS) == list(ATTACK_SPECS)
    assert ATTACK_GROUPS == {"lira": ("lira_online", "lira_offline"), "rmia": ("rmia_online", "rmia_offline"),
                             "all": tuple(ATTACK_SPECS)}
    assert REFERENCE_ATTACKS == ("lira_online", "lira_offline", "rmia_online", "rmia_offline")
    assert expand_attacks("loss,rmia") == ("rmia_online", "rmia_offline", "loss")
