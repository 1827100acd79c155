"""Attack-strength metrics (not privacy bounds): ROC, AUC, TPR at low FPR, advantage.

Conventions: higher score = "more likely a member"; ``members`` is 1/True for records in the
training set. Following Carlini et al. 2022 ("Membership inference attacks from first
principles", Sec. III), the headline numbers are TPR at 1% and 0.1% FPR read off the empirical
(step) ROC curve, plus AUC; balanced accuracy and membership advantage
(Yeom et al. 2018, Def. 4: ``Adv = TPR - FPR``) are reported at their best threshold.
These numbers describe the attack; epsilon lower bounds live in :mod:`audit.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as skm

from audit.errors import UserError
from audit.stats.outcome import AttackMetrics, Roc
from audit.stats.rates import as_scores_members, cp_lower, cp_upper
from audit.theory.checks import check_delta, check_epsilon

__all__ = [
    "roc",
    "auc",
    "tpr_at_fpr",
    "TprAtFpr",
    "balanced_accuracy",
    "membership_advantage",
    "downsample_roc",
    "attack_metrics",
    "dp_advantage_bound",
    "advantage_interval",
]

TARGET_FPRS = (0.01, 0.001)
MAX_ROC_POINTS = 400


def _prepare(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s, m = as_scores_members(scores, members)
    n_pos = int(m.sum())
    if n_pos == 0 or n_pos == m.size:
        raise UserError(
            f"ROC metrics need both members and non-members (got {n_pos} members of {m.size}); "
            "include non-member records in the evaluation"
        )
    return s, m


def roc(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empirical ROC curve via ``sklearn.metrics.roc_curve`` (no intermediate points dropped).

    Returns ``(fpr, tpr, thresholds)``: the test "member iff score >= thresholds[i]" has the
    rates ``fpr[i]``, ``tpr[i]``; the first point is (0, 0) with threshold +inf.

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.

    Returns:
        (fpr, tpr, thresholds), as above.

    Raises:
        UserError: no members or no non-members.
    """
    s, m = _prepare(scores, members)
    fpr, tpr, thr = skm.roc_curve(m.astype(int), s, drop_intermediate=False)
    return fpr, tpr, thr


def auc(scores: ArrayLike, members: ArrayLike) -> float:
    """Area under the ROC curve (= P[score(member) > score(non-member)] + 0.5 P[tie]).

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.

    Returns:
        The AUC in [0, 1].

    Raises:
        UserError: no members or no non-members.
    """
    s, m = _prepare(scores, members)
    return float(skm.roc_auc_score(m.astype(int), s))


@dataclass(frozen=True, kw_only=True)
class TprAtFpr:
    """The TPR of an attack at a target FPR, read off its empirical ROC (:func:`tpr_at_fpr`): what
    :class:`audit.stats.outcome.AttackMetrics` writes as ``tpr_at_fpr`` and ``tpr_at_fpr_ci`` for each target.

    Attributes:
        tpr: the largest empirical TPR among thresholds whose empirical FPR is at most the target.
        lo: the lower end of its two-sided Clopper–Pearson interval.
        hi: the upper end.
        fpr_achieved: the empirical FPR at that threshold.
        threshold: the threshold.
        tp: the members above it.
        n_pos: the members.
    """

    tpr: float
    lo: float
    hi: float
    fpr_achieved: float
    threshold: float
    tp: int
    n_pos: int

    @property
    def ci(self) -> list[float]:
        """The interval ``[lo, hi]`` as ``tpr_at_fpr_ci`` holds it."""
        return [self.lo, self.hi]


