"""Checks of the DP-SGD configuration a probe read from the code, before any attack: is it as private
as claimed, and is it fixed in advance? [Abadi et al. 2016, Alg. 1; Chua et al. 2024; the class of
Opacus issues 571 and 819, where the sampling rate, step count or normaliser is derived from the
dataset's size].

* :func:`check_config_against_claim`: the PLD epsilon of the configuration (:class:`DPSGDClaim` of
  its noise multiplier, sampling rate and steps) against the claimed epsilon at the same delta;
* :func:`compare_world_configs`: the configuration read on the dataset without and with one
  record; DP-SGD accounting assumes it is the same in both worlds, so any difference is a problem:
  a training whose rate, steps, normaliser, noise or clip move with one record is not DP for
  add/remove neighbours at that dataset size, whatever its noise, and no accountant's epsilon
  covers it.

Pure functions returning a :class:`ConfigFinding`. Sources: docs/references.md, "Configuration checks".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from audit.errors import UserError
from audit.theory.checks import check_delta
from audit.theory.claims import PrivacyClaim
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier, most_steps_within

__all__ = ["NORMALISATIONS", "CONFIG_TOLERANCE", "DPSGDConfig", "ConfigFinding", "config_epsilon",
           "steps_beyond_claim", "check_config_against_claim", "compare_world_configs", "FIX_RATE_STEPS",
           "FIX_NORMALISATION", "FIX_EXPECTED_BATCH", "FIX_NOISE_CLIP"]

#: How the noisy gradient sum is divided: by the expected batch size ``q n`` fixed in advance
#: ("expected"), by the batch actually drawn ("actual"), not at all ("sum"), or something else.
NORMALISATIONS = ("expected", "actual", "sum", "other")
#: Relative excess of the configuration's epsilon over the claim still read as "as claimed":
#: accountants differ by up to about 0.5% on the same mechanism (e.g. Opacus's PRV and the PLD).
CONFIG_TOLERANCE = 0.01
FIX_RATE_STEPS = ("fix the sampling rate and the number of steps in advance, independent of the dataset's size: "
                  "e.g. sample_rate = expected_batch_size / N with N a size decided before seeing the data (not "
                  "len(dataset)) and steps = epochs / sample_rate (with Opacus, hand make_private a "
                  "DPDataLoader(dataset, sample_rate=q) rather than a DataLoader whose 1/len(loader) becomes the rate)")
FIX_NORMALISATION = ("divide the noisy sum by a batch size fixed in advance (the rate times a size decided before "
                     "seeing the data), not by the actual batch size nor by int(q * len(dataset)) (with Opacus, "
                     "loss_reduction='sum' and that constant in the learning rate)")
FIX_EXPECTED_BATCH = ("make the normaliser a constant fixed in advance: with Opacus, loss_reduction='sum' and the "
                      "learning rate divided by an expected batch size decided before seeing the data (its default "
                      "loss_reduction='mean' divides by expected_batch_size = int(N * q), Opacus #571), or train at "
                      "a dataset size N where int((N - 1) q), int(N q) and int((N + 1) q) agree")
FIX_NOISE_CLIP = "fix the noise multiplier and clipping norm in advance instead of deriving them from the data"


@dataclass(frozen=True, kw_only=True)
class DPSGDConfig:
    """The DP-SGD configuration of one training, as read from the code.

    The sampling rate is ``sample_rate`` or, when only that is known, ``expected_batch_size /
    dataset_size``. ``normalisation`` is one of :data:`NORMALISATIONS`; ``normaliser`` the number the
    noisy sum was divided by (when seen); ``batch_sizes`` the realised per-step batch sizes (when seen).

    Args:
        noise_multiplier: sigma, positive and finite.
        steps: T, a positive integer.
        sample_rate: q, when known.
        expected_batch_size: the expected batch size, with ``dataset_size`` when q is not known.
        dataset_size: the number of records sampled from.
        clip: the clipping norm C, when seen.
        normalisation: how the noisy sum is normalised, one of :data:`NORMALISATIONS`.
        normaliser: the number the noisy sum was divided by, when seen.
        batch_sizes: the realised per-step batch sizes, when seen.

    Raises:
        UserError: sigma or T out of range, an unknown normalisation, no way to the sampling rate, or a
            rate outside (0, 1].
    """

    noise_multiplier: float
    steps: int
    sample_rate: float | None = None
    expected_batch_size: float | None = None
    dataset_size: int | None = None
    clip: float | None = None
    normalisation: str = "expected"
    normaliser: float | None = None
    batch_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 < float(self.noise_multiplier) < math.inf:
            raise UserError(f"noise multiplier must be positive and finite (got {self.noise_multiplier!r})")
        if int(self.steps) != self.steps or self.steps < 1:
            raise UserError(f"steps must be a positive integer (got {self.steps!r})")
        if self.normalisation not in NORMALISATIONS:
            raise UserError(f"normalisation must be one of {', '.join(NORMALISATIONS)} (got {self.normalisation!r})")
        if self.sample_rate is None and (self.expected_batch_size is None or not self.dataset_size):
            raise UserError("a DP-SGD configuration needs the sampling rate, or the expected batch size and the "
                            "dataset size")
        if not 0.0 < self.rate <= 1.0:
            raise UserError(f"the sampling rate must lie in (0, 1] (got {self.rate!r})")
        object.__setattr__(self, "batch_sizes", tuple(int(b) for b in self.batch_sizes))

    @property
    def rate(self) -> float:
        """The Poisson sampling rate q the configuration implies.

        Returns:
            ``sample_rate``, or ``expected_batch_size / dataset_size``.
        """
        if self.sample_rate is not None:
            return float(self.sample_rate)
        return float(self.expected_batch_size) / float(self.dataset_size)  # type: ignore[arg-type]

    def claim(self) -> DPSGDClaim:
        """Its guarantee by the PLD accountant, as if sampling were Poisson with rate :attr:`rate`.

        Returns:
            The DP-SGD claim of sigma, q and T.
        """
        return DPSGDClaim(self.noise_multiplier, self.rate, self.steps)

    def summary(self) -> str:
        return f"noise multiplier {self.noise_multiplier:.4g}, sampling rate {self.rate:.4g}, {self.steps} steps"

    def to_dict(self) -> dict[str, Any]:
        return {"noise_multiplier": float(self.noise_multiplier), "steps": int(self.steps), "sample_rate": self.rate,
                "expected_batch_size": self.expected_batch_size, "dataset_size": self.dataset_size,
                "clip": self.clip, "normalisation": self.normalisation, "normaliser": self.normaliser,
                "batch_sizes": list(self.batch_sizes)}


@dataclass(frozen=True)
class ConfigFinding:
    """The result of one configuration check: ``problem`` (True when something must change),
    ``message`` (the one sentence a user needs), ``fix`` (what to change; empty when nothing) and
    JSON-serialisable ``details``. The accounting check reports it as a finding of its block by the one
    conversion :meth:`audit.stats.outcome.Finding.of` (which adds whether it voids the accounting).

    Args:
        check: the check's name.
        problem: True when something must change.
        message: the one sentence a user needs.
        fix: what to change; empty when nothing.
        details: JSON-serialisable figures of the check.
    """

    check: str
    problem: bool
    message: str
    fix: str = ""
    details: dict = field(default_factory=dict)


def config_epsilon(config: DPSGDConfig, delta: float) -> float:
    """Epsilon at ``delta`` of the configuration by the PLD accountant (Poisson sampling assumed).

    Args:
        config: the configuration.
        delta: the delta at which epsilon is computed.

    Returns:
        The configuration's epsilon.
    """
    return float(config.claim().epsilon(check_delta(delta, positive=True)))


def _claimed_epsilon(claimed: float | PrivacyClaim, delta: float) -> float:
    eps = float(claimed.epsilon(delta)) if isinstance(claimed, PrivacyClaim) else float(claimed)
    if math.isnan(eps) or eps < 0:
        raise UserError(f"the claimed epsilon must be a non-negative number (got {claimed!r})")
    return eps


def check_config_against_claim(config: DPSGDConfig, claimed: float | PrivacyClaim, delta: float, *,
                               tolerance: float = CONFIG_TOLERANCE, suggest_noise: bool = True) -> ConfigFinding:
    """Whether the configuration gives a larger epsilon at ``delta`` than the claim.

    The configuration's epsilon is the PLD accountant's for DP-SGD with its noise multiplier,
    sampling rate and steps (Abadi et al. 2016, Alg. 1; :class:`audit.theory.dpsgd.DPSGDClaim`); a
    problem when it exceeds the claimed epsilon by more than ``tolerance`` (relative). With
    ``suggest_noise`` the fix names the smallest noise multiplier that meets the claim at this rate
    and step count (:func:`audit.theory.dpsgd.calibrate_noise_multiplier`). The figure assumes
    Poisson sampling and a normaliser fixed in advance; ``details["caveat"]`` says when the
    configuration states otherwise. Sources: docs/references.md, "Configuration checks".

    Args:
        config: the configuration read from the code.
        claimed: the claimed epsilon, or the claim itself (its epsilon at ``delta`` is used).
        delta: the delta of the comparison.
        tolerance: the relative excess still read as "as claimed".
        suggest_noise: name the smallest noise multiplier that meets the claim in the fix.

    Returns:
        The finding of check ``"epsilon"``: a problem when the configuration's epsilon exceeds the claim.
    """
    delta = check_delta(delta, positive=True)
    claimed_eps = _claimed_epsilon(claimed, delta)
    eps = config_epsilon(config, delta)
    details: dict[str, Any] = {"config": config.to_dict(), "epsilon": eps, "claimed_epsilon": claimed_eps,
                               "delta": delta, "tolerance": tolerance, "accountant": "PLD (dp-accounting)"}
    if config.normalisation != "expected":
        details["caveat"] = (f"the noisy sum is normalised by {config.normalisation!r}, not the expected batch size: "
                             "the accountant's epsilon assumes a normaliser fixed in advance")
    if eps <= claimed_eps * (1.0 + tolerance):
        return ConfigFinding("epsilon", False, f"The configuration read from the code ({config.summary()}) is "
                             f"({eps:.3g}, {delta:g})-DP by the PLD accountant, within the claimed epsilon "
                             f"{claimed_eps:.3g}.", "", details)
    message = (f"The configuration read from the code ({config.summary()}) is only ({eps:.3g}, {delta:g})-DP by the "
               f"PLD accountant, more than the claimed epsilon {claimed_eps:.3g}.")
    within = most_steps_within(config.noise_multiplier, config.rate, claimed_eps, delta, config.steps - 1)
    fixes = [f"claim epsilon {eps:.3g}", "sample at a smaller rate" if within else
             "take fewer steps or a smaller sampling rate"]
    if suggest_noise and claimed_eps > 0:
        needed = calibrate_noise_multiplier(claimed_eps, delta, config.rate, config.steps)
        details["noise_multiplier_needed"] = needed
        fixes.insert(0, f"raise the noise multiplier to at least {needed:.4g}")
    if within:
        details["steps_within_claim"] = within
        message += " " + steps_beyond_claim(within, config.steps)
        fixes.insert(0, f"take at most {within} steps (max_steps and the epochs as the noise was calibrated for)")
    return ConfigFinding("epsilon", True, message, ", or ".join(fixes), details)


def steps_beyond_claim(within: int, steps: int) -> str:
    """The sentence saying that the noise would meet the claim over ``within`` of the ``steps`` steps taken: the
    cause when a loop runs more steps than its noise multiplier was calibrated for (``max_steps`` or epochs beyond
    the accountant's)."""
    return (f"Its noise multiplier meets the claim over at most {within} steps at this rate, and the loop took "
            f"{steps}: if the noise was calibrated for {within} steps or fewer, the loop runs steps beyond its "
            f"accounting (max_steps or epochs larger than the accountant's).")


def _differs(a: Any, b: Any, rel_tol: float) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, str) or isinstance(b, str):
        return a != b
    return not math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=0.0)


