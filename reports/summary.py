"""What a report says first: two plain sentences (what was audited; what was found and how strong the
audit could have been) and one compact table of attacks, for every run kind.

Reads ``results.json`` only and returns text and table cells already formatted
(:func:`reports.formatting.format_value`: 3 significant digits; intervals as ``0.000–0.220``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reports.formatting import format_interval, format_table, format_value
from reports.presentation import presentation_of

Results = Mapping[str, Any]


def _eps(value: Any) -> str:
    return format_value(value) if value is not None else "—"


def _percent(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{100 * value:.3g}%"


def _game_phrase(results: Results) -> str:
    """How the audit played its game, in a few words."""
    game = results.get("game") or {}
    kind = results.get("kind")
    if kind == "membership":
        attacks = results.get("attacks") or {}
        return (f"{format_value(game.get('canaries'))} {game.get('canary_kind', '')} canaries, each included by a "
                f"fair coin, attacked by {len(attacks)} membership attack{'s' if len(attacks) != 1 else ''} "
                f"(primary: {results.get('primary_attack', '—')})")
    if kind == "dp" and not game and isinstance(results.get("config_check"), Mapping):
        block = results["config_check"]
        return (f"its accounting check alone (--check-config): the DP-SGD configuration read from "
                f"{format_value(block.get('trainings'))} instrumented calls of the code's training (the probe, the "
                f"first steps of its repeat, the dataset plus one record and less one record) and compared with the "
                f"claim; no canaries, no attack")
    if kind == "dp" and game.get("one_run"):
        return (f"one run of your training with {format_value(game.get('canaries'))} {game.get('canary_kind')} "
                f"gradient canaries, each included by its own fair coin, observed under the {game.get('threat')} "
                f"threat model")
    if kind == "dp":
        observation = game.get("observation") if isinstance(game.get("observation"), Mapping) else {}
        params = results.get("params") if isinstance(results.get("params"), Mapping) else {}
        extras = []
        if params.get("init") == "pretrained":
            extras.append("every run starting from parameters pre-trained without privacy on disjoint data")
        if observation.get("calibration_runs"):
            extras.append(f"the threshold fixed on {format_value(observation['calibration_runs'])} separate "
                          "calibration runs")
        return (f"{format_value(game.get('runs'))} training runs with the {game.get('canary_kind')} canary by a fair "
                f"coin, observed under the {game.get('threat')} threat model" + "".join(f"; {e}" for e in extras))
    if kind == "mechanism":
        return f"{format_value(game.get('draws_per_world'))} draws on each side of its neighbouring pair"
    return "its audit game"


#: The two names of what a perfect attack reaches, the same on the console, in reports and in the docs
#: (docs/reference/results-schema.md): the mean bound a perfect attack reaches with this design, and the bound
#: with every guess right.
EXPECTATION_NAME = "perfect-attack expectation"
CEILING_NAME = "ceiling (every guess right)"


def perfect_attack_expectation(results: Results) -> float | None:
    """What a perfect attack expects to certify with this design (``one_run.expected_perfect.mean``;
    None where the audit simulated no perfect attack).

    Args:
        results: the run's results.

    Returns:
        The expected epsilon, or None.
    """
    one = results.get("one_run") if isinstance(results.get("one_run"), Mapping) else {}
    mean = (one.get("expected_perfect") or {}).get("mean")
    return float(mean) if isinstance(mean, (int, float)) else None


def _decided_by(results: Results, bound: float | None, theory: float) -> str | None:
    """What decided a violation besides a bound above the claim, in words: the accounting check's findings,
    or the rejection of the claim's own tradeoff curve; None when the bound above the claim alone did."""
    verdict = results.get("verdict") or {}
    block = results.get("config_check") if isinstance(results.get("config_check"), Mapping) else {}
    if verdict.get("source") == "config_check":
        found = "; ".join(str(f.get("message", "")).rstrip(".") for f in block.get("findings") or []
                          if isinstance(f, Mapping) and f.get("violation"))
        return f"the accounting check found: {found or verdict.get('text', '')}"
    if bound is not None and bound > theory:
        return None
    rejecting = next((b for b in results.get("lower_bounds") or [] if isinstance(b, Mapping)
                      and (b.get("details") or {}).get("claim_rejected")), None)
    confidence = _percent(results.get("confidence"))
    how = f" by the {rejecting.get('method')} test" if rejecting else ""
    return f"the claim's own tradeoff curve (ε = {_eps(theory)}) is rejected at {confidence} confidence{how}"


