"""``run inversion``: MI-FACE model inversion of every class, measured against members and non-members.

Data split (seeded): the target's members (``n_train`` records), a disjoint set of the same size
(the non-members, on which the *reference* model is trained with the same recipe and another seed),
and the rest — the attacker's auxiliary data, used only for the neutral start (its mean image, or
a constant at its mean intensity) and to train the *evaluation classifier* (scikit-learn multinomial
logistic regression), which has never seen a member or a non-member [Zhang et al. 2020 use such an
evaluation classifier].

For every class MI-FACE (:mod:`attacks.inversion`, Fredrikson et al. 2015) reconstructs an input
from the target (white-box gradients, and a black-box run with finite-difference gradients) and
from the reference model. Figures per class and on average: MSE and SSIM (Wang et al. 2004) of the
reconstruction to the class mean of the members and of the non-members, the evaluation
classifier's accuracy on the reconstructions, the model's confidence, steps and queries.

What privacy is about is the *gap*: a model that memorises its members gives reconstructions
closer to the members' class mean than to the non-members', more so than the reference model
(trained without the members) does. ``member_gap = (MSE_nonmember - MSE_member)_target -
(MSE_nonmember - MSE_member)_reference``; class-level resemblance (both models recover what a
digit looks like) is not membership leakage and DP does not promise to hide it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from attacks.inversion import MIFaceConfig
from audit.choices import INVERSION_STARTS
from audit.errors import UserError
from audit.inversion.detail import InversionDetail
from audit.inversion.measures import (
    RecordSplit,
    Yardstick,
    fit_evaluator,
    image_shape,
    invert,
    member_gap,
    split_records,
    start_baseline,
    yardstick,
)
from audit.inversion.plugins.blackbox import inversion_target
from audit.inversion.presentation import inversion_tables, inversion_verdict, reconstruction_grid
from audit.inversion.target import InversionTarget, registry_inversion_target
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.run_results import RunResults, Unbounded
from audit.stats.outcome import Figure, Inversion, Outcome
from audit.theory.checks import check_confidence
from targets.catalogue import resolve


@dataclass(frozen=True, kw_only=True)
class InversionOptions(CommonRunOptions):
    """Everything that determines an inversion run (stored in config.json)."""

    steps: int | None = None
    patience: int | None = None
    stop_confidence: float = 0.999
    lr: float = 1.0
    tv: float = 0.0
    black_box_steps: int | None = None
    start: str = "mean"


#: (alpha, beta, black-box steps) by preset.
PRESETS = {"default": (1000, 100, 100), "quick": (200, 50, 20)}
#: The figures of the target's main reconstruction copied to the top of results.json's ``inversion``.
TARGET_FIGURES = ("mse_member_mean", "ssim_member_mean", "mse_nonmember_mean", "ssim_nonmember_mean", "eval_accuracy",
                  "queries", "confidence", "per_class")


def mi_face_config(opts: InversionOptions) -> tuple[MIFaceConfig, int]:
    """The MI-FACE configuration (Fredrikson et al. 2015: alpha, beta, gamma, lambda, AuxTerm) of the
    options over their preset, and the number of steps of the black-box variant."""
    alpha_d, beta_d, bb_d = PRESETS["quick" if opts.quick else "default"]
    config = MIFaceConfig(alpha=opts.steps or alpha_d, beta=opts.patience or beta_d, gamma=opts.stop_confidence,
                          lr=opts.lr, tv_weight=opts.tv)
    return config, bb_d if opts.black_box_steps is None else opts.black_box_steps


def run_inversion(opts: InversionOptions) -> tuple[Path, Outcome]:
    """Run the inversion audit described by ``opts``; returns (run directory, results)."""
    check_confidence(opts.confidence)
    if resolve(opts.target).family == "plugin":  # a trainer plugin exposing probabilities: black-box only
        target = inversion_target(opts)
    else:
        target = registry_inversion_target(opts)
    config, bb_steps = mi_face_config(opts)
    if bb_steps == 0 and not target.white_box:
        raise UserError(f"{target.name} answers black-box queries only, so --black-box-steps 0 leaves no attack to "
                        f"run; give at least 1 step")
    hw = image_shape(target.data.shape)
    split = split_records(target.data, target.n_train, opts.seed)
    ctx = RunContext(opts.out, "inversion", target.name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    ctx.say(f"run directory: {ctx.run_dir}")
    with ctx:
        seeds = [int(s) for s in np.random.SeedSequence(opts.seed).generate_state(2)]
        with ctx.stage("training"):
            params = train_target_and_reference(ctx, target, split, seeds)
        with ctx.stage("evaluator"):
            evaluator, eval_info = fit_evaluator(target.data, split)
        scale = yardstick(target.data, hw, split, opts.start, evaluator)
        with ctx.stage("inversion"):
            out, access = invert_models(ctx, opts, target, params, scale, config, bb_steps)
        images = {k: v.pop("images") for k, v in out.items()}
        inversion = inversion_summary(out, scale, config, bb_steps, opts.start, eval_info)
        figures = reconstruction_grid(ctx.run_dir, scale, images, access, target.name)
        results = inversion_results(opts, target, split, access, inversion, figures)
        outcome = ctx.finish(results, {"command": "run inversion", "options": asdict(opts), "seeds": seeds}
                             | target.config)
        return ctx.run_dir, outcome


def train_target_and_reference(ctx: RunContext, target: InversionTarget, split: RecordSplit,
                               seeds: list[int]) -> tuple:
    """Train the target on the members and the reference model on the non-members (seeds[0], seeds[1]),
    cached; returns both models."""
    masks = {}
    for key, index in (("target", split.members), ("reference", split.nonmembers)):
        masks[key] = np.zeros(len(target.data), dtype=bool)
        masks[key][index] = True
    target_params = target.fit(ctx.paths, masks["target"], seeds[0], "target model")
    reference_params = target.fit(ctx.paths, masks["reference"], seeds[1], "reference model (non-members)")
    return target_params, reference_params


def invert_models(ctx: RunContext, opts: InversionOptions, target: InversionTarget, params: tuple,
                  scale: Yardstick, config: MIFaceConfig, bb_steps: int) -> tuple[dict, str]:
    """MI-FACE on the target and the reference model (white-box when the target allows it), and the
    black-box variant on the target; returns each one's figures by model and the main access."""
    target_params, reference_params = params
    bb_config = None if bb_steps == 0 else MIFaceConfig(alpha=bb_steps, beta=config.beta, gamma=config.gamma,
                                                        lr=config.lr, tv_weight=config.tv_weight, black_box=True)
    main_config, access = (config, "white-box") if target.white_box else (bb_config, "black-box")
    runs = [("target", target_params, main_config, f"MI-FACE (target, {access})"),
            ("reference", reference_params, main_config, f"MI-FACE (reference, {access})")]
    if bb_config is not None and target.white_box:
        runs.append(("black_box", target_params, bb_config, "MI-FACE (target, black-box)"))
    out = {}
    for key, model, cfg, desc in runs:
        out[key] = figures = invert(target, model, scale, cfg, desc, progress=not opts.quiet)
        ctx.say(f"{desc}: evaluation accuracy {figures['eval_accuracy']:.2f}, MSE to member / non-member class mean "
                f"{figures['mse_member_mean']:.4f} / {figures['mse_nonmember_mean']:.4f}, {figures['queries']} queries")
    return out, access