def tpr_at_fpr(
    scores: ArrayLike, members: ArrayLike, fpr: float, confidence: float = 0.95
) -> TprAtFpr:
    """Largest empirical TPR among thresholds whose empirical FPR is <= ``fpr``.

    No interpolation: the value is read off the empirical step curve, so it is achieved by an
    actual threshold (Carlini et al. 2022, Sec. III-B). ``lo``/``hi`` form a two-sided
    Clopper–Pearson interval (alpha/2 on each side) for the TPR count ``tp`` out of ``n_pos``
    members at that threshold; it does not account for the threshold itself being estimated
    from the non-member scores.

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.
        fpr: the largest false-positive rate allowed, in [0, 1].
        confidence: the confidence of the two-sided interval, in (0, 1).

    Returns:
        The TPR, its interval and the threshold that achieves it.

    Raises:
        UserError: no members or no non-members, or fpr or confidence out of range.
    """
    target = float(fpr)
    if not (0.0 <= target <= 1.0):
        raise UserError(f"target FPR must lie in [0, 1] (got {fpr})")
    if not (0.0 < confidence < 1.0):
        raise UserError(f"confidence must lie strictly between 0 and 1 (got {confidence}); use e.g. 0.95")
    s, m = _prepare(scores, members)
    f, t, thr = skm.roc_curve(m.astype(int), s, drop_intermediate=False)
    n_pos = int(m.sum())
    n_neg = int(m.size - n_pos)
    # compare counts, not floats, so that e.g. fpr = 0.01 with n_neg = 100 admits 1 false positive
    fp_counts = np.rint(f * n_neg)
    ok = np.flatnonzero(fp_counts <= target * n_neg + 1e-9)
    j = ok[np.argmax(t[ok])]  # t is non-decreasing, so this is the last admissible point
    tp = int(round(t[j] * n_pos))
    alpha = 1.0 - confidence
    return TprAtFpr(tpr=float(tp / n_pos), lo=cp_lower(tp, n_pos, alpha / 2), hi=cp_upper(tp, n_pos, alpha / 2),
                    fpr_achieved=float(f[j]), threshold=float(thr[j]), tp=tp, n_pos=n_pos)


def membership_advantage(scores: ArrayLike, members: ArrayLike) -> float:
    """Best-threshold membership advantage ``max_t TPR(t) - FPR(t)`` (Yeom et al. 2018, Def. 4;
    the maximum is >= 0 because the trivial threshold +inf gives 0).

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.

    Returns:
        The advantage in [0, 1].

    Raises:
        UserError: no members or no non-members.
    """
    f, t, _ = roc(scores, members)
    return float(max(0.0, np.max(t - f)))


def balanced_accuracy(scores: ArrayLike, members: ArrayLike) -> float:
    """Best-threshold balanced accuracy ``max_t (TPR(t) + 1 - FPR(t)) / 2 = (1 + advantage) / 2``.

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.

    Returns:
        The balanced accuracy in [0.5, 1].

    Raises:
        UserError: no members or no non-members.
    """
    return 0.5 * (1.0 + membership_advantage(scores, members))


