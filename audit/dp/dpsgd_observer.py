"""How a DP-SGD audit of ``run dp`` trains and observes its runs (:class:`DPSGDObserver`, the
``observe`` of :func:`audit.dp.dpsgd_setup.dpsgd_setup`): the runs trained in cached chunks on the run's
executor with the canary, and each run's score under the threat model (black-box: the canary's
loss; white-box: the parameter change along the canary's direction; updates: the per-step
observations), with the threshold fixed in advance where the threat model asks for it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from audit.dp.canary_steps import step_observation
from audit.dp.options import DPOptions
from audit.dp.setup_types import Observation
from audit.executors import CachedExecutor
from audit.plugins.probe import StepMechanism
from audit.run_context import cache_dir_of
from audit.stats.thresholds import DesignedThreshold, designed_threshold_from_samples
from targets.dataset import Dataset
from targets.dpsgd_audit import AuditRuns, CanaryPlan, canary_direction, unflatten
from targets.models import get_architecture
from targets.sampling import steps_per_epoch
from targets.training import TrainConfig, log_softmax, predict_logits


def _one_step_per_epoch_llr(step_obs: np.ndarray, steps_per_epoch: int, shift: float, sigma: float) -> np.ndarray:
    """Per run, the sum over epochs of the log-likelihood ratio of "a shift of ``shift`` at exactly
    one uniformly random step of the epoch" against "no shift", noise ``sigma``:
    ``log (1/k) sum_t exp((shift o_t - shift^2/2) / sigma^2)`` per epoch of ``k`` steps — the
    Neyman–Pearson statistic of the crafted replace-one pair under shuffled batches (Chua et al.
    2024). Any fixed statistic gives a valid bound; this one has power where shuffling leaks."""
    R, T = step_obs.shape
    z = (shift * step_obs - 0.5 * shift ** 2) / sigma ** 2
    total = np.zeros(R)
    for start in range(0, T, steps_per_epoch):
        part = z[:, start:start + steps_per_epoch]
        total += np.logaddexp.reduce(part, axis=1) - np.log(part.shape[1])
    return total


def _shuffle_hypothesis_threshold(sigma: float, steps: int, per_epoch: int, delta: float, confidence: float,
                                  draws: int = 100_000) -> DesignedThreshold:
    """The CP threshold of the ``dirac-replace`` audit, fixed in advance: scores
    (:func:`_one_step_per_epoch_llr`) simulated under the hypothesis "batches are shuffled" (a
    shift of 2 at one random step per epoch with the canary in, none without, noise ``sigma``) go
    through :func:`audit.dp.game.designed_threshold_from_samples`. Seeded and independent of the
    runs."""

    def simulate(rng: np.random.Generator, shifted: bool) -> np.ndarray:
        out = []
        for start in range(0, draws, 10_000):
            m = min(10_000, draws - start)
            obs = rng.normal(0.0, sigma, size=(m, steps))
            if shifted:
                for e0 in range(0, steps, per_epoch):
                    k = min(per_epoch, steps - e0)
                    obs[np.arange(m), e0 + rng.integers(0, k, m)] += 2.0
            out.append(_one_step_per_epoch_llr(obs, per_epoch, 2.0, sigma))
        return np.concatenate(out)

    def choose(n_pos: int, n_neg: int) -> tuple[float, str]:
        rng = np.random.default_rng(20240301)
        sim_in, sim_out = simulate(rng, True), simulate(rng, False)
        threshold, expected = designed_threshold_from_samples(sim_in, sim_out, n_pos, n_neg, confidence, delta)
        return threshold, (f"fixed in advance from {draws} simulated runs per world under the hypothesis 'batches "
                           f"are shuffled' (expected bound {expected:.3f}); all runs used")

    return DesignedThreshold(choose)


def calibrated_threshold(cal_scores: np.ndarray, cal_included: np.ndarray, delta: float, confidence: float,
                         runs: int) -> DesignedThreshold:
    """The threshold of a black-box audit fixed on separate calibration runs (their own coins and seeds,
    never the audited runs): the one whose GDP bound, expected from the calibration scores' error rates at
    the audit's run counts, is largest (:func:`audit.stats.thresholds.designed_threshold_from_samples`)."""

    def choose(n_pos: int, n_neg: int) -> tuple[float, str]:
        threshold, expected = designed_threshold_from_samples(cal_scores[cal_included], cal_scores[~cal_included],
                                                              n_pos, n_neg, confidence, delta, method="gdp")
        return threshold, (f"fixed on {runs} separate calibration runs (GDP expected from their error rates: "
                           f"epsilon {expected:.3f}); every audited run used")

    return DesignedThreshold(choose)


@dataclass(frozen=True)
class Canary:
    """The audited canary: a flat ``gradient`` of norm C (gradient canaries) or an ``input`` (features,
    label); ``info`` describes it in results.json."""

    gradient: np.ndarray | None
    input: tuple[np.ndarray, int] | None
    info: dict


