"""The robust membership-inference attack RMIA [Zarifzadeh, Liu, Shokri 2024, "Low-Cost High-Power
Membership Inference Attacks", ICML, Sec. 3, Eq. (3)-(5); offline variant Sec. 3.2 / App. B.2].

Threat model: as LiRA's (:mod:`attacks.lira`) — the adversary knows the candidates with their
training labels, holds *population* samples ``z`` drawn from the data distribution that no model
trained on, trains reference models, and sees the target's output probabilities.

For a model ``theta`` and a labelled example ``x``, ``p(x | theta)`` is the probability the model gives
to the label. ``p(x)`` is its average over reference models: over all of them (online: each
candidate is IN about half) or, offline, over the reference models that did not train on it,
corrected by the mixing parameter ``a`` (Sec. 3.2: ``p_IN`` is approximated by a linear function of
``p_OUT``, which gives ``p(x) = (1 + a)/2 p_OUT(x) + (1 - a)/2``). The pairwise likelihood ratio
against a population sample ``z`` is

    LR(x, z) = [p(x | theta) / p(x)] / [p(z | theta) / p(z)],                         (Eq. 3)

and the score is the fraction of population samples it dominates by ``gamma``,
``Score(x) = Pr_z[LR(x, z) >= gamma]`` (Eq. 5; higher = member). ``p(z)`` uses the same rule as
``p(x)`` (the population samples are OUT of every reference model, so online and offline differ
only by the ``a`` correction). With a fixed population the score is a monotone step function of
``p(x | theta) / p(x)`` with steps of ``1 / |Z|``: every strong member dominates all of ``Z`` and they
would tie at 1, which leaves TPR at low FPR undefined. Within each step we therefore order candidates
by the ratio itself: the score is ``(count + sigmoid(log LR_x)) / (|Z| + 1)``, where ``count`` is the
number of dominated ``z`` — the same order as Eq. (5) wherever Eq. (5) separates two candidates.

Calibration games (for guess counts and the primary attack of the one-run audit, never on the
target's coins): each reference model in turn plays the target against the others
(leave-one-reference-out, the paper's evaluation protocol); with a single reference model each
shadow model plays the target against the other shadows on its own canaries. ``a`` is chosen on
those games (largest mean AUC over :data:`A_GRID`, the paper's procedure of attacking a reference
model, App. B.2) unless it is given. Sources: docs/references.md, "Membership attacks".
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp

from attacks.reference_games import balanced_subset
from audit.errors import UserError
from audit.stats.metrics import auc

#: Offline mixing parameters tried on the calibration games (Zarifzadeh et al. App. B.2 search [0, 1]).
A_GRID = tuple(round(0.1 * i, 1) for i in range(11))
#: Threshold on the pairwise likelihood ratio (Zarifzadeh et al. use gamma = 1 in most experiments).
GAMMA = 1.0


def label_probability(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``log p(x | theta)``: the log-probability of each example's label, (..., n, C) -> (..., n).

    Args:
        log_probs: log-softmax outputs, (..., n, C).
        labels: the examples' labels, (n,).

    Returns:
        The log-probabilities, (..., n).
    """
    index = np.broadcast_to(np.asarray(labels, dtype=np.int64), log_probs.shape[:-1])[..., None]
    return np.take_along_axis(np.asarray(log_probs, dtype=np.float64), index, axis=-1)[..., 0]


def log_marginal(ref_logp: np.ndarray, ref_in: np.ndarray, offline_a: float | None) -> np.ndarray:
    """``log p(x)`` of each example from the reference models' ``log p(x | theta_r)`` (R, n).

    Online (``offline_a`` None): the mean over all reference models. Offline: ``(1 + a)/2 p_OUT + (1 - a)/2``
    with ``p_OUT`` the mean over the models whose ``ref_in`` is False; an example that no reference model
    left out (possible only in a leave-one-out game with two reference models) falls back to the mean over all.

    Args:
        ref_logp: the reference models' label log-probabilities, (R, n).
        ref_in: which reference model trained on which example, (R, n) bool.
        offline_a: RMIA's offline parameter a in [0, 1], or None for online.

    Returns:
        log p(x), (n,).

    Raises:
        UserError: an a outside [0, 1].
    """
    ref_logp = np.asarray(ref_logp, dtype=np.float64)
    ref_in = np.asarray(ref_in, dtype=bool)
    log_all = logsumexp(ref_logp, axis=0) - np.log(ref_logp.shape[0])
    if offline_a is None:
        return log_all
    if not 0.0 <= offline_a <= 1.0:
        raise UserError(f"the RMIA offline parameter a must lie in [0, 1], got {offline_a}")
    out = ~ref_in
    count = out.sum(axis=0)
    with np.errstate(divide="ignore"):
        log_out = logsumexp(np.where(out, ref_logp, -np.inf), axis=0) - np.log(np.maximum(count, 1))
    log_out = np.where(count > 0, log_out, log_all)
    return np.logaddexp(np.log1p(offline_a) - np.log(2.0) + log_out,
                        np.log1p(-offline_a) - np.log(2.0) if offline_a < 1.0 else -np.inf)


