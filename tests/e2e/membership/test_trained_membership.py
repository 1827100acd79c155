"""``run membership --target my:model`` on models trained outside the tool (a scikit-learn logistic regression
and a small torch CNN on 2,400 MNIST records): no retraining, the blind split check first, the attacks on every
member and non-member with 0 and 2 reference models; a shifted split flagged with no epsilon bound; bad input
one line, exit 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT

from audit.cli import main
from audit.schemas import validate_results

MODELS = textwrap.dedent('''
    import functools
    import warnings

    import numpy as np
    import torch
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from targets.datasets import load_dataset

    CANDIDATES = 2400
    TRAINED = {"count": 0}

    @functools.lru_cache(None)
    def data():
        d = load_dataset("mnist")
        order = np.random.default_rng(1).permutation(len(d))  # the bundled sample is sorted by digit
        return d.X[order], d.y[order]

    def split(shift):
        X, y = data()
        rng = np.random.default_rng(0)
        p = np.where(y[:CANDIDATES] < 5, 0.8, 0.2) if shift else 0.5  # shifted: members mostly digits 0-4
        coins = rng.random(CANDIDATES) < p
        return np.flatnonzero(coins), np.flatnonzero(~coins)

    def lr_train(X, y, seed):
        TRAINED["count"] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return LogisticRegression(C=10.0, max_iter=40, random_state=seed).fit(X.reshape(len(X), -1), y)

    def cnn_train(X, y, seed):
        TRAINED["count"] += 1
        torch.manual_seed(seed)
        net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                  torch.nn.Conv2d(8, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                  torch.nn.Flatten(), torch.nn.Linear(256, 10))
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(8):
            for idx in torch.randperm(len(Xt), generator=gen).split(64):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx]).backward()
                opt.step()
        return net.eval()

    @functools.lru_cache(None)
    def fitted(kind, shift):
        X, y = data()
        members, _ = split(shift)
        return (lr_train if kind == "sklearn" else cnn_train)(X[members], y[members], 0)

    def spec(kind, shift=False):
        X, y = data()
        members, nonmembers = split(shift)
        return {"kind": "model", "name": f"{kind}{'_shifted' if shift else ''}", "predict_proba": fitted(kind, shift),
                "members": (X[members], y[members]), "nonmembers": (X[nonmembers], y[nonmembers]),
                "population": (X[CANDIDATES:], y[CANDIDATES:]),
                "train": lr_train if kind == "sklearn" else cnn_train,
                "membership": "seeded-split:digit-dependent coins" if shift else "independent-coins"}

    def sklearn_model():
        return spec("sklearn")

    def cnn_model():
        return spec("cnn")

    def shifted_model():
        return spec("sklearn", shift=True)

    def _digits(bad):
        d = load_dataset("digits")
        X, y = d.X.reshape(len(d), -1), d.y
        model = LogisticRegression(max_iter=200).fit(X[:600], y[:600])
        out = {"kind": "model", "predict_proba": model, "members": (X[:600], y[:600]),
               "nonmembers": (X[600:1200], y[600:1200])}
        if bad == "shapes":
            out["nonmembers"] = (X[600:1200, :32], y[600:1200])
        elif bad == "overlap":
            out["nonmembers"] = (X[500:1200], y[500:1200])
        elif bad == "empty":
            out["nonmembers"] = (X[:0], y[:0])
        elif bad == "wrong_shape":
            out["predict_proba"] = lambda Z: model.predict_proba(Z)[:, :5]
        elif bad == "nan":
            out["predict_proba"] = lambda Z: np.full((len(Z), 10), np.nan)
        return out

    def bad_shapes():
        return _digits("shapes")

    def bad_overlap():
        return _digits("overlap")

    def bad_empty():
        return _digits("empty")

    def bad_wrong_shape():
        return _digits("wrong_shape")

    def bad_nan():
        return _digits("nan")
''')


@pytest.fixture(scope="module")
def user_models(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("user_models")
    (folder / "user_trained_models.py").write_text(MODELS)
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(folder))
    yield "user_trained_models"
    mp.undo()


def _run(target: str, out: Path, *extra: str) -> dict:
    assert main(["run", "membership", "--target", target, "--out", str(out), "--quiet", *extra]) == 0
    [results] = list(out.glob("*/results.json"))
    results = json.loads(results.read_text())
    validate_results(results)
    return results


@pytest.mark.parametrize("kind", ["sklearn", "cnn"])
def test_a_trained_model_is_audited_without_retraining_with_0_and_2_reference_models(user_models, kind,
                                                                                     tmp_path) -> None:
    import sys

    module = sys.modules.get(user_models) or __import__(user_models)
    none = _run(f"{user_models}:{kind}_model", tmp_path / "r0", "--references", "0")
    trained_before = module.TRAINED["count"]
    two = _run(f"{user_models}:{kind}_model", tmp_path / "r2")  # default: 2 references with train + population
    assert module.TRAINED["count"] - trained_before == 2  # the two reference models; the target is never retrained
    for results in (none, two):
        split = results["split_check"]
        assert split["passed"] is True and split["blind_auc_ci"][0] <= 0.5 <= split["blind_auc_ci"][1]
        assert results["game"]["members"] + results["game"]["nonmembers"] == 2400  # every record, no cap
        loss = results["attacks"]["loss"]
        assert loss["n_members"] + loss["n_nonmembers"] == 2400
        # independent coins + a passed check: one-run bounds over a Bonferroni family, one of them best
        assert results["epsilon_bound"]["allowed"] is True and results["lower_bounds"]
        assert results["best_lower_bound"]["family_size"] == len(results["lower_bounds"])
    assert set(none["attacks"]) == {"loss", "confidence"}
    assert set(two["attacks"]) == {"loss", "confidence", "rmia_offline", "lira_offline"}
    assert two["game"]["reference_models"] == 2 and "population records" in two["game"]["reference_records"]
    # RMIA's offline a is chosen on the reference models' own games, never on the audited records
    assert two["attacks"]["rmia_offline"]["a_chosen_on"].startswith("2 reference games on")
    # scores come from the same fixed model: the loss attack is identical with or without references
    assert none["attacks"]["loss"]["auc"] == two["attacks"]["loss"]["auc"]
    assert (tmp_path / "r2").glob("*/report.html")


def test_a_shifted_split_is_flagged_and_gets_no_epsilon_bound(user_models, tmp_path, capsys) -> None:
    results = _run(f"{user_models}:shifted_model", tmp_path, "--references", "0")
    split = results["split_check"]
    assert split["passed"] is False and split["blind_auc_ci"][0] > 0.5
    assert results["best_lower_bound"] is None and results["lower_bounds"] == []
    assert results["epsilon_bound"]["allowed"] is False and results["ceiling"]["epsilon"] is None
    assert all(a["blind_auc"] == split["blind_auc"] for a in results["attacks"].values())
    assert capsys.readouterr().out.splitlines()[0].startswith("split:     blind AUC")  # said first


@pytest.mark.parametrize("factory, words", [
    ("bad_shapes", "shape"), ("bad_overlap", "both members and non-members"), ("bad_empty", "non-empty"),
    ("bad_wrong_shape", "shape"), ("bad_nan", "NaN"),
])
def test_bad_input_is_one_line_exit_2(user_models, factory, words, tmp_path, capsys) -> None:
    code = main(["run", "membership", "--target", f"{user_models}:{factory}", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err


def test_a_builtin_target_handed_over_agrees_with_its_own_membership_run(tmp_path) -> None:
    """The agreement benchmark at its --quick size (nonprivate_digits, the --quick game): every attack's AUC of
    the target handed over as a trained model (0, 2 and 4 reference models on a population drawn like its
    training set) lies in the built-in run's 95% interval and the other way round. A population of clean
    records only (the old benchmark) fails it: LiRA offline 0.58 against 0.72 [0.65, 0.78]."""
    import subprocess
    import sys

    root = ROOT
    out = tmp_path / "agree.json"
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "agree_trained_nonprivate.py"), "--quick",
                           "--json", str(out), "--out", str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    agreement = json.loads(out.read_text())
    attacks = {key: {row["attack"] for row in block["rows"]} for key, block in agreement["comparisons"].items()}
    assert attacks == {"references_0": {"loss", "confidence"},
                       "references_2": {"loss", "confidence", "lira_offline", "rmia_offline"},
                       "references_4": {"loss", "confidence", "lira_offline", "rmia_offline"}}
    assert agreement["all_agree"], proc.stdout
