"""Benchmark: ``run membership`` on models trained outside the tool, 12,000 audited records, 0 and 2 reference models.

Data: the bundled 5,000-image MNIST sample, each image in three copies (as is, shifted one pixel right, one
pixel down): 15,000 records, the only way to 10,000+ records from data bundled with a package. Candidates:
the 12,000 records of the first 4,000 images, each a member by its own fair coin (``"membership":
"independent-coins"``, so the one-run epsilon bound applies when the blind check passes; a near-duplicate
copy may fall on the other side, which only makes the attacks' task harder); population (reference models,
RMIA): the 3,000 records of the last 1,000 images. Models: a scikit-learn logistic regression and a small
torch CNN (two conv layers), each trained once here, outside the audit. Reports wall and CPU time per audit,
the machine's load (``os.getloadavg``), its CPU and the date.

Usage: ``python benchmarks/bench_trained_model.py --json OUT [--out RUNS]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_training import machine_info  # noqa: E402

from audit.io import write_json  # noqa: E402
from audit.membership.runner import MembershipOptions, run_trained_membership  # noqa: E402
from targets.datasets import load_dataset  # noqa: E402
from targets.plugins.loading import ModelPlugin  # noqa: E402
from targets.threads import usable_cpus  # noqa: E402

IMAGES_AUDITED = 4000
#: Epochs of the CNN (Adam, batch 128). Leakage stays near chance however long it trains (20 epochs: loss AUC
#: 0.503): a record's shifted copies fall on either side by their own coins, so a non-member has trained-on
#: near-duplicates as often as a member. The benchmark measures the audit's cost; the agreement check
#: (agree_trained_nonprivate.py) measures what the attacks find.
CNN_EPOCHS = 5


def records() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, y) of the candidates, their membership coins, and (X, y) of the population (module docstring)."""
    data = load_dataset("mnist")
    order = np.random.default_rng(1).permutation(len(data))
    X, y = data.X[order], data.y[order]
    copies = np.concatenate([X, np.roll(X, 1, axis=3), np.roll(X, 1, axis=2)])
    labels, image = np.tile(y, 3), np.tile(np.arange(len(y)), 3)
    audited = image < IMAGES_AUDITED
    coins = np.random.default_rng(0).random(int(audited.sum())) < 0.5
    return copies[audited], labels[audited], coins, copies[~audited], labels[~audited], image


def lr_train(X: np.ndarray, y: np.ndarray, seed: int) -> LogisticRegression:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=10.0, max_iter=40, random_state=seed).fit(X.reshape(len(X), -1), y)


def cnn_train(X: np.ndarray, y: np.ndarray, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(8, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Flatten(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(CNN_EPOCHS):
        for idx in torch.randperm(len(Xt), generator=gen).split(128):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx]).backward()
            opt.step()
    return net.eval()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_trained"))
    args = parser.parse_args()
    X, y, coins, pX, py, _ = records()
    rows = []
    for kind, train in (("sklearn", lr_train), ("cnn", cnn_train)):
        t0 = time.perf_counter()
        model = train(X[coins], y[coins], 0)
        fit_s = time.perf_counter() - t0
        made = {"kind": "model", "name": f"bench_{kind}", "predict_proba": model, "members": (X[coins], y[coins]),
                "nonmembers": (X[~coins], y[~coins]), "population": (pX, py), "train": train,
                "membership": "independent-coins"}
        for refs in (0, 2):
            load0, w0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
            run_dir, results = run_trained_membership(
                MembershipOptions(target=f"bench:{kind}", out=str(args.out), quiet=True, seed=0, references=refs),
                ModelPlugin(f"bench:{kind}", made))
            row = {"model": kind, "references": refs, "records": int(len(y)), "members": int(coins.sum()),
                   "target_training_s (outside the audit)": fit_s, "wall_s": time.perf_counter() - w0,
                   "cpu_s": time.process_time() - c0, "load_before": load0, "load_after": os.getloadavg()[0],
                   "usable_cpus": usable_cpus(), "blind_auc": results["split_check"]["blind_auc"],
                   "split_passed": results["split_check"]["passed"], "timing": results["timing"],
                   "aucs": {n: a["auc"] for n, a in results["attacks"].items()},
                   "tpr_at_0.1%_fpr": {n: a["tpr_at_fpr"]["0.001"] for n, a in results["attacks"].items()},
                   "run": str(run_dir)}
            rows.append(row)
            print(f"{kind} R={refs}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, load "
                  f"{row['load_before']:.1f}->{row['load_after']:.1f}, blind AUC {row['blind_auc']:.3f}, "
                  f"AUCs {row['aucs']}", flush=True)
    write_json(args.json, {"benchmark": "trained-model membership audit", "date": time.strftime("%Y-%m-%d %H:%M %Z"),
                           "machine": machine_info(torch.device("cpu")), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
