"""What an inversion run measures: the records it splits, the yardstick its reconstructions are held
against (the class means of members and non-members, and an evaluation classifier trained on the
attacker's auxiliary data only), MI-FACE on one model measured against it, and the member gap
between the target and the reference model (see :mod:`audit.inversion.runner`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from attacks.inversion import InputSpace, InversionResult, MIFaceConfig, mi_face, ssim
from audit.choices import INVERSION_STARTS
from audit.errors import UserError
from audit.inversion.target import InversionTarget
from audit.trained_targets import member_split
from targets.dataset import Dataset

#: Most auxiliary records used to train the evaluation classifier.
EVAL_MAX = 2000
#: The per-class figures averaged over the classes (besides the evaluation accuracy and the queries).
MEAN_FIGURES = ("mse_member_mean", "ssim_member_mean", "mse_nonmember_mean", "ssim_nonmember_mean", "confidence")


def image_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """(H, W) for drawing and SSIM: images as they are, flat square vectors as squares."""
    d = int(np.prod(shape))
    side = int(round(d ** 0.5))
    if side * side != d:
        raise UserError(f"inversion needs image data; inputs of shape {shape} are not square images; "
                        f"use the mnist or digits targets")
    return side, side


@dataclass(frozen=True)
class RecordSplit:
    """The seeded split of an inversion run: the target's ``members``, as many ``nonmembers`` (the
    reference model's training set) and the attacker's auxiliary data ``aux`` (the rest)."""

    members: np.ndarray
    nonmembers: np.ndarray
    aux: np.ndarray


def split_records(data: Dataset, n: int, seed: int) -> RecordSplit:
    """Members, non-members (``n`` each) and the auxiliary rest of ``data``, from the seeded
    permutation of :func:`audit.trained_targets.member_split`; the rest must hold at least 10
    records a class for the evaluation classifier."""
    perm = member_split(len(data), 2 * n, seed)
    split = RecordSplit(perm[:n], perm[n:2 * n], perm[2 * n:])
    if split.aux.size < 10 * data.n_classes:
        raise UserError(f"{data.name} has {len(data)} records: too few left ({split.aux.size}) for the evaluation "
                        f"classifier after {n} members and {n} non-members; use --quick or a larger data set")
    return split


def fit_evaluator(data: Dataset, split: RecordSplit) -> tuple[LogisticRegression, dict]:
    """The evaluation classifier [Zhang et al. 2020]: multinomial logistic regression trained on at
    most :data:`EVAL_MAX` auxiliary records, never on a member or a non-member; returns it and what
    results.json says about it (its accuracy on the members and non-members)."""
    flat = data.X.reshape(len(data), -1).astype(np.float64)
    aux_fit = split.aux[:EVAL_MAX]
    evaluator = LogisticRegression(C=0.1, max_iter=1000).fit(flat[aux_fit], data.y[aux_fit])
    heldout = np.concatenate([split.members, split.nonmembers])
    info = {"model": "scikit-learn multinomial logistic regression (C = 0.1)", "trained_on": int(aux_fit.size),
            "accuracy_on_members_and_nonmembers": float(evaluator.score(flat[heldout], data.y[heldout]))}
    return evaluator, info


@dataclass(frozen=True, kw_only=True)
class Yardstick:
    """What every reconstruction of a run starts from and is measured against: the neutral ``start``
    (from the auxiliary data), the data range [``low``, ``high``], the class means of the members and
    of the non-members (flat, one row per class), the ``evaluator`` and the image shape ``hw``."""

    shape: tuple[int, ...]
    hw: tuple[int, int]
    classes: np.ndarray
    start: float | np.ndarray
    low: float
    high: float
    member_means: np.ndarray
    nonmember_means: np.ndarray
    evaluator: LogisticRegression


def yardstick(data: Dataset, hw: tuple[int, int], split: RecordSplit, start: str,
              evaluator: LogisticRegression) -> Yardstick:
    """The :class:`Yardstick` of ``data`` (images of shape ``hw``, :func:`image_shape`) split by ``split``;
    ``start`` names the neutral start (:data:`audit.choices.INVERSION_STARTS`: the auxiliary data's mean
    image, or a grey image at their mean intensity)."""
    flat = data.X.reshape(len(data), -1).astype(np.float64)
    low, high = float(data.X.min()), float(data.X.max())
    if start not in INVERSION_STARTS:
        raise UserError(f"unknown start {start!r}; choose one of {', '.join(INVERSION_STARTS)}")
    aux = split.aux
    start_value = float(flat[aux].mean()) if start == "grey" else flat[aux].mean(0).reshape(data.shape)
    classes = np.arange(data.n_classes)
    members, nonmembers = split.members, split.nonmembers
    member_means = np.stack([flat[members][data.y[members] == c].mean(0) for c in classes])
    nonmember_means = np.stack([flat[nonmembers][data.y[nonmembers] == c].mean(0) for c in classes])
    return Yardstick(shape=data.shape, hw=hw, classes=classes, start=start_value, low=low, high=high,
                     member_means=member_means, nonmember_means=nonmember_means, evaluator=evaluator)


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
    out = {key: float(np.mean([row[key] for row in per_class])) for key in MEAN_FIGURES}
    out["eval_accuracy"] = float(np.mean([row["eval_correct"] for row in per_class]))
    out["queries"] = int(sum(row["queries"] for row in per_class))
    out["per_class"] = per_class
    return out


def invert(target: InversionTarget, params, scale: Yardstick, config: MIFaceConfig, desc: str,
           progress: bool) -> dict:
    """MI-FACE (Fredrikson et al. 2015) of every class from the model ``params`` of ``target``, measured by
    :func:`class_figures`; the reconstructions are under ``images`` (one (H, W) image per class)."""
    space = InputSpace(shape=scale.shape, low=scale.low, high=scale.high)
    result = mi_face(target.probabilities(params), scale.classes, space, scale.start, config, progress=progress,
                     desc=desc)
    pred = scale.evaluator.predict(result.images.reshape(len(scale.classes), -1).astype(np.float64))
    figures = class_figures(result, scale.member_means, scale.nonmember_means, pred, scale.hw, scale.high - scale.low)
    return figures | {"images": result.images.reshape(len(scale.classes), *scale.hw)}


def member_gap(target: dict, reference: dict) -> dict:
    """The privacy-relevant figure: ``(MSE_nonmember - MSE_member)`` of the target's reconstructions
    minus that of the reference model's (trained without the members), per class and on average, with
    its standard error over classes, and the same gap in SSIM and in evaluation accuracy."""
    gap_t = target["mse_nonmember_mean"] - target["mse_member_mean"]
    gap_r = reference["mse_nonmember_mean"] - reference["mse_member_mean"]
    per_class_gap = np.array([(t["mse_nonmember_mean"] - t["mse_member_mean"])
                              - (r["mse_nonmember_mean"] - r["mse_member_mean"])
                              for t, r in zip(target["per_class"], reference["per_class"], strict=True)])
    return {
        "target_mse_nonmember_minus_member": gap_t, "reference_mse_nonmember_minus_member": gap_r,
        "mse_gap": gap_t - gap_r, "mse_gap_per_class": per_class_gap,
        "mse_gap_standard_error": float(per_class_gap.std(ddof=1) / np.sqrt(per_class_gap.size)),
        "ssim_gap": (target["ssim_member_mean"] - target["ssim_nonmember_mean"])
                    - (reference["ssim_member_mean"] - reference["ssim_nonmember_mean"]),
        "eval_accuracy_gap": target["eval_accuracy"] - reference["eval_accuracy"],
    }


def start_baseline(scale: Yardstick) -> dict:
    """The figures of the neutral start itself, before any MI-FACE step (what no attack gives)."""
    start_img = np.broadcast_to(np.asarray(scale.start, dtype=np.float64), scale.shape).reshape(-1)
    start_pred = int(scale.evaluator.predict(start_img[None])[0])
    return {
        "description": "the neutral start itself, before any step (what the figures would be with no attack)",
        "eval_accuracy": float(np.mean(scale.classes == start_pred)),
        "mse_member_mean": float(np.mean((scale.member_means - start_img) ** 2)),
        "ssim_member_mean": float(np.mean([ssim(start_img.reshape(scale.hw), m.reshape(scale.hw),
                                                scale.high - scale.low) for m in scale.member_means])),
    }