def balanced_log_marginal(ref_logp: np.ndarray, ref_in: np.ndarray) -> np.ndarray:
    """Online ``log p(x)`` (n,) from as many IN as OUT reference models per example: the first ``k`` of
    each in stack order, ``k`` = the smaller of the two counts; 0 (``p(x) = 1``) where ``k = 0``.

    For leave-one-out games over reference models that each candidate is IN exactly half of: the other
    models then hold one IN fewer when the left-out model trained on the candidate, so their plain mean
    tells its membership and makes the game more optimistic than the target's (AUC 0.74 against 0.67
    in ``tests/attacks/test_rmia.py``). A balanced subset has the same make-up in both cases.

    Args:
        ref_logp: the reference models' label log-probabilities, (R, n).
        ref_in: which reference model trained on which example, (R, n) bool.

    Returns:
        log p(x), (n,).
    """
    ref_logp = np.asarray(ref_logp, dtype=np.float64)
    keep = balanced_subset(ref_in)
    count = keep.sum(axis=0)
    with np.errstate(divide="ignore"):
        log_mean = logsumexp(np.where(keep, ref_logp, -np.inf), axis=0) - np.log(np.maximum(count, 1))
    return np.where(count > 0, log_mean, 0.0)


def rmia_scores(target_logp: np.ndarray, ref_logp: np.ndarray, ref_in: np.ndarray, pop_target_logp: np.ndarray,
                pop_ref_logp: np.ndarray, offline_a: float | None = None, gamma: float = GAMMA,
                log_px: np.ndarray | None = None) -> np.ndarray:
    """RMIA scores (Eq. 5) of candidates with label log-probabilities ``target_logp`` (..., n) under the target.

    ``ref_logp`` (R, n) / ``ref_in`` (R, n): the reference models on the candidates and which trained on
    which; ``pop_target_logp`` (..., Z) / ``pop_ref_logp`` (R, Z): the target and the reference models on
    the population samples (trained on by none). ``log_px`` (n,) replaces the candidates' ``log p(x)``
    (:func:`log_marginal`). Returns the fraction of population samples ``z`` with ``LR(x, z) >= gamma``,
    shape (..., n).

    Args:
        target_logp: the target's label log-probabilities on the candidates, (..., n).
        ref_logp: the reference models' on the candidates, (R, n).
        ref_in: which reference model trained on which candidate, (R, n) bool.
        pop_target_logp: the target's on the population samples, (..., Z).
        pop_ref_logp: the reference models' on the population samples, (R, Z).
        offline_a: RMIA's offline parameter a, or None for online.
        gamma: the likelihood-ratio threshold, > 0.
        log_px: the candidates' log p(x), replacing :func:`log_marginal`'s.

    Returns:
        The scores in [0, 1], (..., n).

    Raises:
        UserError: a gamma <= 0 or an a outside [0, 1].
    """
    if gamma <= 0:
        raise UserError(f"the RMIA threshold gamma must be positive, got {gamma}")
    ref_logp = np.asarray(ref_logp, dtype=np.float64)
    if ref_logp.ndim != 2 or ref_logp.shape != np.shape(ref_in):
        raise ValueError(f"ref_logp and ref_in must both be (models, examples), got {ref_logp.shape}, "
                         f"{np.shape(ref_in)}")
    pop_ref_logp = np.asarray(pop_ref_logp, dtype=np.float64)
    if log_px is None:
        log_px = log_marginal(ref_logp, ref_in, offline_a)
    x = (np.asarray(target_logp, dtype=np.float64) - log_px) - np.log(gamma)
    z = (np.asarray(pop_target_logp, dtype=np.float64)
         - log_marginal(pop_ref_logp, np.zeros(pop_ref_logp.shape, dtype=bool), offline_a))
    if x.shape[:-1] != z.shape[:-1]:
        raise ValueError(f"target_logp and pop_target_logp need the same leading axes, got {x.shape}, {z.shape}")
    # LR(x, z) >= gamma  <=>  log ratio_z <= log ratio_x - log gamma: count such z per candidate
    flat_x, flat_z = x.reshape(-1, x.shape[-1]), np.sort(z.reshape(-1, z.shape[-1]), axis=1)
    counts = np.stack([np.searchsorted(zs, xs, side="right") for xs, zs in zip(flat_x, flat_z, strict=True)])
    return ((counts + expit(flat_x)) / (z.shape[-1] + 1)).reshape(x.shape)


