"""The ``run dp`` adapter of the project's DP-SGD targets: gradient or input canaries under the
black-box, white-box and updates threat models, with random or pre-trained initial parameters."""

from __future__ import annotations

import functools
import sys
from dataclasses import replace

import numpy as np
import torch

from audit.choices import INITS, THREATS
from audit.dp.canaries import GRADIENT_CANARIES, gradient_canary, input_canary
from audit.dp.canary_steps import step_observation
from audit.dp.options import DPOptions
from audit.dp.setup_types import DPAuditSetup, Observation
from audit.errors import UserError
from audit.executors import cached_audit_runs
from audit.plugins.probe import StepMechanism
from audit.run_context import cache_dir_of
from audit.stats.thresholds import DesignedThreshold, designed_threshold_from_samples
from audit.theory.claims import Neighbouring
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.datasets import load_dataset
from targets.dpsgd_audit import canary_direction, dead_coordinate, param_shapes, unflatten
from targets.models import get_architecture
from targets.registry import get_target
from targets.sampling import steps_per_epoch
from targets.training import log_softmax, predict_logits, resolve_device, train_models

#: The non-private pre-training of ``--init pretrained``: epochs and expected batch size of plain SGD.
PRETRAIN_EPOCHS, PRETRAIN_BATCH = 20, 64


@functools.lru_cache(maxsize=64)
def _noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """PLD-calibrated sigma (as TrainedTarget.noise_multiplier), cached: a sweep over threat
    models calibrates each epsilon once."""

    return float(calibrate_noise_multiplier(epsilon, delta, sample_rate, steps))


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
    through :func:`audit.stats.thresholds.designed_threshold_from_samples`. Seeded and independent of the
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


def pretrained_init(data, rows: np.ndarray, config, seed: int, device) -> dict:
    """One model trained without privacy on ``data[rows]`` by the project's trainer
    (:func:`targets.training.train_models`, plain SGD: :data:`PRETRAIN_EPOCHS` epochs at expected batch
    :data:`PRETRAIN_BATCH`, the target's learning rate): the public starting point of ``--init pretrained``."""


    q = min(1.0, PRETRAIN_BATCH / rows.size)
    plain = replace(config, clip_norm=None, noise_multiplier=0.0, epochs=float(PRETRAIN_EPOCHS), sample_rate=q,
                    expected_batch_size=q * rows.size)
    mask = np.zeros((1, len(data)), dtype=bool)
    mask[0, rows] = True
    params = train_models(data, mask, plain, [int(np.random.SeedSequence([seed, 47]).generate_state(1)[0])],
                          device=device, progress=False, desc="pre-training")
    return {k: v[0] for k, v in params.items()}


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