@dataclass(frozen=True, kw_only=True)
class DPSGDObserver:
    """``observe(included, seed)`` of a DP-SGD audit: trains ``len(included)`` runs of ``config`` on
    ``data[train_index]`` (run r with the ``canary`` iff ``included[r]``; from ``init`` when given) and
    scores them under ``opts.threat`` against ``claim`` at ``delta``; ``sigma`` is the claimed noise
    multiplier, ``shapes`` the parameter shapes of ``arch``."""

    opts: DPOptions
    data: Dataset
    train_index: np.ndarray
    config: TrainConfig
    canary: Canary
    init: dict | None
    device: Any
    arch: str
    shapes: dict
    claim: Any
    delta: float
    sigma: float

    @property
    def replace_pair(self) -> bool:
        """The crafted replace-one pair of Chua et al. 2024 (``dirac-replace``)."""
        return self.opts.canary == "dirac-replace"

    @property
    def exact(self) -> bool:
        """Full batch + gradient canary: with the data part subtracted (updates) or absent (Dirac on a
        dead coordinate), every per-run score is canary * T + N(0, T sigma^2): exactly Gaussian."""
        return self.config.sample_rate >= 1.0 and self.canary.gradient is not None

    def __call__(self, included: np.ndarray, seed: int) -> Observation:
        """Train and score the audited runs; with ``--calibration-runs``, also separate runs (own coins and
        seeds) that fix the threshold (:func:`calibrated_threshold`), never the bound."""
        opts = self.opts
        obs = self.score(self.train(included, np.random.SeedSequence([seed, 23]).generate_state(included.size)
                                    .tolist()), included)
        if opts.calibration_runs:  # separate runs, own coins and seeds: they fix the threshold, never the bound
            cal_in = np.random.default_rng([seed, 41]).random(opts.calibration_runs) < 0.5
            cal_seeds = np.random.SeedSequence([seed, 43]).generate_state(opts.calibration_runs).tolist()
            cal = self.score(self.train(cal_in, cal_seeds), cal_in)
            obs.threshold_strategy = calibrated_threshold(cal.scores, cal_in, self.delta, opts.confidence,
                                                    opts.calibration_runs)
            obs.info["calibration_runs"] = opts.calibration_runs
        return obs

    def train(self, included: np.ndarray, seeds: list[int]) -> AuditRuns:
        """The runs with the canary where ``included``, in cached chunks on the run's executor."""
        opts = self.opts
        with opts.make_executor() as executor:  # cached chunks of runs (audit.executors)
            runner = CachedExecutor(executor=executor, cache_dir=cache_dir_of(opts.out),
                                    log=None if opts.quiet else lambda line: print(line, file=sys.stderr))
            plan = CanaryPlan(included=included, grad_canary=self.canary.gradient, input_canary=self.canary.input,
                              replace_pair=self.replace_pair,
                              observe="updates" if opts.threat == "updates" else "final")
            return runner.audit_runs(self.data, self.train_index, self.config, seeds, plan, device=self.device,
                                     progress=not opts.quiet, init=self.init)

    def score(self, runs: AuditRuns, included: np.ndarray) -> Observation:
        """The :class:`Observation` of ``runs`` under the threat model."""
        info = {"canary_steps_mean_in": float(runs.canary_steps[included].mean()) if included.any() else None,
                "known_part_subtracted": runs.subtracted_known if self.opts.threat == "updates" else None}
        if self.opts.threat == "updates":
            return self.updates_observation(runs, info)
        if self.opts.threat == "white-box":
            return Observation(scores=self.white_box_scores(runs), info=info,
                               gaussian=self.exact and self.opts.canary == "dirac")
        return Observation(scores=self.black_box_scores(runs), info=info, gaussian_fit=True)

    def updates_observation(self, runs: AuditRuns, info: dict) -> Observation:
        """Per-step observations: composed by the per-step model (Poisson, shift 1), or for the replace-one
        pair summed as :func:`_one_step_per_epoch_llr` with the threshold fixed under the shuffling hypothesis."""
        q, T = self.config.sample_rate, self.config.steps
        if self.replace_pair:  # the per-step model (Poisson, shift 1) does not apply
            return Observation(scores=_one_step_per_epoch_llr(runs.step_obs, steps_per_epoch(q), 2.0, self.sigma),
                               info=info,
                               threshold_strategy=_shuffle_hypothesis_threshold(self.sigma, T, steps_per_epoch(q),
                                                                          self.delta, self.opts.confidence))
        return step_observation(runs.step_obs, StepMechanism(self.sigma, q, T), self.claim, self.delta,
                                self.opts.confidence, info, modelled=self.canary.gradient is not None,
                                exact=self.exact)

    def white_box_scores(self, runs: AuditRuns) -> np.ndarray:
        """Final minus initial parameters projected on the canary direction (the gradient canary's, or the
        input canary's gradient at each run's initial parameters), in units of the canary's step lr C / B."""
        delta_theta = (runs.initial - runs.final).double()
        gvec, icanary = self.canary.gradient, self.canary.input
        if gvec is not None:
            d = torch.as_tensor(gvec, dtype=torch.float64)
            d = (d / d.norm()).expand_as(delta_theta)
        else:  # the canary's gradient direction at each run's initial parameters
            xt = torch.as_tensor(np.asarray(icanary[0], dtype=np.float32))
            d = canary_direction(get_architecture(self.arch), unflatten(runs.initial, self.shapes), xt,
                                 torch.tensor(int(icanary[1]))).double()
        B, lr, C = self.config.expected_batch_size, self.config.lr, float(self.config.clip_norm)
        return (delta_theta * d).sum(1).numpy() * B / (lr * C)

    def black_box_scores(self, runs: AuditRuns) -> np.ndarray:
        """The final model's log-probability of the input canary's label (minus its cross-entropy loss)."""
        icanary = self.canary.input
        final = unflatten(runs.final, self.shapes)
        lp = log_softmax(predict_logits(self.arch, final, np.asarray(icanary[0])[None], self.device))[:, 0, :]
        return lp[:, int(icanary[1])]
