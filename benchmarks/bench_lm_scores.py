"""Which part of a canary text carries the black-box audit's signal: the AUC and the members' shift of several
scores read from ONE audited fine-tuning of a built-in DP language-model target (issue 42, item 2).

    python benchmarks/bench_lm_scores.py --json benchmarks/results_lm_scores.json
                                         [--audits full,lora] [--seed 10] [--canaries M] [--repeats R] [--out DIR]
                                         [--append]

Each audit is the command a user runs (``run dp --target T --one-run --threat black-box --seed S``, the default
canaries: new-token x16 after 4 characters; ``--canaries M`` of them when given, and the token repeated ``R`` times
instead of :data:`audit.dp.plugins.lm_blackbox.NEW_TOKEN_REPEATS` with ``--repeats R``); on its way the trained
model's token log-probabilities of the canary texts are saved (``DIR/<audit>_s<seed>[_m<M>][_r<R>]/tokens.npz``;
a later call with the same ``--out`` reads them back): the canary text, its prefix alone, the secret alone (after
the start token only) and the secret after four other canaries' prefixes. Scores, each with the audit's own coins
(:func:`variants`): the audit's (log p of the secret and of the text's end given the prefix), the secret tokens
without the end, the first secret token, the secret tokens after the first, the secret with no prefix, the secret
after other prefixes (mean of 4) and the audit's score less that mean. ``--append`` adds the records to those of
``--json``. The seed is not one of the acceptance's (0, 1, 2), so nothing here is read from an audited run's
coins. Sources: docs/references.md, "Language models".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402

AUDITS = {"full": "dpsgd_tinygpt", "lora": "dpsgd_tinygpt_lora"}
#: Other prefixes each secret is also scored after (the prefixes of the next canaries, cyclically).
OTHER_PREFIXES = 4


def _matrix(arrays: list[np.ndarray]) -> np.ndarray:
    out = np.full((len(arrays), max(len(a) for a in arrays)), np.nan)
    for i, a in enumerate(arrays):
        out[i, :len(a)] = a
    return out


def _capture(folder: Path, lm_blackbox):
    """A ``secret_scores`` that also saves the token log-probabilities of the module docstring."""
    original = lm_blackbox.secret_scores

    def recording(plugin, logprobs, prefixes, secrets):
        saved = {"full": _matrix(logprobs([p + s for p, s in zip(prefixes, secrets, strict=True)])),
                 "prefix": _matrix(logprobs(prefixes)), "bare": _matrix(logprobs(list(secrets)))}
        for k in range(1, OTHER_PREFIXES + 1):
            other = prefixes[k:] + prefixes[:k]
            saved[f"shift{k}"] = _matrix(logprobs([p + s for p, s in zip(other, secrets, strict=True)]))
            saved[f"shift{k}_prefix"] = _matrix(logprobs(other))
        np.savez(folder / "tokens.npz", **saved)
        return original(plugin, logprobs, prefixes, secrets)
    return original, recording


def _run(target: str, seed: int, design: tuple[int | None, int | None], folder: Path) -> tuple[dict, dict]:
    """(token arrays, record) of one audit, run or read back; ``design``: (``--canaries``, ``--repeats``)."""
    canaries, repeats = design
    if not (folder / "tokens.npz").exists():
        # the audit's modules, imported here: the score variants need numpy only (their test imports no torch)
        import audit.dp.plugins.lm_blackbox as lm_blackbox
        from audit.cli import main

        folder.mkdir(parents=True, exist_ok=True)
        original, recording = _capture(folder, lm_blackbox)
        lm_blackbox.secret_scores, default_repeats = recording, lm_blackbox.NEW_TOKEN_REPEATS
        lm_blackbox.NEW_TOKEN_REPEATS = repeats or default_repeats
        load, start, began = list(os.getloadavg()), time.perf_counter(), utc_now()
        try:
            code = main(["run", "dp", "--target", target, "--one-run", "--threat", "black-box", "--seed", str(seed),
                         *(["--canaries", str(canaries)] if canaries else []), "-q", "--out", str(folder)])
        finally:
            lm_blackbox.secret_scores, lm_blackbox.NEW_TOKEN_REPEATS = original, default_repeats
        (folder / "record.json").write_text(json.dumps({
            "exit": code, "wall_s": time.perf_counter() - start, "load": load + list(os.getloadavg()),
            "began": began, "ended": utc_now()}))
    record = json.loads((folder / "record.json").read_text())
    record["results"] = json.loads(next(folder.glob("*/results.json")).read_text())
    return dict(np.load(folder / "tokens.npz")), record


def _secret_rows(full: np.ndarray, prefix: np.ndarray) -> list[np.ndarray]:
    """Each canary's secret tokens' log-probabilities (the text's tokens after its prefix's, the end dropped)."""
    rows = []
    for f, p in zip(full, prefix, strict=True):
        f, n_prefix = f[~np.isnan(f)], int(np.sum(~np.isnan(p))) - 1  # the prefix's own end token is not in f
        rows.append(f[n_prefix:-1])
    return rows


def variants(z: dict) -> dict[str, np.ndarray]:
    """The scores of the module docstring, one per canary."""
    own = np.nansum(z["full"], 1) - np.nansum(z["prefix"], 1)
    secret = _secret_rows(z["full"], z["prefix"])
    others = np.mean([np.nansum(z[f"shift{k}"], 1) - np.nansum(z[f"shift{k}_prefix"], 1)
                      for k in range(1, OTHER_PREFIXES + 1)], axis=0)
    return {"audit (secret and end, given the prefix)": own,
            "secret tokens, end dropped": np.array([r.sum() for r in secret]),
            "first secret token": np.array([r[:1].sum() for r in secret]),
            "secret tokens after the first": np.array([r[1:].sum() for r in secret]),
            "secret with no prefix": np.array([np.sum(r[~np.isnan(r)][:-1]) for r in z["bare"]]),
            f"secret after {OTHER_PREFIXES} other prefixes (mean)": others,
            "audit less the other prefixes' mean": own - others}


def measure(label: str, seed: int, design: tuple[int | None, int | None], out: Path) -> dict:
    from audit.stats.metrics import auc  # imported here like the audit's modules (scikit-learn)

    canaries, repeats = design
    folder = out / (f"{label}_s{seed}" + (f"_m{canaries}" if canaries else "") + (f"_r{repeats}" if repeats else ""))
    z, record = _run(AUDITS[label], seed, design, folder)
    results = record.pop("results")
    one = results["one_run"]
    m = z["full"].shape[0]
    inside = np.random.default_rng([seed, 11]).random(m) < 0.5  # the audit's coins
    if int(inside.sum()) != one["included"]:
        raise SystemExit(f"{label} seed {seed}: the coins read back do not match the run's")
    scores = {}
    for name, s in variants(z).items():
        out_scores = s[~inside]
        scores[name] = {"auc": auc(s, inside), "shift_sd": float((s[inside].mean() - out_scores.mean())
                                                                 / out_scores.std())}
    best = results["best_lower_bound"] or {}
    game = results["game"]
    return {"audit": label, "target": AUDITS[label], "seed": seed, "canaries": m, "canary": game["canary_kind"],
            "repeats": game["canary"]["repeats"], "epsilon": best.get("epsilon"),
            "guesses": [one["k_pos"], one["k_neg"]], "correct": one["correct"], "scores": scores} | record


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--audits", default="full,lora")
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--canaries", type=int, default=None, help="--canaries of every audit (default: the runner's)")
    parser.add_argument("--repeats", type=int, default=None, help="new-token repeats (default: the runner's)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_lm_scores"))
    parser.add_argument("--append", action="store_true", help="add the records to those already in --json")
    args = parser.parse_args(argv)
    records = json.loads(args.json.read_text())["records"] if args.append and args.json.exists() else []
    for label in args.audits.split(","):
        records.append(measure(label, args.seed, (args.canaries, args.repeats), args.out))
        print(json.dumps(records[-1]), file=sys.stderr)
        write_json(args.json, {"date": utc_now(), "machine": host_info(), "records": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