def _floor_of_nq(config: DPSGDConfig) -> bool:
    """Whether ``config`` divides by ``int(N q)`` (Opacus's ``expected_batch_size`` of ``loss_reduction='mean'``):
    its normaliser is the floor of its dataset size times its rate."""
    if config.normalisation != "expected" or config.normaliser is None or not config.dataset_size:
        return False
    return float(config.normaliser) == math.floor(config.dataset_size * config.rate + 1e-9)


def _world_differences(without: DPSGDConfig, with_: DPSGDConfig,
                       rel_tol: float) -> tuple[list[dict[str, Any]], list[str]]:
    """(the differing fields, the fix sentences they call for, in order). A normaliser ``int(N q)`` that moves
    with the record is named as Opacus's expected batch size (#571), with a fix that moves nothing else."""
    floor_nq = _floor_of_nq(without) and _floor_of_nq(with_) and math.isclose(without.rate, with_.rate,
                                                                               rel_tol=rel_tol)
    fields = (("sample rate", without.rate, with_.rate, FIX_RATE_STEPS),
              ("steps", without.steps, with_.steps, FIX_RATE_STEPS),
              ("normalisation", without.normalisation, with_.normalisation, FIX_NORMALISATION),
              ("normaliser" + (" int(N q) (Opacus's expected_batch_size, #571)" if floor_nq else ""),
               without.normaliser, with_.normaliser, FIX_EXPECTED_BATCH if floor_nq else FIX_NORMALISATION),
              ("noise multiplier", without.noise_multiplier, with_.noise_multiplier, FIX_NOISE_CLIP),
              ("clip", without.clip, with_.clip, FIX_NOISE_CLIP))
    diffs = [{"field": name, "without": a, "with": b} for name, a, b, _ in fields if _differs(a, b, rel_tol)]
    fixes = [fix for name, a, b, fix in fields if _differs(a, b, rel_tol)]
    if "actual" in (without.normalisation, with_.normalisation) and FIX_NORMALISATION not in fixes:
        diffs.append({"field": "normalisation", "without": without.normalisation, "with": with_.normalisation,
                      "note": "the actual batch size counts the record itself"})
        fixes.append(FIX_NORMALISATION)
    return diffs, list(dict.fromkeys(fixes))