def leave_one_out(logp: np.ndarray, member: np.ndarray, pop_logp: np.ndarray,
                  offline_a: float | None, gamma: float = GAMMA) -> np.ndarray:
    """Scores (G, n) of each model ``j`` of a stack on its candidates, with the other models as references.

    ``logp`` (G, n) label log-probabilities of G models on n candidates, ``member`` (G, n) which model
    trained on which candidate, ``pop_logp`` (G, Z) the models on the population. Needs G >= 2. The
    online ``p(x)`` comes from a balanced subset of the other models (:func:`balanced_log_marginal`).

    Args:
        logp: G models' label log-probabilities on n candidates, (G, n).
        member: which model trained on which candidate, (G, n) bool.
        pop_logp: the models' on the population, (G, Z).
        offline_a: RMIA's offline parameter a, or None for online.
        gamma: the likelihood-ratio threshold.

    Returns:
        The scores, (G, n).

    Raises:
        UserError: fewer than 2 models.
    """
    G = logp.shape[0]
    if G < 2:
        raise UserError("RMIA calibration needs at least 2 models to play target and reference; "
                        "raise --references or --shadows")
    out = []
    for j in range(G):
        keep = np.arange(G) != j
        log_px = balanced_log_marginal(logp[keep], member[keep]) if offline_a is None else None
        out.append(rmia_scores(logp[j], logp[keep], member[keep], pop_logp[j], pop_logp[keep], offline_a, gamma,
                               log_px))
    return np.stack(out)


def choose_offline_a(logp: np.ndarray, member: np.ndarray, pop_logp: np.ndarray,
                     with_out_only: bool = False) -> tuple[float, dict[float, float]]:
    """The offline ``a`` of :data:`A_GRID` with the largest mean AUC over the leave-one-out games of
    :func:`leave_one_out` on ``logp`` / ``member`` / ``pop_logp`` (the paper's procedure of attacking a reference
    model, Zarifzadeh et al. App. B.2; the first such ``a`` on ties), and every ``a``'s mean AUC.

    ``with_out_only``: each game's AUC counts only the candidates that at least one of the other models left
    out, so that every score used has an OUT model (games over reference models trained on random subsets,
    :mod:`audit.membership.trained`); each game must then keep members and non-members.

    Args:
        logp: the models' label log-probabilities, (G, n).
        member: which model trained on which candidate, (G, n) bool.
        pop_logp: the models' on the population, (G, Z).
        with_out_only: count only candidates some other model left out.

    Returns:
        (the chosen a, each a's mean AUC).

    Raises:
        UserError: fewer than 2 models, or a game without members or non-members.
    """
    G = logp.shape[0]
    keep = [np.ones(logp.shape[1], dtype=bool) if not with_out_only else
            (~np.delete(member, j, axis=0)).any(axis=0) for j in range(G)]
    if any(len(np.unique(member[j][keep[j]])) < 2 for j in range(G)):
        raise UserError("an RMIA calibration game has no members or no non-members left out by another model; "
                        "give more population records or pass --rmia-a")
    aucs = {a: float(np.mean([auc(s[k], i[k]) for s, i, k in
                              zip(leave_one_out(logp, member, pop_logp, a), member, keep, strict=True)]))
            for a in A_GRID}
    return max(aucs, key=aucs.get), aucs
