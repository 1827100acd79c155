"""Design of a one-run DP-SGD audit with gradient canaries, by simulating the claimed mechanism
[Steinke, Nasr, Jagielski 2023, Sec. 6; Mahloujifar, Melis, Chaudhuri 2025].

The game. M gradient canaries, each in the training by its own fair coin, each a record the training
treats like any other: at every step t it joins the batch with the Poisson rate q (``b_t`` ~
Bernoulli(q)), it is clipped to C, and N(0, sigma^2 C^2) noise is added to the sum. The instrumented
auditor knows the clipped data sum, so the noisy sum minus it, projected on canary i's unit
direction and divided by C, is exactly ``o_t = b_t + N(0, sigma^2)`` when the canary is in and
``o_t = N(0, sigma^2)`` when it is out. The one-run game is therefore exactly M independent draws of
the claimed DP-SGD (the pair "with / without one record"), and the best score of a canary is that
pair's log-likelihood ratio (:func:`dpsgd_canary_llr`; Neyman-Pearson).

What this module fixes before the audited training runs, from the claim alone (never from the
audited coins or scores, so the one-run bounds computed with it stay valid whatever the code does):

* the guess counts: "in" for the ``k_pos`` highest scores, and either no "out" guess (one-sided) or
  "out" for as many lowest scores (two-sided, ``k_neg = k_pos``; valid for both one-run tests, see
  :mod:`audit.stats.one_run.fdp`), the shape maximising the mean (or median) bound over simulated
  games (:func:`choose_one_run_design`). For subsampled DP-SGD the "out" side has no tail (an
  included canary joins few steps), so one-sided guesses usually win; for full-batch DP-GD (q = 1) and
  the plain Gaussian mechanism the two tails are mirror images and two-sided guesses win;
* the expected bound of a perfect attack (the optimal LLR score) with this M, and its spread, on
  simulations separate from those that chose the guesses; and the ceiling (every guess right);
* a default number of canaries (:func:`default_canary_count`).

The games are drawn from the score's law computed once per mechanism
(:func:`audit.stats.canary_score_distribution.score_distribution`: M draws per game instead of M x T
simulated observations, :func:`simulated_games`), each bound at a guess count and a number right is
computed once (:func:`cached_bound`), and only the guess shapes whose bound at their mean number right
is within :data:`SCREEN_FRACTION` of the best such bound are evaluated game by game (:func:`_criterion`:
the others cannot be chosen, and the long recursions of many guesses are skipped), so a design from
hundreds of games takes seconds.

Sources: docs/references.md, "One-run auditing".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from audit.errors import UserError
from audit.stats.canary_score_distribution import score_distribution
from audit.stats.one_run.fdp import fdp_epsilon_lb, fdp_mu_lb
from audit.stats.one_run.steinke import one_run_epsilon_lb
from audit.theory.checks import check_confidence, check_delta
from audit.theory.dpsgd import DPSGDClaim
from audit.theory.gaussian import gaussian_epsilon

__all__ = ["CanaryMechanism", "dpsgd_canary_llr", "simulate_dpsgd_canary_scores", "guess_count_grid",
           "OneRunDesign", "choose_one_run_design", "CanaryCountChoice", "default_canary_count",
           "DESIGN_METHODS", "guess_bound", "grid_bounds", "guess_shapes", "DEFAULT_CANARY_CANDIDATES",
           "CHUNK_ELEMENTS"]

#: Simulated observations held at once (canaries x steps), about 32 MiB of float64 per array.
CHUNK_ELEMENTS = 1 << 22
#: The one-run bounds a design can be made for: Mahloujifar et al.'s f-DP test with the f_{eps,delta}
#: null ("fdp"), the epsilon of the largest mu-GDP null it rejects ("fdp-gdp", an estimate), and
#: Steinke et al.'s p-value ("steinke"); all take one- and two-sided guesses.
DESIGN_METHODS = ("fdp", "fdp-gdp", "steinke")
#: Guess shapes whose bound at their mean number right is below this fraction of the best one's are not
#: evaluated game by game (:func:`_criterion`).
SCREEN_FRACTION = 0.9
#: Numbers of canaries :func:`default_canary_count` compares (those above ``max_canaries`` are dropped).
DEFAULT_CANARY_CANDIDATES = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000)


@dataclass(frozen=True)
class CanaryMechanism:
    """What one canary's observations follow: per step ``b_t + N(0, sigma^2)`` with ``b_t`` ~
    Bernoulli(``sample_rate``) when in, ``N(0, sigma^2)`` when out, over ``steps`` steps (units of C)."""

    sample_rate: float
    noise_multiplier: float
    steps: int

    def __post_init__(self) -> None:
        if not 0.0 < float(self.sample_rate) <= 1.0:
            raise UserError(f"canary sample rate must lie in (0, 1] (got {self.sample_rate!r})")
        if not 0.0 < float(self.noise_multiplier) < math.inf:
            raise UserError(f"noise multiplier must be positive and finite (got {self.noise_multiplier!r})")
        if int(self.steps) != self.steps or self.steps < 1:
            raise UserError(f"steps must be a positive integer (got {self.steps!r})")

    @classmethod
    def of(cls, mechanism: DPSGDClaim | CanaryMechanism | Sequence[float]) -> CanaryMechanism:
        """From a :class:`audit.theory.dpsgd.DPSGDClaim`, a CanaryMechanism, or ``(q, sigma, T)``."""
        if isinstance(mechanism, CanaryMechanism):
            return mechanism
        if isinstance(mechanism, DPSGDClaim):
            return cls(mechanism.sample_rate, mechanism.noise_multiplier, mechanism.steps)
        try:
            q, sigma, steps = mechanism  # type: ignore[misc]
        except (TypeError, ValueError):
            raise UserError("the claimed mechanism must be a DPSGDClaim or a (sample_rate, noise_multiplier, "
                            f"steps) triple (got {mechanism!r})") from None
        return cls(float(q), float(sigma), int(steps))

    def to_dict(self) -> dict[str, Any]:
        return {"sample_rate": float(self.sample_rate), "noise_multiplier": float(self.noise_multiplier),
                "steps": int(self.steps)}


def dpsgd_canary_llr(observations: ArrayLike, sample_rate: float, noise_multiplier: float) -> np.ndarray:
    """Per canary, the log-likelihood ratio "in" vs "out" of its normalised per-step observations.

    ``observations[i, t] = o_t`` for canary i (the noisy sum minus the clipped data sum, projected on
    the canary's unit direction, divided by C). Without the canary ``o_t ~ N(0, s^2)``; with it the
    step is the Poisson-subsampled Gaussian ``o_t ~ (1 - q) N(0, s^2) + q N(1, s^2)`` (s = sigma,
    Abadi et al. 2016, Alg. 1; Dong, Roth, Su 2019, Sec. 4.1). The steps are independent given the
    coin (fresh noise and a fresh inclusion draw per step), so the likelihood ratio of the T steps is
    the product of the per-step ratios::

        p_in(o) / p_out(o) = (1 - q) + q exp(-(o - 1)^2 / (2 s^2)) / exp(-o^2 / (2 s^2))
                           = (1 - q) + q exp((2 o - 1) / (2 s^2))

    and the score is ``sum_t log((1 - q) + q exp((2 o_t - 1) / (2 s^2)))``, computed as
    ``logaddexp(log(1 - q), log q + (2 o_t - 1) / (2 s^2))`` (no overflow for large o_t / small s).
    By Neyman-Pearson it is the most powerful statistic for the pair, hence the "perfect attack".
    For q = 1 the step term is exactly ``(2 o_t - 1) / (2 s^2)``. NaN marks a step not observed: it
    adds nothing. Sources: docs/references.md, "One-run auditing".
    """
    obs = np.asarray(observations, dtype=float)
    if obs.ndim != 2:
        raise UserError(f"canary observations must be a (canaries, steps) array (got shape {obs.shape})")
    q, s = float(sample_rate), float(noise_multiplier)
    if not 0.0 < q <= 1.0 or not 0.0 < s < math.inf:
        raise UserError(f"need 0 < sample_rate <= 1 and a positive noise multiplier (got q={q}, sigma={s})")
    z = (2.0 * obs - 1.0) / (2.0 * s * s)
    if q < 1.0:
        with np.errstate(invalid="ignore"):  # NaN steps stay NaN
            z = np.logaddexp(math.log1p(-q), math.log(q) + z)
    return np.nansum(z, axis=1)


def check_count(value: int, name: str, minimum: int = 1) -> int:
    """``value`` as an int, or a one-line error when it is not an integer of at least ``minimum``."""
    if int(value) != value or value < minimum:
        raise UserError(f"{name} must be an integer >= {minimum} (got {value!r})")
    return int(value)


def simulate_dpsgd_canary_scores(canaries: int, sample_rate: float, noise_multiplier: float, steps: int,
                                 rng: np.random.Generator | int | None) -> tuple[np.ndarray, np.ndarray]:
    """One simulated one-run game under the mechanism: ``(scores, members)`` of ``canaries`` canaries.

    Each canary is in by its own fair coin; its T observations are drawn exactly
    (:class:`CanaryMechanism`) and scored by :func:`dpsgd_canary_llr`. Rows are drawn in chunks of
    at most :data:`CHUNK_ELEMENTS` observations, so memory stays bounded for any M (M = 20,000 and
    T = 88 is one chunk of 1.8 million). Deterministic given ``rng`` (a Generator or a seed).
    """
    mech = CanaryMechanism(sample_rate, noise_multiplier, steps)
    m = check_count(canaries, "canaries")
    gen = np.random.default_rng(rng)
    members = gen.random(m) < 0.5
    scores = np.empty(m)
    rows = max(1, CHUNK_ELEMENTS // mech.steps)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        obs = gen.normal(0.0, mech.noise_multiplier, size=(stop - start, mech.steps))
        obs += members[start:stop, None] & (gen.random((stop - start, mech.steps)) < mech.sample_rate)
        scores[start:stop] = dpsgd_canary_llr(obs, mech.sample_rate, mech.noise_multiplier)
    return scores, members


def simulated_games(mech: CanaryMechanism, canaries: int, games: int,
                    rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """``games`` one-run games of ``canaries`` canaries under ``mech``, drawn from the score's law
    (:func:`audit.stats.canary_score_distribution.score_distribution`, cached per mechanism); the same
    games in law as :func:`simulate_dpsgd_canary_scores`'s, deterministic given ``rng``."""
    law = score_distribution(float(mech.sample_rate), float(mech.noise_multiplier), int(mech.steps))
    return [law.game(canaries, rng) for _ in range(games)]


@functools.lru_cache(maxsize=1 << 16)
def cached_bound(method: str, guesses: int, v: int, m: int, delta: float, confidence: float) -> float:
    """:func:`guess_bound`, cached (the same pair recurs in many simulated games)."""
    return guess_bound(method, guesses, v, m, delta, confidence)


def guess_count_grid(canaries: int, points: int = 48) -> np.ndarray:
    """The candidate guess counts: ``points`` geometrically spaced integers from 1 to M/2 (distinct)."""
    m = check_count(canaries, "canaries")
    return np.unique(np.round(np.geomspace(1, max(1, m // 2), points)).astype(int))


def _ordered(scores: np.ndarray) -> np.ndarray:
    """Canary indices by ascending score, ties by ascending index (as the one-run bounds order them)."""
    return np.argsort(scores, kind="stable")


def _right_counts(scores: np.ndarray, members: np.ndarray, guesses: list[tuple[int, int]]) -> np.ndarray:
    """The number of right guesses at every (k_pos, k_neg) of ``guesses`` on one game."""
    order = _ordered(scores)
    right_in = np.concatenate([[0], np.cumsum(members[order[::-1]])])  # right "in" among the top k
    right_out = np.concatenate([[0], np.cumsum(~members[order])])  # right "out" among the bottom k
    k_pos, k_neg = np.array(guesses, dtype=np.int64).reshape(-1, 2).T
    return right_in[k_pos] + right_out[k_neg]


def grid_bounds(scores: np.ndarray, members: np.ndarray, guesses: list[tuple[int, int]], method: str,
                 delta: float, confidence: float) -> np.ndarray:
    """The bound of ``method`` at every (k_pos, k_neg) of ``guesses`` on one game."""
    right = _right_counts(scores, members, guesses)
    return np.array([cached_bound(method, k_pos + k_neg, int(v), scores.size, delta, confidence)
                     for (k_pos, k_neg), v in zip(guesses, right, strict=True)])


def guess_bound(method: str, guesses: int, right: int, m: int, delta: float, confidence: float) -> float:
    """The bound of ``method`` (:data:`DESIGN_METHODS`) when ``right`` of ``guesses`` guesses (either side)
    among ``m`` canaries are right."""
    if method == "fdp":
        return fdp_epsilon_lb(guesses, right, m, delta, confidence)
    if method == "fdp-gdp":
        return gaussian_epsilon(fdp_mu_lb(guesses, right, m, confidence), delta)
    return one_run_epsilon_lb(guesses, right, m, delta, confidence)


@dataclass(frozen=True, kw_only=True)
class OneRunDesign:
    """Guess counts and the expected bound of a one-run audit, fixed by simulating the claim.

    ``expected_epsilon`` (mean), ``epsilon_sd``, ``epsilon_median``, ``epsilon_range`` (5% and 95%
    quantiles) are the bound of a perfect attack (LLR score) at these guess counts, on
    ``evaluations`` simulated games separate from the ``simulations`` games that chose the counts.
    ``ceiling``: the bound when every guess is right. ``grid`` and ``grid_value`` (the criterion on the
    choosing games) document the choice.
    """

    canaries: int
    k_pos: int
    k_neg: int
    method: str
    delta: float
    confidence: float
    criterion: str
    expected_epsilon: float
    epsilon_sd: float
    epsilon_median: float
    epsilon_range: tuple[float, float]
    ceiling: float
    mechanism: CanaryMechanism
    simulations: int
    evaluations: int
    grid: tuple[tuple[int, int], ...]
    grid_value: tuple[float, ...]

    @property
    def guesses(self) -> str:
        return (f"'in' for the {self.k_pos} highest scores" +
                (f", 'out' for the {self.k_neg} lowest" if self.k_neg else " (one-sided)"))

    def to_dict(self) -> dict[str, Any]:
        return {"canaries": self.canaries, "k_pos": self.k_pos, "k_neg": self.k_neg, "method": self.method,
                "guesses": self.guesses, "delta": self.delta, "confidence": self.confidence,
                "criterion": self.criterion, "expected_epsilon": self.expected_epsilon,
                "epsilon_sd": self.epsilon_sd, "epsilon_median": self.epsilon_median,
                "epsilon_range": list(self.epsilon_range), "ceiling": self.ceiling,
                "mechanism": self.mechanism.to_dict(), "simulations": self.simulations,
                "evaluations": self.evaluations, "grid": [list(g) for g in self.grid],
                "grid_value": list(self.grid_value),
                "rule": ("the guess count and shape that reject the claim when the smallest fraction of the included "
                         "canaries leak (audit.stats.one_run.leak; grid_value: each shape's fraction)"
                         if self.criterion == "leak" else
                         "among the guess shapes that can reject the claim, the one maximising the mean bound over "
                         "games of the claimed mechanism's final model, were it linear (audit.stats.one_run."
                         "final_model; never the audited coins)" if self.criterion == "final-model" else
                         "guess counts maximising the " + self.criterion + " bound over games simulated under the "
                         "claimed mechanism (never the audited coins)") + "; expected bound on separate simulations"}


def guess_shapes(canaries: int, method: str, guess_counts: ArrayLike | None) -> list[tuple[int, int]]:
    """(k_pos, k_neg) candidates: one-sided ``(k, 0)`` and symmetric two-sided ``(k, k)`` for every
    guess count k (two-sided where ``2 k <= M``)."""
    if method not in DESIGN_METHODS:
        raise UserError(f"unknown one-run method {method!r}; use one of {', '.join(DESIGN_METHODS)}")
    ks = guess_count_grid(canaries) if guess_counts is None else np.unique(np.asarray(guess_counts, dtype=int))
    if ks.size == 0 or ks[0] < 1 or ks[-1] > canaries:
        raise UserError(f"guess counts must lie between 1 and the {canaries} canaries")
    return [(int(k), 0) for k in ks] + [(int(k), int(k)) for k in ks if 2 * k <= canaries]


def design_from_games(design_games: list[tuple[np.ndarray, np.ndarray]],
                      eval_games: list[tuple[np.ndarray, np.ndarray]], mech: CanaryMechanism,
                      shapes: list[tuple[int, int]], method: str, delta: float, confidence: float,
                      criterion: str) -> OneRunDesign:
    """Choose the shape maximising ``criterion`` over ``design_games``, evaluate it on ``eval_games``."""
    value = _criterion(design_games, shapes, method, delta, confidence, criterion)
    j = int(np.argmax(value))  # ties: the first, i.e. the fewest guesses
    k_pos, k_neg = shapes[j]
    evals = np.array([grid_bounds(s, mem, [shapes[j]], method, delta, confidence)[0] for s, mem in eval_games])
    m = design_games[0][0].size
    ceiling = guess_bound(method, k_pos + k_neg, k_pos + k_neg, m, delta, confidence)
    return OneRunDesign(canaries=m, k_pos=k_pos, k_neg=k_neg, method=method, delta=delta, confidence=confidence,
                        criterion=criterion, expected_epsilon=float(evals.mean()),
                        epsilon_sd=float(evals.std(ddof=1)) if evals.size > 1 else 0.0,
                        epsilon_median=float(np.median(evals)),
                        epsilon_range=(float(np.quantile(evals, 0.05)), float(np.quantile(evals, 0.95))),
                        ceiling=float(ceiling), mechanism=mech, simulations=len(design_games),
                        evaluations=len(eval_games), grid=tuple(shapes), grid_value=tuple(float(x) for x in value))


def _criterion(games: list[tuple[np.ndarray, np.ndarray]], shapes: list[tuple[int, int]], method: str,
               delta: float, confidence: float, criterion: str) -> np.ndarray:
    """The mean (or median) bound of each shape over ``games``; a shape screened out (module docstring) keeps
    its bound at its mean number right, below :data:`SCREEN_FRACTION` of the best."""
    m = games[0][0].size
    right = np.array([_right_counts(s, mem, shapes) for s, mem in games])
    out = np.array([cached_bound(method, kp + kn, int(round(v)), m, delta, confidence)
                    for (kp, kn), v in zip(shapes, right.mean(axis=0), strict=True)])
    keep = np.flatnonzero(out >= SCREEN_FRACTION * out.max())
    table = np.array([[cached_bound(method, sum(shapes[j]), int(v), m, delta, confidence) for j, v in
                       zip(keep, row[keep], strict=True)] for row in right])
    out[keep] = table.mean(axis=0) if criterion == "mean" else np.median(table, axis=0)
    return out


def _check_design_args(delta: float, confidence: float, criterion: str, simulations: int,
                       evaluations: int | None) -> tuple[float, float, int, int]:
    if criterion not in ("mean", "median"):
        raise UserError(f"design criterion must be 'mean' or 'median' (got {criterion!r})")
    sims = check_count(simulations, "simulations")
    evals = sims if evaluations is None else check_count(evaluations, "evaluations")
    return check_delta(delta), check_confidence(confidence), sims, evals


@dataclass(frozen=True, kw_only=True)
class DesignObjective:
    """The bound a one-run design maximises: its method and level, and the criterion over simulated games.

    Attributes:
        delta: the delta of the bound.
        confidence: the bound's confidence.
        method: the bound, one of :data:`DESIGN_METHODS` (:func:`guess_bound`).
        criterion: ``"mean"`` or ``"median"``: the bound's statistic over the simulated games that is maximised.
    """

    delta: float
    confidence: float
    method: str = "fdp"
    criterion: str = "mean"


def choose_one_run_design(mechanism: DPSGDClaim | CanaryMechanism | Sequence[float], canaries: int,
                          objective: DesignObjective, rng: np.random.Generator | int | None, *,
                          simulations: int = 20, evaluations: int | None = None,
                          guess_counts: ArrayLike | None = None) -> OneRunDesign:
    """Guess counts for a one-run audit with ``canaries`` gradient canaries, from the claim alone.

    How: ``simulations`` one-run games are simulated under the claimed mechanism (:func:`simulated_games`:
    fair coins, the optimal LLR score of DP-SGD with the claim's q, sigma and T drawn from its law). For every
    candidate guess shape (``k_pos`` in :func:`guess_count_grid` or ``guess_counts``, with ``k_neg = 0`` or
    ``k_neg = k_pos``) the one-run bound of ``objective.method`` at its ``delta`` and ``confidence`` is computed
    on each game (:func:`guess_bound`: :func:`audit.stats.one_run.fdp.fdp_epsilon_lb`, the Gaussian-family
    estimate of :func:`audit.stats.one_run.fdp.fdp_mu_lb`, or :func:`audit.stats.one_run.steinke.one_run_epsilon_lb`);
    the shape with the largest mean (``criterion="mean"``) or median bound is chosen. ``evaluations`` further
    games (default as many) give the expected bound of a perfect attack at that shape, its spread and the
    ceiling.

    The design takes no coins and no scores of the audited training: it is fixed before the
    training runs, so the bound computed with it is valid whatever the code does (a broken
    implementation only makes the design suboptimal). Sources: docs/references.md, "One-run auditing".

    Args:
        mechanism: the claimed mechanism: a claim, a :class:`CanaryMechanism` or its (q, sigma, T).
        canaries: M, the number of canaries.
        objective: the bound maximised (method, delta, confidence) and the criterion.
        rng: the generator (or seed) of the simulated games.
        simulations: the games that choose the guess counts.
        evaluations: the further games that evaluate the choice (default: as many).
        guess_counts: the candidate ``k_pos`` (default :func:`guess_count_grid`).

    Returns:
        The design: the guess counts and the expected bound of a perfect attack.

    Raises:
        UserError: an unknown method or criterion, delta, confidence or counts out of range, or not a mechanism.
    """
    delta, confidence, method, criterion = objective.delta, objective.confidence, objective.method, objective.criterion
    mech = CanaryMechanism.of(mechanism)
    m = check_count(canaries, "canaries", 2)
    delta, confidence, sims, evals = _check_design_args(delta, confidence, criterion, simulations, evaluations)
    shapes = guess_shapes(m, method, guess_counts)
    games = simulated_games(mech, m, sims + evals, np.random.default_rng(rng))
    return design_from_games(games[:sims], games[sims:], mech, shapes, method, delta, confidence, criterion)


@dataclass(frozen=True)
class CanaryCountChoice:
    """The default number of canaries and its design; ``table`` rows: (M, expected bound, sd, k_pos)."""

    canaries: int
    design: OneRunDesign
    table: tuple[tuple[int, float, float, int], ...]
    max_canaries: int
    within: float

    def to_dict(self) -> dict[str, Any]:
        return {"canaries": self.canaries, "design": self.design.to_dict(), "max_canaries": self.max_canaries,
                "within": self.within,
                "table": [{"canaries": m, "expected_epsilon": e, "epsilon_sd": sd, "k_pos": k}
                          for m, e, sd, k in self.table],
                "rule": (f"the fewest canaries whose expected perfect-attack bound is within {self.within:.0%} of "
                         "the best candidate's, among candidates not above max_canaries, by simulating the claim")}


def default_canary_count(mechanism: DPSGDClaim | CanaryMechanism | Sequence[float], objective: DesignObjective,
                         rng: np.random.Generator | int | None, max_canaries: int, *,
                         candidates: Sequence[int] = DEFAULT_CANARY_CANDIDATES, within: float = 0.05,
                         simulations: int = 10) -> CanaryCountChoice:
    """Default number of canaries M for a one-run audit of the claimed DP-SGD, by simulation.

    Rule: the candidates are ``candidates`` not above ``max_canaries`` (what the model can hold: its
    free coordinates for Dirac canaries), plus ``max_canaries`` itself when it lies below the largest
    candidate. For each, :func:`choose_one_run_design` fixes the guess counts and the expected bound
    of a perfect attack; the games of all candidates are prefixes of the same simulated games of the
    largest candidate (common random numbers, so the comparison is not swamped by simulation noise).
    The bound grows slowly with M (about 0.87 -> 1.0 at eps 2 from 7,850 to 20,000 canaries), while
    each canary costs a coordinate (or cross-talk between random directions) and simulation time,
    so the default is the fewest canaries whose expected bound is at least ``(1 - within)`` times the
    best candidate's. Any M keeps the audit valid; the rule only trades power for cost.
    Sources: docs/references.md, "One-run auditing".

    Args:
        mechanism: the claimed mechanism: a claim, a :class:`CanaryMechanism` or its (q, sigma, T).
        objective: the bound maximised (method, delta, confidence) and the criterion.
        rng: the generator (or seed) of the simulated games.
        max_canaries: the most canaries the model can hold.
        candidates: the candidate numbers of canaries.
        within: the fraction of the best expected bound the chosen number may fall short by.
        simulations: the games that choose each candidate's guess counts (as many evaluate it).

    Returns:
        The chosen number of canaries, its design and the table of every candidate.

    Raises:
        UserError: an unknown method or criterion, delta, confidence, counts or ``within`` out of range.
    """
    delta, confidence, method, criterion = objective.delta, objective.confidence, objective.method, objective.criterion
    mech = CanaryMechanism.of(mechanism)
    cap = check_count(max_canaries, "max_canaries", 2)
    if not 0.0 <= within < 1.0:
        raise UserError(f"within must lie in [0, 1) (got {within!r})")
    delta, confidence, sims, evals = _check_design_args(delta, confidence, criterion, simulations, None)
    sizes = sorted({int(c) for c in candidates if 2 <= int(c) <= cap} |
                   ({cap} if not candidates or cap < max(candidates) else set()))
    games = simulated_games(mech, sizes[-1], sims + evals, np.random.default_rng(rng))
    designs = []
    for m in sizes:
        prefix = [(s[:m], mem[:m]) for s, mem in games]
        designs.append(design_from_games(prefix[:sims], prefix[sims:], mech, guess_shapes(m, method, None),
                                          method, delta, confidence, criterion))
    best = max(d.expected_epsilon for d in designs)
    chosen = next(d for d in designs if d.expected_epsilon >= (1.0 - within) * best)
    table = tuple((d.canaries, d.expected_epsilon, d.epsilon_sd, d.k_pos) for d in designs)
    return CanaryCountChoice(chosen.canaries, chosen, table, cap, float(within))
