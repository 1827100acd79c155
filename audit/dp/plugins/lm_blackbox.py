"""``run dp --target <lm trainer> --one-run --threat black-box``: the one-run audit of a language-model
trainer (:mod:`targets.plugins.lm`) from its outputs alone, with input-space canaries.

M canary texts, each a prefix cut from a held-out text followed by a secret (``--canary``):

* ``new-token`` (default): the secret is one of the plugin's ``canary_tokens``, each a token no record
  contains (Panda et al. 2025, new-token canaries: nothing but the canary teaches the model that token),
  repeated :data:`NEW_TOKEN_REPEATS` times inside the canary's one text (still one record);
* ``rare-unigram``: the secret is a seeded random string of :data:`SUFFIX_CHARS` characters drawn from the
  :data:`RARE_CHARACTERS` rarest characters of the records (rare unigrams, Panda et al. 2025: the model has
  seen them too little to predict them without the canary);
* ``random-suffix``: the secret is a seeded random string of :data:`SUFFIX_CHARS` lowercase letters (any
  tokenizer; weaker: its tokens also occur elsewhere);
* ``rare-bytes``: the secret is a seeded random string of :data:`BYTE_SECRET_CHARS` characters of
  :data:`RARE_BYTE_BLOCK` that no record contains, each two UTF-8 bytes (for a byte-level tokenizer: existing
  tokens the records never use, so a fine-tuning that freezes the embeddings, such as LoRA, still has tokens
  only the canaries teach; issue 42).

Each canary joins the training texts by its own fair coin (the texts and the included canaries in a seeded
random order), the code trains ONCE, and each canary is scored by the log-probability of its secret given its
prefix, ``sum logprobs(prefix + secret) - sum logprobs(prefix)`` (with a tokenizer that appends an end token,
the end token's change is part of it; the score is any fixed function of the outputs, so the bound is valid
whatever it is). Bounds: :func:`audit.dp.one_run.bounds.one_run_results` (f-DP verdict row, Steinke's
test; the verdict by :func:`audit.stats.judgement.judge` like every audit's), with guess counts fixed before
the training by simulating the claim (:func:`lm_design`; ``--guesses K``, ``K:0`` or ``K:K`` fixes the count
or the shape): a DP-SGD claim's own (q, sigma, T); another claim (a non-private trainer audited against
``--epsilon``/``--delta``) as the Gaussian mechanism at that (epsilon, delta), one step at rate 1. The games
simulated are those of the claimed training's final model (:mod:`audit.stats.one_run.final_model`: the last
iterate of a linear model, a nearly Gaussian pair whose tails mirror each other), since a black-box score is
read from the final model; among the shapes that can reject the claim (ceiling above its epsilon), the one-
or two-sided shape of the largest mean bound is taken. The design's perfect-attack expectation is that of
the final model, were it linear: what a black-box attack on canary texts reaches is below it. Sources:
docs/references.md, "One-run auditing" and "Language models".
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from audit.arguments import guess_spec
from audit.choices import TEXT_CANARIES
from audit.dp.detail import DpDetail
from audit.dp.one_run.bounds import OneRunResults, one_run_results
from audit.dp.one_run.game import design_games, one_run_table
from audit.dp.options import DPOptions
from audit.errors import TargetCodeError, UserError
from audit.plugins.training import train_once
from audit.results_header import ResultsHeader
from audit.run_context import RunContext, Stages
from audit.run_results import RunResults
from audit.stats.metrics import attack_metrics
from audit.stats.one_run.design import CanaryMechanism, DesignObjective, OneRunDesign
from audit.stats.one_run.final_model import choose_final_model_design
from audit.stats.outcome import Game, LastIterate, Outcome
from audit.theory.checks import check_delta, check_epsilon
from audit.theory.claims import ApproxDPClaim, PrivacyClaim
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.lm.contract import check_logprobs
from targets.plugins.lm import texts_of
from targets.plugins.loading import TrainerPlugin, plugin_config

__all__ = ["run_lm_blackbox", "LM_CANARY_KINDS", "DEFAULT_LM_CANARIES", "canary_texts", "secret_scores",
           "rare_characters", "PREFIX_CHARS", "SUFFIX_CHARS", "RARE_CHARACTERS",
           "NEW_TOKEN_REPEATS", "RARE_BYTE_BLOCK", "BYTE_SECRET_CHARS"]

#: Input-space canaries of the black-box threat (module docstring).
LM_CANARY_KINDS = TEXT_CANARIES
#: Canaries when ``--canaries`` is not given (capped by the plugin's canary tokens for ``new-token``).
DEFAULT_LM_CANARIES = 1000
#: Characters of a held-out text a canary's prefix keeps; letters of a random suffix.
PREFIX_CHARS, SUFFIX_CHARS = 4, 12
#: Times a new-token canary's token is repeated inside its one text (repetition within a record, Panda et al.
#: 2025: the text is still one record, so the add/remove-one-text guarantee covers it); the score is the
#: log-probability of the whole repeated secret given the prefix. Chosen by ``benchmarks/bench_lm_canaries.py``
#: on draws of its own, never the audited coins (docs/performance.md).
NEW_TOKEN_REPEATS = 16
#: How many of the records' rarest characters a rare-unigram secret draws from.
RARE_CHARACTERS = 16
#: The characters a rare-bytes secret draws from (those no record contains): U+0100-U+07FF, each two UTF-8
#: bytes (lead 0xC4-0xDF, then a continuation byte); and its length.
RARE_BYTE_BLOCK, BYTE_SECRET_CHARS = (0x100, 0x800), 4
_STAGES = ("design", "audited_run", "scoring")


def lm_claim(opts: DPOptions, plugin: TrainerPlugin) -> tuple[PrivacyClaim, float]:
    """The claim audited: the plugin's, or for a plugin that claims nothing ``--epsilon``/``--delta``."""
    given = opts.epsilon is not None or opts.delta is not None
    if plugin.lm.claimed:
        if given:
            raise UserError("--epsilon/--delta do not apply to a plugin that states a claim: its factory states it")
        if plugin.claim is None:
            raise UserError(f"plugin {plugin.spec}: the black-box audit of a language model needs a stated claim, not "
                            f"'opacus' (what Opacus reports is read by --threat updates)")
        return plugin.claim, plugin.delta
    if opts.epsilon is None:
        raise UserError(f"plugin {plugin.spec} claims no privacy (no 'claim'): give the claim to test, --epsilon E "
                        f"[--delta D]")
    delta = plugin.delta if opts.delta is None else opts.delta
    check_epsilon(opts.epsilon, "--epsilon", positive=True, limited=True)
    check_delta(delta, "--delta", positive=True, limited=True)
    return ApproxDPClaim(float(opts.epsilon), float(delta)), float(delta)


