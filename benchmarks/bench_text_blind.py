"""The text blind split check on the corpus's speeches: calibration, what it flags, and what any blind
classifier could see at this record length (issue 35's "histories against comedies" acceptance).

    python benchmarks/bench_text_blind.py --json benchmarks/results_text_blind.json [--seeds 5]

1. :func:`audit.stats.text_split_check.text_split_check` at its defaults (2 folds, 95%), ``--seeds`` seeds
   each (the seed draws the texts and the folds):
   * random splits, 300 + 300, of the LM targets' fine-tuning pool (:func:`targets.lm.base.finetune_pool`:
     comedies, histories and problem plays, the texts the LM targets' members and non-members come from);
   * histories against comedies, 300 + 300 (the LM targets' ``n_members``, :mod:`targets.lm.recipes`) and
     1,000 + 1,000;
   * histories against comedies with 5 folds (each fold trains on 240 per side instead of 150);
   * non-members upper-cased, and re-wrapped (newlines replaced by spaces), 300 + 300 random halves of the pool.
2. Calibration: ``--splits`` random splits (seeds 0, 1, ...) of the pool, 300 + 300; the number flagged,
   against the at most 5% the union-bound interval allows, with its binomial tail probability at 5%.
3. A supervised ceiling: the check's own fold classifier (:func:`~audit.stats.text_split_check.text_fold_scores`)
   trained on ``m`` labelled held-out speeches of each genre (disjoint from the test texts), scored on 300
   histories and 300 comedies. Cross-fitting over 2 folds trains on half of each side, so a blind check with
   ``n`` per side sees at most what this ceiling shows at ``m = n/2`` (``m = n(K-1)/K`` with K folds).

One BLAS thread (threadpoolctl). Writes ``{"host", "date", "uptime_at_start", "checks": [...],
"calibration": {...}, "ceiling": [...]}``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.metrics import auc  # noqa: E402
from audit.stats.text_split_check import text_fold_scores, text_split_check  # noqa: E402
from targets.lm.base import finetune_pool  # noqa: E402
from targets.lm.corpus import load_speeches  # noqa: E402

CEILING_SIZES = (150, 300, 500, 1000, 2000, 6000)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _genre(genres: tuple[str, ...]) -> list[str]:
    return [s.text for s in load_speeches() if s.genre in genres]


def _draw(pool: list[str], n: int, rng: np.random.Generator) -> list[str]:
    return [pool[i] for i in rng.choice(len(pool), n, replace=False)]


def _settings(n: int) -> dict:
    """Each setting: texts per side, folds, and a function of the seed returning (members, non-members)."""
    ft = finetune_pool()
    hist, com = _genre(("histories",)), _genre(("comedies",))

    def halves(pool: list[str], reformat=None):
        def draw(seed: int) -> tuple[list[str], list[str]]:
            texts = _draw(pool, 2 * n, np.random.default_rng([seed, 1]))
            return texts[:n], [reformat(t) for t in texts[n:]] if reformat else texts[n:]
        return draw

    def genres(size: int):
        def draw(seed: int) -> tuple[list[str], list[str]]:
            rng = np.random.default_rng([seed, 2])
            return _draw(hist, size, rng), _draw(com, size, rng)
        return draw

    return {"random split of the fine-tuning pool": (n, 2, halves(ft)),
            "histories vs comedies": (n, 2, genres(n)), "histories vs comedies, 5 folds": (n, 5, genres(n)),
            "histories vs comedies, 1000 each": (1000, 2, genres(1000)),
            "non-members upper-cased": (n, 2, halves(ft, str.upper)),
            "non-members re-wrapped": (n, 2, halves(ft, lambda t: t.replace("\n", " ")))}


def checks(n: int, seeds: int) -> list[dict]:
    out = []
    for name, (size, folds, draw) in _settings(n).items():
        runs = []
        for seed in range(seeds):
            members, nonmembers = draw(seed)
            start = time.perf_counter()
            check = text_split_check(members, nonmembers, folds=folds, seed=seed)
            runs.append({"seed": seed, "blind_auc": check.blind_auc, "ci": list(check.blind_auc_ci),
                         "passed": check.passed, "p_value": check.p_value, "seconds": time.perf_counter() - start})
        aucs = [r["blind_auc"] for r in runs]
        out.append({"setting": name, "per_side": size, "folds": folds, "confidence": 0.95, "runs": runs,
                    "auc_mean": float(np.mean(aucs)), "auc_min": float(np.min(aucs)), "auc_max": float(np.max(aucs)),
                    "passed": sum(r["passed"] for r in runs)})
        print(out[-1]["setting"], f"{out[-1]['auc_mean']:.3f}", [round(a, 3) for a in aucs], flush=True)
    return out


def calibration(n: int, splits: int) -> dict:
    draw = _settings(n)["random split of the fine-tuning pool"][2]
    aucs, flagged = [], 0
    for seed in range(splits):
        check = text_split_check(*draw(seed), seed=seed)
        aucs.append(check.blind_auc)
        flagged += not check.passed
    out = {"per_side": n, "splits": splits, "flagged": flagged, "level": 0.05,
           "tail_probability_at_level": float(stats.binom.sf(flagged - 1, splits, 0.05)),
           "auc_mean": float(np.mean(aucs)), "auc_sd": float(np.std(aucs, ddof=1)), "aucs": aucs}
    print("calibration", flagged, "of", splits, f"mean {out['auc_mean']:.3f} sd {out['auc_sd']:.3f}", flush=True)
    return out


def ceiling(seeds: int, test_per_side: int = 300) -> list[dict]:
    hist, com = _genre(("histories",)), _genre(("comedies",))
    texts = hist + com
    truth = np.r_[np.ones(len(hist), dtype=np.int64), np.zeros(len(com), dtype=np.int64)]
    out = []
    for m in CEILING_SIZES:
        aucs = []
        for seed in range(seeds):
            rng = np.random.default_rng([seed, 3])
            h, c = rng.permutation(np.flatnonzero(truth == 1)), rng.permutation(np.flatnonzero(truth == 0))
            test = np.r_[h[:test_per_side], c[:test_per_side]]
            train = np.r_[h[test_per_side:test_per_side + m], c[test_per_side:test_per_side + m]]
            scores, _ = text_fold_scores(texts, truth, train, test, seed)
            aucs.append(auc(scores, truth[test]))
        out.append({"train_per_side": m, "test_per_side": test_per_side, "aucs": aucs,
                    "auc_mean": float(np.mean(aucs))})
        print("ceiling", m, [round(a, 3) for a in aucs], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--per-side", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ceiling-seeds", type=int, default=5)
    parser.add_argument("--splits", type=int, default=100)
    args = parser.parse_args()
    start = time.perf_counter()
    result = {"host": host_info(), "date": utc_now(), "uptime_at_start": _uptime(), "blas_threads": 1}
    with threadpool_limits(1):
        result["checks"] = checks(args.per_side, args.seeds)
        result["calibration"] = calibration(args.per_side, args.splits)
        result["ceiling"] = ceiling(args.ceiling_seeds)
    result["uptime_at_end"] = _uptime()
    result["seconds"] = time.perf_counter() - start
    write_json(Path(args.json), result)


if __name__ == "__main__":
    main()
