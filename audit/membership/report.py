"""What the membership kind hands its reports (:class:`reports.presentation.Presentation`): its game in a
few words and, for a trained model, its opening sentences with the split check. They read the run's typed
outcome and its kind's block (:class:`audit.membership.detail.MembershipDetail`)."""

from __future__ import annotations

from audit.stats.outcome import Game, Outcome, SplitCheck
from reports.formatting import format_epsilon, format_interval, format_percent, format_value
from reports.summary import claim_sentences, found_sentence, last_iterate_sentence


def game_phrase(outcome: Outcome) -> str:
    """How a canary game was played, in a few words.

    Args:
        outcome: the run's outcome.

    Returns:
        The phrase.
    """
    game = outcome.game or Game()
    attacks = outcome.attacks or {}
    return (f"{format_value(game.canaries)} {game.canary_kind or ''} canaries, each included by a "
            f"fair coin, attacked by {len(attacks)} membership attack{'s' if len(attacks) != 1 else ''} "
            f"(primary: {outcome.primary_attack or '—'})")


def _split_sentence(split: SplitCheck) -> str:
    lo, hi = (list(split.blind_auc_ci) or [None, None])[:2]
    auc = (f"AUC {format_value(split.blind_auc)} ({format_interval([lo, hi])} at "
           f"{format_percent(split.confidence)})")
    if split.passed:
        return (f"Split check: a blind classifier that sees the records but never the model gets {auc}, consistent "
                f"with chance: members and non-members look like one random split.")
    return (f"Split check FAILED: a blind classifier that sees the records but never the model tells members from "
            f"non-members with {auc}. The split is not random, so the attacks' AUCs below measure the split as much "
            f"as the model (each is shown beside the blind AUC), and no ε lower bound is given.")


def _trained_sentences(outcome: Outcome, split: SplitCheck) -> list[str]:
    """A trained model's audit: the split check (first when it failed), what was audited, what it means."""
    game = outcome.game or Game()
    how = ("a language model fine-tuned in this run, then queried" if game.fine_tuned_in_run
           else "a model that already exists, queried without retraining")
    audited = (f"What was audited: {outcome.target} ({outcome.audited.target_description}), {how} on "
               f"{format_value(game.members)} members and "
               f"{format_value(game.nonmembers)} non-members (membership: {game.membership}); "
               f"{game.reference_records}.")
    detail = outcome.detail
    found = str(detail.meaning or "")
    bound = detail.epsilon_bound
    if outcome.best_lower_bound is None and bound is not None and bound.reason:
        found += f" No ε lower bound: {bound.reason}."
    elif outcome.epsilon_theory is not None:  # the model's claim, against the bound
        found += (" Against its claim (ε = " + format_epsilon(outcome.epsilon_theory) + "): "
                  + found_sentence(outcome).removeprefix("What was found: "))
    first = _split_sentence(split)
    reference = last_iterate_sentence(outcome)
    return ([first, audited, found] if not split.passed else [audited, first, found]) + ([reference] if reference
                                                                                       else [])


def sentences(outcome: Outcome) -> list[str]:
    """The sentences that open a membership report: a trained model's (the split check comes first when it
    failed), else a claim audit's (:func:`reports.summary.claim_sentences`).

    Args:
        outcome: the run's outcome.

    Returns:
        The sentences.
    """
    split = outcome.detail.split_check
    return _trained_sentences(outcome, split) if split is not None else claim_sentences(outcome)