def _strength(results: Results) -> str:
    """What was found, what decided a violation, and how strong the audit could have been: the
    perfect-attack expectation where the audit simulated one, else the ceiling."""
    best = results.get("best_lower_bound") or None
    ceiling = (results.get("ceiling") or {}).get("epsilon")
    expected = perfect_attack_expectation(results)
    theory = results.get("epsilon_theory")
    status = (results.get("verdict") or {}).get("status")
    if best is None:
        found = "no statistically valid lower bound"
    else:
        found = (f"ε ≥ {_eps(best.get('epsilon'))} ({best.get('method')}"
                 + (f", attack {best['attack']}" if best.get("attack") else "")
                 + f", {_percent(best.get('family_confidence', best.get('confidence')))} confidence)")
    if ceiling is not None and expected is None:
        found += f" of a possible {_eps(ceiling)}"
    if theory is None:
        return f"What was found: the audit certifies {found}; with no claim there is nothing to violate."
    bound = float(best["epsilon"]) if best and isinstance(best.get("epsilon"), (int, float)) else None
    if status == "violation":
        decided = _decided_by(results, bound, theory)
        if best is None and not results.get("lower_bounds"):  # the accounting check alone
            return f"What was found: {decided}: the implementation or its privacy accounting is broken."
        above = bound is not None and bound > theory
        relation = (f"above the claimed ε = {_eps(theory)}" if above else
                    f"below the claimed ε = {_eps(theory)}" if bound is None or bound < theory else
                    f"at the claimed ε = {_eps(theory)}")
        reason = "" if decided is None else (f", and {decided}" if above else f"; the violation is that {decided}")
        return (f"What was found: the audit certifies {found}, {relation}{reason}: the implementation or its "
                f"privacy accounting is broken.")
    if best is None and not results.get("lower_bounds"):
        return (f"What was found: {(results.get('verdict') or {}).get('text', '—')} (the accounting check alone; no "
                f"attack was run, so no lower bound).")
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


def _claim_sentences(results: Results) -> list[str]:
    target, description = results.get("target", "?"), results.get("target_description")
    who = f"{target} ({description})" if description else str(target)
    theory = results.get("epsilon_theory")
    if theory is None:
        audited = f"What was audited: {who}, which makes no privacy claim, with {_game_phrase(results)}."
        strongest = _strongest_attack(results)
        found = _strength(results)
        if strongest:
            found = found.removesuffix(".") + f"; the strongest attack, {strongest}."
        return [audited, found]
    audited = (f"What was audited: {who}, which claims ε = {_eps(theory)} at δ = {format_value(results.get('delta'))}, "
               f"with {_game_phrase(results)}.")
    return [audited, _strength(results)]


def _strongest_attack(results: Results) -> str | None:
    attacks = {n: a for n, a in (results.get("attacks") or {}).items() if isinstance(a, Mapping) and "auc" in a}
    if not attacks:
        return None
    name = max(attacks, key=lambda n: attacks[n].get("auc") or 0)
    tpr = (attacks[name].get("tpr_at_fpr") or {}).get("0.001")
    return f"{name}, reaches AUC {format_value(attacks[name].get('auc'))} and TPR {format_value(tpr)} at 0.1% FPR"


