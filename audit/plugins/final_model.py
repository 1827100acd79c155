"""The final-model check: the model a training returns must come from its DP iterates alone (issue 39,
item 3). Sources: docs/references.md, "Configuration checks" (De et al. 2022 for averaging and EMA).

DP-SGD's guarantee covers the iterates ``theta_0, ..., theta_T`` and what is computed from them alone
(post-processing): the last iterate, an average or an exponential moving average of them (De et al.
2022), any linear combination ``sum_t w_t theta_t``. A model that a pass outside the noisy steps changed
(a non-private "polish" epoch after DP training, a plain optimizer stepping the same parameters) is not
covered, whatever the accountant says.

The check reads one whole training of the code (the accounting check's run on the dataset plus one record,
so it costs no training of its own) with :class:`targets.final_params.IterateSketch` recording the
iterates and :func:`targets.final_params.returned_parameters` reading the model ``train`` returned:

1. the returned parameters equal the last iterate (to float32 rounding): **ok**;
2. else they are a linear combination of the iterates: the least-squares residual of the sketch of
   ``theta*`` on the sketches of the iterates, relative to the largest of their norms, is at most
   :data:`ROUNDINGS_PER_STEP` x the parameters' machine epsilon x (T + 1) (the rounding a float32 — or
   half-precision — average over T + 1 iterates can
   accumulate; no smaller than :data:`MIN_TOLERANCE`): **ok**, with the weights' sum (1 for an average or
   an EMA that starts from ``theta_0``);
3. else: a **violation**, "the model changed outside DP-SGD", with its fix. The sketch is exact with
   probability one (:mod:`targets.final_params`), so the only false violation is rounding above the
   tolerance, and the only miss a change smaller than it (relative to the parameters' norm).

Where the model cannot be read — a hooked loop (its hooks carry gradients, not parameters), a returned
object that holds no torch module or tensor the audit can reach, parameters that do not line up with the
DP optimizer's, a sketch above its memory budget, iterates that span every direction — the finding says
it could not read the model (``details.read`` False), never that the model passed; for a hooked loop
``details.applies`` is False too (the hooks' contract carries gradients, never parameters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from audit.stats.outcome import Finding
from targets.final_params import IterateSketch, merged_adapters, returned_parameters

#: Roundings (in machine epsilons of the parameters' dtype) a weighted sum of the iterates may carry per iterate.
ROUNDINGS_PER_STEP = 8
#: The smallest relative tolerance.
MIN_TOLERANCE = 1e-6
FIX_FINAL = ("return the model after the last DP step, or a post-processing of the DP iterates alone (an average "
             "or EMA of the parameters after each DP step); train every update through the DP optimizer: no "
             "ordinary (non-private) pass over the data after, between or outside the noisy steps")


def _unread(reason: str, applies: bool = True) -> Finding:
    """A finding that says the model was not read (``applies`` False: the hooks' contract carries no parameters,
    so it is not a check that was not read: never could-not-read)."""
    return Finding.checked("final-model", False, True, f"Could not read the model the code returns: {reason}; "
                           "whether it is the DP training's is not checked.", "",
                           {"read": False, "reason": reason, "applies": applies}, read=not applies)


def tolerance(steps: int, eps: float = float(np.finfo(np.float32).eps)) -> float:
    """The relative tolerance over ``steps + 1`` iterates of parameters of machine epsilon ``eps`` (module
    docstring, step 2)."""
    return max(MIN_TOLERANCE, ROUNDINGS_PER_STEP * eps * (steps + 1))


def explained(sketches: np.ndarray, target: np.ndarray, tol: float) -> dict[str, float]:
    """How well ``target`` (the sketch of the returned parameters) is a linear combination of the columns of
    ``sketches`` (one per iterate): the relative residual, the tolerance ``tol`` and the weights' sum."""
    weights, *_ = np.linalg.lstsq(sketches, target, rcond=None)
    scale = max(float(np.linalg.norm(target)), float(np.linalg.norm(sketches, axis=0).max()),
                float(np.finfo(float).tiny))
    residual = float(np.linalg.norm(sketches @ weights - target)) / scale
    return {"relative_residual": residual, "tolerance": tol, "weights_sum": float(weights.sum()),
            "relative_distance_to_last": float(np.linalg.norm(target - sketches[:, -1])) / scale}


