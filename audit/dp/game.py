"""The multi-run DP distinguishing game and its statistics, independent of how runs are trained.

An audit of a DP claim plays the distinguishing game of the DP definition many times
(Jagielski, Ullman, Oprea 2020; Nasr et al. 2021): for run ``r = 1..R`` a fair coin decides
whether the canary is in the training set (``included[r]``), the mechanism runs, and the auditor
computes a score (higher = "the canary was in"). This module turns those scores into epsilon lower
bounds; *how* a run is trained and observed lives elsewhere (a trainer: :mod:`targets.dpsgd_audit`,
DP-ERM, or a user plugin), so any trainer can be plugged in.

Plugging in a trainer
---------------------
Call :func:`fair_coins` for the inclusion flags, train/observe the R runs however you like, and
pass the per-run scores to :func:`audit_runs`::

    included = fair_coins(R, seed)
    scores = np.array([my_score(train(X + canary if inc else X, seed_r)) for inc, seed_r in ...])
    out = audit_runs(scores, included, claim, delta, confidence=0.95, rng=seed)
    out["lower_bounds"], out["best_lower_bound"], out["verdict"]

Statistics (:mod:`audit.stats`):

* **Clopper–Pearson** and **GDP** from one family of threshold tests with simultaneous rate bounds
  (:func:`audit.stats.thresholds.threshold_bounds`; the strategy is chosen before the scores are
  seen: a threshold fixed by design when the setup has one, ``strategy``, else the Bonferroni grid). The GDP
  epsilon is valid when the pair is exactly Gaussian (``gaussian_pair``), otherwise an estimate
  (also against a mu-GDP claim: the claim's curve is what tests it, below).
* whenever there is a claim, the same rate bounds test the claim's own tradeoff curve
  (:mod:`audit.stats.tradeoff_test`): a test with ``FNR_ub < f(FPR_ub)`` is a violation at the same
  confidence, no extra family member. For a mu-GDP claim this is exactly ``mu_lb > mu``.
* estimates, labelled and never deciding the verdict: the Gaussian fit of exactly Gaussian scores
  and the per-step composition of the ``updates`` threat model (:mod:`audit.stats.per_step`).

The valid bounds form the verdict's family (:class:`audit.stats.verdict.Family`) of one member: the
threshold family, whose rows share one simultaneous confidence event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from audit.errors import UserError
from audit.stats.gdp import gaussian_fit_bound
from audit.stats.judgement import Judgement, judge
from audit.stats.metrics import attack_metrics
from audit.stats.outcome import AttackMetrics, Bound, Verdict
from audit.stats.per_step import StepComposition, per_step_bound
from audit.stats.rates import as_scores_members, operating_point
from audit.stats.thresholds import ThresholdStrategy, choose_strategy, threshold_bounds
from audit.stats.verdict import Family, epsilon_value
from audit.theory.checks import check_confidence
from audit.theory.claims import PrivacyClaim

__all__ = ["fair_coins", "audit_runs", "RunsAudit", "ScoreModel", "flag_estimates_above_claim", "ALPHA_GRID"]

#: alpha grid of the tradeoff curves written to results.json
ALPHA_GRID = np.unique(np.concatenate([np.logspace(-5, 0, 121), [1e-3, 1e-2, 0.1, 0.5]]))


def fair_coins(runs: int, seed: int) -> np.ndarray:
    """Independent fair coins (True = canary in) for ``runs`` runs, seeded; at least one of each
    outcome is not forced (a run with all heads is a valid, if useless, game)."""
    if int(runs) != runs or runs < 4:
        raise UserError(f"a multi-run audit needs at least 4 runs (got {runs}); pass --runs 4 or more")
    return np.random.default_rng([int(seed), 11]).random(int(runs)) < 0.5


def flag_estimates_above_claim(verdict: Verdict, bounds: Sequence[Bound], epsilon_theory: float | None) -> Verdict:
    """A consistent verdict whose assumption-based estimates exceed the claim says so in its text
    (suspicious, worth more runs); it never becomes a violation on an estimate alone."""
    above = ([] if epsilon_theory is None else
             [b for b in bounds if not b.valid and epsilon_value(b.epsilon) > epsilon_theory + 1e-9])
    if verdict.status == "consistent" and above:
        verdict = replace(verdict, text=verdict.text + "; but the assumption-based "
                          + ", ".join(sorted({b.method for b in above}))
                          + " estimate exceeds the claim: suspicious, check with more runs")
    return verdict


@dataclass(frozen=True, kw_only=True)
class ScoreModel:
    """What the statistics of :func:`audit_runs` know about the scores beyond the coins (all optional).

    Attributes:
        step_scores: (R, T) per-step observations (updates threat model, an estimate).
        sample_rate: the Poisson rate the claim composes (with ``step_scores``).
        steps: the number of steps the claim composes (with ``step_scores``).
        gaussian_pair: the scores are exactly Gaussian with a common variance in both worlds (e.g.
            output perturbation scored by a fixed projection): the GDP epsilon is then valid, and
            the Gaussian-fit estimate is added.
        gaussian_fit: add the Gaussian-fit estimate for scores assumed (not known) to be Gaussian
            (e.g. a black-box canary's loss); an estimate, with normality p-values in its details.
        design_sigma: the claimed noise multiplier: fixes the per-step threshold in advance.
        strategy: how the threshold tests are chosen (:mod:`audit.stats.thresholds`): a test fixed by
            design before any run was seen (``FixedThreshold``, or ``DesignedThreshold`` when the design
            needs the run counts), or None for :func:`audit.stats.thresholds.choose_strategy`'s default,
            the Bonferroni grid.
    """

    step_scores: ArrayLike | None = None
    sample_rate: float | None = None
    steps: int | None = None
    gaussian_pair: bool = False
    gaussian_fit: bool = False
    design_sigma: float | None = None
    strategy: ThresholdStrategy | None = None


@dataclass(frozen=True, kw_only=True)
class RunsAudit:
    """What :func:`audit_runs` returns.

    Attributes:
        judgement: the bounds, the verdict and the family (:func:`audit.stats.judgement.judge`).
        threshold_strategy: how the threshold tests chose their thresholds (``game.threshold_strategy``).
        attack_metrics: the per-run scores' metrics, with each threshold test's operating point
            (``attacks``' entry of the run).
    """

    judgement: Judgement
    threshold_strategy: str
    attack_metrics: AttackMetrics


def audit_runs(scores: ArrayLike, included: ArrayLike, claim: PrivacyClaim | None, delta: float,
               confidence: float = 0.95, rng: np.random.Generator | int | None = 0,
               model: ScoreModel = ScoreModel()) -> RunsAudit:
    """Epsilon lower bounds from R runs of the distinguishing game, and the verdict.

    Args:
        scores: (R,) one score per run, higher = "canary in" (any fixed function of what the threat
            model lets the adversary see).
        included: (R,) the fair coins (True = canary trained on).
        claim: a :class:`audit.theory.claims.PrivacyClaim` (or None for no claim); the threshold tests
            also test its own tradeoff curve (a rejection is a violation; :mod:`audit.stats.tradeoff_test`),
            far stronger than comparing epsilons when the exact curve is known (DP-SGD by the PLD
            accountant).
        delta: of the bounds; confidence: family-wise, of the verdict; rng: seeds the randomised
            parts of the statistics (tie-breaking, a held-out split).
        model: what is known of the scores beyond the coins (:class:`ScoreModel`).

    Returns:
        The :class:`RunsAudit`: the judgement (its verdict flagged by :func:`flag_estimates_above_claim`;
        its bounds, the best valid one of the verdict's family, the best estimate of all, labelled), the
        threshold strategy and the attack's metrics (AUC, TPR at low FPR of the per-run scores).
    """
    s, inc = as_scores_members(scores, included)
    confidence = check_confidence(confidence)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    family = Family(size=1, confidence=confidence)
    strategy = choose_strategy(int(inc.sum()), int((~inc).sum()), model.strategy)
    bounds = [b.block() for b in threshold_bounds(s, inc, delta, family.member_confidence, strategy, rng,
                                                  gaussian_pair=model.gaussian_pair,
                                                  claim_tradeoff=None if claim is None else claim.tradeoff)]
    if model.gaussian_pair or model.gaussian_fit:
        bounds.append(gaussian_fit_bound(s, inc, delta, confidence).block())
    if model.step_scores is not None:
        if model.sample_rate is None or model.steps is None:
            raise UserError("per-step observations need the sample rate and the number of steps of the claim")
        composition = StepComposition(sample_rate=model.sample_rate, steps=model.steps)
        bounds.append(per_step_bound(model.step_scores, inc, composition, delta, confidence, rng,
                                     design_sigma=model.design_sigma).block())
    judgement = judge(bounds, claim=claim, delta=delta, alpha=ALPHA_GRID, family=family)
    judgement = judgement.with_verdict(flag_estimates_above_claim(judgement.verdict, bounds,
                                                                  judgement.epsilon_theory))
    metrics = replace(attack_metrics(s, inc, confidence), empirical_points=tuple(  # each threshold test's point
        operating_point(f"{b.method} test ({b.details['rule']})", b.details, confidence)
        for b in bounds if b.method == "clopper-pearson" and "fp" in b.details))
    return RunsAudit(judgement=judgement, threshold_strategy=strategy.name, attack_metrics=metrics)
