"""What an audit found, typed: the blocks of ``results.json`` (``audit/schemas/results.schema.json``) as
frozen, keyword-only dataclasses (:class:`audit.stats.blocks.Block`), from a bound to the whole run
(:class:`Outcome`) and a comparison of runs (:class:`Comparison`).

Each block's fields are the keys its schema definition names (a test checks the two against each other,
both ways); a field is required exactly where every file of that kind writes the key, and the schema's
open objects (a bound's ``details``, a run's ``params``, ``model``, ``host``, ``timing``) are named
``Mapping`` fields. :meth:`Block.to_dict` writes the object ``results.json`` holds,
:meth:`Block.from_dict` reads it back (``audit.results_file`` validates a file against the schema first);
a read and a write give the same bytes. The verdict, the roles of the bounds and the family's confidence
split are those of :mod:`audit.stats.verdict` and :mod:`audit.stats.lower_bound` (``docs/references.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.stats.blocks import LIST, MAP, Block, nested, number_or_inf

__all__ = [
    "Verdict", "Ceiling", "Curve", "Bound", "BestBound", "ErrorPoint", "Roc", "AttackMetrics", "Table",
    "Family", "SplitCheck", "Figure", "Game", "ExpectedPerfect", "LastIterate", "OneRun", "Finding", "ConfigCheck",
    "EpsilonBound", "Inversion", "ExtractionMethod", "Extraction", "ReconstructionPoint", "Reconstruction",
    "SweepPoint", "SweepRow", "Outcome", "CompareRow", "Comparison",
]


@dataclass(frozen=True, kw_only=True)
class Verdict(Block):
    """``verdict`` (``$defs/verdict``): how the best bound compares with the claim.

    Attributes:
        status: ``consistent``, ``violation``, ``no-claim`` or ``could-not-read`` (a check that could void the
            accounting was not read).
        text: the verdict in words.
        source: what decided it when not the bounds (``config_check``).
    """

    status: str
    text: str
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class Ceiling(Block):
    """``ceiling`` (``$defs/ceiling``): what a perfect attack in the same game could certify.

    Attributes:
        epsilon: the ceiling's epsilon (None when no bound has one).
        text: the ceiling in words.
    """

    epsilon: float | None = number_or_inf()
    text: str


@dataclass(frozen=True, kw_only=True)
class Curve(Block):
    """A tradeoff curve (``$defs/curve``): beta(alpha) on an FPR grid.

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
    """One empirical lower bound (``$defs/bound``, one row of ``lower_bounds``; built by
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
    role: str
    statement: str
    attack: str | None = None
    details: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class BestBound(Bound):
    """``best_lower_bound`` (``$defs/best_bound``): the best valid bound of the verdict's family.

    Attributes:
        family_size: how many bounds competed.
        family_confidence: the confidence the best one holds at across the family.
    """

    family_size: int
    family_confidence: float


@dataclass(frozen=True, kw_only=True)
class ErrorPoint(Block):
    """An attack's operating point with its confidence box (``$defs/point``).

    Attributes:
        fpr: false-positive rate.
        fnr: false-negative rate.
        fpr_ci: its interval.
        fnr_ci: its interval.
        label: the point's name in a figure.
    """

    fpr: float
    fnr: float
    fpr_ci: Sequence[float]
    fnr_ci: Sequence[float]
    label: str | None = None


@dataclass(frozen=True, kw_only=True)
class Roc(Block):
    """An attack's ROC curve (``$defs/attack`` ``roc``).

    Attributes:
        fpr: false-positive rates.
        tpr: true-positive rates.
    """

    fpr: Sequence[float]
    tpr: Sequence[float]


@dataclass(frozen=True, kw_only=True)
class AttackMetrics(Block):
    """One attack's figures (``$defs/attack``, a value of ``attacks``).

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
    """

    auc: float | None
    tpr_at_fpr: Mapping[str, float | None]
    tpr_at_fpr_ci: Mapping[str, Sequence[float]]
    roc: Roc = nested(Roc)
    advantage: float | None = None
    balanced_accuracy: float | None = None
    advantage_ci: Sequence[float] | None = None
    advantage_dp_bound: float | None = None
    empirical_points: tuple[ErrorPoint, ...] | None = nested(ErrorPoint, LIST, optional=True)
    n_members: int | None = None
    n_nonmembers: int | None = None


@dataclass(frozen=True, kw_only=True)
class Table(Block):
    """A table a runner wrote for its report (``$defs/table``).

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
    """``family``: the bounds that competed for the verdict and their confidence split (Bonferroni).

    Attributes:
        confidence: the family's confidence.
        size: how many bounds competed.
        split: each member's share of the error, by name.
        text: the split in words.
    """

    confidence: float
    size: int | None = None
    split: Mapping[str, float] | None = None
    text: str | None = None