def sweep_sentences(results: Results) -> list[str]:
    rows = [r for r in results.get("rows") or [] if isinstance(r, Mapping)]
    eps = sorted({r.get("epsilon_claimed") for r in rows if r.get("epsilon_claimed") is not None})
    threats = sorted({str(r.get("threat")) for r in rows})
    canaries = sorted({str(r.get("canary")) for r in rows})
    audited = (f"What was audited: run dp on {results.get('target')} at claimed ε = "
               f"{', '.join(format_value(e) for e in eps)}, threat model{'s' if len(threats) > 1 else ''} "
               f"{', '.join(threats)}, canary {', '.join(canaries)} ({len(rows)} audits).")
    if not rows:
        return [audited, "What was found: nothing (no audit completed)."]
    top = max(rows, key=lambda r: r.get("epsilon_lb_valid") or 0.0)
    est = max(rows, key=lambda r: r.get("epsilon_lb") or 0.0)
    status = (results.get("verdict") or {}).get("status", "—")
    family = results.get("family") or {}
    violations = sum(r.get("verdict") == "violation" for r in rows)
    return [audited, f"What was found: {status} — {violations} of {len(rows)} audits find a violation (a valid "
                     f"bound above the claim or a rejection of the claim's tradeoff curve); the largest valid bound "
                     f"is {_eps(top.get('epsilon_lb_valid'))} ({top.get('valid_method')}) at claimed ε = "
                     f"{_eps(top.get('epsilon_theory'))}, the largest figure {_eps(est.get('epsilon_lb'))} "
                     f"({est.get('method')}); the verdict holds at {_percent(family.get('confidence'))} over the "
                     f"family of {format_value(family.get('size'))} audits. Valid points above the y = x line are "
                     f"violations; so is a rejected tradeoff curve, even below it."]


def inversion_sentences(results: Results) -> list[str]:
    inv = results.get("inversion") or {}
    ref = inv.get("reference") or {}
    gap = inv.get("member_gap") or {}
    who = f"{results.get('target')} ({results.get('target_description')})"
    access = "white-box and black-box" if "black_box" in inv else (results.get("model") or {}).get("access", "")
    return [f"What was audited: MI-FACE model inversion of every class of {who}, {access}, "
            f"against a reference model trained on the same distribution without the members.",
            f"What was found: an independent classifier recognises {_percent(inv.get('eval_accuracy'))} of the "
            f"target's reconstructions (reference model {_percent(ref.get('eval_accuracy'))}, chance "
            f"{_percent(inv.get('chance_accuracy'))}); the member gap in MSE is {format_value(gap.get('mse_gap'))} "
            f"(standard error {format_value(gap.get('mse_gap_standard_error'))}) — only this gap, not recognisable "
            f"digits, is about privacy."]


def extraction_sentences(results: Results) -> list[str]:
    ext = results.get("extraction") or {}
    who = f"{results.get('target')} ({results.get('target_description')})"
    text = (f"What was found: {ext.get('method', 'the attack')} recovered the model with "
            f"{format_value(ext.get('queries'))} queries (relative parameter error "
            f"{format_value(ext.get('param_rel_error'))}, agreement {format_value(ext.get('agreement_test'))} on "
            f"test data).")
    post = (ext.get("post_processing") or {}).get("text")
    if post:
        text += f" For this DP model, {post}."
    return [f"What was audited: stealing {who} through its prediction API "
            f"({format_value(ext.get('d'))} features).", text]


def reconstruction_sentences(results: Results) -> list[str]:
    rec = results.get("reconstruction") or {}
    who = f"{results.get('target')} ({results.get('target_description')})"
    verdict = results.get("verdict") or {}
    return [f"What was audited: how often an informed adversary ({rec.get('threat')} access) identifies one "
            f"training record of {who} among n equally likely candidates, against the claim's ReRo bound.",
            f"What was found: {verdict.get('status')} — {verdict.get('text')}. {rec.get('meaning', '')}".rstrip()]


