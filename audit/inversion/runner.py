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

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from attacks.inversion import InversionResult, MIFaceConfig, mi_face, ssim
from audit.choices import INVERSION_STARTS
from audit.errors import UserError
from audit.inversion.plugin import inversion_target
from audit.inversion.target import registry_inversion_target
from audit.run_context import RunContext
from audit.run_options import CommonRunOptions
from audit.theory.checks import check_confidence
from audit.trained_targets import member_split
from reports.inversion_plots import image_grid
from targets.catalogue import resolve

GRID_PNG = "inversion_grid.png"
#: Most auxiliary records used to train the evaluation classifier.
EVAL_MAX = 2000


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


def image_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """(H, W) for drawing and SSIM: images as they are, flat square vectors as squares."""
    d = int(np.prod(shape))
    side = int(round(d ** 0.5))
    if side * side != d:
        raise UserError(f"inversion needs image data; inputs of shape {shape} are not square images; "
                        f"use the mnist or digits targets")
    return side, side


def class_figures(result: InversionResult, member_means: np.ndarray, nonmember_means: np.ndarray,
                  eval_pred: np.ndarray, hw: tuple[int, int], data_range: float) -> dict:
    """Per-class and mean MSE / SSIM to member and non-member class means, evaluation accuracy, queries."""
    per_class = []
    for j, c in enumerate(result.labels):
        img = result.images[j].reshape(hw)
        mm, nm = member_means[c].reshape(hw), nonmember_means[c].reshape(hw)
        per_class.append({
            "class": int(c),
            "mse_member_mean": float(np.mean((img - mm) ** 2)),
            "ssim_member_mean": ssim(img, mm, data_range),
            "mse_nonmember_mean": float(np.mean((img - nm) ** 2)),
            "ssim_nonmember_mean": ssim(img, nm, data_range),
            "eval_prediction": int(eval_pred[j]), "eval_correct": bool(eval_pred[j] == c),
            "confidence": float(result.confidence[j]), "steps": int(result.iterations[j]),
            "queries": int(result.queries[j]), "stop": result.stop_reason[j],
        })
    out = {key: float(np.mean([row[key] for row in per_class]))
           for key in ("mse_member_mean", "ssim_member_mean", "mse_nonmember_mean", "ssim_nonmember_mean",
                       "confidence")}
    out["eval_accuracy"] = float(np.mean([row["eval_correct"] for row in per_class]))
    out["queries"] = int(sum(row["queries"] for row in per_class))
    out["per_class"] = per_class
    return out


