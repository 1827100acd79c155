"""What the dp kind and its sweep hand their reports (:class:`reports.presentation.Presentation`): the
game in a few words, the section of a one-run audit, and a sweep's sentences and figure. They read the run's
typed outcome and its kind's block (:class:`audit.dp.detail.DpDetail`, :class:`audit.dp.detail.SweepDetail`)."""

from __future__ import annotations

from pathlib import Path

from audit.dp.detail import DpDetail
from audit.stats.outcome import Game, OneRun, Outcome
from reports import plots
from reports.formatting import format_epsilon, format_interval, format_percent, format_value
from reports.summary import CEILING_NAME, EXPECTATION_NAME

#: The file of a sweep's figure in its run directory.
EPSILON_PNG = "epsilon.png"


def game_phrase(outcome: Outcome) -> str:
    """How a dp audit played its game, in a few words: the accounting check alone, one run with gradient
    canaries, or many runs with one canary.

    Args:
        outcome: the run's outcome.

    Returns:
        The phrase.
    """
    game = outcome.game or Game()
    check = (outcome.detail or DpDetail()).config_check
    if outcome.game is None and check is not None:
        what = "the declared mechanism's configuration" if check.mechanism else "the DP-SGD configuration"
        return (f"its accounting check alone (--check-config): {what} read from "
                f"{format_value(check.trainings)} instrumented calls of the code's training (the "
                f"probe, the first steps of its repeat and of a run from another seed, the dataset plus one record "
                f"and less one record, and where a statistical test alone rejected, one more run from another "
                f"seed) and "
                f"compared with the claim; no canaries, no attack")
    if game.one_run:
        return (f"one run of your training with {format_value(game.canaries)} {game.canary_kind} "
                f"gradient canaries, each included by its own fair coin, observed under the {game.threat} "
                f"threat model")
    extras = []
    if (outcome.audited.params or {}).get("init") == "pretrained":
        extras.append("every run starting from parameters pre-trained without privacy on disjoint data")
    calibration = (game.observation or {}).get("calibration_runs")
    if calibration:
        extras.append(f"the threshold fixed on {format_value(calibration)} separate calibration runs")
    return (f"{format_value(game.runs)} training runs with the {game.canary_kind} canary by a fair "
            f"coin, observed under the {game.threat} threat model" + "".join(f"; {e}" for e in extras))


def _one_run_paragraphs(one: OneRun, game: Game, outcome: Outcome) -> list[str]:
    best = outcome.best_lower_bound
    expected = one.expected_perfect
    mean, sd, quantiles, games = ((expected.mean, expected.sd, expected.range_5_95, expected.games) if expected
                                  else (None, None, None, None))
    design = one.design or {}
    observation = game.observation or {}
    if game.threat == "black-box":  # canaries in the data, read from the final model alone
        canaries = (f"One run of your training: {format_value(one.canaries)} {game.canary_kind or 'input'} canaries "
                    f"({format_value(one.included)} in by their fair coins), each an example the training takes "
                    "with the data when its coin says so; the attack reads the final model alone. ")
    else:
        canaries = (f"One run of your training: {format_value(one.canaries)} gradient canaries "
                    f"({format_value(one.included)} in by their fair coins; "
                    f"{(game.canary or {}).get('directions', '')}), each joining every step like one more "
                    "Poisson-sampled record, clipped to C. ")
    return [
        canaries + (f"The audit ran {game.trainings_text}." if game.trainings_text else "The audit trained one model."),
        f"Guesses: 'in' for the {format_value(one.k_pos)} highest scores"
        + (f" and 'out' for the {format_value(one.k_neg)} lowest" if one.k_neg else "")
        + f", {format_value(one.correct)} right. Bound: ε ≥ {format_epsilon(best.epsilon if best else None)} (f-DP "
        f"one-run test, {format_percent(best.family_confidence if best else None)} confidence); the same guesses "
        f"{'reject' if one.claim_rejected else 'do not reject'} the claim's own tradeoff curve. The "
        f"{CEILING_NAME}: ε ≥ {format_epsilon(one.ceiling)}.",
        f"The {EXPECTATION_NAME} with this M: ε ≥ {format_epsilon(mean)} on average (sd {format_epsilon(sd)}, 5–95% "
        f"{format_interval(quantiles)}) — the likelihood ratio of the claimed mechanism on {format_value(games)} "
        f"games simulated under the claim.",
        f"How the guess count was chosen: {design.get('rule', '—')} ({format_value(design.get('simulations'))} "
        f"simulated games of the claimed q, σ, T; never the audited coins or scores).",
    ] + ([f"This threat sees {observation['sees']}; it cannot see {observation['cannot_see']}."]
         if observation.get("sees") else [])