def dpsgd_setup(opts: DPOptions) -> DPAuditSetup:
    """A registry DP-SGD target audited with a gradient or input canary under a threat model.

    Scores: ``updates`` — per-step observations (:mod:`targets.dpsgd_audit`) and, per run, their
    summed log-likelihood ratio (for ``dirac-replace``: :func:`_one_step_per_epoch_llr`, with the
    claim read for replace-one neighbours); ``white-box`` — the final minus initial parameters projected on
    the canary direction (the adversary knows the initialisation: the runs' seeds are public);
    ``black-box`` — minus the final model's cross-entropy loss on the input canary.

    ``opts.init``: ``random`` (each run's own initialisation) or ``pretrained`` (every run starts from
    one model trained without privacy on data disjoint from the training set and the canary,
    :func:`pretrained_init`; Annamalai & De Cristofaro 2024). ``opts.calibration_runs`` > 0 trains that
    many more runs with their own coins and seeds and fixes the threshold on them
    (:func:`calibrated_threshold`); otherwise the Bonferroni grid is used.
    """


    if opts.init not in INITS:
        raise UserError(f"unknown initialisation {opts.init!r}; choose one of {', '.join(INITS)}")
    if opts.calibration_runs and opts.threat == "updates":
        raise UserError("--calibration-runs fixes the threshold of a black-box or white-box audit; the updates "
                        "threat model fixes its own")
    target = get_target(opts.target).with_privacy(opts.epsilon, opts.delta)
    if not target.private:
        raise UserError(f"target {target.name} is not private; run dp audits DP targets")
    if opts.threat not in THREATS:
        raise UserError(f"unknown threat model {opts.threat!r}; choose one of {', '.join(THREATS)}")
    if target.momentum:
        raise UserError(f"target {target.name} uses momentum; DP audits need plain DP-SGD (momentum 0)")
    gradient = opts.canary in GRADIENT_CANARIES
    if gradient and opts.threat == "black-box":
        raise UserError("a gradient canary has no input to query: use --threat white-box or updates, "
                        "or an input canary (natural, mislabelled, crafted)")
    device = resolve_device(opts.device)
    data = load_dataset(target.dataset, opts.data_dir)
    if len(data) < target.n_train + 1:
        raise UserError(f"dataset {data.name} has {len(data)} examples; target needs {target.n_train} + 1")
    perm = np.random.default_rng([opts.seed, 5]).permutation(len(data))
    train_index, pool_index = perm[:target.n_train], perm[target.n_train:]
    init, init_info = None, {"init": opts.init}
    if opts.init == "pretrained":  # a disjoint half: the last n_train rows of the pool (canaries come from its front)
        if pool_index.size < 2 * target.n_train:
            raise UserError(f"--init pretrained needs {target.n_train} more records than the target's training set "
                            f"and its canary pool; dataset {data.name} has {len(data)}")
        pre_rows, pool_index = pool_index[-target.n_train:], pool_index[:-target.n_train]
    sigma = _noise_multiplier(target.epsilon, target.delta, target.sample_rate, target.steps)
    config = target.train_config(sigma)
    if opts.init == "pretrained":
        init = pretrained_init(data, pre_rows, config, opts.seed, device)
        init_info |= {"pretrained_on": f"{pre_rows.size} records disjoint from the training set and the canary",
                      "pretraining": f"non-private SGD, {PRETRAIN_EPOCHS} epochs, expected batch {PRETRAIN_BATCH}, "
                                     f"lr {config.lr}"}
    claimed = target.claim(sigma)
    replace_pair = opts.canary == "dirac-replace"
    claim = claimed
    if replace_pair:  # what the claimed (Poisson) DP-SGD promises a replace-one pair

        claim = DPSGDClaim(sigma, target.sample_rate, target.steps, neighbouring=Neighbouring.REPLACE)
    shapes = param_shapes(target.arch, data)
    n_params = int(sum(np.prod(s) for s in shapes.values()))
    crng = np.random.default_rng([opts.seed, 17])
    if gradient:
        dead = dead_coordinate(target.arch, data, train_index) if opts.canary == "dirac" else None
        gvec, cinfo = gradient_canary(opts.canary, n_params, float(target.clip_norm), dead, crng)
        icanary = None
    else:
        cx, cy, cinfo = input_canary(opts.canary, data, train_index, pool_index, crng)
        icanary, gvec = (cx, cy), None
    q, T = config.sample_rate, config.steps
    B, lr, C = config.expected_batch_size, config.lr, float(config.clip_norm)
    # full batch + gradient canary: with the data part subtracted (updates) or absent (Dirac on a
    # dead coordinate), every per-run score is canary * T + N(0, T sigma^2): exactly Gaussian
    exact = q >= 1.0 and gvec is not None

    def train(included: np.ndarray, seeds: list[int]):
        with opts.make_executor() as executor:  # cached chunks of runs (audit.executors)
            return cached_audit_runs(executor, cache_dir_of(opts.out), data, train_index, config, seeds, included,
                                     grad_canary=gvec, input_canary=icanary,
                                     observe="updates" if opts.threat == "updates" else "final", device=device,
                                     replace_pair=replace_pair, progress=not opts.quiet, init=init,
                                     log=None if opts.quiet else lambda line: print(line, file=sys.stderr))

    def observe(included: np.ndarray, seed: int) -> Observation:
        obs = score(train(included, np.random.SeedSequence([seed, 23]).generate_state(included.size).tolist()),
                    included)
        if opts.calibration_runs:  # separate runs, own coins and seeds: they fix the threshold, never the bound
            cal_in = np.random.default_rng([seed, 41]).random(opts.calibration_runs) < 0.5
            cal_seeds = np.random.SeedSequence([seed, 43]).generate_state(opts.calibration_runs).tolist()
            cal = score(train(cal_in, cal_seeds), cal_in)
            obs.threshold_strategy = calibrated_threshold(cal.scores, cal_in, target.delta, opts.confidence,
                                                    opts.calibration_runs)
            obs.info["calibration_runs"] = opts.calibration_runs
        return obs

    def score(runs, included: np.ndarray) -> Observation:
        info = {"canary_steps_mean_in": float(runs.canary_steps[included].mean()) if included.any() else None,
                "known_part_subtracted": runs.subtracted_known if opts.threat == "updates" else None}
        if opts.threat == "updates" and replace_pair:  # the per-step model (Poisson, shift 1) does not apply
            return Observation(scores=_one_step_per_epoch_llr(runs.step_obs, steps_per_epoch(q), 2.0, sigma), info=info,
                               threshold_strategy=_shuffle_hypothesis_threshold(sigma, T, steps_per_epoch(q),
                                                                                target.delta, opts.confidence))
        if opts.threat == "updates":
            return step_observation(runs.step_obs, StepMechanism(sigma, q, T), claim, target.delta, opts.confidence,
                                    info, modelled=gvec is not None, exact=exact)
        if opts.threat == "white-box":
            delta_theta = (runs.initial - runs.final).double()
            if gvec is not None:
                d = torch.as_tensor(gvec, dtype=torch.float64)
                d = (d / d.norm()).expand_as(delta_theta)
            else:  # the canary's gradient direction at each run's initial parameters
                xt = torch.as_tensor(np.asarray(icanary[0], dtype=np.float32))
                d = canary_direction(get_architecture(target.arch), unflatten(runs.initial, shapes), xt,
                                     torch.tensor(int(icanary[1]))).double()
            score = (delta_theta * d).sum(1).numpy() * B / (lr * C)
            return Observation(scores=score, info=info, gaussian=exact and opts.canary == "dirac")
        final = unflatten(runs.final, shapes)
        lp = log_softmax(predict_logits(target.arch, final, np.asarray(icanary[0])[None], device))[:, 0, :]
        return Observation(scores=lp[:, int(icanary[1])], info=info, gaussian_fit=True)

    params = {"noise_multiplier": sigma, "clip_norm": target.clip_norm, "sample_rate": q, "steps": T,
              "epochs": target.epochs, "lr": lr, "expected_batch_size": B, "n_train": target.n_train,
              "full_batch": q >= 1.0, "sampling": target.sampling,
              "claimed_epsilon_add_remove": float(claimed.epsilon(target.delta))} | init_info
    default = {"updates": 4000, "white-box": 4000, "black-box": 1000}[opts.threat]
    return DPAuditSetup(
        name=target.name, description=target.description, dataset=data.name,
        model={"name": target.arch, "parameters": n_params},
        neighbouring=("replace one record (crafted dataset: every other record's gradient is -g, the audited "
                      "record's +g or -g); claim read for replace-one neighbours" if replace_pair
                      else "add/remove one record (the canary)"),
        claim=claim, delta=target.delta, params=params, canary={"kind": opts.canary} | cinfo,
        threat=opts.threat, observe=observe, default_runs=400 if opts.quick else default)