def run_inversion(opts: InversionOptions) -> tuple[Path, dict]:
    """Run the inversion audit described by ``opts``; returns (run directory, results)."""
    check_confidence(opts.confidence)
    if resolve(opts.target).family == "plugin":  # a trainer plugin exposing probabilities: black-box only
        target = inversion_target(opts)
    else:
        target = registry_inversion_target(opts)
    alpha_d, beta_d, bb_d = PRESETS["quick" if opts.quick else "default"]
    config = MIFaceConfig(alpha=opts.steps or alpha_d, beta=opts.patience or beta_d, gamma=opts.stop_confidence,
                          lr=opts.lr, tv_weight=opts.tv)
    bb_steps = bb_d if opts.black_box_steps is None else opts.black_box_steps
    data = target.data
    hw = image_shape(data.shape)
    n = target.n_train
    perm = member_split(len(data), 2 * n, opts.seed)
    members, nonmembers, aux = perm[:n], perm[n:2 * n], perm[2 * n:]
    if aux.size < 10 * data.n_classes:
        raise UserError(f"{data.name} has {len(data)} records: too few left ({aux.size}) for the evaluation "
                        f"classifier after {n} members and {n} non-members; use --quick or a larger data set")
    ctx = RunContext(opts.out, "inversion", target.name, seed=opts.seed, quiet=opts.quiet, device=opts.device)
    paths, say, timing = ctx.paths, ctx.say, ctx.timing
    say(f"run directory: {paths.run_dir}")
    with ctx:

        t0 = time.perf_counter()
        claim = target.claim
        seeds = [int(s) for s in np.random.SeedSequence(opts.seed).generate_state(2)]
        masks = {}
        for key, index in (("target", members), ("reference", nonmembers)):
            masks[key] = np.zeros(len(data), dtype=bool)
            masks[key][index] = True
        target_params = target.fit(paths, masks["target"], seeds[0], "target model")
        reference_params = target.fit(paths, masks["reference"], seeds[1], "reference model (non-members)")
        timing["training_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()

        flat = data.X.reshape(len(data), -1).astype(np.float64)
        aux_fit = aux[:EVAL_MAX]
        evaluator = LogisticRegression(C=0.1, max_iter=1000).fit(flat[aux_fit], data.y[aux_fit])
        heldout = np.concatenate([members, nonmembers])
        eval_info = {"model": "scikit-learn multinomial logistic regression (C = 0.1)", "trained_on": int(aux_fit.size),
                     "accuracy_on_members_and_nonmembers": float(evaluator.score(flat[heldout], data.y[heldout]))}
        timing["evaluator_s"] = time.perf_counter() - t0

        low, high = float(data.X.min()), float(data.X.max())
        if opts.start not in INVERSION_STARTS:
            raise UserError(f"unknown start {opts.start!r}; choose one of {', '.join(INVERSION_STARTS)}")
        start = float(flat[aux].mean()) if opts.start == "grey" else flat[aux].mean(0).reshape(data.shape)
        classes = np.arange(data.n_classes)
        member_means = np.stack([flat[members][data.y[members] == c].mean(0) for c in classes])
        nonmember_means = np.stack([flat[nonmembers][data.y[nonmembers] == c].mean(0) for c in classes])

        def invert(params, cfg: MIFaceConfig, desc: str) -> dict:
            result = mi_face(target.probabilities(params), classes, data.shape, start, low, high, cfg,
                             progress=not opts.quiet, desc=desc)
            pred = evaluator.predict(result.images.reshape(len(classes), -1).astype(np.float64))
            figures = class_figures(result, member_means, nonmember_means, pred, hw, high - low)
            say(f"{desc}: evaluation accuracy {figures['eval_accuracy']:.2f}, MSE to member / non-member class mean "
                f"{figures['mse_member_mean']:.4f} / {figures['mse_nonmember_mean']:.4f}, {figures['queries']} queries")
            return figures | {"images": result.images.reshape(len(classes), *hw)}

        t0 = time.perf_counter()
        bb_config = MIFaceConfig(alpha=bb_steps, beta=config.beta, gamma=config.gamma, lr=config.lr,
                                 tv_weight=config.tv_weight, black_box=True)
        main_config, access = (config, "white-box") if target.white_box else (bb_config, "black-box")
        out = {"target": invert(target_params, main_config, f"MI-FACE (target, {access})"),
               "reference": invert(reference_params, main_config, f"MI-FACE (reference, {access})")}
        if bb_steps > 0 and target.white_box:
            out["black_box"] = invert(target_params, bb_config, "MI-FACE (target, black-box)")
        timing["inversion_s"] = time.perf_counter() - t0

        images = {k: v.pop("images") for k, v in out.items()}
        inversion = {k: out["target"][k] for k in ("mse_member_mean", "ssim_member_mean", "mse_nonmember_mean",
                                                   "ssim_nonmember_mean", "eval_accuracy", "queries", "confidence",
                                                   "per_class")}
        inversion["reference"] = out["reference"]
        if "black_box" in out:
            inversion["black_box"] = out["black_box"]
        gap_t = inversion["mse_nonmember_mean"] - inversion["mse_member_mean"]
        gap_r = out["reference"]["mse_nonmember_mean"] - out["reference"]["mse_member_mean"]
        per_class_gap = np.array([(t["mse_nonmember_mean"] - t["mse_member_mean"])
                                  - (r["mse_nonmember_mean"] - r["mse_member_mean"])
                                  for t, r in zip(out["target"]["per_class"], out["reference"]["per_class"])])
        inversion["member_gap"] = {
            "target_mse_nonmember_minus_member": gap_t, "reference_mse_nonmember_minus_member": gap_r,
            "mse_gap": gap_t - gap_r, "mse_gap_per_class": per_class_gap,
            "mse_gap_standard_error": float(per_class_gap.std(ddof=1) / np.sqrt(per_class_gap.size)),
            "ssim_gap": (inversion["ssim_member_mean"] - inversion["ssim_nonmember_mean"])
                        - (out["reference"]["ssim_member_mean"] - out["reference"]["ssim_nonmember_mean"]),
            "eval_accuracy_gap": inversion["eval_accuracy"] - out["reference"]["eval_accuracy"],
        }
        start_img = np.broadcast_to(np.asarray(start, dtype=np.float64), data.shape).reshape(-1)
        start_pred = int(evaluator.predict(start_img[None])[0])
        inversion["start_baseline"] = {
            "description": "the neutral start itself, before any step (what the figures would be with no attack)",
            "eval_accuracy": float(np.mean(classes == start_pred)),
            "mse_member_mean": float(np.mean((member_means - start_img) ** 2)),
            "ssim_member_mean": float(np.mean([ssim(start_img.reshape(hw), m.reshape(hw), high - low)
                                               for m in member_means])),
        }
        inversion["config"] = asdict(config) | {"black_box_steps": bb_steps, "start": INVERSION_STARTS[opts.start],
                                                "data_range": [low, high]}
        inversion["evaluator"] = eval_info
        inversion["chance_accuracy"] = 1.0 / data.n_classes


        grid_rows = [("member mean", member_means.reshape(-1, *hw)), (f"target ({access})", images["target"])]
        if "black_box" in images:
            grid_rows.append(("target (black-box)", images["black_box"]))
        grid_rows += [("reference model", images["reference"]), ("non-member mean", nonmember_means.reshape(-1, *hw))]
        image_grid(grid_rows, [str(c) for c in classes], paths.run_dir / GRID_PNG,
                   f"MI-FACE reconstructions: {target.name}", low, high)
        figures = [{"file": GRID_PNG, "title": "MI-FACE reconstructions beside the class means",
                    "caption": "Columns are classes. Rows: mean image of the target's members of that class; MI-FACE "
                               f"reconstruction from the target ({access} gradients"
                               + (", then black-box finite-difference gradients" if "black_box" in images else "")
                               + "); reconstruction from the reference model trained on disjoint non-members; mean of "
                                 "the non-members. Same grey scale everywhere."}]

        def table(name: str, fig: dict) -> dict:
            rows = [[r["class"], r["mse_member_mean"], r["mse_nonmember_mean"], r["ssim_member_mean"],
                     r["ssim_nonmember_mean"], r["eval_prediction"], r["confidence"], r["steps"], r["queries"],
                     r["stop"]]
                    for r in fig["per_class"]]
            rows.append(["mean", fig["mse_member_mean"], fig["mse_nonmember_mean"], fig["ssim_member_mean"],
                         fig["ssim_nonmember_mean"], f"accuracy {fig['eval_accuracy']:.2f}", fig["confidence"], "",
                         fig["queries"], ""])
            return {"title": f"Per-class figures: {name}",
                    "columns": ["class", "MSE member mean", "MSE non-member mean", "SSIM member mean",
                                "SSIM non-member mean", "evaluation classifier says", "confidence", "steps", "queries",
                                "stopped by"],
                    "rows": rows,
                    "caption": "MSE and SSIM (Wang et al. 2004, Gaussian window 1.5) of the reconstruction to "
                               "the class mean of the target's members and of the non-members; the evaluation "
                               "classifier was "
                               f"trained on {aux_fit.size} auxiliary records disjoint from both (chance "
                               f"{1 / data.n_classes:.2f})."}

        gap = inversion["member_gap"]
        tables = [{"title": "Target vs reference model (the privacy-relevant gap)",
                   "columns": ["model", "evaluation accuracy", "MSE member mean", "MSE non-member mean",
                               "SSIM member mean", "SSIM non-member mean", "queries"],
                   "rows": [[name, f["eval_accuracy"], f["mse_member_mean"], f["mse_nonmember_mean"],
                             f["ssim_member_mean"], f["ssim_nonmember_mean"], f["queries"]]
                            for name, f in ((f"target ({access})", inversion),
                                            ("reference (no members)", out["reference"]))
                            + ((("target (black-box)", out["black_box"]),) if "black_box" in out else ())]
                           + [["neutral start (no attack)", inversion["start_baseline"]["eval_accuracy"],
                               inversion["start_baseline"]["mse_member_mean"], "", inversion["start_baseline"][
                                   "ssim_member_mean"], "", 0]],
                   "caption": f"member gap (MSE): {gap['mse_gap']:.3g} (standard error over classes "
                              f"{gap['mse_gap_standard_error']:.2g}) = (non-member - member MSE) of the target minus "
                              f"that of the reference; positive means the target's reconstructions lean towards its "
                              f"own members beyond what a model of the same data distribution gives."},
                  table(f"target ({access})", inversion), table("reference model", out["reference"])]
        if "black_box" in out:
            tables.append(table("target (black-box)", out["black_box"]))

        epsilon_theory = claim.epsilon(target.delta) if claim is not None else None
        verdict = {"status": "no-claim",
                   "text": f"reconstructions are recognised by an independent classifier "
                           f"{inversion['eval_accuracy']:.0%} of the time (reference model: "
                           f"{out['reference']['eval_accuracy']:.0%}, chance "
                           f"{1 / data.n_classes:.0%}); member gap in MSE {gap['mse_gap']:.2g} (standard error "
                           f"{gap['mse_gap_standard_error']:.2g}). Inversion recovers "
                           f"class-level features, which "
                           + ("differential privacy does not promise to hide; DP bounds only the member-specific gap"
                              if claim is not None else "a model trained on the same distribution without the members "
                                                        "recovers too; only the member gap is about privacy")}
        results = {
            "target_description": target.description, "dataset": data.name, "dataset_source": data.source,
            "model": {"arch": target.model, "members": int(n), "nonmembers": int(n), "auxiliary": int(aux.size),
                      "access": access},
            "neighbouring": "add/remove one record", "delta": target.delta if claim else None,
            "confidence": opts.confidence,
            "epsilon_theory": epsilon_theory, "accountant": claim.description if claim is not None else None,
            "params": target.params,
            "tradeoff": None, "lower_bounds": [], "best_lower_bound": None, "lower_bound_tradeoff": None, "attacks": {},
            "verdict": verdict, "inversion": inversion, "figures": figures, "tables": tables, "quick": opts.quick,
        }
        results = ctx.finish(results, {"command": "run inversion", "options": asdict(opts), "seeds": seeds}
                             | target.config)
        return ctx.run_dir, results


def summary_lines(run_dir: Path, results: dict) -> list[str]:
    """Summary printed after an inversion run."""
    inv = results["inversion"]
    lines = [f"report:    {run_dir / 'report.html'}"]
    for name, f in (("target", inv), ("reference", inv["reference"]), ("black-box", inv.get("black_box"))):
        if f is None:
            continue
        lines.append(f"{name}: evaluation accuracy {f['eval_accuracy']:.2f} (chance {inv['chance_accuracy']:.2f}), "
                     f"MSE member/non-member mean {f['mse_member_mean']:.4f}/{f['mse_nonmember_mean']:.4f}, "
                     f"SSIM {f['ssim_member_mean']:.3f}/{f['ssim_nonmember_mean']:.3f}, {f['queries']} queries")
    gap = inv["member_gap"]
    lines.append(f"member gap (MSE): {gap['mse_gap']:.3g} (standard error {gap['mse_gap_standard_error']:.2g})")
    return lines
