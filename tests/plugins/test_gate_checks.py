"""The gate's registry of checks (audit.plugins.gate_checks) and the declared mechanism a plugin gives
(audit.theory.declared_mechanism, targets.plugins.declared)."""

import pytest

import audit.plugins.accounting  # noqa: F401  (registers the accounting check's checks)
import audit.plugins.lm_checks  # noqa: F401  (registers the language-model checks)
from audit.errors import UserError
from audit.plugins.gate_checks import (
    GateCheck,
    alpha_split,
    deciding_rank,
    only_dpsgd_participation,
    only_independent_noise,
    registered,
    unsupported_finding,
)
from audit.theory.declared_mechanism import (
    DPSGD,
    BallsInBins,
    DeclaredMechanism,
    MinSeparation,
    NoisingMatrix,
    PoissonParticipation,
)
from targets.plugins.declared import declared_mechanism


def test_the_alpha_split_comes_from_the_registry_and_spends_exactly_alpha():
    split = alpha_split(0.05)
    statistical = {c.name for c in registered() if c.alpha_share > 0}
    assert set(split) == statistical == {"sampling", "periodicity", "rate", "noise"}
    assert sum(split.values()) == pytest.approx(0.05)
    assert all(v == pytest.approx(0.05 / 4) for v in split.values())
    cyclic = DeclaredMechanism(PoissonParticipation(0.1, cycle=4))
    split = alpha_split(0.05, cyclic)  # the declared law's test in place of Poisson's three
    assert split == pytest.approx({"participation": 0.05 * 2 / 3, "noise": 0.05 / 3})
    assert {c.name for c in registered(cyclic)} >= {"participation", "noise", "records"}
    with pytest.raises(ValueError):
        alpha_split(1.0)


def test_the_deciding_order_puts_facts_first_and_ranks_emitted_findings_with_their_check():
    order = [c.name for c in registered()]
    assert order.index("position-ids") < order.index("records") < order.index("clipping") < order.index("sampling")
    assert order.index("sampling") < order.index("noise") < order.index("epsilon")
    assert deciding_rank("noise-coverage") == deciding_rank("noise") < deciding_rank("epsilon")
    assert deciding_rank("a-check-nobody-registered") > deciding_rank("epsilon")


def test_what_a_check_cannot_test_is_unread_and_never_a_problem():
    cyclic = DeclaredMechanism(PoissonParticipation(0.1, cycle=4), NoisingMatrix("banded-toeplitz", (1.0, 0.4)))
    assert only_dpsgd_participation(DPSGD) == "" and only_independent_noise(DPSGD) == ""
    reason = only_dpsgd_participation(cyclic)
    assert "cyclic over 4 groups" in reason
    found = unsupported_finding(GateCheck("sampling", 70, 1.0), reason)
    assert found.unread and not found.problem and not found.violation and "Could not read" in found.message
    assert only_independent_noise(cyclic) and not only_independent_noise(
        DeclaredMechanism(noise=NoisingMatrix("banded-toeplitz", (1.0,))))


def test_mechanisms_describe_themselves_and_serialise():
    truncated = DeclaredMechanism(PoissonParticipation(0.05, cap=64))
    assert not truncated.is_dpsgd and truncated.participation.law == "truncated-poisson"
    assert DPSGD.is_dpsgd and DPSGD.to_dict()["participation"] == {"law": "poisson", "cycle": 1}
    assert BallsInBins(4).describe() == "balls-in-bins participation over 4 bins"
    assert MinSeparation(0.2, 3).law == "min-separation"
    for bad in (lambda: PoissonParticipation(1.5), lambda: PoissonParticipation(0.1, cycle=0),
                lambda: NoisingMatrix("toeplitz"), lambda: BallsInBins(0)):
        with pytest.raises(UserError):
            bad()


def test_jax_privacy_objects_are_read_as_what_their_plan_builds():
    pytest.importorskip("jax_privacy")
    from jax_privacy import batch_selection
    from jax_privacy.experimental.execution_plan import BandMFExecutionPlanConfig

    config = BandMFExecutionPlanConfig(iterations=40, strategy=[1.0, 0.5, 0.25, 0.1], epsilon=None, delta=None,
                                       noise_multiplier=1.2, sampling_prob=0.5, l2_clip_norm=1.0)
    read = declared_mechanism("test:p", config)
    assert read.participation == PoissonParticipation(0.5, cycle=4)
    assert read.noise == NoisingMatrix("banded-toeplitz", (1.0, 0.5, 0.25, 0.1)) and "BandMF" in read.source
    strategy = batch_selection.CyclicPoissonSampling(sampling_prob=0.1, iterations=40, truncated_batch_size=30)
    assert declared_mechanism("test:p", strategy).participation == PoissonParticipation(0.1, cap=30)
    bins = batch_selection.BallsInBinsSampling(iterations=40, cycle_length=5)
    assert declared_mechanism("test:p", bins).participation == BallsInBins(5)
    assert declared_mechanism("test:p", None) is DPSGD
    with pytest.raises(UserError, match="'mechanism' must be"):
        declared_mechanism("test:p", {"cycle": 4})
