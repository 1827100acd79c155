"""Defaults of ``run membership`` by target (issue 26): a non-private target measures its leakage with 500
mislabelled canaries and 8 reference models; a DP target keeps the one-run preset (6,000 sparse canaries);
``--canary``, ``--canaries``, ``--references`` and ``--quick`` override."""

from __future__ import annotations

import pytest

from attacks.names import ATTACKS
from audit.membership.options import MembershipOptions
from audit.membership.runner import GAME_SIZES, game_preset, game_sizes


def _opts(target: str, **extra) -> MembershipOptions:
    return MembershipOptions(target=target, **extra)


@pytest.mark.parametrize("target, canary, preset, sizes", [
    ("nonprivate_mnist", "mislabelled", "nonprivate", (500, 2, 8)),
    ("nonprivate_digits", "mislabelled", "nonprivate", (500, 2, 8)),
    ("dpsgd_mnist", "sparse", "default", (6000, 2, 4)),
])
def test_the_default_game_follows_the_targets_claim(target, canary, preset, sizes) -> None:
    assert game_preset(_opts(target), None) == (canary, preset)
    assert game_sizes(_opts(target), list(ATTACKS), preset) == sizes == GAME_SIZES[preset]


def test_options_override_the_preset() -> None:
    assert game_preset(_opts("nonprivate_mnist", canary="natural"), None) == ("natural", "nonprivate")
    assert game_preset(_opts("nonprivate_mnist", quick=True), None) == ("mislabelled", "quick")
    assert game_preset(_opts("dpsgd_mnist", quick=True), None) == ("sparse", "quick")
    opts = _opts("nonprivate_mnist", canaries=300, references=4)
    assert game_sizes(opts, list(ATTACKS), "nonprivate") == (300, 2, 4)
    # no reference model is trained when no attack needs one
    assert game_sizes(_opts("nonprivate_mnist"), ["loss", "shadow"], "nonprivate") == (500, 2, 0)
