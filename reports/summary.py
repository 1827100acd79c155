"""What a report says first: two plain sentences (what was audited; what was found and how strong the
audit could have been), a third for an audit of a DP-SGD training through its final model (the last-iterate
reference, :func:`last_iterate_sentence`), and one compact table of attacks, for every run kind.

Reads the run's typed outcome (:class:`audit.stats.outcome.Outcome`) only and returns text and table cells
already formatted (:func:`reports.formatting.format_value`: 3 significant digits; intervals as ``0.000–0.220``).
"""

from __future__ import annotations

from typing import Any

from audit.stats.outcome import Bound, Game, OneRun, Outcome, SplitCheck
from reports.formatting import format_interval, format_table, format_value
from reports.presentation import presentation_of


def _eps(value: Any) -> str:
    return format_value(value) if value is not None else "—"


def _percent(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{100 * value:.3g}%"


def _game_phrase(outcome: Outcome) -> str:
    """How the audit played its game, in a few words."""
    game = outcome.game or Game()
    kind = outcome.kind
    if kind == "membership":
        attacks = outcome.attacks or {}
        return (f"{format_value(game.canaries)} {game.canary_kind or ''} canaries, each included by a "
                f"fair coin, attacked by {len(attacks)} membership attack{'s' if len(attacks) != 1 else ''} "
                f"(primary: {outcome.primary_attack or '—'})")
    if kind == "dp" and outcome.game is None and outcome.config_check is not None:
        return (f"its accounting check alone (--check-config): the DP-SGD configuration read from "
                f"{format_value(outcome.config_check.trainings)} instrumented calls of the code's training (the "
                f"probe, the first steps of its repeat, the dataset plus one record and less one record) and "
                f"compared with the claim; no canaries, no attack")
    if kind == "dp" and game.one_run:
        return (f"one run of your training with {format_value(game.canaries)} {game.canary_kind} "
                f"gradient canaries, each included by its own fair coin, observed under the {game.threat} "
                f"threat model")
    if kind == "dp":
        extras = []
        if (outcome.params or {}).get("init") == "pretrained":
            extras.append("every run starting from parameters pre-trained without privacy on disjoint data")
        calibration = (game.observation or {}).get("calibration_runs")
        if calibration:
            extras.append(f"the threshold fixed on {format_value(calibration)} separate calibration runs")
        return (f"{format_value(game.runs)} training runs with the {game.canary_kind} canary by a fair "
                f"coin, observed under the {game.threat} threat model" + "".join(f"; {e}" for e in extras))
    if kind == "mechanism":
        return f"{format_value(game.draws_per_world)} draws on each side of its neighbouring pair"
    return "its audit game"


#: The two names of what a perfect attack reaches, the same on the console, in reports and in the docs
#: (docs/reference/results-schema.md): the mean bound a perfect attack reaches with this design, and the bound
#: with every guess right.
EXPECTATION_NAME = "perfect-attack expectation"
CEILING_NAME = "ceiling (every guess right)"


def perfect_attack_expectation(outcome: Outcome) -> float | None:
    """What a perfect attack expects to certify with this design (``one_run.expected_perfect.mean``;
    None where the audit simulated no perfect attack).

    Args:
        outcome: the run's outcome.

    Returns:
        The expected epsilon, or None.
    """
    expected = outcome.one_run.expected_perfect if outcome.one_run is not None else None
    return float(expected.mean) if expected is not None and isinstance(expected.mean, (int, float)) else None


def _decided_by(outcome: Outcome, bound: float | None, theory: float) -> str | None:
    """What decided a violation besides a bound above the claim, in words: the accounting check's findings,
    or the rejection of the claim's own tradeoff curve; None when the bound above the claim alone did."""
    verdict = outcome.verdict
    if verdict.source == "config_check":
        findings = outcome.config_check.findings if outcome.config_check is not None else ()
        found = "; ".join(f.message.rstrip(".") for f in findings if f.violation)
        return f"the accounting check found: {found or verdict.text}"
    if bound is not None and bound > theory:
        return None
    rejecting = outcome.claim_rejecting_bound()
    how = f" by the {rejecting.method} test" if rejecting else ""
    return (f"the claim's own tradeoff curve (ε = {_eps(theory)}) is rejected at {_percent(outcome.confidence)} "
            f"confidence{how}")


def _strength(outcome: Outcome) -> str:
    """What was found, what decided a violation, and how strong the audit could have been: the
    perfect-attack expectation where the audit simulated one, else the ceiling."""
    best = outcome.best_lower_bound
    ceiling = outcome.ceiling.epsilon if outcome.ceiling is not None else None
    expected = perfect_attack_expectation(outcome)
    theory = outcome.epsilon_theory
    status = outcome.verdict.status
    if best is None:
        found = "no statistically valid lower bound"
    else:
        found = (f"ε ≥ {_eps(best.epsilon)} ({best.method}" + (f", attack {best.attack}" if best.attack else "")
                 + f", {_percent(best.family_confidence)} confidence)")
    if ceiling is not None and expected is None:
        found += f" of a possible {_eps(ceiling)}"
    if theory is None:
        return f"What was found: the audit certifies {found}; with no claim there is nothing to violate."
    bound = float(best.epsilon) if best and isinstance(best.epsilon, (int, float)) else None
    if status == "violation":
        decided = _decided_by(outcome, bound, theory)
        if best is None and not outcome.lower_bounds:  # the accounting check alone
            return f"What was found: {decided}: the implementation or its privacy accounting is broken."
        above = bound is not None and bound > theory
        relation = (f"above the claimed ε = {_eps(theory)}" if above else
                    f"below the claimed ε = {_eps(theory)}" if bound is None or bound < theory else
                    f"at the claimed ε = {_eps(theory)}")
        reason = "" if decided is None else (f", and {decided}" if above else f"; the violation is that {decided}")
        return (f"What was found: the audit certifies {found}, {relation}{reason}: the implementation or its "
                f"privacy accounting is broken.")
    if best is None and not outcome.lower_bounds:
        return (f"What was found: {outcome.verdict.text} (the accounting check alone; no attack was run, so no "
                f"lower bound).")
    if expected is not None:
        strength = (f"the {EXPECTATION_NAME} with this M is ε ≥ {_eps(expected)}, the {CEILING_NAME} "
                    f"{_eps(ceiling)}")
        if expected > theory:
            return (f"What was found: the audit certifies {found} at claimed ε = {_eps(theory)} — consistent: this "
                    f"audit was strong enough to expose a violation and found none ({strength}).")
        return (f"What was found: the audit certifies {found} at claimed ε = {_eps(theory)} — consistent, but "
                f"{strength}: even a perfect attack would usually certify less than the claim, so a larger audit "
                f"(more canaries) is needed to test it in full; a low bound does not show the target leaks less "
                f"than claimed.")
    if ceiling is not None and ceiling < theory:
        return (f"What was found: the audit certifies {found} at claimed ε = {_eps(theory)} — consistent. The "
                f"{CEILING_NAME} is only {_eps(ceiling)}, so even a perfect attack in this game could not expose a "
                f"violation: a larger audit (more canaries, runs or draws) is needed to test the claim in full; a "
                f"low bound does not show the target leaks less than claimed.")
    reach = (f"the {CEILING_NAME} is {_eps(ceiling)}, above the claim, so a perfect attack could expose a "
             f"violation" if ceiling is not None else "this game states no ceiling")
    return (f"What was found: the audit certifies {found} at claimed ε = {_eps(theory)} — consistent: no violation "
            f"found; {reach}, but a bound below the claim does not show the target leaks less than claimed.")


def last_iterate_sentence(outcome: Outcome) -> str | None:
    """The last-iterate reference of a DP-SGD training audited through its final model, beside the bound,
    the ceiling and the perfect-attack expectation, with what it means (``last_iterate``; None without it).

    Args:
        outcome: the run's outcome.

    Returns:
        The sentence, or None.
    """
    ref = outcome.last_iterate
    if ref is None:
        return None
    best = outcome.best_lower_bound
    beside = [f"the bound ε ≥ {_eps(best.epsilon if best else None)}"]
    if outcome.ceiling is not None and outcome.ceiling.epsilon is not None:
        beside.append(f"the {CEILING_NAME} {_eps(outcome.ceiling.epsilon)}")
    expected = perfect_attack_expectation(outcome)
    if expected is not None:
        beside.append(f"the {EXPECTATION_NAME} {_eps(expected)}")
    final = ref.expected_bound or {}
    if final.get("mean") is not None:
        beside.append(f"what a perfect attack on a linear model's final iterate expects with these guesses, ε ≥ "
                      f"{_eps(final['mean'])} (5–95% {format_interval(final.get('range_5_95'))})")
    return (f"Last-iterate reference: ε ≈ {_eps(ref.epsilon)} at δ = {format_value(ref.delta)} for this training "
            f"(σ = {format_value(ref.noise_multiplier)}, q = {format_value(ref.sample_rate)}, "
            f"T = {format_value(ref.steps)}), beside {', '.join(beside)} and the claimed ε = "
            f"{_eps(outcome.epsilon_theory)}. {ref.text}")


def _claim_sentences(outcome: Outcome) -> list[str]:
    description = outcome.target_description
    who = f"{outcome.target} ({description})" if description else str(outcome.target)
    theory = outcome.epsilon_theory
    if theory is None:
        audited = f"What was audited: {who}, which makes no privacy claim, with {_game_phrase(outcome)}."
        strongest = _strongest_attack(outcome)
        found = _strength(outcome)
        if strongest:
            found = found.removesuffix(".") + f"; the strongest attack, {strongest}."
        return [audited, found]
    audited = (f"What was audited: {who}, which claims ε = {_eps(theory)} at δ = {format_value(outcome.delta)}, "
               f"with {_game_phrase(outcome)}.")
    reference = last_iterate_sentence(outcome)
    return [audited, _strength(outcome)] + ([reference] if reference else [])


def _strongest_attack(outcome: Outcome) -> str | None:
    attacks = outcome.attacks or {}
    if not attacks:
        return None
    name = max(attacks, key=lambda n: attacks[n].auc or 0)
    tpr = attacks[name].tpr_at_fpr.get("0.001")
    return f"{name}, reaches AUC {format_value(attacks[name].auc)} and TPR {format_value(tpr)} at 0.1% FPR"


def sweep_sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of a sweep's report: what was audited at which claims, and what was found.

    Args:
        outcome: the sweep's outcome.

    Returns:
        The sentences.
    """
    rows = outcome.rows or ()
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
    family = outcome.family
    violations = sum(r.verdict == "violation" for r in rows)
    return [audited, f"What was found: {outcome.verdict.status} — {violations} of {len(rows)} audits find a violation "
                     f"(a valid bound above the claim or a rejection of the claim's tradeoff curve); the largest valid "
                     f"bound is {_eps(top.epsilon_lb_valid)} ({top.valid_method}) at claimed ε = "
                     f"{_eps(top.epsilon_theory)}, the largest figure {_eps(est.epsilon_lb)} "
                     f"({est.method}); the verdict holds at {_percent(family.confidence if family else None)} over "
                     f"the family of {format_value(family.size if family else None)} audits. Valid points above the "
                     f"y = x line are violations; so is a rejected tradeoff curve, even below it."]


def inversion_sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of an inversion audit's report.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    inv = outcome.inversion
    if inv is None:  # a results file of the kind without its block: the claim's sentences
        return _claim_sentences(outcome)
    who = f"{outcome.target} ({outcome.target_description})"
    access = "white-box and black-box" if inv.black_box is not None else (outcome.model or {}).get("access", "")
    return [f"What was audited: MI-FACE model inversion of every class of {who}, {access}, "
            f"against a reference model trained on the same distribution without the members.",
            f"What was found: an independent classifier recognises {_percent(inv.eval_accuracy)} of the "
            f"target's reconstructions (reference model {_percent(inv.reference.get('eval_accuracy'))}, chance "
            f"{_percent(inv.chance_accuracy)}); the member gap in MSE is {format_value(inv.member_gap.get('mse_gap'))} "
            f"(standard error {format_value(inv.member_gap.get('mse_gap_standard_error'))}) — only this gap, not "
            f"recognisable digits, is about privacy."]


def extraction_sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of an extraction audit's report.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    ext = outcome.extraction
    if ext is None:
        return _claim_sentences(outcome)
    who = f"{outcome.target} ({outcome.target_description})"
    text = (f"What was found: {ext.method} recovered the model with {format_value(ext.queries)} queries (relative "
            f"parameter error {format_value(ext.param_rel_error)}, agreement {format_value(ext.agreement_test)} on "
            f"test data).")
    post = (ext.post_processing or {}).get("text")
    if post:
        text += f" For this DP model, {post}."
    return [f"What was audited: stealing {who} through its prediction API ({format_value(ext.d)} features).", text]


def reconstruction_sentences(outcome: Outcome) -> list[str]:
    """The opening sentences of a reconstruction audit's report.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    rec = outcome.reconstruction
    if rec is None:
        return _claim_sentences(outcome)
    who = f"{outcome.target} ({outcome.target_description})"
    verdict = outcome.verdict
    return [f"What was audited: how often an informed adversary ({rec.threat} access) identifies one "
            f"training record of {who} among n equally likely candidates, against the claim's ReRo bound.",
            f"What was found: {verdict.status} — {verdict.text}. {rec.meaning or ''}".rstrip()]


def _one_run_paragraphs(one: OneRun, game: Game, outcome: Outcome) -> list[str]:
    best = outcome.best_lower_bound
    expected = one.expected_perfect
    mean, sd, quantiles, games = ((expected.mean, expected.sd, expected.range_5_95, expected.games) if expected
                                  else (None, None, None, None))
    design = one.design or {}
    observation = game.observation or {}
    return [
        f"One run of your training: {format_value(one.canaries)} gradient canaries "
        f"({format_value(one.included)} in by their fair coins; {(game.canary or {}).get('directions', '')}), each "
        f"joining every step like one more Poisson-sampled record, clipped to C. "
        + (f"The audit ran {game.trainings_text}." if game.trainings_text else "The audit trained one model."),
        f"Guesses: 'in' for the {format_value(one.k_pos)} highest scores"
        + (f" and 'out' for the {format_value(one.k_neg)} lowest" if one.k_neg else "")
        + f", {format_value(one.correct)} right. Bound: ε ≥ {_eps(best.epsilon if best else None)} (f-DP one-run "
        f"test, {_percent(best.family_confidence if best else None)} confidence); the same guesses "
        f"{'reject' if one.claim_rejected else 'do not reject'} the claim's own tradeoff curve. The "
        f"{CEILING_NAME}: ε ≥ {_eps(one.ceiling)}.",
        f"The {EXPECTATION_NAME} with this M: ε ≥ {_eps(mean)} on average (sd {_eps(sd)}, 5–95% "
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
    if outcome.one_run is None:
        return []
    return _one_run_paragraphs(outcome.one_run, outcome.game or Game(), outcome)


def _split_sentence(split: SplitCheck) -> str:
    lo, hi = (list(split.blind_auc_ci) or [None, None])[:2]
    auc = (f"AUC {format_value(split.blind_auc)} ({format_interval([lo, hi])} at "
           f"{_percent(split.confidence)})")
    if split.passed:
        return (f"Split check: a blind classifier that sees the records but never the model gets {auc}, consistent "
                f"with chance: members and non-members look like one random split.")
    return (f"Split check FAILED: a blind classifier that sees the records but never the model tells members from "
            f"non-members with {auc}. The split is not random, so the attacks' AUCs below measure the split as much "
            f"as the model (each is shown beside the blind AUC), and no ε lower bound is given.")


def _trained_sentences(outcome: Outcome) -> list[str]:
    """A trained model's audit: the split check (first when it failed), what was audited, what it means."""
    game = outcome.game or Game()
    split = outcome.split_check
    how = ("a language model fine-tuned in this run, then queried" if game.fine_tuned_in_run
           else "a model that already exists, queried without retraining")
    audited = (f"What was audited: {outcome.target} ({outcome.target_description}), {how} on "
               f"{format_value(game.members)} members and "
               f"{format_value(game.nonmembers)} non-members (membership: {game.membership}); "
               f"{game.reference_records}.")
    found = str(outcome.meaning or "")
    bound = outcome.epsilon_bound
    if outcome.best_lower_bound is None and bound is not None and bound.reason:
        found += f" No ε lower bound: {bound.reason}."
    elif outcome.epsilon_theory is not None:  # the model's claim, against the bound
        found += (" Against its claim (ε = " + _eps(outcome.epsilon_theory) + "): "
                  + _strength(outcome).removeprefix("What was found: "))
    first = _split_sentence(split)
    reference = last_iterate_sentence(outcome)
    return ([first, audited, found] if not split.passed else [audited, first, found]) + ([reference] if reference
                                                                                       else [])


def headline_sentences(outcome: Outcome) -> list[str]:
    """The two plain sentences that open a report of ``outcome`` (three for a trained model: the split
    check comes first when it failed).

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    sentences = presentation_of(outcome.kind).sentence_function()
    if sentences is not None:  # the kind's own (its record's presentation, reports.presentation)
        return sentences(outcome)
    if outcome.split_check is not None:  # a trained model's membership audit
        return _trained_sentences(outcome)
    return _claim_sentences(outcome)


def _bound_text(bound: Bound) -> str:
    mu_lb = (bound.details or {}).get("mu_lb")
    if bound.epsilon is None and mu_lb is not None:
        value = f"μ ≥ {format_value(mu_lb)}"
    else:
        value = f"ε ≥ {_eps(bound.epsilon)}"
    return f"{value} ({bound.method}: {bound.statement or bound.role})"


def _attack_rows(outcome: Outcome) -> list[list[str]]:
    bounds: dict[str, list[str]] = {}
    for bound in outcome.lower_bounds:
        bounds.setdefault(str(bound.attack), []).append(_bound_text(bound))
    attacks, primary = outcome.attacks or {}, outcome.primary_attack
    rows = []
    for name in sorted(attacks, key=lambda n: (n != primary, n)):
        attack = attacks[name]
        tpr, ci = attack.tpr_at_fpr, attack.tpr_at_fpr_ci
        rows.append([name + (" (primary)" if name == primary else ""), format_value(attack.auc),
                     f"{format_value(tpr.get('0.01'))} ({format_interval(ci.get('0.01'))})" if tpr else "—",
                     f"{format_value(tpr.get('0.001'))} ({format_interval(ci.get('0.001'))})" if tpr else "—",
                     format_interval(attack.advantage_ci) or format_value(attack.advantage),
                     "; ".join(bounds.get(name, [])) or "—"])
    return rows


def attack_table(outcome: Outcome) -> dict | None:
    """The one compact table of attacks: ``{"title", "columns", "rows", "caption"}`` (cells formatted).

    Args:
        outcome: the run's outcome.

    Returns:
        The table (the kind's own first table where it leads), or None without one.
    """
    if presentation_of(outcome.kind).tables_lead:
        return format_table(outcome.tables[0]) if outcome.tables else None
    if not outcome.attacks:
        return None
    rows = _attack_rows(outcome)
    columns = ["attack", "AUC", "TPR at 1% FPR (interval)", "TPR at 0.1% FPR (interval)", "advantage interval",
               "lower bounds (method: what it bounds)"]
    split = outcome.split_check
    if split is not None:  # a trained model: each attack's AUC beside the blind classifier's
        columns.insert(2, "blind AUC (records only)")
        blind = f"{format_value(split.blind_auc)} ({format_interval(split.blind_auc_ci)})"
        rows = [row[:2] + [blind] + row[2:] for row in rows]
    return {"title": "Attacks", "columns": columns,
            "rows": rows,
            "caption": f"Intervals at {_percent(outcome.confidence)} confidence. AUC and TPR measure attack strength, "
                       f"not privacy; the lower bounds are what the attacks prove. Role verdict = valid and competing "
                       f"for the best bound; secondary = valid, outside the verdict's family; estimate = rests on a "
                       f"stated assumption."}