def one_run_sentences(results: Results) -> list[str]:
    """The paragraphs of a one-run audit's section: canaries, guesses right, bound, the ceiling (every guess
    right) and the perfect-attack expectation with this many canaries (``results["one_run"]``).

    Args:
        results: the run's results.

    Returns:
        The paragraphs (none without a one-run block).
    """
    one = results.get("one_run") if isinstance(results.get("one_run"), Mapping) else None
    if not one:
        return []
    game = results.get("game") or {}
    best = results.get("best_lower_bound") or {}
    expected = one.get("expected_perfect") or {}
    design = one.get("design") or {}
    canary = game.get("canary") if isinstance(game.get("canary"), Mapping) else {}
    observation = game.get("observation") if isinstance(game.get("observation"), Mapping) else {}
    return [
        f"One run of your training: {format_value(one.get('canaries'))} gradient canaries "
        f"({format_value(one.get('included'))} in by their fair coins; {canary.get('directions', '')}), each joining "
        f"every step like one more Poisson-sampled record, clipped to C. "
        + (f"The audit ran {game['trainings_text']}." if game.get("trainings_text") else
           "The audit trained one model."),
        f"Guesses: 'in' for the {format_value(one.get('k_pos'))} highest scores"
        + (f" and 'out' for the {format_value(one['k_neg'])} lowest" if one.get("k_neg") else "")
        + f", {format_value(one.get('correct'))} right. Bound: ε ≥ {_eps(best.get('epsilon'))} (f-DP one-run test, "
        f"{_percent(best.get('family_confidence'))} confidence); the same guesses "
        f"{'reject' if one.get('claim_rejected') else 'do not reject'} the claim's own tradeoff curve. The "
        f"{CEILING_NAME}: ε ≥ {_eps(one.get('ceiling'))}.",
        f"The {EXPECTATION_NAME} with this M: ε ≥ {_eps(expected.get('mean'))} on average (sd "
        f"{_eps(expected.get('sd'))}, 5–95% {format_interval(expected.get('range_5_95'))}) — the likelihood ratio of "
        f"the claimed mechanism on {format_value(expected.get('games'))} games simulated under the claim.",
        f"How the guess count was chosen: {design.get('rule', '—')} ({format_value(design.get('simulations'))} "
        f"simulated games of the claimed q, σ, T; never the audited coins or scores).",
    ] + ([f"This threat sees {observation['sees']}; it cannot see {observation['cannot_see']}."]
         if observation.get("sees") else [])


def _split_sentence(split: Mapping[str, Any]) -> str:
    lo, hi = (split.get("blind_auc_ci") or [None, None])[:2]
    auc = (f"AUC {format_value(split.get('blind_auc'))} ({format_interval([lo, hi])} at "
           f"{_percent(split.get('confidence'))})")
    if split.get("passed"):
        return (f"Split check: a blind classifier that sees the records but never the model gets {auc}, consistent "
                f"with chance: members and non-members look like one random split.")
    return (f"Split check FAILED: a blind classifier that sees the records but never the model tells members from "
            f"non-members with {auc}. The split is not random, so the attacks' AUCs below measure the split as much "
            f"as the model (each is shown beside the blind AUC), and no ε lower bound is given.")


def _trained_sentences(results: Results) -> list[str]:
    """A trained model's audit: the split check (first when it failed), what was audited, what it means."""
    game = results.get("game") or {}
    split = results.get("split_check") or {}
    target, description = results.get("target", "?"), results.get("target_description")
    audited = (f"What was audited: {target} ({description}), a model that already exists, queried without retraining "
               f"on {format_value(game.get('members'))} members and {format_value(game.get('nonmembers'))} "
               f"non-members (membership: {game.get('membership')}); {game.get('reference_records')}.")
    found = str(results.get("meaning") or "")
    bound = results.get("epsilon_bound") or {}
    if results.get("best_lower_bound") is None and bound.get("reason"):
        found += f" No ε lower bound: {bound['reason']}."
    elif results.get("epsilon_theory") is not None:  # the model's claim, against the bound
        found += " Against its claim (ε = " + _eps(results["epsilon_theory"]) + "): " + _strength(results).removeprefix(
            "What was found: ")
    first = _split_sentence(split)
    return [first, audited, found] if not split.get("passed") else [audited, first, found]