def one_run_sentences(outcome: Outcome) -> list[str]:
    """The paragraphs of a one-run audit's section: canaries, guesses right, bound, the ceiling (every guess
    right) and the perfect-attack expectation with this many canaries (``one_run``).

    Args:
        outcome: the run's outcome.

    Returns:
        The paragraphs (none without a one-run block).
    """
    one = (outcome.detail or DpDetail()).one_run
    return [] if one is None else _one_run_paragraphs(one, outcome.game or Game(), outcome)


def sections(outcome: Outcome) -> list[tuple[str, list[str]]]:
    """The dp kind's own section: a one-run audit's (none for the other games).

    Args:
        outcome: the run's outcome.

    Returns:
        (title, paragraphs) of each section.
    """
    paragraphs = one_run_sentences(outcome)
    return [("One run of your training", paragraphs)] if paragraphs else []


def sweep_sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of a sweep's report: what was audited at which claims, and what was found.

    Args:
        outcome: the sweep's outcome.

    Returns:
        The sentences.
    """
    rows = outcome.detail.rows
    eps = sorted({r.epsilon_claimed for r in rows if r.epsilon_claimed is not None})
    threats = sorted({str(r.threat) for r in rows})
    canaries = sorted({str(r.canary) for r in rows})
    audited = (f"What was audited: run dp on {outcome.target} at claimed ε = "
               f"{', '.join(format_value(e) for e in eps)}, threat model{'s' if len(threats) > 1 else ''} "
               f"{', '.join(threats)}, canary {', '.join(canaries)} ({len(rows)} audits).")
    if not rows:
        return [audited, "What was found: nothing (no audit completed)."]
    top = max(rows, key=lambda r: r.epsilon_lb_valid or 0.0)
    est = max(rows, key=lambda r: r.epsilon_lb or 0.0)
    family = outcome.judged.family
    violations = sum(r.verdict == "violation" for r in rows)
    return [audited, f"What was found: {outcome.verdict.status} — {violations} of {len(rows)} audits find a violation "
                     f"(a valid bound above the claim or a rejection of the claim's tradeoff curve); the largest valid "
                     f"bound is {format_epsilon(top.epsilon_lb_valid)} ({top.valid_method}) at claimed ε = "
                     f"{format_epsilon(top.epsilon_theory)}, the largest figure {format_epsilon(est.epsilon_lb)} "
                     f"({est.method}); the verdict holds at {format_percent(family.confidence if family else None)} "
                     f"over the family of {format_value(family.size if family else None)} audits. Valid points above "
                     f"the y = x line are violations; so is a rejected tradeoff curve, even below it."]


def sweep_figures(run_dir: Path, outcome: Outcome) -> list[dict]:
    """A sweep's figure: each audit's bound against its claim (:func:`reports.plots.epsilon_plot`).

    Args:
        run_dir: the run directory.
        outcome: the sweep's outcome.

    Returns:
        The figure's description (none without points).
    """
    if not outcome.detail.sweep:
        return []
    path = plots.epsilon_plot(outcome.detail.sweep, Path(run_dir) / EPSILON_PNG)
    return [{"path": path, "title": "Empirical ε lower bound vs theoretical ε",
             "caption": "One point per audited target of the sweep. Points must stay on or below the "
                        "dotted y = x line; a point above it means the claimed guarantee is broken or "
                        "the accounting is wrong."}]
