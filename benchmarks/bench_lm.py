"""Language-model membership and new-token canaries on the tiny GPT (issue 35's acceptance figures).

    python benchmarks/bench_lm.py --json OUT [--members 300] [--epochs 30] [--canaries 1000]
                                  [--canary-epochs 10] [--cache DIR] [--seed 0] [--threads 1] [--dp]

1. Membership: the base (:func:`targets.lm.base.pretrained_base`, cached) fine-tuned non-privately on
   ``--members`` speeches drawn at random from the fine-tuning pool; as many non-members drawn from the same
   pool. The text blind split check runs first; then loss, zlib, Min-K%, Min-K%++ and reference-calibrated
   loss (the base as reference), each with AUC and TPR at 1% and 0.1% FPR (:mod:`audit.stats.metrics`).
2. New-token canaries [Panda et al. 2025]: ``--canaries`` canaries, each a held-out speech's first 32
   characters followed by its own reserved token; a fair coin per canary puts it in the fine-tuning set
   (of the base, non-private, ``--canary-epochs`` epochs, canaries only); the score is the log-probability
   of the canary's token given its prefix. AUC, TPR at 1% FPR, and the one-run epsilon lower bound
   [Steinke, Nasr, Jagielski 2023] with GUESSES "in" and GUESSES "out" guesses fixed in advance.

One intra-op thread by default: on the shared 2-core machine two threads were 10-70x slower per step
(OpenMP threads waiting on each other under load).

3. With ``--dp``: the same members fine-tuned by the recipes ``dpsgd_tinygpt`` and ``dpsgd_tinygpt_lora``
   (:mod:`targets.lm.recipes`: Opacus DP-SGD at (4, 1e-5)); loss and reference-calibrated AUCs.

Writes ``{"host": ..., "membership": {...}, "canaries": {...}, "dp": {...}}`` with wall times.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from attacks.lm_membership import (  # noqa: E402
    loss_scores,
    min_k_plus_plus_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.metrics import auc, tpr_at_fpr  # noqa: E402
from audit.stats.one_run.steinke import one_run_bound  # noqa: E402
from audit.stats.text_split_check import text_split_check  # noqa: E402
from targets.lm.base import finetune_pool, pretrained_base  # noqa: E402
from targets.lm.model import token_logprobs, token_moments  # noqa: E402
from targets.lm.recipes import LM_TARGETS, lm_recipe  # noqa: E402
from targets.lm.tokenizer import reserved_marker  # noqa: E402
from targets.lm.training import FineTune, fine_tune  # noqa: E402

PREFIX_CHARS = 32
#: One-run guesses, fixed before any score is seen: "in" for the GUESSES highest and "out" for the GUESSES
#: lowest canary scores [Steinke, Nasr, Jagielski 2023, Algorithm 1]; all correct gives eps >= 4.17 of 1,000.
GUESSES = 100
DELTA = 1e-5


def _metrics(scores: np.ndarray, members: np.ndarray) -> dict:
    return {"auc": auc(scores, members), "tpr_at_1pct": tpr_at_fpr(scores, members, 0.01).tpr,
            "tpr_at_0.1pct": tpr_at_fpr(scores, members, 0.001).tpr}


def membership(base, tokenizer, pool: list[str], args: argparse.Namespace) -> dict:
    n = args.members
    members, nonmembers = pool[:n], pool[n: 2 * n]
    start = time.perf_counter()
    check = text_split_check(members, nonmembers, seed=args.seed)
    check_s = time.perf_counter() - start
    start = time.perf_counter()
    model = fine_tune(base, tokenizer, members, FineTune(epochs=args.epochs, seed=args.seed))
    train_s = time.perf_counter() - start
    texts = members + nonmembers
    truth = np.r_[np.ones(n), np.zeros(n)]
    logp, ref = token_logprobs(model, tokenizer, texts), token_logprobs(base, tokenizer, texts)
    scores = {"loss": loss_scores(logp), "zlib": zlib_scores(logp, texts), "min_k": min_k_scores(logp),
              "min_k_plus_plus": min_k_plus_plus_scores(logp, token_moments(model, tokenizer, texts)),
              "reference": reference_scores(logp, ref)}
    return {"members": n, "nonmembers": n, "epochs": args.epochs, "split_check": check.to_dict(),
            "split_check_s": check_s, "train_s": train_s, "total_s": time.perf_counter() - start + check_s,
            "attacks": {name: _metrics(s, truth) for name, s in scores.items()}}


def canaries(base, tokenizer, pool: list[str], args: argparse.Namespace) -> dict:
    m = args.canaries
    prefixes = [t[:PREFIX_CHARS] for t in pool[:m]]
    texts = [p + reserved_marker(i) for i, p in enumerate(prefixes)]
    coins = np.random.default_rng([args.seed, 0xCA7]).random(m) < 0.5
    start = time.perf_counter()
    model = fine_tune(base, tokenizer, [t for t, c in zip(texts, coins, strict=True) if c],
                      FineTune(epochs=args.canary_epochs, seed=args.seed))
    train_s = time.perf_counter() - start
    logp = token_logprobs(model, tokenizer, texts)
    scores = np.array([lp[len(p.encode("utf-8"))] for lp, p in zip(logp, prefixes, strict=True)])
    bound = one_run_bound(scores, coins, GUESSES, GUESSES, DELTA, 0.95)
    return {"canaries": m, "in": int(coins.sum()), "epochs": args.canary_epochs, "train_s": train_s,
            "total_s": time.perf_counter() - start, "secret_token": _metrics(scores, coins.astype(float)),
            "one_run": {"k_pos": GUESSES, "k_neg": GUESSES, "delta": DELTA, "confidence": 0.95,
                        "epsilon": bound.epsilon, "details": bound.details},
            "whole_sequence_loss": _metrics(loss_scores(logp), coins.astype(float))}


def dp_membership(base, tokenizer, pool: list[str], args: argparse.Namespace) -> dict:
    n = args.members
    texts, truth = pool[: 2 * n], np.r_[np.ones(n), np.zeros(n)]
    ref = token_logprobs(base, tokenizer, texts)
    out = {}
    for name in LM_TARGETS[1:]:
        recipe = lm_recipe(name, seed=args.seed)
        start = time.perf_counter()
        model = fine_tune(base, tokenizer, texts[:n], recipe.finetune)
        train_s = time.perf_counter() - start
        logp = token_logprobs(model, tokenizer, texts)
        out[name] = {"epsilon": recipe.epsilon, "delta": recipe.delta, **asdict(recipe.finetune), "train_s": train_s,
                     "loss": _metrics(loss_scores(logp), truth),
                     "reference": _metrics(reference_scores(logp, ref), truth)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--members", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--canary-epochs", type=int, default=10)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "privacy-audit-lm"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dp", action="store_true", help="also the two DP recipes (about 4 minutes each)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = lm_recipe("nonprivate_tinygpt").base
    start = time.perf_counter()
    base, hit = pretrained_base(spec, Path(args.cache))
    base_s = time.perf_counter() - start
    pool = finetune_pool()
    order = np.random.default_rng([args.seed, 0x9001]).permutation(len(pool))
    members_pool = [pool[i] for i in order[: 2 * args.members]]
    canary_pool = [pool[i] for i in order[2 * args.members: 2 * args.members + args.canaries]]
    result = {"host": host_info(), "date": utc_now(), "seed": args.seed, "threads": args.threads,
              "load_average_at_start": os.getloadavg(),
              "base": {"spec": asdict(spec), "cache_hit": hit,
                       "seconds": base_s},
              "membership": membership(base, spec.tokenizer, members_pool, args)}
    write_json(Path(args.json), result)
    result["canaries"] = canaries(base, spec.tokenizer, canary_pool, args)
    if args.dp:
        write_json(Path(args.json), result)
        result["dp"] = dp_membership(base, spec.tokenizer, members_pool, args)
    result["load_average_at_end"] = os.getloadavg()
    write_json(Path(args.json), result)
    print(result["membership"]["attacks"], result["canaries"]["secret_token"], result["canaries"]["one_run"])


if __name__ == "__main__":
    main()
