"""Which canary texts a DP fine-tuning of the tiny GPT learns: the AUC of the secret's score, members (in by
their coins) against non-members, for several canary constructions inserted into ONE training of a built-in
language-model target (issue 42, item 2; the black-box threat of :mod:`audit.dp.plugins.lm_blackbox`).

    python benchmarks/bench_lm_canaries.py --json OUT [--targets dpsgd_tinygpt,dpsgd_tinygpt_lora]
                                           [--per-kind 150] [--lr LR] [--seed 0]

Each construction is a held-out speech's first ``prefix`` characters followed by a secret repeated
``repeats`` times inside its one text (:data:`CONSTRUCTIONS`): a reserved token of its own (new-token), 12
of the records' 16 rarest characters (rare-unigram) or 12 random lowercase letters (random-suffix).
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
                 "rare-unigram/4x4": ("rare-unigram", 4, 4), "random-suffix/4": ("random-suffix", 4, 1)}


def _canaries(made: dict, per_kind: int, rng: np.random.Generator) -> dict[str, tuple[list[str], list[str]]]:
    """(prefixes, secrets) of every construction, new tokens distinct across constructions."""
    pool, tokens = made["canary_prefixes"], iter(range(len(made["canary_tokens"])))
    letters = {"rare-unigram": np.array(rare_characters(made["texts"])),
               "random-suffix": np.array(list("abcdefghijklmnopqrstuvwxyz"))}
    out = {}
    for name, (kind, prefix, repeats) in CONSTRUCTIONS.items():
        prefixes = [pool[i][:prefix] for i in rng.choice(len(pool), per_kind, replace=False)]
        secrets = [(reserved_marker(next(tokens)) if kind == "new-token" else
                    " " + "".join(rng.choice(letters[kind], SUFFIX_CHARS))) * repeats for _ in prefixes]
        out[name] = (prefixes, secrets)
    return out


def measure(name: str, args: argparse.Namespace) -> dict:
    recipe = lm_recipe(name)
    finetune = recipe.finetune if args.lr is None else dataclasses.replace(recipe.finetune, lr=args.lr)
    made = lm_trainer(recipe, finetune=finetune)
    plugin = plugin_from_dict(f"bench:{name}", made)
    rng = np.random.default_rng([args.seed, 0xC4])
    canaries = _canaries(made, args.per_kind, rng)
    coins = {k: rng.random(args.per_kind) < 0.5 for k in canaries}
    texts = list(made["texts"]) + [p + s for k, (ps, ss) in canaries.items()
                                   for p, s, c in zip(ps, ss, coins[k], strict=True) if c]
    texts = [texts[i] for i in rng.permutation(len(texts))]
    load_before, start = os.getloadavg(), time.perf_counter()
    logprobs = made["train"](texts, args.seed)
    train_s = time.perf_counter() - start
    base = logprob_function(pretrained_base(recipe.base, lm_cache_dir())[0], recipe.base.tokenizer)
    rows = {}
    for k, (prefixes, secrets) in canaries.items():
        scores = secret_scores(plugin, logprobs, prefixes, secrets)
        calibrated = scores - secret_scores(plugin, base, prefixes, secrets)
        inside = coins[k]
        rows[k] = {"auc": auc(scores, inside), "auc_calibrated": auc(calibrated, inside),
                   "shift_sd": float((scores[inside].mean() - scores[~inside].mean()) / scores[~inside].std()),
                   "in": int(inside.sum()), "out": int((~inside).sum())}
        print(f"{name} {k}: AUC {rows[k]['auc']:.3f} (calibrated {rows[k]['auc_calibrated']:.3f}), shift/sd "
              f"{rows[k]['shift_sd']:.3f}", file=sys.stderr)
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
    args = parser.parse_args(argv)
    records = [measure(name, args) for name in args.targets.split(",")]
    write_json(args.json, {"date": utc_now(), "machine": host_info(), "per_kind": args.per_kind, "seed": args.seed,
                           "constructions": {k: dict(zip(("kind", "prefix_chars", "repeats"), v, strict=True))
                                             for k, v in CONSTRUCTIONS.items()},
                           "records": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
