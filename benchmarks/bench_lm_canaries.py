"""Which canary texts a DP fine-tuning of the tiny GPT learns: the AUC of the secret's score, members (in by
their coins) against non-members, for several canary constructions inserted into ONE training of a built-in
language-model target (issue 42, item 2; the black-box threat of :mod:`audit.dp.plugins.lm_blackbox`).

    python benchmarks/bench_lm_canaries.py --json OUT [--targets dpsgd_tinygpt,dpsgd_tinygpt_lora]
                                           [--per-kind 150] [--lr LR] [--seed 0] [--constructions A,B]

Each construction is a held-out speech's first ``prefix`` characters followed by a secret repeated
``repeats`` times inside its one text (:data:`CONSTRUCTIONS`): a reserved token of its own (new-token), 12
of the records' 16 rarest characters (rare-unigram), 12 random lowercase letters (random-suffix), or secrets of
existing byte tokens no record contains (for LoRA, whose embeddings are frozen): 4 random characters of
U+0100-U+07FF (``rare-bytes``: each two UTF-8 bytes, lead 0xC4-0xDF and a continuation byte, none of which
the Shakespeare pool uses) or 4 random control characters (``control``: single bytes 1-8 and 14-31).
Every secret has a decoy drawn the same way (a new token's: one of the spare tokens no canary uses);
``auc_decoy`` scores log p(secret | prefix) - log p(decoy | prefix), which cancels what the training does to
every secret of its construction alike.
``--per-kind`` canaries of every construction, each in by its own fair coin, join the target's 300 member
speeches, and the target's recipe fine-tunes the cached base ONCE on all of them (``--lr`` replaces the
recipe's learning rate). The score is the audit's, log p(secret | prefix) read from the fine-tuned model
(:func:`audit.dp.plugins.lm_blackbox.secret_scores`); ``auc_calibrated`` subtracts the same score under the
base model (the pretrained model the fine-tuning starts from). ``shift_sd`` is (mean score in - mean score
out) / sd of the scores out: about the Gaussian mu of the score, which an audit at 1,000 canaries needs near
0.5 (AUC 0.64) to expect epsilon >= 0.5 (docs/performance.md). Every record carries the training time, the
load average before and after, the machine and the date.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.dp.plugins.lm_blackbox import RARE_CHARACTERS, SUFFIX_CHARS, rare_characters, secret_scores  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.metrics import auc  # noqa: E402
from targets.lm.base import pretrained_base  # noqa: E402
from targets.lm.model import logprob_function  # noqa: E402
from targets.lm.plugins import lm_cache_dir, lm_trainer  # noqa: E402
from targets.lm.recipes import lm_recipe  # noqa: E402
from targets.lm.tokenizer import reserved_marker  # noqa: E402
from targets.plugins.loading import plugin_from_dict  # noqa: E402

#: name -> (secret kind, prefix characters, repeats of the secret inside the text).
CONSTRUCTIONS = {"new-token/32": ("new-token", 32, 1), "new-token/4": ("new-token", 4, 1),
                 "new-token/4x16": ("new-token", 4, 16), "rare-unigram/4": ("rare-unigram", 4, 1),
                 "rare-unigram/4x4": ("rare-unigram", 4, 4), "random-suffix/4": ("random-suffix", 4, 1),
                 "rare-bytes/4": ("rare-bytes", 4, 1), "rare-bytes/4x4": ("rare-bytes", 4, 4),
                 "control/4x4": ("control", 4, 4)}
#: Reserved tokens kept for the new-token canaries' decoys (1,024 - 1,000 in an audit of 1,000 canaries).
SPARE_TOKENS = 24
#: The alphabets of the byte-token secrets (module docstring).
BYTE_ALPHABETS = {"rare-bytes": [chr(c) for c in range(0x100, 0x800)],
                  "control": [chr(c) for c in (*range(1, 9), *range(14, 32))]}


def _canaries(made: dict, per_kind: int, names: list[str],
              rng: np.random.Generator) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """(prefixes, secrets, decoys) of every construction in ``names``, new tokens distinct across constructions;
    a new-token canary's decoy is one of the last :data:`SPARE_TOKENS` tokens, which no canary uses (as an audit
    of 1,000 canaries would leave them spare), repeated like the secret."""
    n_tokens = len(made["canary_tokens"]) - SPARE_TOKENS
    pool, tokens, spare = made["canary_prefixes"], iter(range(n_tokens)), iter(range(1 << 30))
    letters = {"rare-unigram": np.array(rare_characters(made["texts"])),
               "random-suffix": np.array(list("abcdefghijklmnopqrstuvwxyz"))} | {
        k: np.array(v) for k, v in BYTE_ALPHABETS.items()}

    def secret(kind: str, decoy: bool = False) -> str:
        if kind == "new-token":
            return reserved_marker(n_tokens + next(spare) % SPARE_TOKENS if decoy else next(tokens))
        if kind in BYTE_ALPHABETS:
            return "".join(rng.choice(letters[kind], 4))
        return " " + "".join(rng.choice(letters[kind], SUFFIX_CHARS))

    out = {}
    for name in names:
        kind, prefix, repeats = CONSTRUCTIONS[name]
        prefixes = [pool[i][:prefix] for i in rng.choice(len(pool), per_kind, replace=False)]
        pairs = [(secret(kind) * repeats, secret(kind, decoy=True) * repeats) for _ in prefixes]
        out[name] = (prefixes, [a for a, _ in pairs], [b for _, b in pairs])
    return out


def measure(name: str, args: argparse.Namespace) -> dict:
    recipe = lm_recipe(name)
    finetune = recipe.finetune if args.lr is None else dataclasses.replace(recipe.finetune, lr=args.lr)
    made = lm_trainer(recipe, finetune=finetune)
    plugin = plugin_from_dict(f"bench:{name}", made)
    rng = np.random.default_rng([args.seed, 0xC4])
    canaries = _canaries(made, args.per_kind, args.constructions.split(","), rng)
    coins = {k: rng.random(args.per_kind) < 0.5 for k in canaries}
    texts = list(made["texts"]) + [p + s for k, (ps, ss, _) in canaries.items()
                                   for p, s, c in zip(ps, ss, coins[k], strict=True) if c]
    texts = [texts[i] for i in rng.permutation(len(texts))]
    load_before, start = os.getloadavg(), time.perf_counter()
    logprobs = made["train"](texts, args.seed)
    train_s = time.perf_counter() - start
    base = logprob_function(pretrained_base(recipe.base, lm_cache_dir())[0], recipe.base.tokenizer)
    rows = {}
    for k, (prefixes, secrets, decoys) in canaries.items():
        scores = secret_scores(plugin, logprobs, prefixes, secrets)
        calibrated = scores - secret_scores(plugin, base, prefixes, secrets)
        contrast = scores - secret_scores(plugin, logprobs, prefixes, decoys)
        inside = coins[k]
        rows[k] = {"auc": auc(scores, inside), "auc_calibrated": auc(calibrated, inside),
                   "auc_decoy": auc(contrast, inside),
                   "shift_sd_decoy": float((contrast[inside].mean() - contrast[~inside].mean()) /
                                           contrast[~inside].std()),
                   "shift_sd": float((scores[inside].mean() - scores[~inside].mean()) / scores[~inside].std()),
                   "in": int(inside.sum()), "out": int((~inside).sum())}
        print(f"{name} {k}: AUC {rows[k]['auc']:.3f} (calibrated {rows[k]['auc_calibrated']:.3f}, decoy "
              f"{rows[k]['auc_decoy']:.3f}), shift/sd {rows[k]['shift_sd']:.3f}", file=sys.stderr)
    return {"target": name, "lr": finetune.lr, "texts": len(texts), "members": len(made["texts"]),
            "train_s": train_s, "load_before": load_before, "load_after": os.getloadavg(),
            "rare_characters": RARE_CHARACTERS, "constructions": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--targets", default="dpsgd_tinygpt,dpsgd_tinygpt_lora")
    parser.add_argument("--per-kind", type=int, default=150)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--constructions", default=",".join(CONSTRUCTIONS),
                        help="comma-separated names of CONSTRUCTIONS (default all)")
    args = parser.parse_args(argv)
    records = [measure(name, args) for name in args.targets.split(",")]
    write_json(args.json, {"date": utc_now(), "machine": host_info(), "per_kind": args.per_kind, "seed": args.seed,
                           "constructions": {k: dict(zip(("kind", "prefix_chars", "repeats"), v, strict=True))
                                             for k, v in CONSTRUCTIONS.items() if k in args.constructions.split(",")},
                           "records": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
