"""``run dp --one-run`` for the project's DP-SGD targets: ONE training run of the target on its training
data plus M gradient canaries (:mod:`targets.gradient_canaries`), each in by its own fair coin, scored
under the ``updates`` or ``white-box`` threat model, bounded by :func:`audit.dp.one_run.bounds.one_run_results`.

Fixed before the training, from the claim and the seed alone (never the audited coins or scores):
the number of canaries (``--canaries``, or :func:`audit.stats.one_run.design.default_canary_count`
capped by the Dirac coordinates the model has and :data:`DEFAULT_MAX_CANARIES`) and the guess counts
(:func:`audit.stats.one_run.design.choose_one_run_design`, simulating the claimed q, sigma, T).

Scores: ``updates`` — the likelihood ratio of each canary's T per-step observations under the claimed
mechanism (:func:`audit.stats.one_run.design.dpsgd_canary_llr`; random directions read their
cross-talk as extra Gaussian noise, :func:`targets.gradient_canaries.crosstalk_variance` — an
approximation of the score only, every bound stays valid); ``white-box`` — the total change of the
parameters projected on each canary direction, in units of ``lr C / B`` (the summed updates' projection).
The ``black-box`` one-run game of a built-in target is ``run membership`` (input canaries in the data,
scored on the final model). Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audit.dp.detail import DpDetail
from audit.dp.one_run.bounds import OneRunResults, one_run_results
from audit.dp.options import DPOptions
from audit.errors import UserError
from audit.results_header import ResultsHeader
from audit.run_context import RunContext
from audit.run_results import RunResults
from audit.stats.metrics import attack_metrics
from audit.stats.one_run.design import (
    CanaryMechanism,
    DesignObjective,
    OneRunDesign,
    choose_one_run_design,
    default_canary_count,
    dpsgd_canary_llr,
)
from audit.stats.outcome import Bound, Game, OneRun, Outcome, Table
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.catalogue import trained_target
from targets.datasets import load_dataset
from targets.dpsgd_audit import param_shapes
from targets.gradient_canaries import (
    OneRunCanaries,
    crosstalk_variance,
    quiet_coordinates,
    random_direction_capacity,
    train_one_run,
)
from targets.training import resolve_device

__all__ = ["run_one_run", "TrainedOneRun", "ONE_RUN_THREATS", "DEFAULT_MAX_CANARIES", "canary_capacity", "design_games"]

#: The threats the one-run game of a built-in target gives (black-box: ``run membership``).
ONE_RUN_THREATS = ("updates", "white-box")
#: The default number of canaries never exceeds this (simulation and scoring time; the expected bound
#: grows slowly beyond it); ``--quick``: :data:`QUICK_MAX_CANARIES`.
DEFAULT_MAX_CANARIES, QUICK_MAX_CANARIES = 20_000, 2_000
#: Simulated games that choose the guess counts and the number of canaries (and as many that evaluate
#: them); ``--quick``: a quarter. Enough that the choice is stable across seeds (docs/performance.md,
#: "One-run design"): the games are drawn from the score's law, so they cost seconds in all.
DESIGN_SIMULATIONS = 200


def canary_capacity(n_params: int, sample_rate: float, noise_multiplier: float) -> int:
    """The most canaries a model of ``n_params`` coordinates holds: its coordinates (Dirac canaries) or,
    beyond, :func:`targets.gradient_canaries.random_direction_capacity` random directions."""
    return max(n_params, random_direction_capacity(n_params, sample_rate, noise_multiplier))


def _check_options(opts: DPOptions) -> str:
    """The threat of a one-run audit of a built-in target; one-line errors for options it does not take."""
    threat = opts.threat or "updates"
    if threat == "black-box":
        raise UserError(f"the one-run black-box game of a built-in target is the membership audit: python -m audit "
                        f"run membership --target {opts.target}; --one-run takes --threat updates or white-box")
    if threat not in ONE_RUN_THREATS:
        raise UserError(f"unknown threat model {threat!r} for --one-run; choose one of {', '.join(ONE_RUN_THREATS)}")
    given = [flag for flag, on in (("--runs", opts.runs is not None), ("--canary", opts.canary is not None),
                                   ("--init pretrained", opts.init != "random"),
                                   ("--calibration-runs", opts.calibration_runs > 0)) if on]
    if given:
        raise UserError(f"{', '.join(given)} do(es) not apply to --one-run (one training, gradient canaries: Dirac "
                        "while the model has coordinates, else random directions); use --canaries M")
    return threat


def check_canary_count(opts: DPOptions, capacity: int, n_params: int, holder: str) -> None:
    """``--canaries`` within what the model holds (one line, before anything is written); ``holder`` names the
    model in the message ("<target>'s model holds under the <threat> threat", "plugin <name>'s model holds")."""
    if opts.canaries is not None and opts.canaries > capacity:
        raise UserError(f"--canaries {opts.canaries} is more than {holder}: at most {capacity} ({n_params} coordinates "
                        f"for Dirac canaries, then random directions while their cross-talk stays below a quarter of "
                        f"the noise)")
    if opts.canaries is not None and opts.canaries < 2:
        raise UserError("--canaries must be at least 2")


def design_games(opts: DPOptions) -> int:
    """Simulated games that choose the design (:data:`DESIGN_SIMULATIONS`, a quarter with ``--quick``)."""
    return DESIGN_SIMULATIONS // 4 if opts.quick else DESIGN_SIMULATIONS


def design_canaries(opts: DPOptions, mech: CanaryMechanism, delta: float, n_params: int) -> OneRunDesign:
    """The number of canaries and the guess counts, from the claimed (or probed) mechanism and the seed alone:
    ``--canaries`` when given, else the default count up to the model's coordinates (at least 2)."""
    sims = design_games(opts)
    rng = np.random.default_rng([opts.seed, 61])
    objective = DesignObjective(delta=delta, confidence=opts.confidence)
    if opts.canaries is not None:
        return choose_one_run_design(mech, opts.canaries, objective, rng, simulations=sims)
    cap = max(2, min(n_params, QUICK_MAX_CANARIES if opts.quick else DEFAULT_MAX_CANARIES))
    return default_canary_count(mech, objective, rng, cap, simulations=sims).design