def _fmt(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def compare_world_configs(config_without: DPSGDConfig, config_with: DPSGDConfig, *, rel_tol: float = 1e-9,
                          delta: float | None = None) -> ConfigFinding:
    """Whether the configuration itself changes when one record is added to the dataset.

    DP-SGD's guarantee (Abadi et al. 2016, Alg. 1, and every accountant) is for a sampling rate,
    step count, noise multiplier, clipping norm and normaliser fixed in advance. Code that derives
    them from the dataset (rate ``1/len(loader)``, steps ``epochs * len(loader)``, dividing the noisy
    sum by the actual batch size) changes them with the record, which the accountant never sees.
    Compares the two readings field by field (relative tolerance ``rel_tol``); normalising by the
    actual batch size is a problem even when both readings agree, since that size counts the record. A
    problem means the training is not DP for add/remove neighbours at this size, whatever its noise.
    With ``delta``, ``details`` also hold each world's PLD epsilon. Sources: docs/references.md,
    "Configuration checks".

    Args:
        config_without: the configuration read without the record.
        config_with: the configuration read with the record added.
        rel_tol: the relative tolerance of the comparison of each field.
        delta: when given, each world's PLD epsilon at this delta goes into ``details``.

    Returns:
        The finding of check ``"world-dependence"``: a problem when a field changed or the normaliser
        is the actual batch size.
    """
    diffs, fixes = _world_differences(config_without, config_with, rel_tol)
    details: dict[str, Any] = {"without": config_without.to_dict(), "with": config_with.to_dict(),
                               "differences": diffs}
    if delta is not None:
        details["epsilon_without"] = config_epsilon(config_without, delta)
        details["epsilon_with"] = config_epsilon(config_with, delta)
    if not diffs:
        return ConfigFinding("world-dependence", False, "The DP-SGD configuration is the same with and without "
                             "the record, as the accounting assumes.", "", details)
    changes = "; ".join(f"{d['field']} {_fmt(d['without'])} without it, {_fmt(d['with'])} with it" for d in diffs)
    message = (f"The DP-SGD configuration depends on the record ({changes}): a configuration that moves with one "
               "record is not DP for add/remove neighbours at this dataset size, whatever the noise, and the "
               "accountant's epsilon (which assumes it fixed in advance) does not cover this training.")
    return ConfigFinding("world-dependence", True, message, "; ".join(fixes), details)