def design_mechanism(claim: PrivacyClaim, delta: float) -> CanaryMechanism:
    """The mechanism the guess counts are designed under (module docstring)."""
    if isinstance(claim, DPSGDClaim):
        return CanaryMechanism(claim.sample_rate, claim.noise_multiplier, claim.steps)
    return CanaryMechanism(1.0, float(calibrate_noise_multiplier(claim.epsilon(delta), delta, 1.0, 1)), 1)


def lm_design(opts: DPOptions, m: int, claim: PrivacyClaim, delta: float) -> OneRunDesign:
    """The guess counts, fixed before the training from the claim alone
    (:func:`audit.stats.one_run.final_model.choose_final_model_design`): among the shapes that can reject the
    claim, the count and shape (one- or two-sided) with the largest mean bound over games of the claimed
    mechanism's final model (:func:`design_mechanism`), every count of the design's grid or the ``--guesses``
    given (``K``: either shape, ``K:0`` one-sided, ``K:K`` two-sided)."""
    objective = DesignObjective(delta=delta, confidence=opts.confidence)
    if opts.guesses is None:
        counts, sides = None, "both"
    else:
        spec = guess_spec(opts.guesses)
        if spec is None:
            raise UserError(f"--guesses must be K, K:0 or K:K (got {opts.guesses!r})")
        (k, sides), counts = spec, [spec[0]]
        if (2 if sides == "two" else 1) * k > m:
            raise UserError(f"--guesses {opts.guesses} needs at least {(2 if sides == 'two' else 1) * k} canaries "
                            f"(--canaries)")
    return choose_final_model_design(design_mechanism(claim, delta), m, float(claim.epsilon(delta)), objective,
                                     np.random.default_rng([opts.seed, 61]), simulations=design_games(opts),
                                     guess_counts=counts, sides=sides)


