"""Agreement check: a built-in non-private target handed over as a trained model gives the attack AUCs of
``run membership --target nonprivate_mnist``, within their intervals.

1. ``run membership --target TARGET`` with its defaults (the canary game; :mod:`audit.membership.runner`).
2. The same target model, read back from that run's model cache (never retrained), is handed over as
   ``{"kind": "model"}``: members are the canaries its coins put in, non-members the others (so
   ``"membership": "independent-coins"`` is true), ``train`` the registry's own trainer
   (:func:`targets.training.train_models` with the target's configuration), and the population the
   records of the target's training distribution it never trained on: the test set, the shadow pool and
   the shadows' canaries (mislabelled as in the game, when the canaries are). A population of clean
   records alone would not be the distribution the target trained on (its training set holds the
   mislabelled canaries too): reference models trained on it are surer of the true labels than the target
   and its OUT models are, and measured LiRA offline 0.722 and RMIA offline 0.714 against 0.842 and 0.830.
3. ``run membership`` on it, with 0, 2 and 4 reference models; each attack in both runs is compared: AUC
   of the trained-model run inside the built-in run's Hanley–McNeil interval (and vice versa).

Usage: ``python benchmarks/agree_trained_nonprivate.py --json OUT [--out RUNS] [--canary natural] [--quick]``
(about 3-6 minutes on 2 cores; ``--quick``: ``nonprivate_digits`` with the ``--quick`` game, for the tests).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.executors import TrainingCall  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.membership.game import build_canary_game  # noqa: E402
from audit.membership.runner import MembershipOptions, run_membership, run_trained_membership  # noqa: E402
from audit.membership.subjects import registry_subject  # noqa: E402
from audit.run_context import RunPaths, cache_dir_of  # noqa: E402
from audit.stats.outcome import Game, Outcome  # noqa: E402
from audit.stats.split_check import auc_score_interval  # noqa: E402
from audit.trained_targets import quick_target  # noqa: E402
from targets.catalogue import trained_target  # noqa: E402
from targets.datasets import Dataset  # noqa: E402
from targets.plugins.loading import ModelPlugin  # noqa: E402
from targets.training import train_models  # noqa: E402

TARGET = "nonprivate_mnist"
#: The target of ``--quick``.
QUICK_TARGET = "nonprivate_digits"
#: Reference models of the trained-model runs compared with the built-in run.
REFERENCES = (0, 2, 4)


def handed_over(opts: MembershipOptions, run_dir: Path, played: Game) -> dict:
    """The built-in run's target model as a ``{"kind": "model"}`` dict (module docstring, step 2); ``played``
    is that run's ``outcome.game``."""
    m, shadows, references = played.canaries, played.shadow_models, played.reference_models
    target = registry_subject(opts)
    game = build_canary_game(target.data, target.n_train, m, shadows, opts.canary, opts.seed, references=references)
    seeds = np.random.SeedSequence(opts.seed).generate_state(1 + shadows + references).tolist()
    paths = RunPaths(run_dir.parent, run_dir, cache_dir_of(opts.out))  # the built-in run's model cache
    [params] = target.fit(paths, game.data, [TrainingCall("target model", game.target_mask[None], seeds[:1])],
                          game.appended_rows)
    tc = game.target_canaries
    X, y = game.data.X, game.data.y
    members, nonmembers = tc[game.target_in], tc[~game.target_in]
    # the target's training distribution, never trained on: the test set, the shadow pool, the shadows' canaries
    used = game.target_mask | np.isin(np.arange(len(y)), tc)
    population = np.flatnonzero(~used[: game.natural_rows])
    spec = trained_target(opts.target)
    if opts.quick:
        spec = quick_target(spec)
    config = spec.train_config(spec.noise_multiplier())

    def predict_proba(Z: np.ndarray) -> np.ndarray:
        return np.exp(target.log_probs(params, Z)[0])

    def train(Xr: np.ndarray, yr: np.ndarray, seed: int):
        data = Dataset(Xr, yr, target.data.name, target.data.n_classes, Xr.shape[1:],
                       "population of the agreement check")
        trained = train_models(data, np.ones((1, len(yr)), bool), config, [seed], progress=False)
        return lambda Z: np.exp(target.log_probs(trained, Z)[0])

    return {"kind": "model", "name": f"{opts.target}_handed_over", "predict_proba": predict_proba,
            "members": (X[members], y[members]), "nonmembers": (X[nonmembers], y[nonmembers]),
            "population": (X[population], y[population]), "train": train, "membership": "independent-coins",
            "training_size": int(game.target_mask.sum())}


def compare(builtin: Outcome, trained: Outcome, confidence: float) -> list[dict]:
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    rows = []
    for name, a in (trained.attacks or {}).items():
        b = (builtin.attacks or {}).get(name)
        if b is None:
            continue
        ci_b = auc_score_interval(b.auc, b.n_members, b.n_nonmembers, z)
        auc_ci = a.auc_ci
        rows.append({"attack": name, "auc_builtin": b.auc, "auc_builtin_ci": list(ci_b), "auc_trained": a.auc,
                     "auc_trained_ci": auc_ci, "tpr_0.001_builtin": b.tpr_at_fpr["0.001"],
                     "tpr_0.001_trained": a.tpr_at_fpr["0.001"],
                     "agree": ci_b[0] <= a.auc <= ci_b[1] and auc_ci[0] <= b.auc <= auc_ci[1]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=Path("runs/agreement"))
    parser.add_argument("--canary", default=None, choices=("mislabelled", "natural"),
                        help="the built-in run's canaries (default: its default, mislabelled)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TARGET} with the --quick game (for the tests)")
    args = parser.parse_args()
    target = QUICK_TARGET if args.quick else TARGET
    opts = MembershipOptions(target=target, out=str(args.out), quiet=True, seed=0, canary=args.canary, quick=args.quick)
    run_dir, builtin = run_membership(opts)
    opts = replace(opts, canary=builtin.game.canary_kind)
    made = handed_over(opts, run_dir, builtin.game)
    out = {"target": target, "quick": args.quick, "builtin_run": str(run_dir),
           "population": len(made["population"][1]), "comparisons": {}}
    for refs in REFERENCES:
        t_opts = MembershipOptions(target="handed:over", out=str(args.out), quiet=True, seed=0, references=refs)
        t_dir, trained = run_trained_membership(t_opts, ModelPlugin("handed:over", made))
        blind_auc = trained.detail.split_check.blind_auc
        out["comparisons"][f"references_{refs}"] = {"run": str(t_dir), "blind_auc": blind_auc,
                                                    "rows": compare(builtin, trained, 0.95)}
    out["all_agree"] = all(row["agree"] for block in out["comparisons"].values() for row in block["rows"])
    write_json(args.json, out)
    for key, block in out["comparisons"].items():
        for row in block["rows"]:
            print(key, row["attack"], f"builtin {row['auc_builtin']:.3f} {row['auc_builtin_ci']}",
                  f"trained {row['auc_trained']:.3f}", "agree" if row["agree"] else "DISAGREE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
