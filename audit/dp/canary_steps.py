"""From per-step canary observations to bounds: the one path every update-level audit takes — the
built-in DP-SGD targets (:mod:`targets.dpsgd_audit`), Opacus and hooked user loops
(:mod:`audit.dp.plugins.updates`).

Observation model. A gradient canary of norm C joins each step with probability q (the rate the
code really samples with); the auditor sees the noisy clipped sum projected on the canary's
direction, in units of C: ``o_t = b_t + N(0, sigma^2)`` (plus the data's part when the coordinate is
not free of data gradients), ``b_t ~ Bernoulli(q)`` with the canary in and 0 without
(Nasr et al. 2023, Sec. 5; docs/references.md, "Per-step auditing").

Per-run statistic: the log-likelihood ratio of the observed steps under the mechanism the code runs
(:class:`StepMechanism`: noise multiplier, Poisson rate, the number of steps it actually takes),
:func:`llr_scores` — the Neyman–Pearson statistic of that composed pair. For correct code this is
the claimed mechanism.

Threshold, fixed before any run is seen (:mod:`audit.stats.thresholds`):

* when the mechanism run is less private than the claim (its PLD epsilon is larger by more than
  :data:`ACCOUNTANT_SLACK`: more steps, a larger rate or less noise than accounted), the test most
  likely to reject the claim's own tradeoff curve if the code runs that mechanism, from scores
  simulated under it
  (:func:`rejection_threshold`, :func:`audit.stats.tradeoff_test.designed_rejection_threshold`);
* otherwise the Bonferroni grid (for full batch, q = 1, the scores are exactly Gaussian and the
  grid's GDP row is valid).

Every audit through here also tests the claim's tradeoff curve with the same rate bounds (a
rejection is a violation at the printed confidence) and adds the labelled per-step-composed
estimate of the mechanism run.
"""

from __future__ import annotations

import numpy as np

from audit.dp.setup_types import Observation
from audit.plugins.probe import StepMechanism
from audit.stats.thresholds import DesignedThreshold
from audit.stats.tradeoff_test import designed_rejection_threshold
from audit.theory.claims import PrivacyClaim

__all__ = ["llr_scores", "simulate_llr", "rejection_threshold", "step_observation", "SIMULATED_RUNS"]

#: Runs per world simulated to fix a threshold in advance.
SIMULATED_RUNS = 20_000
#: Relative difference below which the mechanism run counts as the claimed one (accountants, e.g.
#: Opacus's PRV and our PLD, differ by up to about 0.5% on the same mechanism).
ACCOUNTANT_SLACK = 0.01


def llr_scores(step_obs: np.ndarray, sample_rate: float, noise_multiplier: float) -> np.ndarray:
    """Per run, the sum over steps of the log-likelihood ratio of one step, ``(1 - q) + q exp((o - 1/2)/sigma^2)``:
    the Neyman–Pearson statistic for the composed pair (Poisson-subsampled Gaussian, canary shift 1
    in units of C); for q = 1 it is equivalent to the sum of the observations. NaN marks steps a run
    did not take (runs of different lengths): they add nothing."""
    obs = np.asarray(step_obs, dtype=float)
    if sample_rate >= 1.0:
        return np.nansum(obs, axis=1)
    z = (obs - 0.5) / noise_multiplier ** 2
    return np.nansum(np.logaddexp(np.log1p(-sample_rate), np.log(sample_rate) + z), axis=1)


def simulate_llr(mech: StepMechanism, runs: int, shifted: bool, rng: np.random.Generator) -> np.ndarray:
    """:func:`llr_scores` of ``runs`` runs of ``mech`` with the canary in (``shifted``) or out."""
    out = []
    for start in range(0, runs, 5_000):
        m = min(5_000, runs - start)
        obs = rng.normal(0.0, mech.noise_multiplier, size=(m, mech.steps))
        if shifted:
            obs += rng.random((m, mech.steps)) < mech.sample_rate
        out.append(llr_scores(obs, mech.sample_rate, mech.noise_multiplier))
    return np.concatenate(out)


def rejection_threshold(claim: PrivacyClaim, mech: StepMechanism, confidence: float,
                        runs: int = SIMULATED_RUNS) -> DesignedThreshold:
    """The threshold strategy of an :class:`audit.dp.setup_types.Observation`: given the numbers of runs
    with and without the canary, the threshold most likely to reject ``claim``'s tradeoff curve when the
    code runs ``mech``, from seeded simulations independent of the runs."""
    def choose(n_pos: int, n_neg: int) -> tuple[float, str]:
        rng = np.random.default_rng(20250115)
        sim_in, sim_out = simulate_llr(mech, runs, True, rng), simulate_llr(mech, runs, False, rng)
        threshold, power = designed_rejection_threshold(sim_in, sim_out, n_pos, n_neg, confidence, claim.tradeoff)
        return threshold, (f"fixed in advance: the test most likely to reject the claim's tradeoff curve if the code "
                           f"runs DP-SGD with noise multiplier {mech.noise_multiplier:.4g}, rate "
                           f"{mech.sample_rate:.4g}, {mech.steps} steps ({runs} simulated runs per world; "
                           f"rejection probability {power:.3f}); all runs used")

    return DesignedThreshold(choose)


def step_observation(step_obs: np.ndarray, mech: StepMechanism, claim: PrivacyClaim | None, delta: float,
                     confidence: float, info: dict, *, modelled: bool = True, exact: bool = False) -> Observation:
    """The :class:`audit.dp.setup_types.Observation` of R runs' per-step observations ``step_obs`` (R, T;
    NaN after the last step of a run shorter than T — the per-step estimate then uses the steps every
    run took).

    ``mech``: the mechanism the code runs (statistic, threshold design and per-step estimate);
    ``claim``: what it is audited against; ``modelled``: the observations follow the model of the
    module docstring (a gradient canary; an input canary's clipped gradient may be shorter than C,
    so no threshold is designed and no per-step threshold fixed for it); ``exact``: the per-run
    scores are exactly Gaussian (full batch with a gradient canary).
    """
    obs = np.asarray(step_obs, dtype=float)
    strategy = None
    if modelled and mech.sample_rate < 1.0 and claim is not None:
        if mech.claim().epsilon(delta) > claim.epsilon(delta) * (1 + ACCOUNTANT_SLACK):
            strategy = rejection_threshold(claim, mech, confidence)
    common = obs[:, ~np.isnan(obs).any(axis=0)]
    return Observation(scores=llr_scores(obs, mech.sample_rate, mech.noise_multiplier), step_scores=common,
                       sample_rate=mech.sample_rate, steps=mech.steps, info=info, gaussian=exact,
                       design_sigma=mech.noise_multiplier if modelled else None, threshold_strategy=strategy)
