"""What a report says first: two plain sentences (what was audited; what was found and how strong the
audit could have been), a third for an audit of a DP-SGD training through its final model (the last-iterate
reference, :func:`last_iterate_sentence`), and one compact table of attacks, for every run kind.

Reads the run's typed outcome (:class:`audit.stats.outcome.Outcome`) only and returns text and table cells
already formatted (:func:`reports.formatting.format_value`: 3 significant digits; intervals as ``0.000–0.220``).
"""

from __future__ import annotations

from audit.stats.outcome import Bound, Outcome
from reports.formatting import format_epsilon, format_interval, format_percent, format_table, format_value
from reports.presentation import presentation_of

#: The short names the sentences below use.
_eps, _percent = format_epsilon, format_percent


#: The two names of what a perfect attack reaches, the same on the console, in reports and in the docs
#: (docs/reference/results-schema.md): the mean bound a perfect attack reaches with this design, and the bound
#: with every guess right.
EXPECTATION_NAME = "perfect-attack expectation"
CEILING_NAME = "ceiling (every guess right)"


def _decided_by(outcome: Outcome, bound: float | None, theory: float) -> str | None:
    """What decided a violation besides a bound above the claim, in words: the accounting check's findings,
    or the rejection of the claim's own tradeoff curve; None when the bound above the claim alone did."""
    verdict = outcome.verdict
    if verdict.source == "config_check":
        check = outcome.kind_detail.accounting_check()
        findings = check.findings if check is not None else ()
        found = "; ".join(f.message.rstrip(".") for f in findings if f.violation)
        return f"the accounting check found: {found or verdict.text}"
    if bound is not None and bound > theory:
        return None
    rejecting = outcome.claim_rejecting_bound()
    how = f" by the {rejecting.method} test" if rejecting else ""
    return (f"the claim's own tradeoff curve (ε = {_eps(theory)}) is rejected at {_percent(outcome.confidence)} "
            f"confidence{how}")


def found_sentence(outcome: Outcome) -> str:
    """What was found, what decided a violation, and how strong the audit could have been: the
    perfect-attack expectation where the audit simulated one, else the ceiling.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentence (``What was found: ...``).
    """
    best = outcome.best_lower_bound
    ceiling = outcome.judged.ceiling.epsilon if outcome.judged.ceiling is not None else None
    expected = outcome.kind_detail.perfect_expectation()
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
    ref = outcome.judged.last_iterate
    if ref is None:
        return None
    best = outcome.best_lower_bound
    beside = [f"the bound ε ≥ {_eps(best.epsilon if best else None)}"]
    if outcome.judged.ceiling is not None and outcome.judged.ceiling.epsilon is not None:
        beside.append(f"the {CEILING_NAME} {_eps(outcome.judged.ceiling.epsilon)}")
    expected = outcome.kind_detail.perfect_expectation()
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


def audited_name(outcome: Outcome) -> str:
    """The audited target as the opening sentences name it: its name, and its description in brackets where
    there is one.

    Args:
        outcome: the run's outcome.

    Returns:
        The name.
    """
    description = outcome.audited.target_description
    return f"{outcome.target} ({description})" if description else str(outcome.target)


def claim_sentences(outcome: Outcome) -> list[str]:
    """The sentences that open a claim audit's report: what was audited (the game in the words of the kind's
    presentation, :attr:`reports.presentation.Presentation.game`), what was found, and the last-iterate
    reference where there is one.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    phrase = presentation_of(outcome.kind).function("game")
    game = phrase(outcome) if phrase is not None else "its audit game"
    who = audited_name(outcome)
    theory = outcome.epsilon_theory
    if theory is None:
        audited = f"What was audited: {who}, which makes no privacy claim, with {game}."
        strongest = _strongest_attack(outcome)
        found = found_sentence(outcome)
        if strongest:
            found = found.removesuffix(".") + f"; the strongest attack, {strongest}."
        return [audited, found]
    audited = (f"What was audited: {who}, which claims ε = {_eps(theory)} at δ = {format_value(outcome.delta)}, "
               f"with {game}.")
    reference = last_iterate_sentence(outcome)
    return [audited, found_sentence(outcome)] + ([reference] if reference else [])


def _strongest_attack(outcome: Outcome) -> str | None:
    attacks = outcome.attacks or {}
    if not attacks:
        return None
    name = max(attacks, key=lambda n: attacks[n].auc or 0)
    tpr = attacks[name].tpr_at_fpr.get("0.001")
    return f"{name}, reaches AUC {format_value(attacks[name].auc)} and TPR {format_value(tpr)} at 0.1% FPR"


def headline_sentences(outcome: Outcome) -> list[str]:
    """The two plain sentences that open a report of ``outcome`` (three for a trained model: the split
    check comes first when it failed): the kind's own (its presentation's ``sentences``, which may read the
    outcome's ``detail`` block, always there when they are called), else a claim audit's.

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    sentences = presentation_of(outcome.kind).function("sentences")
    if sentences is not None and outcome.detail is not None:  # the kind's own, read from its block (its
        return sentences(outcome)  # record's presentation, reports.presentation)
    return claim_sentences(outcome)  # a kind without sentences, or an outcome built without its block


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
    split = outcome.kind_detail.blind_split()
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