def headline_sentences(results: Results) -> list[str]:
    """The two plain sentences that open a report of ``results`` (three for a trained model: the split
    check comes first when it failed).

    Args:
        results: the run's results.

    Returns:
        The sentences.
    """
    sentences = presentation_of(results.get("kind")).sentence_function()
    if sentences is not None:  # the kind's own (its record's presentation, reports.presentation)
        return sentences(results)
    if isinstance(results.get("split_check"), Mapping):  # a trained model's membership audit
        return _trained_sentences(results)
    return _claim_sentences(results)


def _bound_text(bound: Mapping[str, Any]) -> str:
    details = bound.get("details") if isinstance(bound.get("details"), Mapping) else {}
    if bound.get("epsilon") is None and details.get("mu_lb") is not None:
        value = f"μ ≥ {format_value(details['mu_lb'])}"
    else:
        value = f"ε ≥ {_eps(bound.get('epsilon'))}"
    what = bound.get("statement") or bound.get("role", "verdict" if bound.get("valid") else "estimate")
    return f"{value} ({bound.get('method')}: {what})"


def attack_table(results: Results) -> dict | None:
    """The one compact table of attacks: ``{"title", "columns", "rows", "caption"}`` (cells formatted).

    Args:
        results: the run's results.

    Returns:
        The table (the kind's own first table where it leads), or None without one.
    """
    if presentation_of(results.get("kind")).tables_lead:
        tables = [t for t in results.get("tables") or [] if isinstance(t, Mapping)]
        return format_table(tables[0]) if tables else None
    attacks = {n: a for n, a in (results.get("attacks") or {}).items() if isinstance(a, Mapping)}
    if not attacks:
        return None
    bounds: dict[str, list[str]] = {}
    for bound in results.get("lower_bounds") or []:
        if isinstance(bound, Mapping):
            bounds.setdefault(str(bound.get("attack")), []).append(_bound_text(bound))
    primary = results.get("primary_attack")
    rows = []
    for name in sorted(attacks, key=lambda n: (n != primary, n)):
        attack = attacks[name]
        tpr, ci = attack.get("tpr_at_fpr") or {}, attack.get("tpr_at_fpr_ci") or {}
        rows.append([name + (" (primary)" if name == primary else ""), format_value(attack.get("auc")),
                     f"{format_value(tpr.get('0.01'))} ({format_interval(ci.get('0.01'))})" if tpr else "—",
                     f"{format_value(tpr.get('0.001'))} ({format_interval(ci.get('0.001'))})" if tpr else "—",
                     format_interval(attack.get("advantage_ci")) or format_value(attack.get("advantage")),
                     "; ".join(bounds.get(name, [])) or "—"])
    confidence = _percent(results.get("confidence"))
    columns = ["attack", "AUC", "TPR at 1% FPR (interval)", "TPR at 0.1% FPR (interval)", "advantage interval",
               "lower bounds (method: what it bounds)"]
    split = results.get("split_check")
    if isinstance(split, Mapping):  # a trained model: each attack's AUC beside the blind classifier's
        columns.insert(2, "blind AUC (records only)")
        blind = f"{format_value(split.get('blind_auc'))} ({format_interval(split.get('blind_auc_ci'))})"
        rows = [row[:2] + [blind] + row[2:] for row in rows]
    return {"title": "Attacks", "columns": columns,
            "rows": rows,
            "caption": f"Intervals at {confidence} confidence. AUC and TPR measure attack strength, not privacy; "
                       f"the lower bounds are what the attacks prove. Role verdict = valid and competing for the best "
                       f"bound; secondary = valid, outside the verdict's family; estimate = rests on a stated "
                       f"assumption."}
