"""What ``run membership`` does particular to a trained language model, audited on its texts: a built-in LM
target (:mod:`targets.lm.builtin`) or a plugin returning ``{"kind": "lm"}`` (:mod:`targets.lm.contract`). No game
is played; the audit is that of a trained model (:func:`audit.membership.runner.run_trained_membership`, which
also runs the text blind split check first, :func:`audit.stats.text_split_check.text_split_check`: can a
classifier that reads only the texts tell members from non-members?), on texts:

1. a built-in target is fine-tuned (a plugin's model already exists);
2. the model's per-token log-probabilities on every member and non-member (and the base model's, and the
   moments for Min-K%++, when given);
3. ``R`` reference models, each the target's ``train`` on its own random subset of the population texts
   (as many as the model was trained on; at most half the population when ``R >= 2``), queried on the
   same texts: every one is OUT for every audited text;
4. the attacks on texts (:data:`attacks.names.TEXT_ATTACKS`, :func:`attacks.lm_membership.run_text_attacks`) the
   target supports, each beside the blind AUC; the runner gives a one-run epsilon bound only when
   :func:`audit.membership.trained_results.bound_allowed` (fair coins and a passed check), Bonferroni over every
   attack and guess fraction (:func:`audit.membership.trained_results.trained_bounds`).

Sources: docs/references.md, "Language model membership", "Blind split check", "One-run auditing".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from attacks.lm_membership import TextInputs, run_text_attacks
from attacks.names import ATTACK_SPECS, ATTACKS, TEXT_ATTACKS
from audit.errors import UserError
from audit.membership.detail import MembershipDetail
from audit.membership.options import MembershipOptions
from audit.membership.trained import TRAINED_REFERENCES
from audit.membership.trained_results import (
    NO_CLAIM_DELTA,
    Scored,
    TrainedFindings,
    attack_entry,
    trained_meaning,
    trained_table,
)
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext, Stages, cache_dir_of
from audit.run_results import RunResults
from audit.stats.outcome import EpsilonBound, Game
from audit.stats.split_check import SplitCheck
from targets.catalogue import is_language_model
from targets.lm.builtin import builtin_lm
from targets.lm.contract import TrainedLM, lm_from_dict
from targets.plugins.loading import ModelPlugin
from targets.threads import thread_limit

__all__ = ["TextAudit", "text_audit", "lm_references", "takes_lm_target", "LM_STAGES"]

#: The stages that print a progress line, in order.
LM_STAGES = ("split_check", "target", "queries", "references")


def takes_lm_target(name: str, use: object) -> bool:
    """``RunKind.applies_to`` of ``run membership``: it takes every built-in language-model target
    (:func:`targets.catalogue.is_language_model`)."""
    return is_language_model(name)


def _check_options(opts: MembershipOptions) -> None:
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a language-model target: it states its own claim")
    if opts.canaries is not None or opts.shadows is not None or opts.canary is not None:
        raise UserError("--canary/--canaries/--shadows do not apply to a language model: it is audited on its own "
                        "member and non-member texts")
    if tuple(opts.attacks) != tuple(ATTACKS):
        raise UserError(f"--attack does not apply to a language model: it runs {', '.join(TEXT_ATTACKS)} (those its "
                        f"target supports); leave out --attack")


def lm_references(lm: TrainedLM, given: int | None) -> int:
    """The number of reference models: ``given`` (one of :data:`TRAINED_REFERENCES`), else 2 when ``lm`` has
    ``train`` and ``population``, else 0; a one-line error when it cannot have them."""
    if given is None:
        return 2 if lm.train is not None and lm.population else 0
    if given not in TRAINED_REFERENCES:
        raise UserError(f"a language model is audited with {', '.join(map(str, TRAINED_REFERENCES))} reference "
                        f"models, got --references {given}")
    if given and (lm.train is None or not lm.population):
        raise UserError(f"--references {given} needs 'train' and 'population' texts in LM target {lm.spec}; add "
                        f"them or pass --references 0")
    return given


def _load(opts: MembershipOptions, plugin: ModelPlugin | None, cache_dir: Path) -> TrainedLM:
    if plugin is None:
        return builtin_lm(opts.target, seed=opts.seed, cache_dir=cache_dir, quick=opts.quick)
    return lm_from_dict(plugin.spec, plugin.made, sorted(plugin.loaded), list(plugin.namespaces))


def _query(fn, texts: list[str], desc: str, quiet: bool) -> list[np.ndarray]:
    with tqdm(total=len(texts), desc=desc, unit="text", disable=quiet, leave=False) as bar:
        return fn(texts, lambda done, total: bar.update(done - bar.n))


def _reference_texts(lm: TrainedLM, references: int, seed: int) -> list[list[str]]:
    """Each reference model's training texts: its own random subset of the population (module docstring)."""
    pool = lm.population or []
    size = min(lm.training_size or len(lm.members), len(pool) // 2 if references >= 2 else len(pool))
    if references and size < 1:
        raise UserError(f"LM target {lm.spec}: {len(pool)} population texts are too few for reference models")
    rng = np.random.default_rng([seed, 21])
    return [[pool[i] for i in np.sort(rng.choice(len(pool), size=size, replace=False))] for _ in range(references)]


def _inputs(ctx: RunContext, lm: TrainedLM, texts: list[str], references: int, quiet: bool) -> TextInputs:
    """What the attacks on texts read of ``lm`` (module docstring): its log-probabilities on ``texts``, its
    moments and its base model's when given, and those of ``references`` reference models."""
    with ctx.stage("queries", f"queries: the model's token log-probabilities on {len(texts)} texts"):
        logp = _query(lm.token_logprobs, texts, "querying the model", quiet)
        moments = _query(lm.token_moments, texts, "next-token moments", quiet) if lm.moments is not None else None
        base = (_query(lambda t, p: lm.token_logprobs(t, p, base=True), texts, "querying the base model", quiet)
                if lm.base_logprobs is not None else None)
    ref_logp = None
    if references:
        parts = _reference_texts(lm, references, ctx.seed)
        seeds = np.random.SeedSequence([ctx.seed, 22]).generate_state(references).tolist()
        ref_logp = []
        with ctx.stage("references", f"references: training {references} reference model(s) like the target, each "
                                     f"on {len(parts[0])} of {len(lm.population)} population texts"):
            for r, (part, s) in enumerate(zip(parts, seeds, strict=True)):
                fn = lm.fit_reference(part, int(s))
                ref_logp.append(_query(fn, texts, f"querying reference model {r + 1}", quiet))
    return TextInputs(texts=texts, logprobs=logp, moments=moments, base=base, references=ref_logp)


#: Why an attack on texts that needs it (:data:`attacks.names.TEXT_NEEDS`) is not run without it.
MISSING = {"moments": "needs 'moments' (mean and std of the next-token log-probability) in the plugin",
           "base": "needs 'base_logprobs' (the model before fine-tuning) in the plugin",
           "references": "needs reference models: 'train' and 'population' in the plugin, --references >= 1"}


def _not_run(inputs: TextInputs) -> dict[str, str]:
    """Each attack on texts that ``inputs`` cannot feed, and why."""
    return {name: MISSING[ATTACK_SPECS[name].needs] for name in TEXT_ATTACKS
            if not inputs.has(ATTACK_SPECS[name].needs)}


@dataclass(frozen=True, eq=False)
class TextAudit:
    """What ``run membership`` does particular to a trained language model (module docstring): the model and
    its reference models, and the stages that print a progress line."""

    subject: TrainedLM
    references: int
    stages: Stages

    def split_line(self) -> str:
        """The progress line of the text blind split check."""
        lm = self.subject
        return (f"text blind split check: {len(lm.members)} members against {len(lm.nonmembers)} non-members, the "
                f"texts alone")

    def prepare(self, ctx: RunContext) -> None:
        """A built-in target fine-tuned on its members (a plugin's model exists: nothing)."""
        lm = self.subject
        if lm.prepare is not None:
            with ctx.stage("target", f"target: fine-tuning {lm.name} on its {len(lm.members)} members"), \
                    thread_limit(1):
                self.stages.set_training_time(lm.prepare())

    def score(self, ctx: RunContext, split: SplitCheck, opts: MembershipOptions) -> Scored:
        """The model queried on every member and non-member (and its reference models), and every attack on texts
        it supports scored, each entry beside the blind AUC."""
        lm, references = self.subject, self.references
        texts = lm.members + lm.nonmembers
        member = np.r_[np.ones(len(lm.members), bool), np.zeros(len(lm.nonmembers), bool)]
        inputs = _inputs(ctx, lm, texts, references, opts.quiet)
        scores = run_text_attacks(inputs)
        attacks_out = {name: replace(attack_entry(scores[name], member, split, opts.confidence, TEXT_ATTACKS[name]),
                                     reference_models=references if ATTACK_SPECS[name].needs == "references" else None)
                       for name in TEXT_ATTACKS if name in scores}
        return Scored(scores=scores, member=member, attacks=attacks_out, skipped=_not_run(inputs), detail=inputs)

    def results(self, opts: MembershipOptions, scored: Scored, found: TrainedFindings) -> RunResults:
        """The typed results of the audit (:func:`text_results`)."""
        return text_results(opts, self.subject, found)


def text_audit(opts: MembershipOptions, plugin: ModelPlugin | None) -> TextAudit:
    """The audit of a language model: ``plugin`` a ``{"kind": "lm"}`` factory's dict, or None for the built-in
    target ``opts.target``; its options checked (one-line errors), the model loaded, its reference models
    chosen and its stages planned."""
    _check_options(opts)
    stages = Stages.for_command(LM_STAGES, {"target": 1.0})
    lm = _load(opts, plugin, cache_dir_of(opts.out))
    references = lm_references(lm, opts.references)
    stages.expect("references", references)
    stages.planned = [s for s in LM_STAGES if (s != "target" or lm.prepare is not None)
                      and (s != "references" or references)]   # "[i/n]" counts the stages that run
    return TextAudit(lm, references, stages)


def text_results(opts: MembershipOptions, lm: TrainedLM, found: TrainedFindings) -> RunResults:
    """The typed results of a language model's membership audit, in the blocks of a trained model's
    (:func:`audit.membership.trained.record_results`), its target under ``trained_lm``."""
    split, attacks_out, references, judgement = found.split, found.attacks, found.references, found.judgement
    allowed, why = found.allowed, found.why
    best = judgement.best_lower_bound
    delta = lm.delta if lm.claim is not None else NO_CLAIM_DELTA
    members = [len(t) for t in lm.members]
    header = ResultsHeader(
        description=lm.description, dataset=lm.source, dataset_source=lm.source,
        model={"arch": lm.model_kind, "member_text_chars_median": float(np.median(members))},
        neighbouring=ADD_REMOVE_RECORD, delta=delta, confidence=opts.confidence,
        primary_attack=best.attack if best else None, epsilon_theory=judgement.epsilon_theory,
        accountant=accountant(lm.claim), params=lm.params)
    population = len(lm.population or [])
    game = Game(members=len(lm.members), nonmembers=len(lm.nonmembers), membership=lm.membership,
                reference_records=(f"{references} reference model(s), each trained like the target on its own "
                                   f"random texts of {population} population texts (none a member or non-member)"
                                   if references else "no reference models"),
                kind="trained language model", membership_note=lm.membership_note,
                fine_tuned_in_run=lm.prepare is not None,
                records=f"the {len(lm.members)} member and {len(lm.nonmembers)} non-member texts ({lm.source})",
                reference_models=references)
    detail = MembershipDetail(epsilon_bound=EpsilonBound(allowed=allowed, reason=why),
                              attacks_not_run=found.skipped, split_check=split, trained_lm=lm.to_dict(),
                              meaning=trained_meaning(lm, split, attacks_out, best, delta))
    return RunResults(
        header=header, judgement=judgement,
        attacks=attacks_out, tables=(trained_table(attacks_out, split),), game=game,
        detail=detail, quick=opts.quick)
