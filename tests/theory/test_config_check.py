"""Configuration checks (audit.theory.config_check): the configuration's epsilon against the claim, the
configuration read with and without one record (the sampling and rate tests on batch logs are in
tests/stats/test_sampling_check.py)."""

from __future__ import annotations

import json

import pytest

from audit.errors import UserError
from audit.theory.claims import ApproxDPClaim
from audit.theory.config_check import (
    FIX_NOISE_CLIP,
    FIX_NORMALISATION,
    FIX_RATE_STEPS,
    DPSGDConfig,
    check_config_against_claim,
    compare_world_configs,
    config_epsilon,
)
from audit.theory.dpsgd import DPSGDClaim

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
    json.dumps(finding.to_dict())


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
    json.dumps(finding.to_dict())


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