@dataclass(frozen=True, kw_only=True)
class SplitCheck(Block):
    """``split_check``: a trained model's blind check that its members and non-members were split at random
    (:mod:`audit.stats.split_check`).

    Attributes:
        blind_auc: the AUC of a classifier that sees the records only.
        blind_auc_ci: its interval.
        passed: whether the split looks random.
        confidence: the interval's confidence.
    """

    blind_auc: float
    blind_auc_ci: Sequence[float]
    passed: bool
    confidence: float | None = None


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
    """

    mean: float
    text: str | None = None
    sd: float | None = None
    games: int | None = None
    range_5_95: Sequence[float] | None = None


@dataclass(frozen=True, kw_only=True)
class LastIterate(Block):
    """``last_iterate``: the last-iterate heuristic [Steinke et al. 2025] of the DP-SGD training the code ran
    (:func:`audit.theory.last_iterate.last_iterate_reference`), what an audit of the final model can expect
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


@dataclass(frozen=True, kw_only=True)
class Finding(Block):
    """One finding of the accounting check (``config_check.findings``).

    Attributes:
        check: which check.
        message: what it found.
        problem: whether it is a problem.
        violation: whether it breaks the claim.
        read: False when the check could not read what it needs (``message`` says why; older files: None).
    """

    check: str
    message: str
    problem: bool
    violation: bool | None = None
    read: bool | None = None


@dataclass(frozen=True, kw_only=True)
class ConfigCheck(Block):
    """``config_check``: the accounting check of a DP-SGD configuration (``--check-config``).

    Attributes:
        status: its outcome.
        trainings: instrumented calls of the training.
        config: the configuration the code runs (with the accountant's ``epsilon``).
        findings: what each check found.
    """

    status: str
    trainings: int | None = None
    config: Mapping[str, Any] | None = None
    findings: tuple[Finding, ...] = nested(Finding, LIST)


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
    """

    eval_accuracy: float
    chance_accuracy: float
    member_gap: Mapping[str, Any]
    reference: Mapping[str, Any]
    queries: Any
    black_box: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ExtractionMethod(Block):
    """One extraction attack's row (``extraction.methods``).

    Attributes:
        method: the attack.
        queries: the queries it made.
        param_rel_error: the stolen parameters' relative error.
        agreement_test: agreement with the target on test records.
        agreement_uniform: agreement on uniform inputs.
    """

    method: str
    queries: Any
    param_rel_error: Any
    agreement_test: Any
    agreement_uniform: Any


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
    """

    method: str
    methods: tuple[ExtractionMethod, ...] = nested(ExtractionMethod, LIST)
    queries: Any
    param_rel_error: Any
    agreement_test: Any
    agreement_uniform: Any
    d: int
    post_processing: Mapping[str, Any] | None = None


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
    """

    n_candidates: int
    kappa: float
    runs: int
    successes: int
    success: float
    success_ci: Sequence[float]
    rero_bound: float | None


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
    """

    threat: str
    confidence: float
    family: Any
    points: tuple[ReconstructionPoint, ...] = nested(ReconstructionPoint, LIST)
    candidates: Any
    observation: Any
    meaning: str | None = None


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


