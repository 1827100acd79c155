"""Threshold selection for multi-run audits: which tests "member iff score >= t" a bound may use,
and with what correction, so that the bound holds at the confidence it states.

Picking the best threshold on the same scores the Clopper–Pearson interval uses invalidates the
interval. Each :class:`ThresholdStrategy` returns a :class:`TestFamily`: candidate tests whose
false-positive and false-negative rates are bounded *simultaneously* with probability at least the
requested confidence. Any function of those rate bounds — the best Clopper–Pearson epsilon over the
tests, the best GDP mu — is then valid at that confidence, with no further correction; the
Clopper–Pearson and GDP rows of one audit therefore count as one member of the verdict's family.

Strategies:

* :class:`BonferroniGrid` (default): tests at a grid of false-positive *counts* k fixed in advance
  from the number of negatives (and, symmetrically, of false-negative counts), with Bonferroni over
  the grid. The threshold for count k is the (k+1)-th largest negative score; its true FPR is then
  distributed as the (k+1)-th smallest of n uniforms, Beta(k+1, n-k), so the Clopper–Pearson bound
  at count k holds whatever the data (ties are broken by a seeded random key, a randomised test, so
  the scores behave as continuous). The positives are independent of that threshold, so their
  count is binomial. Unlike jax_privacy's Bonferroni over ROC-frontier thresholds, the family is
  fixed before the scores are seen, so the union bound is rigorous; on Gaussian scores it certifies
  as much or more (docs/references.md, "Threshold selection").
* :class:`HeldOutSplit`: choose one threshold on a random half of the observations (stratified by
  membership), bound it on the other half [Jagielski, Ullman, Oprea 2020].
* :class:`FixedThreshold`: one threshold fixed by design before any observation (e.g. from the
  claim or from simulations under a stated hypothesis), bounded on every observation.
* :class:`DesignedThreshold`: the same, where the design needs the numbers of observations of each
  world (a threshold optimised for the counts the bound will have): ``design(n_pos, n_neg)`` gives
  the threshold and says how it was fixed. The counts come from the coins, never from the scores.

Strategies are values (frozen dataclasses, the shape of jax_privacy's ``Bonferroni`` / ``Split`` /
``Explicit``): an audit takes one and passes it on. :func:`choose_strategy` picks one from what is
known before the scores are seen: a designed threshold when the audit has one, else the grid.
Convention: higher score = member.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from audit.errors import UserError
from audit.stats.gdp import GDP_ASSUMPTION
from audit.stats.lower_bound import LowerBound
from audit.stats.rates import (
    as_scores_members,
    confusion_counts,
    cp_upper_array,
    epsilon_from_rates_array,
    mu_from_rates,
)
from audit.stats.tradeoff_test import claim_margin
from audit.theory.checks import check_confidence, check_delta
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["TestFamily", "ThresholdStrategy", "BonferroniGrid", "HeldOutSplit", "FixedThreshold", "DesignedThreshold",
           "STRATEGIES",
           "choose_strategy", "split_runs", "threshold_bounds", "designed_threshold_from_samples",
           "SELECTION_ALPHA_FACTOR"]

#: HeldOutSplit selects its threshold with Clopper–Pearson at this times the final alpha: a
#: pessimistic objective that prefers thresholds with many counts over tail thresholds that only
#: looked good by chance on the selection half. Selection only, so validity is unaffected.
SELECTION_ALPHA_FACTOR = 0.01


@dataclass(frozen=True, kw_only=True)
class TestFamily:
    """Candidate tests "member iff score >= threshold" with simultaneous rate bounds.

    Arrays have one entry per test. ``fp``/``fn`` are the counts the bounds were computed from
    (for the grid these are the nominal counts the thresholds were placed at), ``fpr_ub``/``fnr_ub``
    one-sided Clopper–Pearson upper bounds at ``alpha_each``, so that all of them hold together with
    probability at least ``confidence``. ``info`` describes the strategy for results.json.
    """

    thresholds: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    n_neg: int
    n_pos: int
    alpha_each: float
    confidence: float
    info: dict = field(default_factory=dict)

    @property
    def fpr_ub(self) -> np.ndarray:
        return cp_upper_array(self.fp, self.n_neg, self.alpha_each)

    @property
    def fnr_ub(self) -> np.ndarray:
        return cp_upper_array(self.fn, self.n_pos, self.alpha_each)

    def ceiling(self, delta: float) -> float:
        """The largest Clopper–Pearson epsilon these tests could certify: that of a perfect attack,
        with no false positive and no false negative at the tests' per-rate alpha (the audit's
        ceiling; with N observations per world it is about ln N).

        Args:
            delta: the delta of the epsilon.

        Returns:
            The ceiling.
        """
        return float(epsilon_from_rates_array(cp_upper_array(0, self.n_neg, self.alpha_each),
                                              cp_upper_array(0, self.n_pos, self.alpha_each), delta))

    def gdp_ceiling(self, delta: float) -> float | None:
        """The largest GDP epsilon these tests could certify: ``mu_from_rates`` decreases in both
        rate bounds, so a perfect attack (no error of either kind) maximises it. None at delta 0.

        Args:
            delta: the delta of the epsilon.

        Returns:
            The GDP ceiling, or None at delta 0.
        """
        mu = float(mu_from_rates(cp_upper_array(0, self.n_neg, self.alpha_each),
                                 cp_upper_array(0, self.n_pos, self.alpha_each)))
        return gaussian_epsilon(mu, delta) if delta > 0 else None


class ThresholdStrategy(abc.ABC):
    """How the tests of a threshold audit are chosen; see the module docstring."""

    name: str = "abstract"

    @abc.abstractmethod
    def tests(self, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float,
              rng: np.random.Generator) -> TestFamily:
        """The candidate tests and their simultaneous rate bounds at ``confidence``.

        Args:
            scores: one score per observation (higher: more likely "in").
            members: whether each observation is "in" (bool).
            confidence: the simultaneous confidence of the rate bounds.
            delta: the delta of the bounds.
            rng: the generator of any random split.

        Returns:
            The tests and their rate bounds.
        """


def _need_both_worlds(members: np.ndarray, minimum: int) -> tuple[int, int]:
    n_pos, n_neg = int(members.sum()), int((~members).sum())
    if n_pos < minimum or n_neg < minimum:
        raise UserError(f"the audit needs at least {minimum} observations of each world (got {n_pos} with, {n_neg} "
                        "without the target); use more runs or draws")
    return n_pos, n_neg


def grid_counts(n: int, points: int) -> np.ndarray:
    """0 and ``points`` geometrically spaced counts from 1 to n/2 (rounded, unique).

    Args:
        n: the number of observations.
        points: the number of geometric counts.

    Returns:
        The sorted unique counts.
    """
    if n < 2:
        return np.array([0])
    return np.unique(np.concatenate([[0], np.round(np.geomspace(1, n / 2, points)).astype(int)]))


@dataclass(frozen=True)
class BonferroniGrid(ThresholdStrategy):
    """Bonferroni over thresholds placed at a grid of error counts fixed in advance (module docstring).

    ``points`` counts per side: false-positive counts 0 and ``points`` geometric values up to half
    the negatives (thresholds from the negatives' order statistics), and the same for false
    negatives (thresholds from the positives'); each of the K tests gets alpha / (2K) per rate.
    """

    points: int = 10
    name: str = "bonferroni-grid"

    def tests(self, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float,
              rng: np.random.Generator) -> TestFamily:
        n_pos, n_neg = _need_both_worlds(members, 1)
        # ranks of the pooled scores, ties broken by a seeded random key (a randomised test)
        order = np.lexsort((rng.random(scores.size), scores))
        rank = np.empty(scores.size, dtype=np.int64)
        rank[order] = np.arange(scores.size)
        neg_desc = np.sort(rank[~members])[::-1]
        pos_asc = np.sort(rank[members])
        k_fp = grid_counts(n_neg, self.points)
        k_fn = grid_counts(n_pos, self.points)
        # FP side: threshold just above the (k+1)-th largest negative; FN side: at the (j+1)-th smallest positive
        cut_fp = neg_desc[k_fp] + 1
        cut_fn = pos_asc[k_fn]
        fn_at_fp = np.searchsorted(pos_asc, cut_fp, side="left")
        fp_at_fn = n_neg - np.searchsorted(np.sort(rank[~members]), cut_fn, side="left")
        cuts = np.concatenate([cut_fp, cut_fn])
        sorted_scores = scores[order]
        thresholds = np.where(cuts < scores.size, sorted_scores[np.minimum(cuts, scores.size - 1)], np.inf)
        k = cuts.size
        alpha_each = (1.0 - confidence) / (2 * k)
        return TestFamily(thresholds=thresholds, fp=np.concatenate([k_fp, fp_at_fn]),
                          fn=np.concatenate([fn_at_fp, k_fn]), n_neg=n_neg, n_pos=n_pos, alpha_each=alpha_each,
                          confidence=confidence,
                          info={"strategy": self.name, "tests": int(k), "alpha_each": alpha_each,
                                "choice": f"Bonferroni over {k} thresholds placed at error counts fixed in advance "
                                          f"(false positives {k_fp.tolist()}, false negatives {k_fn.tolist()}); all "
                                          "observations used"})


@dataclass(frozen=True)
class HeldOutSplit(ThresholdStrategy):
    """One threshold chosen on a random half (stratified by membership), bounded on the other half.

    The candidates are ``n_thresholds`` quantiles of the selection half; the one maximising the
    Clopper–Pearson epsilon at a pessimistic alpha (:data:`SELECTION_ALPHA_FACTOR`) is kept, ties
    broken by the add-one smoothed point estimate so that a useless all-in threshold never beats a
    separating one.
    """

    n_thresholds: int = 256
    name: str = "held-out-split"

    def tests(self, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float,
              rng: np.random.Generator) -> TestFamily:
        sel, bnd = split_runs(members, rng)
        sel_i, bnd_i = np.concatenate(sel), np.concatenate(bnd)
        s_sel, m_sel = scores[sel_i], members[sel_i]
        n_pos, n_neg = int(m_sel.sum()), int((~m_sel).sum())
        alpha = 1.0 - confidence
        cands = np.unique(np.quantile(s_sel, np.linspace(0.0, 1.0, self.n_thresholds)))
        fp, fn = confusion_counts(s_sel, m_sel, cands)
        a_sel = SELECTION_ALPHA_FACTOR * alpha / 2
        objective = epsilon_from_rates_array(cp_upper_array(fp, n_neg, a_sel), cp_upper_array(fn, n_pos, a_sel), delta)
        smooth = epsilon_from_rates_array((fp + 1) / (n_neg + 2), (fn + 1) / (n_pos + 2), delta)
        threshold = float(cands[int(np.lexsort((-smooth, -objective))[0])])
        s_b, m_b = scores[bnd_i], members[bnd_i]
        fp_b, fn_b = confusion_counts(s_b, m_b, [threshold])
        return TestFamily(thresholds=np.array([threshold]), fp=fp_b, fn=fn_b, n_neg=int((~m_b).sum()),
                          n_pos=int(m_b.sum()), alpha_each=alpha / 2, confidence=confidence,
                          info={"strategy": self.name, "tests": 1, "alpha_each": alpha / 2, "n_select": int(sel_i.size),
                                "n_bound": int(bnd_i.size), "thresholds_tried": int(cands.size),
                                "choice": "chosen on a random half of the observations, bounded on the other half"})


@dataclass(frozen=True)
class FixedThreshold(ThresholdStrategy):
    """One threshold fixed before any observation was seen; every observation is used."""

    threshold: float
    description: str = "fixed in advance"
    name: str = "fixed"

    def tests(self, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float,
              rng: np.random.Generator) -> TestFamily:
        _need_both_worlds(members, 1)
        fp, fn = confusion_counts(scores, members, [self.threshold])
        alpha = 1.0 - confidence
        return TestFamily(thresholds=np.array([self.threshold]), fp=fp, fn=fn, n_neg=int((~members).sum()),
                          n_pos=int(members.sum()), alpha_each=alpha / 2, confidence=confidence,
                          info={"strategy": self.name, "tests": 1, "alpha_each": alpha / 2,
                                "choice": self.description})


@dataclass(frozen=True)
class DesignedThreshold(ThresholdStrategy):
    """One threshold fixed in advance by ``design(n_pos, n_neg) -> (threshold, how it was fixed)`` from
    the numbers of observations with and without the target (e.g. optimised on simulations or on
    separate calibration runs for those counts), then bounded on every observation as
    :class:`FixedThreshold`, whose name and results it has."""

    design: Callable[[int, int], tuple[float, str]]
    name: str = FixedThreshold.name

    def tests(self, scores: np.ndarray, members: np.ndarray, confidence: float, delta: float,
              rng: np.random.Generator) -> TestFamily:
        n_pos, n_neg = _need_both_worlds(members, 1)
        threshold, description = self.design(n_pos, n_neg)
        return FixedThreshold(threshold, description).tests(scores, members, confidence, delta, rng)


#: Strategies a user may name (``--threshold``); ``auto`` means :func:`choose_strategy`.
STRATEGIES = {"bonferroni-grid": BonferroniGrid, "held-out-split": HeldOutSplit}


def choose_strategy(n_pos: int, n_neg: int, fixed: ThresholdStrategy | None = None,
                    requested: str = "auto") -> ThresholdStrategy:
    """The strategy of an audit, from what is known before its scores are seen: a threshold fixed by
    design when the audit has one (``fixed``: a :class:`FixedThreshold` or :class:`DesignedThreshold`),
    else the Bonferroni grid (its grid is set by ``n_pos``/``n_neg``); ``requested`` names a strategy
    of :data:`STRATEGIES` explicitly.

    Args:
        n_pos: the number of observations with the target.
        n_neg: the number without.
        fixed: the audit's threshold fixed by design, if any.
        requested: ``"auto"`` or a name in :data:`STRATEGIES`.

    Returns:
        The strategy.

    Raises:
        UserError: an unknown strategy name.
    """
    if requested == "auto":
        return fixed if fixed is not None else BonferroniGrid()
    if requested not in STRATEGIES:
        raise UserError(f"unknown threshold strategy {requested!r}; choose auto or one of {', '.join(STRATEGIES)}")
    return STRATEGIES[requested]()


def split_runs(included: np.ndarray,
               rng: np.random.Generator | int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random halves of the observations, stratified by membership: ([sel_in, sel_out], [bound_in,
    bound_out]) (indices). The selection half chooses a test, the bound half bounds it.

    Args:
        included: whether each observation is "in" (bool).
        rng: the generator (or seed) of the split.

    Returns:
        The selection and bound halves, as above.

    Raises:
        UserError: fewer than 2 observations of either world.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pos, neg = np.flatnonzero(included), np.flatnonzero(~included)
    if pos.size < 2 or neg.size < 2:
        raise UserError(f"the audit needs at least 2 observations of each world (got {pos.size} with, {neg.size} "
                        "without the target); use more runs or draws")
    sel, bnd = [], []
    for idx in (pos, neg):
        perm = rng.permutation(idx)
        sel.append(perm[: perm.size // 2])
        bnd.append(perm[perm.size // 2:])
    return sel, bnd


def threshold_bounds(scores: ArrayLike, members: ArrayLike, delta: float, confidence: float,
                     strategy: ThresholdStrategy, rng: np.random.Generator | int | None,
                     gaussian_pair: bool = False,
                     claim_tradeoff: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[LowerBound, LowerBound]:
    """Clopper–Pearson and GDP lower bounds from the tests of ``strategy``, both valid together at
    ``confidence`` (one simultaneous event; module docstring).

    Clopper–Pearson: the largest :func:`audit.stats.rates.epsilon_from_rates` over the tests' rate
    bounds [Jagielski, Ullman, Oprea 2020]. GDP: the largest ``mu_lb`` over the tests [Nasr et al.
    2023, Sec. 4], a rigorous bound on mu, converted to epsilon at ``delta``. That epsilon bounds the
    mechanism's epsilon only when its tradeoff is Gaussian, so the row is valid only when the pair is
    known to be Gaussian (``gaussian_pair``, e.g. a Gaussian mechanism's output) and an estimate
    otherwise — also against a mu-GDP claim, which does not make the output Gaussian (a Laplace
    mechanism can satisfy one): such a claim is tested through its own curve (``claim_tradeoff``), and
    ``FNR_ub < G_mu(FPR_ub)`` holds exactly when ``mu_lb > mu``. At delta = 0 the row bounds mu only
    (epsilon None: G_mu has no finite epsilon at delta 0).

    Each row's ``details["ceiling"]`` is what a perfect attack could certify with that row's method
    (:meth:`TestFamily.ceiling`, :meth:`TestFamily.gdp_ceiling`), so no row exceeds its ceiling.

    With ``claim_tradeoff`` (the claim's f) the same rate bounds also test the claim's own curve
    (:mod:`audit.stats.tradeoff_test`): the Clopper–Pearson row's details say whether a test has
    ``FNR_ub < f(FPR_ub)`` (``claim_rejected``, a violation at ``confidence``) and by how much.

    Args:
        scores: one score per observation (higher: more likely "in").
        members: whether each observation is "in".
        delta: the delta of the epsilons.
        confidence: the confidence both bounds hold at together.
        strategy: how the tests are chosen.
        rng: the generator (or seed) of any random split.
        gaussian_pair: the pair is known to be Gaussian (the GDP row is then valid).
        claim_tradeoff: the claim's tradeoff curve f, to test it with the same rate bounds.

    Returns:
        (Clopper–Pearson bound, GDP bound).

    Raises:
        UserError: too few observations of either world.
    """
    s, m = as_scores_members(scores, members)
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    family = strategy.tests(s, m, confidence, delta, rng)
    fpr_ub, fnr_ub = family.fpr_ub, family.fnr_ub
    eps = epsilon_from_rates_array(fpr_ub, fnr_ub, delta)
    mu = mu_from_rates(fpr_ub, fnr_ub)
    rejection = {} if claim_tradeoff is None else _claim_rejection(family, fpr_ub, fnr_ub, claim_tradeoff)

    def details(j: int, ceiling: float | None) -> dict:
        return {"ceiling": ceiling, "fp": int(family.fp[j]), "fn": int(family.fn[j]),
                "n_neg": family.n_neg, "n_pos": family.n_pos,
                "fpr": family.fp[j] / family.n_neg, "fnr": family.fn[j] / family.n_pos,
                "fpr_ub": float(fpr_ub[j]), "fnr_ub": float(fnr_ub[j]), "threshold": float(family.thresholds[j]),
                "direction": ">=", "rule": "member iff score >= threshold", "delta": delta,
                "mu_lb": float(mu[j])} | family.info

    n = family.n_neg + family.n_pos
    j = int(np.argmax(eps))
    cp = LowerBound(method="clopper-pearson", epsilon=float(eps[j]), confidence=confidence, n=n, valid=True,
                    details=details(j, family.ceiling(delta)) | rejection)
    j = int(np.argmax(mu))
    assumption = "none: the pair is Gaussian, so its tradeoff is exactly G_mu" if gaussian_pair else GDP_ASSUMPTION
    gdp = LowerBound(method="gdp", epsilon=gaussian_epsilon(float(mu[j]), delta) if delta > 0 else None,
                     confidence=confidence, n=n, valid=gaussian_pair,
                     details=details(j, family.gdp_ceiling(delta)) | {"assumption": assumption})
    return cp, gdp


def _claim_rejection(family: TestFamily, fpr_ub: np.ndarray, fnr_ub: np.ndarray,
                     claim_tradeoff: Callable[[np.ndarray], np.ndarray]) -> dict:
    """The test of the family that comes closest to rejecting the claim's curve, and whether it does."""
    margin = claim_margin(fpr_ub, fnr_ub, claim_tradeoff)
    i = int(np.argmax(margin))
    return {"claim_rejected": bool(margin[i] > 1e-9), "claim_margin": float(margin[i]),
            "claim_test": {"threshold": float(family.thresholds[i]), "fpr_ub": float(fpr_ub[i]),
                           "fnr_ub": float(fnr_ub[i]), "claim_fnr": float(margin[i] + fnr_ub[i]),
                           "rule": "rejects the claim when fnr_ub < claim_fnr = f(fpr_ub)"}}


def designed_threshold_from_samples(sim_in: np.ndarray, sim_out: np.ndarray, n_pos: int, n_neg: int,
                                    confidence: float, delta: float, n_thresholds: int = 400,
                                    method: str = "clopper-pearson") -> tuple[float, float]:
    """Threshold of the test "in iff score >= t" fixed in advance from simulated scores.

    ``sim_in``/``sim_out`` are scores simulated under a hypothesis about the mechanism, or observed on
    separate calibration runs (never the audit's own runs). For each candidate threshold the
    false-positive / false-negative counts of ``n_neg``/``n_pos`` runs are binomial; their 75th
    percentiles go through the bound of ``method`` — the Clopper–Pearson epsilon, or the GDP epsilon of
    ``mu_from_rates`` (``"gdp"``) — a pessimistic quantile, so that a far-tail threshold whose expected
    count rounds to 0 is not preferred on luck, and the best threshold is kept. Chosen before any run
    is seen, it lets the bound use every run; a wrong hypothesis makes it suboptimal, never invalid.
    Returns (threshold, the bound expected with probability about 1/2 or more).

    Args:
        sim_in: simulated (or calibration) scores with the target.
        sim_out: simulated (or calibration) scores without it.
        n_pos: the number of audit runs with the target.
        n_neg: the number without.
        confidence: the confidence of the bound.
        delta: the delta of the epsilon.
        n_thresholds: the candidate thresholds (quantiles of the simulated scores).
        method: ``"clopper-pearson"`` or ``"gdp"``.

    Returns:
        (threshold, expected bound).

    Raises:
        ValueError: an unknown method.
    """
    if method not in ("clopper-pearson", "gdp"):
        raise ValueError(f"method must be 'clopper-pearson' or 'gdp', got {method!r}")
    sim_in, sim_out = np.sort(np.asarray(sim_in, dtype=float)), np.sort(np.asarray(sim_out, dtype=float))
    cands = np.unique(np.quantile(sim_out, 1.0 - np.logspace(-5, 0, n_thresholds)))
    fpr = 1.0 - np.searchsorted(sim_out, cands, side="left") / sim_out.size
    fnr = np.searchsorted(sim_in, cands, side="left") / sim_in.size
    a = (1.0 - confidence) / 2
    fpr_ub = cp_upper_array(stats.binom.ppf(0.75, n_neg, fpr), n_neg, a)
    fnr_ub = cp_upper_array(stats.binom.ppf(0.75, n_pos, fnr), n_pos, a)
    if method == "gdp":
        mu = mu_from_rates(fpr_ub, fnr_ub)
        j = int(np.argmax(mu))
        return float(cands[j]), gaussian_epsilon(max(float(mu[j]), 0.0), delta)
    eps = epsilon_from_rates_array(fpr_ub, fnr_ub, delta)
    j = int(np.argmax(eps))
    return float(cands[j]), float(eps[j])
