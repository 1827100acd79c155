"""Configuration checks (audit.theory.config_check): the configuration's epsilon against the claim, the
configuration read with and without one record (the sampling and rate tests on batch logs are in
tests/stats/test_sampling_check.py)."""

from __future__ import annotations

import json

import pytest

from audit.errors import UserError
from audit.theory.claims import ApproxDPClaim
from audit.theory.config_check import (
    FIX_EXPECTED_BATCH,
    FIX_NOISE_CLIP,
    FIX_NORMALISATION,
    FIX_RATE_STEPS,
    DPSGDConfig,
    check_config_against_claim,
    compare_world_configs,
    config_epsilon,
)
from audit.theory.dpsgd import DPSGDClaim, most_steps_within

DELTA = 1e-5
#: One small configuration shared by the tests that need an accountant (its PLD is cached: fast).
SMALL = {"noise_multiplier": 2.0, "steps": 5, "sample_rate": 0.5}


def test_config_rate_from_expected_batch_size() -> None:
    cfg = DPSGDConfig(noise_multiplier=2.0, steps=5, expected_batch_size=500, dataset_size=1000, clip=1.0)
    assert cfg.rate == pytest.approx(0.5)
    assert config_epsilon(cfg, DELTA) == pytest.approx(DPSGDClaim(2.0, 0.5, 5).epsilon(DELTA))
    with pytest.raises(UserError):
        DPSGDConfig(noise_multiplier=1.0, steps=10)  # neither a rate nor a batch size and n
    with pytest.raises(UserError):
        DPSGDConfig(noise_multiplier=1.0, steps=10, sample_rate=0.1, normalisation="median")
    with pytest.raises(UserError):
        DPSGDConfig(noise_multiplier=1.0, steps=10, sample_rate=1.5)


def test_config_within_claim_is_no_problem() -> None:
    cfg = DPSGDConfig(**SMALL)
    eps = config_epsilon(cfg, DELTA)
    finding = check_config_against_claim(cfg, eps * 1.005, DELTA)  # inside the accountants' tolerance
    assert not finding.problem and finding.fix == "" and "within the claimed epsilon" in finding.message
    assert check_config_against_claim(cfg, ApproxDPClaim(eps + 1, DELTA), DELTA).problem is False
    json.dumps(finding.details)  # JSON-serialisable, as the block holds it


def test_config_above_claim_says_what_to_change() -> None:
    cfg = DPSGDConfig(**SMALL, normalisation="actual")
    eps = config_epsilon(cfg, DELTA)
    finding = check_config_against_claim(cfg, eps / 2, DELTA)
    assert finding.problem and finding.check == "epsilon"
    assert f"{eps:.3g}" in finding.message and "more than the claimed epsilon" in finding.message
    needed = finding.details["noise_multiplier_needed"]
    assert needed > 2.0 and DPSGDClaim(needed, 0.5, 5).epsilon(DELTA) <= eps / 2
    assert f"{needed:.4g}" in finding.fix and "caveat" in finding.details
    quick = check_config_against_claim(cfg, eps / 2, DELTA, suggest_noise=False)
    assert quick.problem and "noise_multiplier_needed" not in quick.details
    json.dumps(finding.details)  # JSON-serialisable, as the block holds it


def test_steps_beyond_the_accounting_are_named_with_the_steps_the_noise_affords() -> None:
    """A loop calibrated for 3 steps that runs 5 (max_steps beyond the accountant's): the finding says the noise meets
    the claim over 3 steps, and its fix starts with taking at most 3 (issue 50: it read as too little noise alone)."""
    claim = DPSGDClaim(2.0, 0.5, 3).epsilon(DELTA) * 1.002  # the coarse PLD of the search is within 0.2% here
    finding = check_config_against_claim(DPSGDConfig(**SMALL), claim, DELTA)
    assert finding.problem and finding.details["steps_within_claim"] == 3
    assert "meets the claim over at most 3 steps" in finding.message and "the loop took 5" in finding.message
    assert finding.fix.startswith("take at most 3 steps") and "take fewer steps" not in finding.fix
    far = check_config_against_claim(DPSGDConfig(**SMALL), DPSGDClaim(2.0, 0.5, 1).epsilon(DELTA) / 2, DELTA)
    assert "steps_within_claim" not in far.details and "take fewer steps" in far.fix  # not one step affordable