def canary_texts(plugin: TrainerPlugin, kind: str, m: int, seed: int) -> tuple[list[str], list[str]]:
    """(prefixes, secrets) of ``m`` canaries of ``kind`` (module docstring), seeded; one-line errors when the
    plugin cannot give them."""
    rng = np.random.default_rng([seed, 71])
    pool = list(plugin.lm.canary_prefixes) or texts_of(plugin.dataset[0])
    chosen = rng.choice(len(pool), m, replace=m > len(pool))
    prefixes = [pool[i][:PREFIX_CHARS] for i in chosen]
    if kind == "new-token":
        tokens = plugin.lm.canary_tokens
        if m > len(tokens):
            raise UserError(f"plugin {plugin.spec} gives {len(tokens)} canary tokens; new-token canaries need one per "
                            f"canary: --canaries {len(tokens)} at most, or --canary random-suffix")
        return prefixes, [t * NEW_TOKEN_REPEATS for t in tokens[:m]]
    if kind == "rare-bytes":
        used = set("".join(texts_of(plugin.dataset[0])))
        block = np.array([c for c in map(chr, range(*RARE_BYTE_BLOCK)) if c not in used])
        if block.size < 2:
            raise UserError(f"the texts of plugin {plugin.spec} use the characters a rare-bytes secret is drawn from "
                            f"(U+{RARE_BYTE_BLOCK[0]:04X}-U+{RARE_BYTE_BLOCK[1] - 1:04X}); use --canary new-token or "
                            "random-suffix")
        return prefixes, ["".join(rng.choice(block, BYTE_SECRET_CHARS)) for _ in range(m)]
    letters = np.array(rare_characters(texts_of(plugin.dataset[0])) if kind == "rare-unigram" else
                       list("abcdefghijklmnopqrstuvwxyz"))
    return prefixes, [" " + "".join(rng.choice(letters, SUFFIX_CHARS)) for _ in range(m)]


def rare_characters(texts: list[str]) -> list[str]:
    """The :data:`RARE_CHARACTERS` least frequent printable, non-space characters of ``texts`` (ties by code
    point), rarest first."""
    counts: dict[str, int] = {}
    for text in texts:
        for char in text:
            if char.isprintable() and not char.isspace():
                counts[char] = counts.get(char, 0) + 1
    return sorted(counts, key=lambda c: (counts[c], c))[:RARE_CHARACTERS]


