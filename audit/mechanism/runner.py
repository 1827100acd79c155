"""Mechanism audit: sample a mechanism on its neighbouring pair and bound its epsilon from below.

``python -m audit run mechanism --target NAME`` draws ``draws`` outputs of the mechanism on each
dataset of its worst-case neighbouring pair (D0 without, D1 with the target record; seeded
generators, vectorised), maps every output to the mechanism's test statistic (a monotone
likelihood-ratio score, so threshold tests are Neyman–Pearson optimal), and runs the threshold
audit of :func:`audit.stats.thresholds.threshold_bounds` (Bonferroni over thresholds placed at
error counts fixed in advance): the Clopper–Pearson and Gaussian-DP bounds come from one family of
simultaneous rate bounds, so the best of them holds at the stated confidence [Jagielski, Ullman,
Oprea 2020; Nasr et al. 2021; Nasr et al. 2023 for the GDP estimator]. The bound is compared with
the mechanism's proven claim and, to show how tight the audit is, with the exact privacy of the
pair itself (the best any test can reach).

Works for the textbook mechanisms (:mod:`targets.mechanisms`), DP-ERM output perturbation
(:mod:`targets.dperm`, white-box: the released parameters projected on the minimiser shift) and
user plugins (:mod:`targets.plugins.mechanism`: the statistic learned on separate draws, the
plugin's reproducibility checked, its packages recorded in config.json). The same rate bounds test
the claim's own tradeoff curve; against a mu-GDP claim that is exactly "mu_lb > mu" (the GDP row's
epsilon stays an estimate unless the output is Gaussian)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from audit.choices import MECHANISM_DRAWS
from audit.errors import UserError
from audit.results_header import ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_results import RunResults
from audit.stats.judgement import judge
from audit.stats.metrics import attack_metrics
from audit.stats.outcome import Bound, Game, Outcome
from audit.stats.rates import operating_point
from audit.stats.thresholds import choose_strategy, threshold_bounds
from audit.stats.verdict import Family
from audit.target_theory import IMPLIED_MU, build_mechanism, check_privacy_args, gdp_summary, tradeoff_alphas
from audit.theory.checks import check_confidence
from audit.theory.claims import PURE_DP_DELTA, PrivacyClaim
from targets.catalogue import resolve
from targets.mechanisms import Mechanism
from targets.plugins.loading import MechanismPlugin, plugin_config
from targets.plugins.mechanism import PluginMechanism
from targets.plugins.rng import reproducibility_lines

#: Draws are made in chunks of this size so progress can be shown and memory stays small.
CHUNK = 25_000
#: Draws per world used to learn the test of a mechanism without a known statistic (plugins).
FIT_DRAWS = 20_000
#: Name of the single "attack" of a mechanism audit in results.json.
ATTACK_NAME = "threshold"


@dataclass(frozen=True, kw_only=True)
class MechanismOptions:
    """Everything that determines a mechanism audit (stored in config.json)."""

    target: str
    out: str = "runs"
    seed: int = 0
    quick: bool = False
    epsilon: float | None = None
    delta: float | None = None
    quiet: bool = False
    draws: int = MECHANISM_DRAWS
    confidence: float = 0.95


def resolve_mechanism(name: str, epsilon: float | None, delta: float | None) -> tuple[Mechanism, float]:
    """The mechanism named ``name`` (textbook or DP-ERM) and the delta at which to audit it.

    Pure-DP mechanisms are audited at ``PURE_DP_DELTA`` unless ``delta`` is given; Gaussian
    mechanisms and DP-ERM at their own delta.
    """
    check_privacy_args(epsilon, delta)
    try:
        entry = resolve(name)
    except UserError:
        raise UserError(f"unknown mechanism target {name!r}; run `python -m audit list` to see the mechanisms") \
            from None
    if entry.family == "plugin":
        plugin = entry.factory()
        if not isinstance(plugin, MechanismPlugin):
            raise UserError(f"plugin {name} is a trainer; audit it with `python -m audit run dp --target {name}`")
        if epsilon is not None or delta is not None:
            raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
        mech = PluginMechanism(plugin)
        return mech, mech.delta
    if entry.family == "control" and (epsilon is not None or delta is not None):
        raise UserError("--epsilon/--delta do not apply to the broken controls: each has a fixed claim")
    if entry.family == "trained":
        raise UserError(f"target {name} is a trained model, not a mechanism; audit it with "
                        f"`python -m audit run membership --target {name}`")
    return build_mechanism(entry, epsilon, delta)


def _chunks(mech: Mechanism, dataset, n: int, rng: np.random.Generator, progress: tqdm | None) -> Iterator[np.ndarray]:
    """``n`` outputs of ``mech`` on ``dataset`` from ``rng``, in chunks of at most ``CHUNK``."""
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        yield mech.sample(dataset, m, rng)
        if progress is not None:
            progress.update(m)


def draw_scores(mech: Mechanism, dataset, n: int, rng: np.random.Generator, progress: tqdm | None) -> np.ndarray:
    """Scores of ``n`` outputs of ``mech`` on ``dataset``, drawn in chunks from ``rng``."""
    return np.concatenate([mech.score(chunk) for chunk in _chunks(mech, dataset, n, rng, progress)])


def gdp_in_mu_space(bound: Bound, claim: PrivacyClaim) -> Bound:
    """Attach the claim's Gaussian-DP mu to a GDP bound row, and drop its epsilon where neither
    the pair nor the claim is Gaussian-shaped.

    The GDP row's ``mu_lb`` is a rigorous lower bound on the mu of any G_mu the mechanism's
    tradeoff lies above [Nasr et al. 2023, Sec. 4]; it is compared with the claim's mu. Its
    epsilon, though, reads epsilon(delta) off G_{mu_lb}, which is only meaningful when the
    mechanism's tradeoff is Gaussian (Gaussian mechanism, DP-ERM, DP-SGD): for Laplace or
    randomized response the Gaussian extrapolation to delta = 1e-5 exceeds the true epsilon, so
    for those claims the row reports mu only (epsilon None). When the mechanism's score is
    Gaussian with a known, equal variance in both worlds (``Mechanism.gaussian_output``: Gaussian
    mechanism, DP-ERM output perturbation) the row is already valid: the pair's tradeoff *is* G_mu.
    """
    mu_claim, how = gdp_summary(claim)
    details = dict(bound.details) | {"mu_claim": mu_claim, "mu_claim_method": how}
    if bound.epsilon is None:  # audited at delta 0
        details["epsilon_omitted"] = "G_mu has no finite epsilon at delta 0; compare mu_lb with mu_claim"
        return replace(bound, details=details)
    if not bound.valid and how == IMPLIED_MU:
        details["epsilon_omitted"] = ("the claim's tradeoff is not Gaussian, so epsilon(delta) of G_mu_lb says "
                                      "nothing about it; compare mu_lb with mu_claim")
        return replace(bound, epsilon=None, details=details)
    return replace(bound, details=details)


def mechanism_bounds(mech: Mechanism, scores_out: np.ndarray, scores_in: np.ndarray, delta: float,
                     confidence: float, seed: int) -> tuple[tuple, list[Bound], Family]:
    """The statistics of a mechanism audit: the threshold strategy chosen from the draw counts, the
    Clopper–Pearson and GDP rows (one family of simultaneous rate bounds, so one family member; the
    GDP row is valid when the mechanism's output is Gaussian) as results rows with the claim's mu
    attached; the Clopper–Pearson row also tests the claim's own tradeoff curve. Returns (the
    LowerBound pair, the rows, the verdict's family)."""
    family = Family(size=1, confidence=confidence)
    strategy = choose_strategy(scores_in.size, scores_out.size)
    scores = np.concatenate([scores_out, scores_in])
    members = np.concatenate([np.zeros(scores_out.size, bool), np.ones(scores_in.size, bool)])
    gaussian = bool(getattr(mech, "gaussian_output", False))
    found = threshold_bounds(scores, members, delta, family.member_confidence, strategy,
                             np.random.default_rng([seed, 2]), gaussian_pair=gaussian,
                             claim_tradeoff=mech.claim.tradeoff)
    rows = [gdp_in_mu_space(b.block(ATTACK_NAME), mech.claim) if b.method == "gdp" else b.block(ATTACK_NAME)
            for b in found]
    return found, rows, family


def run_mechanism(opts: MechanismOptions, mechanism: Mechanism | None = None) -> tuple[Path, Outcome]:
    """Run the mechanism audit described by ``opts``; returns (run directory, outcome).

    ``mechanism`` audits that object (e.g. a plugin built from a dict by :mod:`audit.testing`)
    instead of resolving ``opts.target``, which then only names it.
    """
    if opts.draws < 2:
        raise UserError(f"--draws must be at least 2 (got {opts.draws}); the audit needs 10^5 for a useful bound")
    check_confidence(opts.confidence)
    if mechanism is None:
        mech, delta = resolve_mechanism(opts.target, opts.epsilon, opts.delta)
    else:
        mech, delta = mechanism, float(getattr(mechanism, "delta", PURE_DP_DELTA))
    name = mech.plugin.name if isinstance(mech, PluginMechanism) else opts.target
    ctx = RunContext(opts.out, "mechanism", name, seed=opts.seed, quiet=opts.quiet)
    with ctx:
        return ctx.run_dir, _audit(ctx, opts, mech, delta)


def _audit(ctx: RunContext, opts: MechanismOptions, mech: Mechanism, delta: float) -> Outcome:
    config = {"command": "run mechanism", "options": asdict(opts), "mechanism": mech.to_dict()}
    ctx.say(f"auditing {mech.description} with {opts.draws} draws per world")

    d0, d1 = mech.neighbouring_pair()
    timing = ctx.timing
    t0 = time.perf_counter()
    check = None
    if isinstance(mech, PluginMechanism):  # the user's code: record what it imported, check it uses its seed
        config["plugin"] = plugin_config(mech.plugin)
        check = mech.check_reproducible(opts.seed)
    fit_draws = 0
    if hasattr(mech, "fit_score"):  # statistic unknown: learn it on separate draws (audit.stats.score_fit)
        fit_draws = min(opts.draws, FIT_DRAWS)
        with tqdm(total=2 * fit_draws, desc="fitting the test", unit="draw", disable=opts.quiet) as bar:
            mech.fit_score(*(np.concatenate(list(_chunks(mech, d, fit_draws, ctx.rng(k), bar)))
                             for d, k in ((d0, 3), (d1, 4))))
    with tqdm(total=2 * opts.draws, desc="sampling", unit="draw", disable=opts.quiet) as bar:
        s0 = draw_scores(mech, d0, opts.draws, np.random.default_rng([opts.seed, 0]), bar)
        s1 = draw_scores(mech, d1, opts.draws, np.random.default_rng([opts.seed, 1]), bar)
    timing["sampling_s"] = time.perf_counter() - t0

    scores = np.concatenate([s0, s1])
    members = np.concatenate([np.zeros(opts.draws, bool), np.ones(opts.draws, bool)])
    t0 = time.perf_counter()
    claim = mech.claim
    found, bounds, family = mechanism_bounds(mech, s0, s1, delta, opts.confidence, opts.seed)
    timing["bounds_s"] = time.perf_counter() - t0

    metrics = replace(attack_metrics(scores, members, opts.confidence), empirical_points=tuple(
        operating_point(f"{b.method} test ({b.details['rule']})", b.details, opts.confidence) for b in found),
        description="threshold test on the mechanism's likelihood-ratio statistic (Neyman-Pearson)")

    judgement = judge(bounds, claim=claim, delta=delta, alpha=tradeoff_alphas(), family=family)
    pair = mech.pair_claim()
    pair_epsilon = None if pair is None else float(pair.epsilon(delta))
    nominal = mech.nominal_claim
    header = ResultsHeader(description=mech.description, dataset=None, neighbouring=mech.neighbouring, delta=delta,
                           confidence=opts.confidence, accountant=accountant(claim),
                           params=mech.params() | {"sensitivity": mech.sensitivity})
    game = Game(draws_per_world=opts.draws, threshold_strategy=found[0].details["strategy"],
                confidence=opts.confidence, threshold_choice=found[0].details["choice"],
                pair_epsilon=pair_epsilon, pair_claim=None if pair is None else pair.description,
                test_fitted_on=f"{fit_draws} separate draws per world" if fit_draws else "known statistic",
                nominal_claim=nominal.description, nominal_epsilon=float(nominal.epsilon(delta)),
                nulls=frozenset({"pair_epsilon", "pair_claim"} if pair is None else ()))
    results = RunResults(header=header, judgement=judgement,
                         attacks={ATTACK_NAME: metrics}, game=game,
                         quick=opts.quick, tables=None if check is None else (check.table(),),
                         reproducible=None if check is None else check.reproducible,
                         reproducibility_note=None if check is None else check.note)
    return ctx.finish(results, config)


def summary_lines(run_dir: Path, outcome: Outcome) -> list[str]:
    """The few lines printed at the end of a mechanism audit.

    Args:
        run_dir: the run's directory.
        outcome: the run's outcome.

    Returns:
        The lines.
    """
    game = outcome.game
    pair_epsilon = game.pair_epsilon
    pair = "" if pair_epsilon is None else f"; the pair itself allows {float(pair_epsilon):.4f}"
    lines = [f"theory:    epsilon = {outcome.epsilon_theory:.4f} at delta = {outcome.delta:g} "
             f"({outcome.audited.accountant}){pair}"]
    for bound in outcome.lower_bounds:
        d = bound.details or {}
        if bound.method == "gdp":  # details hold infinities as results.json does ("inf"): read through float
            claim_mu = (f"claim: mu <= {float(d['mu_claim']):.4f}, {d['mu_claim_method']}"
                        if math.isfinite(float(d["mu_claim"])) else "the claim implies no mu-GDP")
            if bound.epsilon is None:
                eps = ""
            elif bound.valid:
                eps = f", epsilon >= {bound.epsilon:.4f} (valid: the output is Gaussian)"
            else:
                eps = f", epsilon >= {bound.epsilon:.4f} if the tradeoff is Gaussian"
            what = f"mu >= {float(d['mu_lb']):.4f} ({claim_mu}){eps}"
        else:
            what = f"epsilon >= {bound.epsilon:.4f}"
        lines.append(f"empirical: {what} ({bound.method}, {bound.confidence:.0%} confidence; FPR "
                     f"{d['fp']}/{d['n_neg']}, FNR {d['fn']}/{d['n_pos']} of {game.draws_per_world} draws "
                     f"per world, {d['strategy']})")
    lines.append(f"verdict:   {outcome.verdict.status}: {outcome.verdict.text}")
    lines += reproducibility_lines(outcome.audited.reproducible, outcome.audited.reproducibility_note)
    lines.append(f"report:    {run_dir / 'report.html'}")
    if outcome.best_lower_bound is None:
        lines.insert(1, "empirical: no valid lower bound")
    return lines