def final_model_check(iterates: IterateSketch | None, trained: Any, driver: str) -> Finding:
    """The ``final-model`` finding (module docstring) of one training: ``iterates`` recorded while it ran (None:
    not recorded), ``trained`` what its ``train`` returned, ``driver`` its steps' source ("opacus" or "hooks")."""
    if driver != "opacus" or iterates is None:
        return _unread("a hooked loop reports its noisy gradient sums, not its parameters, so its DP iterates are "
                       "not seen (Opacus's are)", applies=False)
    if iterates.unreadable is not None:
        return _unread(iterates.unreadable)
    if not iterates.sketches:
        return _unread("no DP optimizer's parameters were seen")
    theta, how = returned_parameters(trained, iterates.names, iterates.shapes)
    if theta is None and merged_adapters(trained, iterates.names):
        return _unread("the DP optimizer trained LoRA adapters and the returned model holds them merged into its "
                       "weights (merge_and_unload), which the audit does not compare with the iterates", applies=False)
    if theta is None:
        return _unread(how)
    sketches = np.stack(iterates.sketches, axis=1)
    steps = iterates.steps
    details: dict[str, Any] = {"read": True, "how": how, "steps": steps, "parameters": iterates.dimension,
                               "sketch_rows": int(sketches.shape[0]), "raw_steps": iterates.raw_steps}
    last = iterates.last
    tol = tolerance(steps, iterates.eps)
    gap = float(np.abs(theta - last).max()) / max(float(np.abs(last).max()), float(np.finfo(float).tiny))
    if gap <= tol:
        return Finding.checked("final-model", False, True, f"The model the code returns is the last of its {steps} "
                               "DP iterates.", "", details | {"relative_gap_to_last": gap})
    if sketches.shape[0] <= sketches.shape[1]:
        return _unread(f"its {steps + 1} iterates span every direction of the {sketches.shape[0]} the audit "
                       "kept, so any model would be a combination of them")
    fit = explained(sketches, iterates.sketch(torch.from_numpy(theta)), tol)
    details |= fit | {"relative_gap_to_last": gap}  # the largest coordinate's change, over the largest coordinate
    if fit["relative_residual"] <= fit["tolerance"]:
        return Finding.checked("final-model", False, True, f"The model the code returns is a linear combination "
                               f"of its {steps + 1} DP iterates (weights summing to {fit['weights_sum']:.3g}: an "
                               "average or EMA of them is post-processing, covered by the guarantee).", "", details)
    return Finding.checked("final-model", True, True, f"The model changed outside DP-SGD: the parameters the code "
                           f"returns are at relative distance {fit['relative_residual']:.3g} from every linear "
                           f"combination of its {steps + 1} DP iterates (tolerance {fit['tolerance']:.2g}; "
                           f"{fit['relative_distance_to_last']:.3g} from the last iterate), so some update after or "
                           "outside the noisy steps (a non-private pass over the data) reached the model, and the "
                           "accountant's epsilon does not cover it." + _raw_steps(iterates.raw_steps), FIX_FINAL,
                           details)


def _raw_steps(count: int) -> str:
    """The sentence naming the steps of the optimizer Opacus wraps taken without a noisy step, if any."""
    if not count:
        return ""
    return (f" The optimizer Opacus wraps stepped {count} time{'s' if count > 1 else ''} without a noisy step "
            "(original_optimizer.step() called on a raw gradient: no clipping, no noise); those are not DP iterates.")