def random_canary_directions(seed: int, m: int, n_params: int) -> np.ndarray:
    """``m`` seeded random unit directions in the ``n_params`` parameters (canaries beyond the coordinates)."""
    d = np.random.default_rng([seed, 67]).standard_normal((m, n_params), dtype=np.float32)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _canaries(opts: DPOptions, data, train_index: np.ndarray, arch: str, n_params: int, m: int,
              model_seed: int) -> tuple[OneRunCanaries, dict]:
    """M canaries: fair coins, Poisson-coin seed, Dirac coordinates or random directions (and what they are)."""
    included = np.random.default_rng([opts.seed, 11]).random(m) < 0.5
    coin_seed = int(np.random.SeedSequence([opts.seed, 29]).generate_state(1)[0])
    if m <= n_params:
        coords = quiet_coordinates(arch, data, train_index, model_seed, m)
        return (OneRunCanaries("dirac", included, coin_seed, coordinates=coords),
                {"kind": "dirac", "directions": f"Dirac: {m} distinct coordinates of the {n_params}, in every "
                 "parameter tensor (equal shares up to each tensor's size), in each those the training data's "
                 "clipped gradients touch least at the initial parameters", "norm": "C"})
    d = random_canary_directions(opts.seed, m, n_params)
    return (OneRunCanaries("random", included, coin_seed, directions=d),
            {"kind": "random", "directions": f"random unit directions ({m} canaries > {n_params} coordinates: "
             "seeded Gaussian directions, cross-talk between them read as extra noise)", "norm": "C"})


