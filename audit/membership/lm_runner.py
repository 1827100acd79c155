"""``run membership`` of a trained language model: a built-in LM target (:mod:`targets.lm.builtin`) or a
plugin returning ``{"kind": "lm"}`` (:mod:`targets.lm.contract`). No game is played; the audit is that of a
trained model (:mod:`audit.membership.trained_runner`), on texts:

1. the text blind split check first (:func:`audit.stats.text_split_check.text_split_check`): can a
   classifier that reads only the texts tell members from non-members?
2. a built-in target is fine-tuned (a plugin's model already exists);
3. the model's per-token log-probabilities on every member and non-member (and the base model's, and the
   moments for Min-K%++, when given);
4. ``R`` reference models, each the target's ``train`` on its own random subset of the population texts
   (as many as the model was trained on; at most half the population when ``R >= 2``), queried on the
   same texts: every one is OUT for every audited text;
5. the attacks of :data:`attacks.names.LM_ATTACKS` the target supports, each beside the blind AUC, and a
   one-run epsilon bound only when :func:`audit.membership.trained_runner.bound_allowed` (fair coins and a
   passed check), Bonferroni over every attack and guess fraction (:func:`trained_bounds`).

Sources: docs/references.md, "Language model membership", "Blind split check", "One-run auditing".
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from attacks.lm_membership import (
    likelihood_ratio_scores,
    loss_scores,
    mean_reference_scores,
    min_k_plus_plus_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from attacks.names import ATTACKS, LM_ATTACKS
from audit.errors import UserError
from audit.membership.detail import MembershipDetail
from audit.membership.options import MembershipOptions
from audit.membership.trained import TRAINED_REFERENCES
from audit.membership.trained_runner import (
    NO_CLAIM_DELTA,
    attack_entry,
    bound_allowed,
    trained_bounds,
    trained_judgement,
    trained_meaning,
    trained_tables,
)
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext, Stages, cache_dir_of
from audit.stats.outcome import EpsilonBound, Game, Outcome
from audit.stats.split_check import SplitCheck
from audit.stats.verdict import Family
from targets.catalogue import is_language_model
from targets.lm.builtin import builtin_lm
from targets.lm.contract import TrainedLM, lm_from_dict
from targets.plugins.loading import ModelPlugin
from targets.threads import thread_limit

__all__ = ["run_lm_membership", "lm_references", "takes_lm_target", "LM_STAGES"]

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
        raise UserError(f"--attack does not apply to a language model: it runs {', '.join(LM_ATTACKS)} (those its "
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


def _scores(ctx: RunContext, lm: TrainedLM, texts: list[str], references: int, quiet: bool) -> dict[str, np.ndarray]:
    """Every attack the target supports (module docstring), scored on ``texts``."""
    with ctx.stage("queries", f"queries: the model's token log-probabilities on {len(texts)} texts"):
        logp = _query(lm.token_logprobs, texts, "querying the model", quiet)
        scores = {"loss": loss_scores(logp), "zlib": zlib_scores(logp, texts), "min_k": min_k_scores(logp)}
        if lm.moments is not None:
            scores["min_k_plus_plus"] = min_k_plus_plus_scores(logp, _query(lm.token_moments, texts,
                                                                            "next-token moments", quiet))
        if lm.base_logprobs is not None:
            base = _query(lambda t, p: lm.token_logprobs(t, p, base=True), texts, "querying the base model", quiet)
            scores["reference_base"] = reference_scores(logp, base)
            scores["llr_base"] = likelihood_ratio_scores(logp, [base])
    if references:
        parts = _reference_texts(lm, references, ctx.seed)
        seeds = np.random.SeedSequence([ctx.seed, 22]).generate_state(references).tolist()
        ref_logp = []
        with ctx.stage("references", f"references: training {references} reference model(s) like the target, each "
                                     f"on {len(parts[0])} of {len(lm.population)} population texts"):
            for r, (part, s) in enumerate(zip(parts, seeds, strict=True)):
                fn = lm.fit_reference(part, int(s))
                ref_logp.append(_query(fn, texts, f"querying reference model {r + 1}", quiet))
        scores["reference"] = mean_reference_scores(logp, ref_logp)
        scores["llr_reference"] = likelihood_ratio_scores(logp, ref_logp)
    return scores


def _not_run(lm: TrainedLM, references: int) -> dict[str, str]:
    skipped = {}
    if lm.moments is None:
        skipped["min_k_plus_plus"] = "needs 'moments' (mean and std of the next-token log-probability) in the plugin"
    if lm.base_logprobs is None:
        skipped["reference_base"] = skipped["llr_base"] = ("needs 'base_logprobs' (the model before fine-tuning) in "
                                                           "the plugin")
    if not references:
        skipped["reference"] = skipped["llr_reference"] = ("needs reference models: 'train' and 'population' in the "
                                                           "plugin, --references >= 1")
    return skipped


def run_lm_membership(opts: MembershipOptions, plugin: ModelPlugin | None = None) -> tuple[Path, Outcome]:
    """The membership audit of a language model (module docstring): ``plugin`` a ``{"kind": "lm"}`` factory's
    dict, or None for the built-in target ``opts.target``; returns (run directory, outcome)."""
    _check_options(opts)
    stages = Stages.for_command(LM_STAGES, {"target": 1.0})
    lm = _load(opts, plugin, cache_dir_of(opts.out))
    references = lm_references(lm, opts.references)
    stages.expect("references", references)
    stages.planned = [s for s in LM_STAGES if (s != "target" or lm.prepare is not None)
                      and (s != "references" or references)]   # "[i/n]" counts the stages that run
    ctx = RunContext(opts.out, "membership", lm.name, seed=opts.seed, quiet=opts.quiet, device=opts.device,
                     stages=stages)
    with ctx:
        ctx.say(f"run directory: {ctx.paths.run_dir}")
        with ctx.stage("split_check", f"text blind split check: {len(lm.members)} members against "
                                      f"{len(lm.nonmembers)} non-members, the texts alone"), thread_limit(1):
            split = lm.split_check(opts.confidence, opts.seed)
        ctx.say(split.summary)
        if lm.prepare is not None:
            with ctx.stage("target", f"target: fine-tuning {lm.name} on its {len(lm.members)} members"), \
                    thread_limit(1):
                stages.set_training_time(lm.prepare())
        texts = lm.members + lm.nonmembers
        member = np.r_[np.ones(len(lm.members), bool), np.zeros(len(lm.nonmembers), bool)]
        scores = _scores(ctx, lm, texts, references, opts.quiet)
        attacks_out = {name: attack_entry(scores[name], member, split, opts.confidence, LM_ATTACKS[name])
                       | ({"reference_models": references} if name in ("reference", "llr_reference") else {})
                       for name in LM_ATTACKS if name in scores}
        allowed, why = bound_allowed(lm, split)
        delta = lm.delta if lm.claim is not None else NO_CLAIM_DELTA
        bounds, family = (trained_bounds(scores, member, delta, opts.confidence) if allowed
                          else ([], Family(size=1, confidence=opts.confidence)))
        judged = trained_judgement(bounds, family, lm.claim, delta, why).blocks()
        results = _results(opts, lm, split, attacks_out, references, judged, (allowed, why))
        config_json = {"command": "run membership", "options": asdict(opts), "target": lm.to_dict()}
        outcome = ctx.finish(results, config_json)
    return ctx.run_dir, outcome


def _results(opts: MembershipOptions, lm: TrainedLM, split: SplitCheck, attacks_out: dict, references: int,
             judged: dict, bound_permission: tuple[bool, str]) -> dict[str, object]:
    """results.json of a language model's membership audit, in the blocks of a trained model's
    (:func:`audit.membership.trained_runner.run_trained_membership`), its target under ``trained_lm``."""
    allowed, why = bound_permission
    best = judged["best_lower_bound"]
    delta = lm.delta if lm.claim is not None else NO_CLAIM_DELTA
    members = [len(t) for t in lm.members]
    header = ResultsHeader(
        description=lm.description, dataset=lm.source, dataset_source=lm.source,
        model={"arch": lm.model_kind, "member_text_chars_median": float(np.median(members))},
        neighbouring=ADD_REMOVE_RECORD, delta=delta, confidence=opts.confidence,
        primary_attack=best["attack"] if best else None, epsilon_theory=judged["epsilon_theory"],
        accountant=accountant(lm.claim), params=lm.params).to_dict()
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
                              attacks_not_run=_not_run(lm, references), split_check=split, trained_lm=lm.to_dict(),
                              meaning=trained_meaning(lm, split, attacks_out, best, delta))
    return header | judged | {"attacks": attacks_out, "tables": trained_tables(attacks_out, split), "game": game,
                              "detail": detail, "quick": opts.quick}