def _sums(plugin: TrainerPlugin, logprobs: Callable, texts: list[str]) -> np.ndarray:
    """Each text's summed token log-probability; a one-line error for output the contract does not allow."""
    try:
        out = logprobs(texts)
    except Exception as exc:
        raise TargetCodeError(f"logprobs of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    arrays = check_logprobs(out, texts, f"logprobs of plugin {plugin.spec}")  # the lm contract's one-line errors
    return np.array([float(a.sum()) for a in arrays])


def secret_scores(plugin: TrainerPlugin, logprobs: Callable, prefixes: list[str], secrets: list[str]) -> np.ndarray:
    """log p(secret | prefix) per canary, read as ``sum logprobs(prefix + secret) - sum logprobs(prefix)``."""
    full = _sums(plugin, logprobs, [p + s for p, s in zip(prefixes, secrets, strict=True)])
    return full - _sums(plugin, logprobs, prefixes)


def run_lm_blackbox(opts: DPOptions, plugin: TrainerPlugin) -> tuple[Path, Outcome]:
    """One training of an LM trainer plugin with M canary texts (module docstring); returns (run directory,
    outcome)."""
    kind = opts.canary or "new-token"
    if kind not in LM_CANARY_KINDS:
        raise UserError(f"unknown canary {kind!r} for a language model's black-box one-run audit; choose one of "
                        f"{', '.join(LM_CANARY_KINDS)}")
    claim, delta = lm_claim(opts, plugin)
    m = opts.canaries or min(DEFAULT_LM_CANARIES, len(plugin.lm.canary_tokens) if kind == "new-token" else
                             DEFAULT_LM_CANARIES)
    if m < 2:
        raise UserError("--canaries must be at least 2 (and the plugin must give canary tokens for new-token)")
    prefixes, secrets = canary_texts(plugin, kind, m, opts.seed)
    texts = texts_of(plugin.dataset[0])
    ctx = RunContext(opts.out, "dp", plugin.name, seed=opts.seed, quiet=opts.quiet, device=opts.device,
                     stages=Stages.for_command(_STAGES, {"audited_run": 1.0}))
    with ctx:
        with ctx.stage("design", f"design: the guess counts for {m} canaries, from {design_games(opts)} games "
                                 f"simulated under the claim"):
            design = lm_design(opts, m, claim, delta)
        included = np.random.default_rng([opts.seed, 11]).random(m) < 0.5
        train_texts = texts + [p + s for p, s, i in zip(prefixes, secrets, included, strict=True) if i]
        order = np.random.default_rng([opts.seed, 73]).permutation(len(train_texts))
        X = np.empty(len(train_texts), dtype=object)
        X[:] = [train_texts[i] for i in order]
        with ctx.stage("audited_run", f"audited run: the training on its {len(texts)} texts and {int(included.sum())} "
                                      f"of {m} {kind} canary texts (fair coins)"):
            logprobs = train_once(plugin, X, np.zeros(len(X), dtype=np.int64),
                                  int(np.random.SeedSequence([opts.seed, 37]).generate_state(1)[0]))
        with ctx.stage("scoring", "scoring: log-probability of each canary's secret given its prefix"):
            scores = secret_scores(plugin, logprobs, prefixes, secrets)
        stats = one_run_results(scores, included, claim, delta, opts.confidence, design)
        results = _results(plugin, opts, (kind, claim, delta), stats, scores, included, len(texts))
        config = {"command": "run dp", "one_run": True, "seed": opts.seed, "confidence": opts.confidence,
                  "options": asdict(opts) | {"threat": "black-box", "canaries": m, "canary": kind},
                  "plugin": plugin_config(plugin)}
        if not opts.quiet:
            one = stats.one_run
            print(f"one run: {m} {kind} canaries, {one.k_pos + one.k_neg} guesses, {one.correct} right; "
                  f"1 training", file=sys.stderr)
        return ctx.run_dir, ctx.finish(results, config)


def _last_iterate(params: dict, delta: float, claim: PrivacyClaim) -> LastIterate | None:
    """The last-iterate reference when the training is add/remove DP-SGD (the final model is all the black box
    sees: :meth:`audit.stats.outcome.LastIterate.of`), else None."""
    return LastIterate.of(params, delta, "add/remove one text", claim)


def _results(plugin: TrainerPlugin, opts: DPOptions, audited: tuple[str, PrivacyClaim, float], stats: OneRunResults,
             scores: np.ndarray, included: np.ndarray, n_texts: int) -> RunResults:
    """The typed results of the black-box one-run audit of an LM trainer (kind dp, ``game.one_run``);
    ``audited``: the canary kind, the claim and its delta."""
    kind, claim, delta = audited
    attack = f"black-box/one-run-{kind}"
    judgement = stats.judgement.for_attack(attack)
    expected = stats.one_run.expected_perfect
    one = replace(stats.one_run, expected_perfect=replace(expected, text=expected.text + (
        "; the games are of the claimed training's final model, were it linear (the last-iterate heuristic): a "
        "black-box attack on canary texts sees less")))
    header = ResultsHeader(
        description=plugin.description, dataset=f"{n_texts} texts of {plugin.spec}",
        model={"name": f"language-model trainer {plugin.spec}"}, neighbouring="add/remove one text (each canary)",
        delta=delta, confidence=opts.confidence, accountant=getattr(claim, "description", None),
        params={"plugin": plugin.spec, "claimed_epsilon": float(claim.epsilon(delta)), "claimed_delta": delta,
                "n_train": n_texts, "claim_source": "plugin" if plugin.lm.claimed else "--epsilon/--delta"}
        | plugin.params)
    return RunResults(
        header=header, judgement=judgement, estimate=True, family=True,
        attacks={attack: attack_metrics(scores, included, opts.confidence)},
        detail=DpDetail(one_run=one), last_iterate=_last_iterate(plugin.params, delta, claim),
        game=Game(one_run=True, runs=1, canaries=int(included.size), canary_kind=kind, threat="black-box",
                  canary={"kind": kind, "prefix_chars": PREFIX_CHARS,
                          "repeats": NEW_TOKEN_REPEATS if kind == "new-token" else 1,
                          "secret": f"one of the plugin's canary tokens (a token no record contains), "
                                    f"{NEW_TOKEN_REPEATS} times"
                          if kind == "new-token" else
                          f"{BYTE_SECRET_CHARS} seeded random characters of U+{RARE_BYTE_BLOCK[0]:04X}-"
                          f"U+{RARE_BYTE_BLOCK[1] - 1:04X} no record contains (two UTF-8 bytes each)"
                          if kind == "rare-bytes" else f"{SUFFIX_CHARS} seeded random characters ("
                          + ("the records' rarest" if kind == "rare-unigram" else "lowercase letters") + ")"},
                  observation={"score": "log p(secret | prefix) = sum logprobs(prefix + secret) - sum "
                                        "logprobs(prefix)"},
                  threshold_strategy="one-run guesses: 'in' for the k_pos highest scores, 'out' for the k_neg "
                                     "lowest, fixed by simulating the claimed training's final model",
                  trainings=1, included=int(included.sum()), n_train=n_texts,
                  inclusion="independent fair coin per canary text; the included ones join the training texts"),
        tables=(one_run_table(one, judgement.lower_bounds),))