def run_one_run(opts: DPOptions) -> tuple[Path, Outcome]:
    """One training of a built-in DP-SGD target with M gradient canaries; returns (run directory, results)."""
    threat = _check_options(opts)
    target = trained_target(opts.target).with_privacy(opts.epsilon, opts.delta)
    if not target.private:
        raise UserError(f"target {target.name} is not private; run dp audits DP targets")
    sigma = float(calibrate_noise_multiplier(target.epsilon, target.delta, target.sample_rate, target.steps))
    config = target.train_config(sigma)
    claim = target.claim(sigma)
    mech = CanaryMechanism(config.sample_rate, sigma, config.steps)
    data = load_dataset(target.dataset, opts.data_dir)
    perm = np.random.default_rng([opts.seed, 5]).permutation(len(data))  # the training rows of run dp
    train_index = perm[:target.n_train]
    n_params = int(sum(np.prod(s) for s in param_shapes(target.arch, data).values()))
    capacity = canary_capacity(n_params, config.sample_rate, sigma)
    check_canary_count(opts, capacity, n_params, f"{opts.target}'s model holds under the {threat} threat")
    ctx = RunContext(opts.out, "dp", target.name, seed=opts.seed, quiet=opts.quiet)
    with ctx:
        with ctx.stage("design"):
            design = design_canaries(opts, mech, target.delta, n_params)
        m = design.canaries
        model_seed = int(np.random.SeedSequence([opts.seed, 23]).generate_state(1)[0])
        canaries, cinfo = _canaries(opts, data, train_index, target.arch, n_params, m, model_seed)
        ctx.say(f"{target.name}: one run of the training with {m} {canaries.kind} gradient canaries "
                f"({int(canaries.included.sum())} in), threat {threat}")
        with ctx.stage("train"):
            run = train_one_run(data, train_index, config, model_seed, canaries, updates=threat == "updates",
                                device=resolve_device(opts.device), progress=not opts.quiet)
        crosstalk = crosstalk_variance(m, n_params, config.sample_rate)
        scores = (dpsgd_canary_llr(run.step_obs, config.sample_rate, math.sqrt(sigma ** 2 + crosstalk))
                  if threat == "updates" else run.white_box)
        with ctx.stage("statistics"):
            stats = one_run_results(scores, canaries.included, claim, target.delta, opts.confidence, design)
        trained = TrainedOneRun(target=target, data=data, threat=threat, scores=scores, canaries=canaries,
                                canary_info=cinfo, run=run, sigma=sigma, config=config, n_params=n_params,
                                capacity=capacity, crosstalk=crosstalk)
        results = _results(opts, trained, stats)
        config_json = {"command": "run dp", "one_run": True, "seed": opts.seed, "confidence": opts.confidence,
                       "canaries": m,
                       "options": asdict(opts) | {"threat": threat}}  # canaries as given: rerun repeats the design
        return ctx.run_dir, ctx.finish(results, config_json)


@dataclass(frozen=True, kw_only=True)
class TrainedOneRun:
    """What the one training of a built-in target's one-run audit was and gave (:func:`run_one_run`).

    Attributes:
        target: the trained target (with the claim's privacy).
        data: its dataset.
        threat: ``updates`` or ``white-box``.
        scores: one score per canary.
        canaries: the canaries and their fair coins.
        canary_info: what the canaries are (``game.canary``).
        run: the training's record (:func:`targets.gradient_canaries.train_one_run`).
        sigma: the noise multiplier the claim calibrated.
        config: the training's configuration.
        n_params: the model's parameters.
        capacity: the most canaries the model holds.
        crosstalk: the random directions' cross-talk variance (0 for Dirac canaries).
    """

    target: Any
    data: Any
    threat: str
    scores: np.ndarray
    canaries: OneRunCanaries
    canary_info: dict
    run: Any
    sigma: float
    config: Any
    n_params: int
    capacity: int
    crosstalk: float

    def observation(self) -> dict:
        """``game.observation``: the score, what the threat sees and cannot see, how the guesses were chosen."""
        inc, threat, crosstalk = self.canaries.included, self.threat, self.crosstalk
        return {"score": ("likelihood ratio of the per-step observations under the claimed mechanism" +
                          (f" (cross-talk variance {crosstalk:.3g} read as noise)" if crosstalk else "")
                          if threat == "updates" else
                          "total parameter change projected on the canary direction, units of lr C / B"),
                "canary_joins_mean_in": float(self.run.joins[inc].mean()) if inc.any() else None,
                "capacity": self.capacity,
                "sees": ("the noise the step adds, the sampling rate and step count it runs, hence an accounting "
                         "that does not match them" + ("" if threat == "updates" else
                                                       ", through the final parameters only")),
                "cannot_see": ("a clipping mistake: gradient canaries have norm C and join after the per-example "
                               "clipping (input canaries of the many-run `run dp` pass through it)"),
                "guess_counts": ("chosen for the updates threat's perfect attack" if threat == "white-box"
                                 else "chosen for the perfect attack of this threat")}