def downsample_roc(fpr: ArrayLike, tpr: ArrayLike, max_points: int = MAX_ROC_POINTS) -> Roc:
    """Thin an ROC step curve for plotting while keeping the low-FPR region.

    Keeps the two extreme points and, for FPR values on a log-spaced grid from the smallest
    positive FPR to 1 (plus a linear grid), the last curve point at or below the grid value and
    the first one above it, so both corners of each step near the grid value survive. Returns
    the curve (:class:`audit.stats.outcome.Roc`) with at most ``max_points`` points (python floats).

    Args:
        fpr: the ROC curve's false-positive rates, non-decreasing.
        tpr: its true-positive rates.
        max_points: the most points kept.

    Returns:
        The thinned curve, as above.
    """
    f = np.asarray(fpr, dtype=float)
    t = np.asarray(tpr, dtype=float)
    if f.size <= max_points:
        return Roc(fpr=[float(x) for x in f], tpr=[float(x) for x in t])
    positive = f[f > 0]
    fmin = float(positive.min()) if positive.size else 1.0
    n_grid = max(2, (max_points - 2) // 2)
    idx: set[int] = {0, f.size - 1}
    for n_log in range(n_grid, 1, -1):
        grid = np.unique(np.r_[np.geomspace(fmin, 1.0, n_log), np.linspace(0.0, 1.0, max(2, n_log // 4))])
        below = np.searchsorted(f, grid, side="right") - 1  # last index with f <= g
        cand = set(np.clip(below, 0, f.size - 1).tolist()) | set(np.clip(below + 1, 0, f.size - 1).tolist())
        cand |= {0, f.size - 1}
        if len(cand) <= max_points:
            idx = cand
            break
    keep = np.array(sorted(idx))
    return Roc(fpr=[float(x) for x in f[keep]], tpr=[float(x) for x in t[keep]])


def attack_metrics(scores: ArrayLike, members: ArrayLike, confidence: float = 0.95) -> AttackMetrics:
    """All attack-strength metrics, as the results block of an attack (:class:`audit.stats.outcome.AttackMetrics`,
    python types; a caller adds its own fields with ``dataclasses.replace``).

    Fields set: ``auc``, ``balanced_accuracy``, ``advantage``, ``advantage_ci`` (:func:`advantage_interval`),
    ``tpr_at_fpr`` ({"0.01", "0.001"}),
    ``tpr_at_fpr_ci`` ({"0.01": [lo, hi], ...}, Clopper–Pearson at ``confidence``), ``roc``
    (downsampled to at most 400 points by :func:`downsample_roc`), ``n_members``, ``n_nonmembers``.

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.
        confidence: the confidence of the intervals, in (0, 1).

    Returns:
        The metrics above.

    Raises:
        UserError: no members or no non-members.
    """
    s, m = _prepare(scores, members)
    f, t, _ = skm.roc_curve(m.astype(int), s, drop_intermediate=False)
    adv = float(max(0.0, np.max(t - f)))
    out_tpr: dict[str, float] = {}
    out_ci: dict[str, list[float]] = {}
    for target in TARGET_FPRS:
        r = tpr_at_fpr(s, m, target, confidence)
        out_tpr[str(target)] = r.tpr
        out_ci[str(target)] = r.ci
    # the ROC for plotting: corners only (collinear points carry no information)
    f_d, t_d, _ = skm.roc_curve(m.astype(int), s, drop_intermediate=True)
    return AttackMetrics(
        auc=float(skm.roc_auc_score(m.astype(int), s)),
        balanced_accuracy=0.5 * (1.0 + adv),
        advantage=adv,
        advantage_ci=advantage_interval(s, m, confidence),
        tpr_at_fpr=out_tpr,
        tpr_at_fpr_ci=out_ci,
        roc=downsample_roc(f_d, t_d),
        n_members=int(m.sum()),
        n_nonmembers=int(m.size - m.sum()),
    )


def dp_advantage_bound(epsilon: float, delta: float) -> float:
    """Largest membership advantage ``TPR - FPR`` any test can reach against an (eps, delta)-DP
    mechanism: ``(e^eps - 1 + 2 delta) / (e^eps + 1)``, capped at 1.

    Derivation: (eps, delta)-DP confines (FPR, TPR) to ``TPR <= e^eps FPR + delta`` and
    ``1 - FPR <= e^eps (1 - TPR) + delta`` [Kairouz, Oh, Viswanath 2015, Thm. 2.1; the f_{eps,delta}
    tradeoff of Dong, Roth, Su 2019, eq. (5)]. ``TPR - FPR`` is maximised at the corner where both
    hold with equality, ``FPR = (1 - delta) / (e^eps + 1)``, giving the formula (for delta = 0 it is
    Yeom et al. 2018, Thm. 1's ``e^eps - 1`` bound tightened to ``tanh(eps / 2)``).

    Args:
        epsilon: the claim's epsilon.
        delta: the claim's delta.

    Returns:
        The bound in [0, 1].
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if math.isinf(epsilon):
        return 1.0
    e = math.exp(min(float(epsilon), 700.0))
    return float(min(1.0, (e - 1.0 + 2.0 * delta) / (e + 1.0)))


def advantage_interval(scores: ArrayLike, members: ArrayLike, confidence: float = 0.95) -> list[float]:
    """Two-sided interval for the best-threshold advantage ``max_t TPR(t) - FPR(t)``, simultaneous
    over thresholds.

    The empirical maximum is biased upwards (the threshold is chosen on the same scores), so a
    point estimate cannot be compared with a bound; its interval can. By the Dvoretzky–Kiefer–Wolfowitz
    inequality with Massart's constant, ``sup_t |TPR_hat(t) - TPR(t)| <= e_pos`` with probability
    ``>= 1 - 2 exp(-2 n_pos e_pos^2)``, likewise for FPR; with ``alpha/2`` for each,
    ``e_n = sqrt(ln(4 / alpha) / (2 n))`` and ``|max_t Adv_hat(t) - max_t Adv(t)| <= e_pos + e_neg``.
    Assumes the members' and the non-members' scores are each independent draws (exact in the
    multi-run game; an approximation in the one-run game, whose guess counts Steinke et al. 2023
    bound instead). Returns ``[lo, hi]`` clipped to [0, 1].

    Args:
        scores: one attack score per record (higher: more likely a member).
        members: whether each record is a member (bool or 0/1), of the same length.
        confidence: the interval's confidence, in (0, 1).

    Returns:
        [lo, hi].

    Raises:
        UserError: no members or no non-members, or confidence out of range.
    """
    if not 0 < confidence < 1:
        raise UserError(f"confidence must lie strictly between 0 and 1 (got {confidence}); use e.g. 0.95")
    s, m = _prepare(scores, members)
    n_pos, n_neg = int(m.sum()), int(m.size - m.sum())
    alpha = 1.0 - confidence
    margin = sum(math.sqrt(math.log(4.0 / alpha) / (2.0 * n)) for n in (n_pos, n_neg))
    adv = membership_advantage(s, m)
    return [max(0.0, adv - margin), min(1.0, adv + margin)]