@dataclass(frozen=True, kw_only=True)
class Outcome(Block):
    """A run's ``results.json``, every kind (``$defs/run``): the envelope, the claim and the bounds, the
    verdict, and the kind's own blocks (None where the kind has none).

    Attributes:
        schema_version: the format's version.
        kind: the run kind.
        target: the audited target.
        seed: the run's seed.
        created: when (UTC).
        host: the machine.
        timing: seconds per stage.
        volatile: the keys a rerun may change.
        verdict: the verdict.
        lower_bounds: every bound.
        best_lower_bound: the best valid bound of the verdict's family.
        epsilon_theory: the claim's epsilon at ``delta`` (None without a claim).
        delta: the delta the epsilons are read at.
        confidence: the verdict family's confidence.
        target_description: the target in words.
        dataset: the dataset.
        model: the audited model.
        params: the target's parameters.
        neighbouring: the neighbouring relation.
        accountant: the claim's accountant.
        primary_attack: the attack whose bound decides the verdict.
        attacks: each attack's figures.
        ceiling: the ceiling.
        last_iterate: the last-iterate heuristic of a DP-SGD training (a reference, not a bound).
        tradeoff: the claim's tradeoff curve.
        lower_bound_tradeoff: the best bound's tradeoff curve.
        best_estimate: the best estimate (dp).
        game: the game.
        tables: the runner's tables.
        figures: the runner's figures.
        family: the verdict family.
        split_check: a trained model's split check.
        epsilon_bound: whether a trained model's audit may bound epsilon.
        meaning: what a trained model's audit found, in words.
        trained_lm: a language model's membership audit: the target as audited (``TrainedLM.to_dict``).
        one_run: a one-run dp audit.
        config_check: a dp accounting check.
        inversion: an inversion audit.
        extraction: an extraction audit.
        reconstruction: a reconstruction audit.
        sweep: a sweep's points.
        rows: a sweep's audited targets.
    """

    schema_version: int
    kind: str
    target: str
    seed: int
    created: str
    host: Mapping[str, Any]
    timing: Mapping[str, float]
    volatile: Sequence[str]
    verdict: Verdict = nested(Verdict)
    lower_bounds: tuple[Bound, ...] = nested(Bound, LIST)
    best_lower_bound: BestBound | None = nested(BestBound)
    epsilon_theory: float | None = number_or_inf()
    delta: float | None
    confidence: float
    target_description: str | None = None
    dataset: str | None = None
    model: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    neighbouring: str | None = None
    accountant: str | None = None
    primary_attack: str | None = None
    attacks: Mapping[str, AttackMetrics] | None = nested(AttackMetrics, MAP, optional=True)
    ceiling: Ceiling | None = nested(Ceiling, optional=True)
    last_iterate: LastIterate | None = nested(LastIterate, optional=True)
    tradeoff: Curve | None = nested(Curve, optional=True)
    lower_bound_tradeoff: Curve | None = nested(Curve, optional=True)
    best_estimate: Bound | None = nested(Bound, optional=True)
    game: Game | None = nested(Game, optional=True)
    tables: tuple[Table, ...] | None = nested(Table, LIST, optional=True)
    figures: tuple[Figure, ...] | None = nested(Figure, LIST, optional=True)
    family: Family | None = nested(Family, optional=True)
    split_check: SplitCheck | None = nested(SplitCheck, optional=True)
    epsilon_bound: EpsilonBound | None = nested(EpsilonBound, optional=True)
    meaning: str | None = None
    trained_lm: Mapping[str, Any] | None = None
    one_run: OneRun | None = nested(OneRun, optional=True)
    config_check: ConfigCheck | None = nested(ConfigCheck, optional=True)
    inversion: Inversion | None = nested(Inversion, optional=True)
    extraction: Extraction | None = nested(Extraction, optional=True)
    reconstruction: Reconstruction | None = nested(Reconstruction, optional=True)
    sweep: tuple[SweepPoint, ...] | None = nested(SweepPoint, LIST, optional=True)
    rows: tuple[SweepRow, ...] | None = nested(SweepRow, LIST, optional=True)

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
    """``compare.json`` (``$defs/compare``): runs side by side.

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