def _results(opts: DPOptions, trained: TrainedOneRun, stats: OneRunResults) -> RunResults:
    """The typed results of a one-run audit (kind dp, ``game.one_run``)."""
    target, config, canaries = trained.target, trained.config, trained.canaries
    attack = f"{trained.threat}/one-run-{canaries.kind}"
    judgement = stats.judgement.for_attack(attack)
    one, inc = stats.one_run, canaries.included
    header = ResultsHeader(
        description=target.description, dataset=trained.data.name,
        model={"name": target.arch, "parameters": trained.n_params},
        neighbouring="add/remove one record (each canary)", delta=target.delta, confidence=opts.confidence,
        accountant=target.claim(trained.sigma).description,
        params={"noise_multiplier": trained.sigma, "clip_norm": target.clip_norm, "sample_rate": config.sample_rate,
                "steps": config.steps, "epochs": target.epochs, "lr": config.lr,
                "expected_batch_size": config.expected_batch_size, "n_train": target.n_train,
                "sampling": target.sampling})
    game = Game(one_run=True, runs=1, canaries=canaries.count, canary_kind=canaries.kind,
                canary=trained.canary_info, threat=trained.threat,
                threshold_strategy="one-run guesses: 'in' for the k_pos highest scores, 'out' for the k_neg "
                                   "lowest (0: one-sided), both fixed by simulating the claimed mechanism",
                observation=trained.observation(), trainings=1, included=int(inc.sum()),
                inclusion="independent fair coin per canary; each included canary joins every step by its own "
                          "Poisson coin at the target's sampling rate, clipped to C like any record")
    return RunResults(
        header=header, judgement=judgement, estimate=True, family=True,
        attacks={attack: attack_metrics(trained.scores, inc, opts.confidence)},
        detail=DpDetail(one_run=one), game=game,
        tables=(one_run_table(one, judgement.lower_bounds),))


def one_run_table(one: OneRun, bounds: Sequence[Bound]) -> Table:
    """The report table of a one-run audit's bounds (its game ``one`` and every bound, with its role).

    Args:
        one: the one-run block.
        bounds: the judgement's bounds.

    Returns:
        The table.
    """
    rows = [[b.method, b.epsilon, b.role, b.confidence, (b.details or {}).get("mu_lb"), b.statement] for b in bounds]
    expected = one.expected_perfect
    return Table(title="One run of your training: bounds", columns=["method", "epsilon", "role", "confidence",
                                                                   "mu bound", "what it bounds"],
                 rows=rows,
                 caption=(f"{one.canaries} canaries ({one.included} in), {one.k_pos} 'in' and {one.k_neg} 'out' "
                          f"guesses, {one.correct} right. {expected.text}; ceiling {one.ceiling:.3g} (every guess "
                          f"right). The claim's own tradeoff curve {'was' if one.claim_rejected else 'was not'} "
                          "rejected by the same guesses."))
