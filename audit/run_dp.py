"""``run dp``: multi-run audits of DP training (DP-SGD, full-batch DP-GD) and DP-ERM.

Two layers, so that other trainers can be plugged in:

* :class:`DPAuditSetup` says *how a run is trained and observed*: ``observe(included, seed)``
  trains ``len(included)`` runs (run r with the canary iff ``included[r]``) and returns an
  :class:`Observation` (one score per run, higher = canary in; optionally per-step observations).
  Builders here: :func:`dpsgd_setup` (registry targets, gradient or input canaries, threat models
  black-box / white-box / updates) and :func:`dperm_setup` (DP-ERM output perturbation, white-box).
* :func:`play` runs the game for any setup: fair coins (:func:`audit.dp_game.fair_coins`),
  ``observe``, statistics (:func:`audit.dp_game.audit_runs`), results.json, config.json and the
  report. :func:`run_dp` = build the setup from the options + :func:`play`.

A plugin target (e.g. a black-box ``train(X, y, seed) -> predict_proba``) only needs to construct a
:class:`DPAuditSetup` with its claim and an ``observe`` function and call :func:`play`.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from audit.choices import INITS, THREATS
from audit.dp_game import audit_runs, fair_coins
from audit.errors import UserError
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.stats.thresholds import FixedThreshold
from audit.stats.verdict import Family
from audit.target_defaults import TargetUse, dp_choice, plugin_canary, target_use, trainer_plugin_use
from audit.theory.checks import check_confidence
from targets.plugin_rng import reproducibility_lines

#: The non-private pre-training of ``--init pretrained``: epochs and expected batch size of plain SGD.
PRETRAIN_EPOCHS, PRETRAIN_BATCH = 20, 64


@dataclass(frozen=True)
class DPOptions(CommonRunOptions):
    """Everything that determines a ``run dp`` (stored in config.json)."""

    runs: int | None = None
    canary: str | None = None  # None: the target's default (audit.target_defaults)
    threat: str | None = None
    init: str = "random"
    calibration_runs: int = 0


@dataclass
class Observation:
    """What the auditor extracted from R runs.

    ``scores`` (R,): higher = "canary in". ``step_scores`` (R, T) per-step observations (updates
    threat model) with the claim's ``sample_rate`` and ``steps`` to compose them. ``info``: extra
    JSON-serialisable facts (e.g. how many steps the canary joined). ``gaussian``: the scores are
    exactly Gaussian with a common variance (adds the parametric ``gaussian-fit`` estimate);
    ``gaussian_fit``: add that estimate for scores only assumed Gaussian (a black-box canary's loss).
    ``design_sigma``: the claimed noise multiplier, used to fix the per-step threshold in advance.
    ``cp_threshold``: fixes the Clopper–Pearson threshold in advance (see :func:`audit.dp_game.audit_runs`).
    ``results``: extra top-level results.json keys (e.g. a plugin's ``reproducible``); its ``tables``
    are appended to the run's tables.
    """

    scores: np.ndarray
    step_scores: np.ndarray | None = None
    sample_rate: float | None = None
    steps: int | None = None
    info: dict = field(default_factory=dict)
    gaussian: bool = False
    gaussian_fit: bool = False
    design_sigma: float | None = None
    cp_threshold: Callable[[int, int], tuple[float, str]] | None = None
    results: dict = field(default_factory=dict)


@dataclass
class DPAuditSetup:
    """How the runs of one audit are trained and observed (see the module docstring).

    ``claim``: a PrivacyClaim (None for no claim); ``observe(included, seed) -> Observation``.
    ``default_runs``: used when the options give none. ``config``: extra config.json keys.
    """

    name: str
    description: str
    dataset: str
    model: dict
    neighbouring: str
    claim: Any
    delta: float
    params: dict
    canary: dict
    threat: str
    observe: Callable[[np.ndarray, int], Observation]
    default_runs: int = 1000
    config: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# DP-ERM


def dperm_setup(opts: DPOptions) -> DPAuditSetup:
    """DP-ERM output perturbation, white-box: the auditor sees the released parameters.

    ``--canary crafted`` uses :func:`targets.dperm.crafted_pair` (replace-one pair pushing the
    minimiser towards 2/(n lambda)); ``mislabelled`` the label flip of the least-used input. The
    minimiser is deterministic given the data, so the two worlds' minimisers are fitted once and
    each run is one fresh noise draw of the mechanism (``DPERMMechanism.sample``). Score: the
    released parameters projected on theta1 - theta0 (Neyman–Pearson for the Gaussian pair).
    """
    from targets.dperm import make_dperm

    if opts.threat != "white-box":
        raise UserError("DP-ERM audits observe the released parameters: use --threat white-box")
    pairs = {"crafted": "crafted-pair", "mislabelled": "label-flip"}
    if opts.canary not in pairs:
        raise UserError("DP-ERM canaries: --canary crafted (crafted replace-one pair) or mislabelled (label flip)")
    mech = make_dperm(opts.target, epsilon=opts.epsilon, delta=opts.delta, pair=pairs[opts.canary])
    d0, d1 = mech.neighbouring_pair()
    shift = mech.minimiser_shift()

    def observe(included: np.ndarray, seed: int) -> Observation:
        rng = np.random.default_rng([seed, 31])
        scores = np.empty(included.size)
        for world, data in ((1, d1), (0, d0)):
            idx = np.flatnonzero(included == bool(world))
            for start in range(0, idx.size, 50_000):
                part = idx[start:start + 50_000]
                scores[part] = mech.score(mech.sample(data, part.size, rng))
        return Observation(scores, info={"minimiser_shift": shift}, gaussian=True)

    claim = mech.claim
    return DPAuditSetup(
        name=opts.target, description=mech.description, dataset=opts.target.removeprefix("dperm_"),
        model={"name": "logistic regression (DP-ERM output perturbation)"}, neighbouring="replace one record",
        claim=claim, delta=mech.erm.delta, params=mech.params() | {
            "shift_over_sensitivity": shift / mech.sensitivity},
        canary={"kind": opts.canary, "pair": mech.pair, "minimiser_shift": shift, "sensitivity": mech.sensitivity},
        threat="white-box", observe=observe, default_runs=20_000 if opts.quick else 2_000_000)


# ---------------------------------------------------------------------------------------------
# DP-SGD / DP-GD


@functools.lru_cache(maxsize=64)
def _noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """PLD-calibrated sigma (as TrainedTarget.noise_multiplier), cached: a sweep over threat
    models calibrates each epsilon once."""
    from audit.theory.dpsgd import calibrate_noise_multiplier

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
                                  draws: int = 100_000) -> Callable[[int, int], tuple[float, str]]:
    """The CP threshold of the ``dirac-replace`` audit, fixed in advance: scores
    (:func:`_one_step_per_epoch_llr`) simulated under the hypothesis "batches are shuffled" (a
    shift of 2 at one random step per epoch with the canary in, none without, noise ``sigma``) go
    through :func:`audit.dp_game.designed_threshold_from_samples`. Seeded and independent of the
    runs."""
    from audit.stats.thresholds import designed_threshold_from_samples

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

    return choose


def pretrained_init(data, rows: np.ndarray, config, seed: int, device) -> dict:
    """One model trained without privacy on ``data[rows]`` by the project's trainer
    (:func:`targets.training.train_models`, plain SGD: :data:`PRETRAIN_EPOCHS` epochs at expected batch
    :data:`PRETRAIN_BATCH`, the target's learning rate): the public starting point of ``--init pretrained``."""
    from dataclasses import replace

    from targets.training import train_models

    q = min(1.0, PRETRAIN_BATCH / rows.size)
    plain = replace(config, clip_norm=None, noise_multiplier=0.0, epochs=float(PRETRAIN_EPOCHS), sample_rate=q,
                    expected_batch_size=q * rows.size)
    mask = np.zeros((1, len(data)), dtype=bool)
    mask[0, rows] = True
    params = train_models(data, mask, plain, [int(np.random.SeedSequence([seed, 47]).generate_state(1)[0])],
                          device=device, progress=False, desc="pre-training")
    return {k: v[0] for k, v in params.items()}


def calibrated_threshold(cal_scores: np.ndarray, cal_included: np.ndarray, delta: float, confidence: float,
                         runs: int) -> Callable[[int, int], tuple[float, str]]:
    """The threshold of a black-box audit fixed on separate calibration runs (their own coins and seeds,
    never the audited runs): the one whose GDP bound, expected from the calibration scores' error rates at
    the audit's run counts, is largest (:func:`audit.stats.thresholds.designed_threshold_from_samples`)."""
    from audit.stats.thresholds import designed_threshold_from_samples

    def choose(n_pos: int, n_neg: int) -> tuple[float, str]:
        threshold, expected = designed_threshold_from_samples(cal_scores[cal_included], cal_scores[~cal_included],
                                                              n_pos, n_neg, confidence, delta, method="gdp")
        return threshold, (f"fixed on {runs} separate calibration runs (GDP expected from their error rates: "
                           f"epsilon {expected:.3f}); every audited run used")

    return choose


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
    import torch

    from audit.canaries import GRADIENT_CANARIES, gradient_canary, input_canary
    from audit.canary_steps import StepMechanism, step_observation
    from audit.executors import cached_audit_runs
    from audit.run_context import cache_dir_of
    from targets.datasets import load_dataset
    from targets.dpsgd_audit import canary_direction, dead_coordinate, param_shapes, unflatten
    from targets.models import get_architecture
    from targets.registry import get_target
    from targets.sampling import steps_per_epoch
    from targets.training import log_softmax, predict_logits, resolve_device

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
        from audit.theory.claims import REPLACE
        from audit.theory.dpsgd import DPSGDClaim

        claim = DPSGDClaim(sigma, target.sample_rate, target.steps, neighbouring=REPLACE)
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
            obs.cp_threshold = calibrated_threshold(cal.scores, cal_in, target.delta, opts.confidence,
                                                    opts.calibration_runs)
            obs.info["calibration_runs"] = opts.calibration_runs
        return obs

    def score(runs, included: np.ndarray) -> Observation:
        info = {"canary_steps_mean_in": float(runs.canary_steps[included].mean()) if included.any() else None,
                "known_part_subtracted": runs.subtracted_known if opts.threat == "updates" else None}
        if opts.threat == "updates" and replace_pair:  # the per-step model (Poisson, shift 1) does not apply
            return Observation(_one_step_per_epoch_llr(runs.step_obs, steps_per_epoch(q), 2.0, sigma), info=info,
                               cp_threshold=_shuffle_hypothesis_threshold(sigma, T, steps_per_epoch(q), target.delta,
                                                                          opts.confidence))
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
            return Observation(score, info=info, gaussian=exact and opts.canary == "dirac")
        final = unflatten(runs.final, shapes)
        lp = log_softmax(predict_logits(target.arch, final, np.asarray(icanary[0])[None], device))[:, 0, :]
        return Observation(lp[:, int(icanary[1])], info=info, gaussian_fit=True)

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


def with_defaults(opts: DPOptions, use: TargetUse) -> DPOptions:
    """``opts`` with the target's default threat and canary where none was given; a target that takes no
    ``run dp`` is a one-line error naming the run kinds it does take."""
    if "dp" not in use.run_kinds:
        raise UserError(f"target {opts.target} ({use.family}) is not audited by run dp; it takes: "
                        f"{', '.join(use.run_kinds)}")
    threat, canary = dp_choice(use, opts.threat, opts.canary)
    return replace(opts, threat=threat, canary=canary)


def build_setup(opts: DPOptions) -> DPAuditSetup:
    """The setup for a target: DP-ERM targets (targets.dperm), trainer plugins (``module:factory``)
    or trained DP-SGD targets. A threat model or canary left out is the target's default
    (:mod:`audit.target_defaults`)."""
    from targets.dperm import DPERM_AUDIT_TARGETS, DPERM_TARGETS
    from targets.plugins import is_plugin_spec

    if opts.threat is not None and opts.threat not in THREATS:
        raise UserError(f"unknown threat model {opts.threat!r}; choose one of {', '.join(THREATS)}")
    check_confidence(opts.confidence)
    if opts.calibration_runs < 0:
        raise UserError(f"--calibration-runs must be 0 or more, got {opts.calibration_runs}")
    dperm = opts.target in DPERM_TARGETS or opts.target in DPERM_AUDIT_TARGETS
    plugin_target = is_plugin_spec(opts.target)
    dpsgd_only = [flag for flag, given in (("--init pretrained", opts.init != "random"),
                                           ("--calibration-runs", opts.calibration_runs > 0)) if given]
    if dpsgd_only and (dperm or plugin_target):
        raise UserError(f"{' and '.join(dpsgd_only)} {'apply' if len(dpsgd_only) > 1 else 'applies'} to the "
                        f"project's DP-SGD targets, not to {'a plugin' if plugin_target else opts.target}")
    if dperm:
        return dperm_setup(with_defaults(opts, target_use(opts.target)))
    if plugin_target:  # a user's trainer: black-box, or its DP-SGD steps (audit.plugin_updates)
        from audit.plugin_updates import trainer_setup
        from targets.plugins import TrainerPlugin, load_plugin

        plugin = load_plugin(opts.target)
        if not isinstance(plugin, TrainerPlugin):
            raise UserError(f"plugin {opts.target} is a mechanism; audit it with `python -m audit run mechanism "
                            f"--target {opts.target}`")
        if opts.epsilon is not None or opts.delta is not None:
            raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
        threat = opts.threat or trainer_plugin_use(plugin.description).default_threat
        return trainer_setup(plugin, plugin_canary(threat, opts.canary), threat, opts.seed, opts.data_dir, opts.quiet,
                             opts.confidence)
    return dpsgd_setup(with_defaults(opts, target_use(opts.target)))


# ---------------------------------------------------------------------------------------------
# the game, for any setup


def play(setup: DPAuditSetup, runs: int, seed: int, confidence: float, out: str | Path = "runs",
         quiet: bool = False, config_extra: dict | None = None, write_report: bool = True,
         run_name: str | None = None) -> tuple[Path, dict]:
    """Toss the coins, observe the runs, bound epsilon, write results/config/report; returns (run dir, results).
    ``run_name`` names the run directory instead of ``<utc-time>-dp-<target>`` (the audits of a sweep).

    ``confidence`` is the family-wise confidence of the verdict. An exception from ``observe`` (the
    target's code, or the workbench) leaves as :class:`audit.errors.AuditIncomplete` with its
    traceback in the run's log.txt."""
    included = fair_coins(runs, seed)  # checks runs before anything is written
    ctx = RunContext(out, "dp", setup.name, seed=seed, quiet=quiet, name=run_name)
    with ctx:
        return _play(ctx, setup, runs, included, confidence, config_extra, write_report)


def _play(ctx: RunContext, setup: DPAuditSetup, runs: int, included: np.ndarray, confidence: float,
          config_extra: dict | None, write_report: bool) -> tuple[Path, dict]:
    seed = ctx.seed
    ctx.say(f"{setup.name}: {runs} runs ({int(included.sum())} with the canary), canary {setup.canary.get('kind')}, "
            f"threat {setup.threat}")
    with ctx.stage("observe"):
        obs = setup.observe(included, seed)
    t0 = time.perf_counter()
    fixed = None
    if obs.cp_threshold is not None:
        threshold, choice = obs.cp_threshold(int(included.sum()), int((~included).sum()))
        fixed = FixedThreshold(threshold, choice)
    game = audit_runs(obs.scores, included, setup.claim, setup.delta, confidence, np.random.default_rng([seed, 3]),
                      step_scores=obs.step_scores, sample_rate=obs.sample_rate, steps=obs.steps,
                      gaussian_pair=obs.gaussian, gaussian_fit=obs.gaussian_fit, design_sigma=obs.design_sigma,
                      fixed_threshold=fixed)
    ctx.timing["statistics_s"] = time.perf_counter() - t0
    attack = f"{setup.threat}/{setup.canary.get('kind')}"
    bounds = [b | {"attack": attack} for b in game["lower_bounds"]]
    best = None if game["best_lower_bound"] is None else game["best_lower_bound"] | {"attack": attack}
    rows = [[b["method"], b["epsilon"], b["role"], b["confidence"],
             b["details"].get("mu_lb", b["details"].get("mu_step_lb")), b["n"]] for b in bounds]
    results = {
        "target_description": setup.description, "dataset": setup.dataset, "model": setup.model,
        "neighbouring": setup.neighbouring, "delta": setup.delta, "confidence": confidence,
        "epsilon_theory": game["epsilon_theory"],
        "accountant": setup.claim.description if setup.claim is not None else None,
        "params": setup.params, "tradeoff": game["tradeoff"], "lower_bounds": bounds, "best_lower_bound": best,
        "best_estimate": game["best_estimate"], "lower_bound_tradeoff": game["lower_bound_tradeoff"],
        "ceiling": game["ceiling"],
        "attacks": {attack: game["attack_metrics"]},
        "verdict": game["verdict"],
        "game": {"runs": runs, "included": int(included.sum()), "canary_kind": setup.canary.get("kind"),
                 "canary": setup.canary, "threat": setup.threat, "threshold_strategy": game["threshold_strategy"],
                 "inclusion": "independent fair coin per run", "observation": obs.info},
        "tables": [{"title": "Epsilon lower bounds of this audit", "columns": ["method", "epsilon", "role",
                                                                             "confidence", "mu bound", "observations"],
                    "rows": rows,
                    "caption": "role verdict = statistically valid and competing for the best bound (each at the "
                               "family's per-member confidence); estimate = rests on the stated assumption "
                               "(GDP of a non-Gaussian pair, per-step model, Gaussian fit), never decides the "
                               "verdict."}],
    }
    extra = dict(obs.results)
    results["tables"] += extra.pop("tables", [])
    results |= extra
    config = {"command": "run dp", "runs": runs, "seed": seed, "confidence": confidence,
              "setup": {"name": setup.name, "threat": setup.threat, "canary": setup.canary, "params": setup.params},
              } | setup.config | (config_extra or {})
    return ctx.run_dir, ctx.finish(results, config, report=write_report)


def run_dp(opts: DPOptions) -> tuple[Path, dict]:
    """Build the setup for ``opts.target`` and play the game; returns (run directory, results)."""
    setup = build_setup(opts)
    runs = opts.runs or setup.default_runs
    chosen = replace(opts, threat=setup.threat, canary=setup.canary["kind"])  # config.json records the defaults taken
    return play(setup, runs, opts.seed, opts.confidence, opts.out, opts.quiet, {"options": asdict(chosen)})


def summary_lines(run_dir: Path, results: dict) -> list[str]:
    """Lines printed after a run."""
    theory = results["epsilon_theory"]
    lines = [f"report:    {run_dir / 'report.html'}",
             f"theory:    epsilon = {theory:.3f} at delta = {results['delta']:g}" if theory is not None
             else "theory:    no claim"]
    for b in results["lower_bounds"]:
        eps = b["epsilon"]
        what = (f"epsilon >= {eps:.3f}" if isinstance(eps, (int, float)) else
                f"mu >= {b['details']['mu_lb']:.3f} (no epsilon at delta 0)" if eps is None else f"epsilon >= {eps}")
        lines.append(f"bound:     {b['method']:<18} {what} ({b['statement']})")
    lines.append(f"verdict:   {results['verdict']['status']}: {results['verdict']['text']}")
    return lines + reproducibility_lines(results)


# ---------------------------------------------------------------------------------------------
# epsilon sweep


@dataclass(frozen=True)
class SweepOptions:
    """``sweep dp``: the audit of ``target`` at each claimed epsilon, for each threat model."""

    target: str
    epsilons: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    threats: tuple[str, ...] | None = None
    canary: str | None = None
    runs: int | None = None
    out: str = "runs"
    seed: int = 0
    device: str = "auto"
    quick: bool = False
    delta: float | None = None
    data_dir: str | None = None
    quiet: bool = False
    confidence: float = 0.95
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    init: str = "random"
    calibration_runs: int = 0


def sweep_family(opts: SweepOptions) -> Family:
    """The sweep's verdict is "violation" if any of its audits is one, so its audits form one family:
    each audit's verdict is computed at the family's member confidence (Bonferroni over the audits)."""
    threats, _ = _sweep_grid(opts)
    return Family(len(threats) * len(opts.epsilons), opts.confidence)


def _sweep_grid(opts: SweepOptions) -> tuple[tuple[str, ...], str]:
    from targets.dperm import DPERM_AUDIT_TARGETS, DPERM_TARGETS

    is_dperm = opts.target in DPERM_TARGETS or opts.target in DPERM_AUDIT_TARGETS
    threats = opts.threats or (("white-box",) if is_dperm else ("updates", "white-box"))
    return threats, opts.canary or target_use(opts.target).default_canary


def sweep_rows(opts: SweepOptions, sub_out: Path) -> list[dict]:
    """One row per (threat, epsilon) with the plotted figure (the largest bound, labelled by method)
    and the largest statistically valid bound; each audit also writes its own run directory and
    holds at the sweep family's member confidence (:func:`sweep_family`)."""
    threats, canary = _sweep_grid(opts)
    confidence = sweep_family(opts).member_confidence
    rows = []
    for threat in threats:
        for eps in opts.epsilons:
            run_opts = DPOptions(target=opts.target, out=str(sub_out), seed=opts.seed, device=opts.device,
                                 quick=opts.quick, epsilon=eps, delta=opts.delta, data_dir=opts.data_dir,
                                 quiet=opts.quiet, runs=opts.runs, canary=canary, threat=threat,
                                 confidence=confidence, workers=opts.workers, executor=opts.executor,
                                 ray_address=opts.ray_address, init=opts.init,
                                 calibration_runs=opts.calibration_runs)
            started = time.perf_counter()
            setup = build_setup(run_opts)
            runs = opts.runs or setup.default_runs
            run_dir, res = play(setup, runs, opts.seed, confidence, sub_out, opts.quiet, {"options": asdict(run_opts)},
                                write_report=False, run_name=f"{threat}-epsilon-{eps:g}")
            est, valid = res["best_estimate"], res["best_lower_bound"]
            rows.append({"target": opts.target, "series": threat, "threat": threat, "canary": canary,
                         "epsilon_claimed": eps, "epsilon_theory": res["epsilon_theory"],
                         "epsilon_lb": float(est["epsilon"]) if est else 0.0, "method": est["method"] if est else None,
                         "epsilon_lb_valid": float(valid["epsilon"]) if valid else 0.0,
                         "valid_method": valid["method"] if valid else None,
                         "verdict": res["verdict"]["status"], "verdict_text": res["verdict"]["text"], "runs": runs,
                         "models": runs + opts.calibration_runs, "init": opts.init,
                         "wall_s": time.perf_counter() - started, "run_dir": run_dir.name,
                         "bounds": {b["method"]: b["epsilon"] for b in res["lower_bounds"]},
                         "details": est["details"] if est else {}})
    return rows


def run_sweep(opts: SweepOptions) -> tuple[Path, dict]:
    """Run the sweep and write a run directory whose report draws epsilon_lb against epsilon_theory."""
    check_confidence(opts.confidence)
    family = sweep_family(opts)
    ctx = RunContext(opts.out, "sweep", opts.target, seed=opts.seed, quiet=opts.quiet)
    with ctx:
        return ctx.run_dir, _sweep(ctx, opts, family)


def audit_timing_key(row: dict) -> str:
    """The ``timing`` key of one audit of a sweep (its wall time in seconds)."""
    return f"audit_{row['run_dir']}_s"


def _sweep(ctx: RunContext, opts: SweepOptions, family: Family) -> dict:
    rows = sweep_rows(opts, ctx.run_dir / "audits")
    for r in rows:  # wall times vary between identical runs: they go to timing (volatile), not into rows
        ctx.timing[audit_timing_key(r)] = r.pop("wall_s")
    plotted = [{"epsilon_theory": r["epsilon_theory"], "epsilon_lb": r["epsilon_lb"], "series": r["series"],
                "method": r["method"]} for r in rows]
    plotted += [{"epsilon_theory": r["epsilon_theory"], "epsilon_lb": r["epsilon_lb_valid"],
                 "series": f"{r['series']} (best valid)", "method": r["valid_method"]} for r in rows]
    verdict = sweep_verdict(rows, family)
    results = {
        "target_description": f"epsilon sweep of run dp on {opts.target}",
        "delta": opts.delta, "confidence": opts.confidence, "family": {"size": family.size,
                                                                       "confidence": family.confidence},
        "epsilon_theory": None, "sweep": plotted, "verdict": verdict,
        "lower_bounds": [], "best_lower_bound": None,
        "tables": [{"title": "Sweep", "columns": ["threat", "canary", "epsilon theory", "largest figure", "its method",
                                                 "best valid lb", "its method", "audit verdict", "runs",
                                                 "audit (in audits/)"],
                    "rows": [[r["threat"], r["canary"], r["epsilon_theory"], r["epsilon_lb"], r["method"],
                              r["epsilon_lb_valid"], r["valid_method"], r["verdict"], r["runs"], r["run_dir"]]
                             for r in rows],
                    "caption": "largest figure: the largest bound of each audit, estimates included (GDP / "
                               "per-step / Gaussian-fit figures assume the stated tradeoff shape and never decide); "
                               "best valid lb: the audit's best bound that competed for its verdict; audit verdict: "
                               "that audit's own verdict, which also counts a rejection of the claim's tradeoff "
                               "curve (a violation even when every epsilon bound lies below the claim)."}],
        "rows": rows,
    }
    return ctx.finish(results, {"command": "sweep dp", "options": asdict(opts)})


def sweep_verdict(rows: list[dict], family: Family) -> dict[str, str]:
    """The sweep's verdict: ``violation`` when any audit's own verdict is one (a valid bound above its
    claim, or a test that rejects the claim's tradeoff curve), each audit computed at the family's
    member confidence so that the sweep holds at ``family.confidence``. Estimates above the claim are
    counted apart and never decide."""
    family_text = (f"each audit at {family.member_confidence:.4g} confidence, so the sweep's verdict holds at "
                   f"{family.confidence:.0%} (family of {family.size} audits)")
    violations = [r for r in rows if r["verdict"] == "violation"]
    estimates = [r for r in rows if r["verdict"] != "violation" and r["epsilon_theory"] is not None
                 and r["epsilon_lb"] > r["epsilon_theory"] + 1e-9]
    flagged = (f"; {len(estimates)} other audit(s) have an assumption-based estimate above the claim (suspicious, "
               "never a violation)") if estimates else ""
    if violations:
        which = ", ".join(f"{r['threat']} at epsilon {r['epsilon_claimed']:g}" for r in violations)
        return {"status": "violation", "text": f"{len(violations)} of {len(rows)} audits find a violation ({which})"
                                               f"{flagged}; {family_text}"}
    return {"status": "consistent", "text": f"none of the {len(rows)} audits finds a violation{flagged}; "
                                            f"{family_text}"}


def sweep_summary(run_dir: Path, results: dict) -> list[str]:
    """Lines printed after a sweep."""
    lines = [f"report:    {run_dir / 'report.html'}"]
    for r in results["rows"]:
        lines.append(f"{r['threat']:<10} eps_theory {r['epsilon_theory']:.3f}  largest {r['epsilon_lb']:.3f} "
                     f"({r['method']}), best valid {r['epsilon_lb_valid']:.3f} ({r['valid_method']}), "
                     f"{r['verdict']}, {r['runs']} runs, {results['timing'][audit_timing_key(r)]:.1f} s")
    lines.append(f"verdict:   {results['verdict']['status']}: {results['verdict']['text']}")
    return lines