def test_most_steps_within_is_the_largest_count_within_the_claim() -> None:
    eps = DPSGDClaim(2.0, 0.5, 4).epsilon(DELTA)
    assert most_steps_within(2.0, 0.5, eps * 1.001, DELTA, 10) == 4  # the coarse PLD's bound is within 0.1% here
    assert most_steps_within(2.0, 0.5, eps * 1.001, DELTA, 3) == 3  # capped by upto
    assert most_steps_within(2.0, 0.5, 1e-6, DELTA, 10) == 0


def test_same_configuration_in_both_worlds() -> None:
    cfg = DPSGDConfig(**SMALL, clip=1.0, normaliser=500.0)
    finding = compare_world_configs(cfg, cfg, delta=DELTA)
    assert not finding.problem and finding.details["differences"] == []
    assert finding.details["epsilon_with"] == finding.details["epsilon_without"]


def test_rate_and_steps_from_len_dataset() -> None:
    """Opacus-style: rate 1/len(loader) and steps epochs * len(loader) with a fixed batch size 10."""
    n, batch, epochs = 1000, 10, 3

    def read(size: int) -> DPSGDConfig:
        per_epoch = -(-size // batch)
        return DPSGDConfig(noise_multiplier=1.0, steps=epochs * per_epoch, sample_rate=1 / per_epoch, clip=1.0)

    finding = compare_world_configs(read(n), read(n + 1))
    assert finding.problem and finding.fix == FIX_RATE_STEPS
    fields = [d["field"] for d in finding.details["differences"]]
    assert fields == ["sample rate", "steps"]
    assert "300 without it, 303 with it" in finding.message


def test_normalising_by_actual_batch_size() -> None:
    base = dict(noise_multiplier=1.0, steps=100, sample_rate=0.01)
    finding = compare_world_configs(DPSGDConfig(**base, normalisation="actual", normaliser=10.0),
                                    DPSGDConfig(**base, normalisation="actual", normaliser=11.0))
    assert finding.problem and finding.fix == FIX_NORMALISATION
    same_reading = compare_world_configs(DPSGDConfig(**base, normalisation="actual"),
                                         DPSGDConfig(**base, normalisation="actual"))
    assert same_reading.problem and same_reading.fix == FIX_NORMALISATION  # the divisor counts the record
    noise = compare_world_configs(DPSGDConfig(**base, clip=1.0), DPSGDConfig(**base, clip=1.2))
    assert noise.problem and noise.fix == FIX_NOISE_CLIP


@pytest.mark.parametrize(("n", "moves"), [(190, True), (189, True), (191, False), (195, False)])
def test_a_normaliser_int_n_q_is_named_as_opacus_expected_batch_size(n: int, moves: bool) -> None:
    """Opacus #571: loss_reduction='mean' divides by int(N q), which moves with one record added or removed only
    where (N - 1) q, N q or (N + 1) q crosses an integer (N 189 and 190 at q 0.1); the fix names the arithmetic."""
    def read(size: int) -> DPSGDConfig:
        return DPSGDConfig(noise_multiplier=1.0, steps=20, sample_rate=0.1, dataset_size=size,
                           normaliser=float(int(size * 0.1)))

    findings = [compare_world_configs(read(n - 1), read(n)), compare_world_configs(read(n), read(n + 1))]
    assert any(f.problem for f in findings) == moves
    for f in (f for f in findings if f.problem):
        assert f.fix == FIX_EXPECTED_BATCH and "int(N q)" in f.message and "#571" in f.message
    assert "loss_reduction='sum'" in FIX_EXPECTED_BATCH and "#571" in FIX_EXPECTED_BATCH
    other = compare_world_configs(DPSGDConfig(noise_multiplier=1.0, steps=20, sample_rate=0.1, dataset_size=190,
                                              normaliser=25.0),
                                  DPSGDConfig(noise_multiplier=1.0, steps=20, sample_rate=0.1, dataset_size=191,
                                              normaliser=26.0))
    assert other.fix == FIX_NORMALISATION  # a normaliser that is not int(N q): not named as Opacus's