def inversion_summary(out: dict, scale: Yardstick, config: MIFaceConfig, bb_steps: int, start: str,
                      eval_info: dict) -> Inversion:
    """results.json's ``inversion``: the target's figures, the reference's and the black-box ones, the
    member gap, the neutral start's figures, the MI-FACE configuration and the evaluator."""
    return Inversion(**{k: out["target"][k] for k in TARGET_FIGURES}, reference=out["reference"],
                     black_box=out.get("black_box"), member_gap=member_gap(out["target"], out["reference"]),
                     start_baseline=start_baseline(scale),
                     config=asdict(config) | {"black_box_steps": bb_steps, "start": INVERSION_STARTS[start],
                                              "data_range": [scale.low, scale.high]},
                     evaluator=eval_info, chance_accuracy=1.0 / len(scale.classes))


def inversion_results(opts: InversionOptions, target: InversionTarget, split: RecordSplit, access: str,
                      inversion: Inversion, figures: list[Figure]) -> RunResults:
    """The typed results of an inversion run: the header, no bounds, the verdict, the figures and the
    tables."""
    data, claim, n = target.data, target.claim, target.n_train
    header = ResultsHeader(
        description=target.description, dataset=data.name, dataset_source=data.source,
        model={"arch": target.model, "members": int(n), "nonmembers": int(n), "auxiliary": int(split.aux.size),
               "access": access},
        neighbouring=ADD_REMOVE_RECORD, delta=target.delta if claim else None, confidence=opts.confidence,
        epsilon_theory=claim.epsilon(target.delta) if claim is not None else None, accountant=accountant(claim),
        params=target.params)
    verdict = inversion_verdict(inversion, data.n_classes, claim is not None)
    return RunResults(header=header, judgement=Unbounded(verdict=verdict, null_curves=True), attacks={},
                      detail=InversionDetail(inversion=inversion),
                      figures=tuple(figures), tables=tuple(inversion_tables(inversion, access, data.n_classes)),
                      quick=opts.quick)


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """Summary printed after an inversion run.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    inv = outcome.detail.inversion
    lines = [f"report:    {run_dir / 'report.html'}"]
    target = inv.to_dict()  # the target's figures: the block's own keys
    for name, f in (("target", target), ("reference", inv.reference), ("black-box", inv.black_box)):
        if f is None:
            continue
        lines.append(f"{name}: evaluation accuracy {f['eval_accuracy']:.2f} (chance {inv.chance_accuracy:.2f}), "
                     f"MSE member/non-member mean {f['mse_member_mean']:.4f}/{f['mse_nonmember_mean']:.4f}, "
                     f"SSIM {f['ssim_member_mean']:.3f}/{f['ssim_nonmember_mean']:.3f}, {f['queries']} queries")
    gap = inv.member_gap
    lines.append(f"member gap (MSE): {gap['mse_gap']:.3g} (standard error {gap['mse_gap_standard_error']:.2g})")
    return lines
