"""What an audit found, typed: the blocks of ``results.json`` as frozen, keyword-only dataclasses
(:class:`audit.stats.blocks.Block`), from a bound to the whole run's envelope (:class:`Outcome`) and a
comparison of runs (:class:`Comparison`). Each kind's own block (``Outcome.detail``) is declared in the kind's
package and named on its record (``RunKind.detail``), built on :class:`Detail`; the blocks it holds that
several kinds or layers share (:class:`OneRun`, :class:`ConfigCheck`, :class:`SplitCheck`, ...) are here. They
are the one source of the file format: the schema ``audit/schemas/results.schema.json`` is generated from them
(:mod:`audit.schemas.generate`, ``python -m audit schema``; a test checks the shipped file is that output).

Each block's fields are the keys its schema definition names, typed, with the descriptions of its docstring; a
field is required exactly where every file of that kind writes the key, and the open objects (a bound's
``details``, a run's ``params``, ``model``, ``host``, ``timing``) are ``Mapping`` fields. Every key a run
writes is a named field (:class:`audit.stats.blocks.UnnamedKey` otherwise). :meth:`Block.to_dict` writes the
object ``results.json`` holds, :meth:`Block.from_dict` reads it back (``audit.results_file`` validates a file
against the schema first); a read and a write give the same bytes. The verdict, the roles of the bounds and
the family's confidence split are those of :mod:`audit.stats.verdict` and :mod:`audit.stats.lower_bound`
(``docs/references.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Self

from audit.stats.blocks import INTERVAL, LIST, MAP, Block, constrained, flat, nested, number_or_inf

if TYPE_CHECKING:
    from audit.theory.config_check import ConfigFinding

__all__ = [
    "Verdict", "Ceiling", "Curve", "Bound", "BestBound", "ErrorPoint", "Roc", "AttackMetrics", "Table",
    "Family", "SplitCheck", "Figure", "Game", "ExpectedPerfect", "LastIterate", "OneRun", "Finding", "ClippingCheck",
    "ConfigCheck",
    "EpsilonBound", "Inversion", "ExtractionMethod", "Extraction", "ReconstructionPoint", "Reconstruction",
    "SweepPoint", "SweepRow", "Stamp", "Audited", "Judged", "Detail", "Outcome", "CompareRow", "Comparison",
]


@dataclass(frozen=True, kw_only=True)
class Verdict(Block):
    """``verdict``: how the best bound compares with the claim.

    Attributes:
        status: ``consistent``, ``violation``, ``no-claim`` or ``could-not-read`` (a check that could void the
            accounting was not read).
        text: the verdict in words.
        source: what decided it when not the bounds (``config_check``).
        one_run: the one-run bound's own verdict (``status``, ``text``) where the accounting check decided
            (a plugin's one-run dp).
    """

    status: str = constrained({"enum": ["consistent", "violation", "no-claim", "could-not-read"]})
    text: str
    source: str | None = None
    one_run: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Ceiling(Block):
    """``ceiling``: what a perfect attack in the same game could certify.

    Attributes:
        epsilon: the ceiling's epsilon (None when no bound has one).
        text: the ceiling in words.
    """

    epsilon: float | None = number_or_inf()
    text: str


@dataclass(frozen=True, kw_only=True)
class Curve(Block):
    """A tradeoff curve: beta(alpha) on an FPR grid.

    Attributes:
        alpha: the FPR grid.
        beta: the FNR at each alpha.
        epsilon: the (epsilon, delta)-DP curve's epsilon, where the curve is one.
        delta: its delta.
    """

    alpha: Sequence[float]
    beta: Sequence[float]
    epsilon: float | None = number_or_inf(optional=True)
    delta: float | None = None


@dataclass(frozen=True, kw_only=True)
class Bound(Block):
    """One empirical lower bound (one row of ``lower_bounds``; built by
    :class:`audit.stats.lower_bound.LowerBound`).

    Attributes:
        method: e.g. ``clopper-pearson``, ``gdp``, ``one-run``.
        epsilon: the epsilon lower bound (None when the row bounds mu only).
        confidence: the probability with which this bound alone holds.
        n: the observations it uses.
        valid: whether it holds without further assumptions.
        role: ``verdict``, ``secondary`` or ``estimate``.
        statement: what it bounds, in words.
        attack: the attack whose scores it reads.
        details: the method's own numbers (counts, rate bounds, mu, ...).
    """

    method: str
    epsilon: float | None = number_or_inf()
    confidence: float
    n: int
    valid: bool
    role: str = constrained({"enum": ["verdict", "secondary", "estimate"]})
    statement: str
    attack: str | None = None
    details: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class BestBound(Bound):
    """``best_lower_bound``: the best valid bound of the verdict's family.

    Attributes:
        family_size: how many bounds competed.
        family_confidence: the confidence the best one holds at across the family.
    """

    family_size: int = constrained({"minimum": 1})
    family_confidence: float

    @classmethod
    def of(cls, bound: Bound, family: Family) -> BestBound:
        """``bound`` as the best of ``family`` (:func:`audit.stats.verdict.best_valid_bound` chooses it).

        Args:
            bound: the bound.
            family: the bounds that competed.

        Returns:
            The block.
        """
        return cls(**{f.name: getattr(bound, f.name) for f in fields(Bound)}, family_size=family.size,
                   family_confidence=family.confidence)


@dataclass(frozen=True, kw_only=True)
class ErrorPoint(Block):
    """An attack's operating point with its confidence box.

    Attributes:
        fpr: false-positive rate.
        fnr: false-negative rate.
        fpr_ci: its interval.
        fnr_ci: its interval.
        label: the point's name in a figure.
        threshold: the score threshold of the point.
    """

    fpr: float
    fnr: float
    fpr_ci: Sequence[float] = constrained(INTERVAL)
    fnr_ci: Sequence[float] = constrained(INTERVAL)
    label: str | None = None
    threshold: float | None = number_or_inf(optional=True)


@dataclass(frozen=True, kw_only=True)
class Roc(Block):
    """An attack's ROC curve (``roc`` of an attack).

    Attributes:
        fpr: false-positive rates.
        tpr: true-positive rates.
    """

    fpr: Sequence[float]
    tpr: Sequence[float]


@dataclass(frozen=True, kw_only=True)
class AttackMetrics(Block):
    """One attack's figures (a value of ``attacks``).

    Attributes:
        auc: area under the ROC (None when undefined).
        tpr_at_fpr: TPR at each FPR target (keys like ``"0.01"``).
        tpr_at_fpr_ci: their intervals.
        roc: the ROC curve.
        advantage: TPR - FPR at the best threshold.
        balanced_accuracy: the mean of TPR and TNR there.
        advantage_ci: the advantage's interval.
        advantage_dp_bound: the largest advantage the claim allows.
        empirical_points: operating points with confidence boxes.
        n_members: members scored.
        n_nonmembers: non-members scored.
        description: the attack in words.
        primary: whether its bound decides the verdict (membership).
        calibrated_on: the models its guesses were calibrated on (membership).
        advantage_ci_low_vs_dp_bound: ``below`` or ``above``: the advantage's lower end against the DP bound
            on it (membership; null without a claim).
        lira_variance: the LiRA variance estimate used (``global`` or ``per-example``).
        reference_models: the reference models it used.
        population: the population records it used (RMIA).
        a: RMIA's mixing parameter for the offline OUT probability.
        a_chosen_on: how ``a`` was chosen.
        auc_ci: a descriptive interval of the AUC (a trained model: Hanley–McNeil).
        blind_auc: the blind split check's AUC beside it (a trained model).
        blind_auc_ci: its interval.
    """

    auc: float | None
    tpr_at_fpr: Mapping[str, float | None]
    tpr_at_fpr_ci: Mapping[str, Sequence[float]] = constrained({"additionalProperties": INTERVAL})
    roc: Roc = nested(Roc)
    advantage: float | None = None
    balanced_accuracy: float | None = None
    advantage_ci: Sequence[float] | None = constrained(INTERVAL, optional=True)
    advantage_dp_bound: float | None = None
    empirical_points: tuple[ErrorPoint, ...] | None = nested(ErrorPoint, LIST, optional=True)
    n_members: int | None = None
    n_nonmembers: int | None = None
    description: str | None = None
    primary: bool | None = None
    calibrated_on: str | None = None
    advantage_ci_low_vs_dp_bound: str | None = None
    lira_variance: str | None = None
    reference_models: int | None = None
    population: int | None = None
    a: float | None = None
    a_chosen_on: str | None = None
    auc_ci: Sequence[float] | None = None
    blind_auc: float | None = None
    blind_auc_ci: Sequence[float] | None = None


@dataclass(frozen=True, kw_only=True)
class Table(Block):
    """A table a runner wrote for its report.

    Attributes:
        title: its title.
        columns: the column names.
        rows: the rows (cells as written).
        caption: what it shows.
    """

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str | None = None


@dataclass(frozen=True, kw_only=True)
class Family(Block):
    """``family``: the bounds that compete for an audit's best bound and their confidence split (Bonferroni):
    ``size`` members, fixed before the target's data is seen, family-wise ``confidence`` (each member's is
    :attr:`member_confidence`). One class: the audits build it to compute their bounds
    (:func:`audit.stats.judgement.judge`) and it is the results block.

    Attributes:
        confidence: the family's confidence.
        size: how many bounds competed.
        split: each member's share of the error, by name.
        text: the split in words.
        one_run_confidence: the confidence the one-run bound holds at within the family (a plugin's one-run
            audit, which shares the family with the accounting check).
    """

    confidence: float
    size: int | None = constrained({"minimum": 1}, optional=True)
    split: Mapping[str, float] | None = None
    text: str | None = None
    one_run_confidence: float | None = None

    def __post_init__(self) -> None:
        from audit.theory.checks import check_confidence  # numpy: not on the --help path, which reads the types

        check_confidence(self.confidence)
        if self.size is not None and (int(self.size) != self.size or self.size < 1):
            raise ValueError(f"a family has at least one member (got {self.size})")

    @property
    def member_confidence(self) -> float:
        """The confidence each competing bound is computed at: ``1 - (1 - confidence)/size``.

        Returns:
            The confidence.
        """
        if self.size is None:
            raise ValueError("a family without a size has no member confidence")
        return 1.0 - (1.0 - self.confidence) / self.size


@dataclass(frozen=True, kw_only=True)
class SplitCheck(Block):
    """``split_check``: a trained model's blind check that its members and non-members were split at random,
    as :func:`audit.stats.split_check.blind_split_check` and :func:`audit.stats.text_split_check.text_split_check`
    return it (one class: the check's result is the block). ``blind_auc`` and ``blind_auc_ci`` are the
    pair-weighted mean of the folds' held-out AUCs and its interval at ``confidence``; ``passed`` is True when
    the interval holds 0.5. The check fills every field; a file of an older version may lack the optional ones.

    Attributes:
        blind_auc: the AUC of a classifier that sees the records only.
        blind_auc_ci: its interval.
        passed: whether the split looks random.
        confidence: the interval's confidence.
        p_value: the p-value of the blind AUC against 0.5.
        n_members: the members given.
        n_nonmembers: the non-members given.
        n_members_used: the members the classifier saw.
        n_nonmembers_used: the non-members it saw.
        subsampled: whether it saw fewer than given.
        folds: cross-validation folds.
        fold_aucs: each fold's held-out AUC.
        pooled_auc: the AUC of the pooled out-of-fold scores (descriptive).
        n_features: the features the classifier saw.
        uses_labels: whether it saw the labels.
        seed: the seed of the folds.
        method: the classifier.
        summary: the check in one line.
    """

    blind_auc: float
    blind_auc_ci: Sequence[float] = constrained(INTERVAL)
    passed: bool
    confidence: float | None = None
    p_value: float | None = None
    n_members: int | None = None
    n_nonmembers: int | None = None
    n_members_used: int | None = None
    n_nonmembers_used: int | None = None
    subsampled: bool | None = None
    folds: int | None = None
    fold_aucs: Sequence[float] | None = None
    pooled_auc: float | None = None
    n_features: int | None = None
    uses_labels: bool | None = None
    seed: int | None = None
    method: str | None = None
    summary: str | None = None


@dataclass(frozen=True, kw_only=True)
class Figure(Block):
    """A figure a runner drew itself (``figures``).

    Attributes:
        file: the PNG in the run directory.
        title: its title.
        caption: what it shows.
    """

    file: str
    title: str
    caption: str


@dataclass(frozen=True, kw_only=True)
class Game(Block):
    """``game``: the audit's game (which canaries, how many runs or draws, what the attacker sees).

    Attributes:
        runs: training runs (dp).
        threat: the threat model (dp).
        canary_kind: the canary (dp, membership).
        threshold_strategy: how the thresholds were chosen (dp, mechanism).
        draws_per_world: draws on each side of the pair (mechanism).
        canaries: canaries (membership, one-run dp).
        one_run: whether the game is one run of the training (dp).
        canary: the canary's description (one-run dp).
        observation: what the attacker sees (dp).
        trainings_text: the trainings the audit ran, in words (one-run dp).
        members: members (a trained model).
        nonmembers: non-members (a trained model).
        membership: how the members were chosen (a trained model).
        reference_records: the records the reference models train on (a trained model).
        included: canaries (or runs) included by their coins.
        inclusion: how they were included.
        trainings: the trainings the audit ran (one-run dp).
        n_train: the training records or texts (a plugin's one-run dp).
        kind: the target's kind (a trained model).
        membership_note: how the members were chosen, in more words (a trained model).
        fine_tuned_in_run: whether the language model was fine-tuned in this run.
        records: the records scored (a trained model).
        reference_models: the reference models (membership).
        population: the population records (membership).
        reference_inclusion: how the canaries join the reference models (membership; null without any).
        shadow_models: the shadow models (membership).
        shadow_train_sizes: their training sizes (membership).
        target_train_size: the target's training size (membership).
        test_size: the held-out records (membership).
        confidence: the confidence of the game's test (mechanism).
        threshold_choice: how the threshold was chosen, in words (mechanism).
        pair_epsilon: the epsilon of the neighbouring pair's own claim (mechanism; null without one).
        pair_claim: that claim in words (mechanism; null without one).
        test_fitted_on: what the test statistic was fitted on (mechanism).
        nominal_claim: the target's nominal claim in words (mechanism).
        nominal_epsilon: its epsilon at ``delta`` (mechanism).
        input_canaries: the input canaries audited in the same training, what they were and what their bound
            found (a plugin's one-run dp with ``--input-canaries``).
    """

    runs: int | None = None
    threat: str | None = None
    canary_kind: str | None = None
    threshold_strategy: str | None = None
    draws_per_world: int | None = None
    canaries: int | None = None
    one_run: bool | None = None
    canary: Mapping[str, Any] | None = None
    observation: Mapping[str, Any] | None = None
    trainings_text: str | None = None
    members: int | None = None
    nonmembers: int | None = None
    membership: str | None = None
    reference_records: str | None = None
    included: int | None = None
    inclusion: str | None = None
    trainings: int | None = None
    n_train: int | None = None
    kind: str | None = None
    membership_note: str | None = None
    fine_tuned_in_run: bool | None = None
    records: str | None = None
    reference_models: int | None = None
    population: int | None = None
    reference_inclusion: str | None = None
    shadow_models: int | None = None
    shadow_train_sizes: Sequence[int] | None = None
    target_train_size: int | None = None
    test_size: int | None = None
    confidence: float | None = None
    threshold_choice: str | None = None
    pair_epsilon: float | None = number_or_inf(optional=True)
    pair_claim: str | None = None
    test_fitted_on: str | None = None
    nominal_claim: str | None = None
    nominal_epsilon: float | None = number_or_inf(optional=True)
    input_canaries: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ExpectedPerfect(Block):
    """``one_run.expected_perfect``: what a perfect attack expects to certify with this design, over
    simulated games.

    Attributes:
        mean: the mean epsilon.
        text: in words.
        sd: its standard deviation.
        games: the simulated games.
        range_5_95: its 5% and 95% quantiles.
        median: its median.
    """

    mean: float
    text: str | None = None
    sd: float | None = None
    games: int | None = None
    range_5_95: Sequence[float] | None = None
    median: float | None = None


@dataclass(frozen=True, kw_only=True)
class LastIterate(Block):
    """``last_iterate``: the last-iterate heuristic [Steinke et al. 2025] of the DP-SGD training the code ran
    (:meth:`LastIterate.of`), what an audit of the final model can expect
    at all; a reference beside the bound, never a bound and never the verdict.

    Attributes:
        epsilon: the heuristic epsilon at ``delta``.
        delta: the run's delta.
        noise_multiplier: sigma of the training.
        sample_rate: its Poisson rate q.
        steps: its steps T.
        text: what it means, in one sentence.
        expected_bound: what a perfect attack on a linear model's final iterate expects with this game's
            canaries and guesses (membership's one-run game; ``mean``, ``sd``, ``range_5_95``, ``games``, ...).
    """

    epsilon: float
    delta: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    text: str
    expected_bound: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any] | None, delta: float | None, neighbouring: str | None = None,
           claim: object = None) -> LastIterate | None:
        """The reference of a DP-SGD training with ``params`` (``noise_multiplier``, ``sample_rate``, ``steps``;
        where they lack them, those of ``claim`` when it is a :class:`audit.theory.dpsgd.DPSGDClaim`), or None
        where the heuristic does not apply: no DP-SGD parameters (or ones it cannot read), no delta, replace-one
        neighbours (the heuristic's pair is add/remove).

        Args:
            params: the run's parameters.
            delta: the run's delta.
            neighbouring: the neighbouring relation in words (None, or one starting ``add``: applies).
            claim: the run's claim.

        Returns:
            The block (no ``expected_bound``), or None.
        """
        # imported here: the accountants behind them are not for every reader of results.json to load
        from audit.theory.claims import Neighbouring
        from audit.theory.dpsgd import DPSGDClaim
        from audit.theory.last_iterate import LAST_ITERATE_MEANING, last_iterate_epsilon

        p = dict(params or {})
        if isinstance(claim, DPSGDClaim) and claim.neighbouring is Neighbouring.ADD_REMOVE:
            p = {"noise_multiplier": claim.noise_multiplier, "sample_rate": claim.sample_rate,
                 "steps": claim.steps} | p
        try:  # a reference never stops a run: parameters it cannot read give none
            sigma, q, steps = float(p.get("noise_multiplier")), float(p.get("sample_rate")), float(p.get("steps"))
            delta = float(delta)
        except (TypeError, ValueError):
            return None
        if not (delta > 0 and 0 < sigma < math.inf and 0 < q <= 1 and steps >= 1 and steps == int(steps)):
            return None
        if neighbouring is not None and not neighbouring.lower().startswith("add"):
            return None
        return cls(epsilon=last_iterate_epsilon(delta, sigma, q, int(steps)), delta=delta, noise_multiplier=sigma,
                   sample_rate=q, steps=int(steps), text=LAST_ITERATE_MEANING)

    def console_line(self) -> str:
        """The line printed after a run."""
        final = (self.expected_bound or {}).get("mean")
        expected = ("" if final is None else f"; a perfect attack on a linear final model expects epsilon >= "
                                             f"{final:.3f} with these guesses")
        return (f"reference: last-iterate heuristic epsilon ~ {self.epsilon:.3f} at delta = {self.delta:g} (Steinke "
                f"et al. 2025: what an audit of the final model can expect; a reference, not a bound){expected}")


@dataclass(frozen=True, kw_only=True)
class OneRun(Block):
    """``one_run``: the one-run f-DP audit of one training (Mahloujifar, Melis, Chaudhuri 2025).

    Attributes:
        canaries: gradient canaries.
        included: those in by their fair coins.
        k_pos: guesses 'in'.
        k_neg: guesses 'out' (none: one-sided guesses).
        correct: right guesses.
        ceiling: the ceiling's epsilon (every guess right).
        claim_rejected: whether the test rejects the claim's own tradeoff curve.
        design: the design's search (:mod:`audit.stats.one_run_design`).
        expected_perfect: the perfect-attack expectation.
        ceiling_text: the ceiling in words.
    """

    canaries: int
    included: int
    k_pos: int
    correct: int
    k_neg: int | None = None
    ceiling: float | None = number_or_inf(optional=True)
    claim_rejected: bool | None = None
    design: Mapping[str, Any] | None = None
    expected_perfect: ExpectedPerfect | None = nested(ExpectedPerfect, optional=True)
    ceiling_text: str | None = None


@dataclass(frozen=True, kw_only=True)
class Finding(Block):
    """One finding of the accounting check (``config_check.findings``).

    Attributes:
        check: which check.
        message: what it found.
        problem: whether it is a problem.
        violation: whether it breaks the claim.
        fix: what to change (empty: nothing).
        details: the check's own numbers.
        read: False when the check could not read what it needs (``message`` says why; older files: None).
        decides: whether the check can void the accounting (unread and deciding: a could-not-read verdict).
    """

    check: str
    message: str
    problem: bool
    violation: bool | None = None
    fix: str | None = None
    details: Mapping[str, Any] | None = None
    read: bool | None = None
    decides: bool | None = None

    @classmethod
    def checked(cls, check: str, problem: bool, violation: bool, message: str, fix: str = "",
                details: Mapping[str, Any] | None = None, *, read: bool = True) -> Finding:
        """A finding of a check that states whether it read what it needs: a ``problem`` is a violation when
        ``violation`` (the check can void the accounting), else a note; a check not ``read`` (``message`` says
        why) has no problem, and one that can void the accounting is then *could-not-read*, never a pass
        (:attr:`unread`).

        Args:
            check: which check.
            problem: whether what it read is a problem.
            violation: whether such a problem voids the accounting (the check decides).
            message: what it found, or why it could not read.
            fix: what to change (empty: nothing).
            details: the check's own numbers.
            read: whether it read what it needs.

        Returns:
            The finding.
        """
        return cls(check=check, problem=bool(problem and read), violation=bool(problem and violation and read),
                   message=message, fix=fix, details=details or {}, read=bool(read), decides=bool(violation))

    @classmethod
    def of(cls, found: ConfigFinding, violation: bool) -> Finding:
        """The finding of a configuration check (:mod:`audit.theory.config_check`, which reads what it needs
        from the configuration itself), by :meth:`checked`: its one conversion to the block.

        Args:
            found: the check's result.
            violation: whether its problem voids the accounting.

        Returns:
            The finding.
        """
        return cls.checked(found.check, found.problem, violation, found.message, found.fix, found.details)

    def sentence(self) -> str:
        """The finding as text: its check, its message and its fix.

        Returns:
            The sentence.
        """
        return f"{self.check}: {self.message}" + (f" Fix: {self.fix.rstrip('.')}." if self.fix else "")

    @property
    def unread(self) -> bool:
        """Whether this is a check that could void the accounting and could not read what it needs (older files
        without ``read``/``decides``: read, and deciding)."""
        return self.read is False and self.decides is not False


@dataclass(frozen=True, kw_only=True)
class ClippingCheck(Block):
    """``config_check.clipping``: whether every step's clipped data sum has norm at most C times its batch size
    (:func:`audit.plugins.accounting.clipping_check` computes it; the same numbers are its finding's details).

    Attributes:
        checked: whether the records of the steps were seen (else nothing was checked; ``message`` says why).
        problem: whether a step's sum is too long (the code does not clip each example to C).
        steps_checked: the steps whose records were seen.
        steps_over: those whose sum exceeds C times the batch size (with the check's slack).
        largest_norm_over_c_times_batch: the largest ratio of a step's sum norm to C times its batch size.
        worst_step: the step furthest over the limit: its sum's ``norm`` and its ``batch`` size.
        message: what the check found, in words.
    """

    checked: bool
    problem: bool
    steps_checked: int | None = None
    steps_over: int | None = None
    largest_norm_over_c_times_batch: float | None = None
    worst_step: Mapping[str, float] | None = None
    message: str


@dataclass(frozen=True, kw_only=True)
class ConfigCheck(Block):
    """``config_check``: the accounting check of a DP-SGD configuration (``--check-config``).

    Attributes:
        status: its outcome.
        trainings: instrumented calls of the training.
        config: the configuration the code runs (with the accountant's ``epsilon``).
        findings: what each check found.
        claimed_epsilon: the claim's epsilon at ``delta``.
        delta: the delta of the check.
        alpha: the check's error budget (its share of the family's).
        alpha_split: that budget's split among the checks' tests.
        noise_measured: the noise read from the code's updates.
        sampling: the sampling test's numbers (null when no test read it).
        clipping: the clipping test's numbers.
        driver: what drove the training (a hooked loop, Opacus).
        n_train: the training records or texts.
        opacus_reported_epsilon: the epsilon Opacus reported for the training, where it ran.
        mechanism: the mechanism the training declares (participation and noise; absent: DP-SGD).
    """

    status: str
    trainings: int | None = None
    config: Mapping[str, Any] | None = None
    findings: tuple[Finding, ...] = nested(Finding, LIST)
    claimed_epsilon: float | None = number_or_inf(optional=True)
    delta: float | None = None
    alpha: float | None = None
    alpha_split: Mapping[str, float] | None = None
    noise_measured: Mapping[str, Any] | None = None
    sampling: Mapping[str, Any] | None = None
    clipping: ClippingCheck | None = nested(ClippingCheck, optional=True)
    driver: str | None = None
    n_train: int | None = None
    opacus_reported_epsilon: float | None = number_or_inf(optional=True)
    mechanism: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class EpsilonBound(Block):
    """``epsilon_bound``: whether a trained model's audit may bound epsilon.

    Attributes:
        allowed: whether it may.
        reason: why (not).
    """

    allowed: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class Inversion(Block):
    """``inversion``: what a model-inversion attack reconstructed.

    Attributes:
        eval_accuracy: an evaluation model's accuracy on the reconstructions.
        chance_accuracy: chance.
        member_gap: the gap between members and non-members.
        reference: the same attack on a reference model.
        queries: the queries the attack made.
        black_box: the black-box attack's figures.
        confidence: the confidence of its intervals.
        config: the attack's settings.
        evaluator: the evaluation model.
        mse_member_mean: the mean squared error of the members' reconstructions.
        mse_nonmember_mean: that of the non-members'.
        ssim_member_mean: the mean SSIM of the members' reconstructions.
        ssim_nonmember_mean: that of the non-members'.
        per_class: each class's figures.
        start_baseline: the same figures for the neutral start, before any step.
    """

    eval_accuracy: float
    chance_accuracy: float
    member_gap: Mapping[str, Any]
    reference: Mapping[str, Any]
    queries: Any
    black_box: Mapping[str, Any] | None = None
    confidence: float | None = None
    config: Mapping[str, Any] | None = None
    evaluator: Mapping[str, Any] | None = None
    mse_member_mean: float | None = None
    mse_nonmember_mean: float | None = None
    ssim_member_mean: float | None = None
    ssim_nonmember_mean: float | None = None
    per_class: Sequence[Any] | None = None
    start_baseline: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ExtractionMethod(Block):
    """One extraction attack's row (``extraction.methods``).

    Attributes:
        method: the attack.
        queries: the queries it made.
        param_rel_error: the stolen parameters' relative error.
        agreement_test: agreement with the target on test records.
        agreement_uniform: agreement on uniform inputs.
        failed: why the attack failed (its row then holds no figures).
        tv_distance: the total-variation distance of the stolen model's outputs from the target's on test records.
        tv_distance_uniform: the same on uniform inputs.
        round_decimals: the decimals the target's outputs were rounded to (null: not rounded).
        details: the attack's own numbers.
    """

    method: str
    queries: Any
    param_rel_error: Any = None
    agreement_test: Any = None
    agreement_uniform: Any = None
    failed: str | None = None
    tv_distance: float | None = None
    tv_distance_uniform: float | None = None
    round_decimals: int | None = None
    details: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Extraction(Block):
    """``extraction``: the main extraction attack's figures and every attack's row.

    Attributes:
        method: the main attack.
        methods: every attack.
        queries: the main attack's queries.
        param_rel_error: its relative parameter error.
        agreement_test: its agreement on test records.
        agreement_uniform: its agreement on uniform inputs.
        d: the input dimension.
        post_processing: what post-processing a DP model's release allows (``text``).
        tv_distance: the main attack's total-variation distance on test records.
        tv_distance_uniform: the same on uniform inputs.
        round_decimals: the decimals the target's outputs were rounded to (null: not rounded).
        rounded: the attacks run on rounded outputs.
        label_only: the label-only attack's figures.
        n_uniform: the uniform inputs of the agreement.
        test_data: the test records of the agreement.
        unknowns: the unknowns of the equations.
    """

    method: str
    methods: tuple[ExtractionMethod, ...] = nested(ExtractionMethod, LIST, schema={"minItems": 1})
    queries: Any
    param_rel_error: Any
    agreement_test: Any
    agreement_uniform: Any
    d: int
    post_processing: Mapping[str, Any] | None = None
    tv_distance: float | None = None
    tv_distance_uniform: float | None = None
    round_decimals: int | None = None
    rounded: Sequence[Any] | None = None
    label_only: Mapping[str, Any] | None = None
    n_uniform: int | None = None
    test_data: str | None = None
    unknowns: int | None = None


@dataclass(frozen=True, kw_only=True)
class ReconstructionPoint(Block):
    """One prior size of a reconstruction audit (``reconstruction.points``; Hayes, Mahloujifar, Balle 2023).

    Attributes:
        n_candidates: candidates the target record is drawn from.
        kappa: the baseline success (1 / n_candidates).
        runs: runs.
        successes: successful reconstructions.
        success: their rate.
        success_ci: its interval.
        rero_bound: the largest success the claim allows (None without a claim).
        record_error_median: the median error of the reconstructed record.
        twin_success: the success rate against the non-private twin.
        twin_success_ci: its interval.
        twin_record_error_median: the twin's median record error.
    """

    n_candidates: int
    kappa: float = constrained({"exclusiveMinimum": 0, "maximum": 1})
    runs: int
    successes: int
    success: float = constrained({"minimum": 0, "maximum": 1})
    success_ci: Sequence[float] = constrained(INTERVAL)
    rero_bound: float | None
    record_error_median: float | None = None
    twin_success: float | None = None
    twin_success_ci: Sequence[float] | None = None
    twin_record_error_median: float | None = None


@dataclass(frozen=True, kw_only=True)
class Reconstruction(Block):
    """``reconstruction``: a reconstruction-robustness audit.

    Attributes:
        threat: ``updates`` or ``white-box``.
        confidence: the family's confidence.
        family: the points that competed.
        points: one per prior size.
        candidates: how the candidates were drawn.
        observation: what the attacker sees.
        meaning: what the result means, in words.
        record_error: how the record error is measured, in words.
        twin: what the non-private twin is, in words.
    """

    threat: str = constrained({"enum": ["updates", "white-box"]})
    confidence: float
    family: Any
    points: tuple[ReconstructionPoint, ...] = nested(ReconstructionPoint, LIST, schema={"minItems": 1})
    candidates: Any
    observation: Any
    meaning: str | None = None
    record_error: str | None = None
    twin: str | None = None


@dataclass(frozen=True, kw_only=True)
class SweepPoint(Block):
    """One point of a sweep's figure (``sweep``).

    Attributes:
        epsilon_theory: the target's claim.
        epsilon_lb: the audit's lower bound.
        series: the series it belongs to.
        method: the bound's method.
    """

    epsilon_theory: float | None = number_or_inf()
    epsilon_lb: float | None = number_or_inf()
    series: str
    method: str


@dataclass(frozen=True, kw_only=True)
class SweepRow(Block):
    """One audited target of a sweep (``rows``).

    Attributes:
        threat: the threat model.
        canary: the canary.
        epsilon_claimed: the epsilon asked for.
        epsilon_theory: the accountant's epsilon.
        epsilon_lb: the audit's lower bound.
        epsilon_lb_valid: the audit's valid lower bound.
        method: its method.
        runs: training runs.
        run_dir: the run's directory.
        verdict: the audit's verdict status.
        valid_method: the method of its valid bound.
        target: the audited target.
        series: the series it belongs to.
        init: the initialisation.
        models: the models trained.
        bounds: its bounds by method.
        details: its best bound's numbers.
        verdict_text: its verdict in words.
    """

    threat: str
    canary: str
    epsilon_claimed: float | None = number_or_inf()
    epsilon_theory: float | None = number_or_inf()
    epsilon_lb: float | None = number_or_inf()
    epsilon_lb_valid: float | None = number_or_inf()
    method: str
    runs: int
    run_dir: str
    verdict: str | None = None
    valid_method: str | None = None
    target: str | None = None
    series: str | None = None
    init: str | None = None
    models: int | None = None
    bounds: Mapping[str, Any] | None = None
    details: Mapping[str, Any] | None = None
    verdict_text: str | None = None


@dataclass(frozen=True, kw_only=True)
class Stamp(Block):
    """When, where and how long a run ran: the keys :meth:`audit.run_context.RunContext.finish` stamps on
    every run (written beside the outcome's own keys).

    Attributes:
        created: when (UTC).
        host: the machine.
        timing: seconds per stage.
        volatile: the keys a rerun may change.
    """

    created: str = constrained({"pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"})
    host: Mapping[str, Any] = constrained({"required": ["python", "platform"]})
    timing: Mapping[str, float] = constrained({"required": ["total_s"]})
    volatile: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class Audited(Block):
    """What was audited: the target in words, its data, its model and parameters, the relation and the
    accountant of its claim (:class:`audit.results_header.ResultsHeader`; written beside the outcome's own keys).

    Attributes:
        target_description: the target in words.
        dataset: the dataset.
        dataset_source: where the dataset came from.
        model: the audited model.
        params: the target's parameters.
        neighbouring: the neighbouring relation.
        accountant: the claim's accountant.
        quick: whether the run used the ``--quick`` preset.
        reproducible: whether a plugin gave the same first outputs twice from one seed.
        reproducibility_note: that check in words.
    """

    target_description: str | None = None
    dataset: str | None = None
    dataset_source: str | None = None
    model: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    neighbouring: str | None = None
    accountant: str | None = None
    quick: bool | None = None
    reproducible: bool | None = None
    reproducibility_note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Judged(Block):
    """What the judgement of the bounds gives beside the verdict and the bounds (:mod:`audit.stats.judgement`),
    and the theory's reference for a training audited through its final model (written beside the outcome's
    own keys).

    Attributes:
        ceiling: the ceiling.
        tradeoff: the claim's tradeoff curve.
        lower_bound_tradeoff: the best bound's tradeoff curve.
        best_estimate: the best estimate (dp).
        family: the verdict family.
        last_iterate: the last-iterate heuristic of a DP-SGD training (a reference, not a bound).
    """

    ceiling: Ceiling | None = nested(Ceiling, optional=True)
    tradeoff: Curve | None = nested(Curve, optional=True)
    lower_bound_tradeoff: Curve | None = nested(Curve, optional=True)
    best_estimate: Bound | None = nested(Bound, optional=True)
    family: Family | None = nested(Family, optional=True)
    last_iterate: LastIterate | None = nested(LastIterate, optional=True)


@dataclass(frozen=True, kw_only=True)
class Detail(Block):
    """The base of a kind's own result block (``RunKind.detail``, the outcome's ``detail``): what the reports
    may ask of any kind's block, answered here for a block that holds none of it. A kind's block answers
    what it holds; the reports never name a kind (``docs/contributing.md``).
    """

    def perfect_expectation(self) -> float | None:
        """What a perfect attack expects to certify with the audit's design (None: the audit simulated none).

        Returns:
            The expected epsilon, or None.
        """
        return None

    def accounting_check(self) -> ConfigCheck | None:
        """The accounting check of the configuration the code runs, whose findings may decide the verdict and
        whose configuration's epsilon the headline figure draws (None: the kind ran none).

        Returns:
            The check, or None.
        """
        return None

    def blind_split(self) -> SplitCheck | None:
        """The blind split check of a trained model's members and non-members, shown beside each attack's AUC
        (None: the audit chose its members itself).

        Returns:
            The check, or None.
        """
        return None

    def roc_band(self) -> bool:
        """Whether the ROC figure draws the confidence band of its points (a game of few canaries).

        Returns:
            True to draw it.
        """
        return False


@dataclass(frozen=True, kw_only=True)
class Outcome(Block):
    """A run's ``results.json``, every kind: the envelope (identity and stamp, what was audited, the claim
    and the bounds, the judgement, the attacks and their game, the tables and figures) and the kind's own block
    (``detail``). The file holds every key flat: the groups' keys (``stamp``, ``audited``, ``judged``) and
    the detail's beside the envelope's own (:func:`audit.stats.blocks.flat`).

    Attributes:
        schema_version: the format's version.
        kind: the run kind.
        target: the audited target.
        seed: the run's seed.
        stamp: when, where and how long it ran (``created``, ``host``, ``timing``, ``volatile``).
        audited: what was audited (``target_description``, ``dataset``, ``params``, ...).
        verdict: the verdict.
        lower_bounds: every bound.
        best_lower_bound: the best valid bound of the verdict's family.
        epsilon_theory: the claim's epsilon at ``delta`` (None without a claim).
        delta: the delta the epsilons are read at.
        confidence: the verdict family's confidence.
        judged: the ceiling, the tradeoff curves, the best estimate, the family, the last-iterate reference.
        primary_attack: the attack whose bound decides the verdict.
        attacks: each attack's figures.
        game: the game.
        tables: the runner's tables.
        figures: the runner's figures.
        detail: the kind's own result block, of the type its record names (``RunKind.detail``; its keys are
            written beside the envelope's, and :func:`audit.results_file.outcome_of` reads them into it by
            ``kind``); None for a kind that names none.
    """

    schema_version: int
    kind: str
    target: str
    seed: int
    stamp: Stamp = flat(Stamp)
    audited: Audited = flat(Audited)
    verdict: Verdict = nested(Verdict)
    lower_bounds: tuple[Bound, ...] = nested(Bound, LIST)
    best_lower_bound: BestBound | None = nested(BestBound)
    epsilon_theory: float | None = number_or_inf()
    delta: float | None
    confidence: float
    judged: Judged = flat(Judged)
    primary_attack: str | None = None
    attacks: Mapping[str, AttackMetrics] | None = nested(AttackMetrics, MAP, optional=True)
    game: Game | None = nested(Game, optional=True)
    tables: tuple[Table, ...] | None = nested(Table, LIST, optional=True)
    figures: tuple[Figure, ...] | None = nested(Figure, LIST, optional=True)
    detail: Block | None = flat(None, optional=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = False, detail: type[Block] | None = None) -> Self:
        """The outcome of a results object; ``detail`` is the type of its kind's own block, whose keys are read
        from beside the envelope's (None: the kind names none).

        Args:
            data: the object.
            strict: refuse a key no field names (:meth:`Block.from_dict`).
            detail: the kind's block type (:attr:`audit.kinds.RunKind.detail`).

        Returns:
            The outcome.
        """
        own = set(detail.keys()) if detail is not None else set()
        outcome = super().from_dict({k: v for k, v in data.items() if k not in own}, strict=strict)
        if detail is None:
            return outcome
        return replace(outcome, detail=detail.from_dict({k: v for k, v in data.items() if k in own}, strict=strict))

    @classmethod
    def clashes(cls, detail: type[Block]) -> tuple[str, ...]:
        """The keys of a kind's block that are also the envelope's: its keys are written beside the envelope's,
        so a kind's block may name none of them (the schema's generation refuses one that does).

        Args:
            detail: the kind's block type.

        Returns:
            The shared keys, in the block's field order (empty: none).
        """
        envelope = set(cls.keys())
        return tuple(key for key in detail.keys() if key in envelope)

    @property
    def kind_detail(self) -> Detail:
        """The kind's block as the reports ask it (:class:`Detail`): the block itself where it is one, else a
        block that answers nothing.

        Returns:
            The block.
        """
        return self.detail if isinstance(self.detail, Detail) else Detail()

    def claim_rejecting_bound(self) -> Bound | None:
        """The first bound whose test rejected the claim's own tradeoff curve (``details.claim_rejected``).

        Returns:
            The bound, or None.
        """
        return next((b for b in self.lower_bounds if (b.details or {}).get("claim_rejected")), None)


@dataclass(frozen=True, kw_only=True)
class CompareRow(Block):
    """One attack of one run in a comparison (``compare.json`` ``rows``).

    Attributes:
        run: the run's label.
        run_dir: its directory.
        target: its target.
        attack: the attack.
        auc: its AUC.
        tpr_1: TPR at 1% FPR.
        tpr_01: TPR at 0.1% FPR.
        advantage: its advantage.
        epsilon_theory: the run's claim.
        best_epsilon_lower_bound: the run's best bound.
        delta: the run's delta.
        tpr_1_ci: the interval of ``tpr_1``.
        tpr_01_ci: the interval of ``tpr_01``.
        advantage_ci: the advantage's interval.
        advantage_dp_bound: the largest advantage the claim allows.
    """

    run: str
    run_dir: str
    target: str
    attack: str
    auc: float | None
    tpr_1: float | None
    tpr_01: float | None
    advantage: float | None
    epsilon_theory: float | None = number_or_inf()
    best_epsilon_lower_bound: float | None = number_or_inf()
    delta: float | None
    tpr_1_ci: Sequence[float] | None
    tpr_01_ci: Sequence[float] | None
    advantage_ci: Sequence[float] | None
    advantage_dp_bound: float | None


@dataclass(frozen=True, kw_only=True)
class Comparison(Block):
    """``compare.json``: runs side by side.

    Attributes:
        runs: the run directories.
        rows: one per attack and run.
        figure: the comparison's figure.
        html: its page.
    """

    runs: Sequence[str]
    rows: tuple[CompareRow, ...] = nested(CompareRow, LIST)
    figure: str
    html: str
