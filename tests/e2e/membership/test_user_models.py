"""The membership suite on a user's own model, and the data a user brings: arrays, .npz, .csv and
CIFAR-10 in its binary distribution format (a small generated fixture)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from audit.cli import main
from audit.errors import UserError
from targets.datasets import load_dataset
from targets.plugins.loading import load_plugin


def _cifar_fixture(folder, per_file: int = 40, seed: int = 0):
    """Six batch files in the CIFAR-10 binary format: per record a label byte, then 3,072 pixel bytes."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        part = rng.integers(0, 256, size=(per_file, 3073), dtype=np.uint8)
        part[:, 0] = rng.integers(0, 10, size=per_file)
        part.tofile(folder / name)
        records.append(part)
    return np.concatenate(records)


def test_cifar10_binary_format_is_read_in_order(tmp_path):
    records = _cifar_fixture(tmp_path / "cifar-10-batches-bin")
    data = load_dataset("cifar10", tmp_path)
    assert data.X.shape == (240, 3, 32, 32) and data.shape == (3, 32, 32) and data.n_classes == 10
    np.testing.assert_array_equal(data.y, records[:, 0])
    # channel-major planes of 32 rows: the green value of row 1, column 2 of the first image
    assert data.X[0, 1, 1, 2] == pytest.approx(records[0, 1 + 1024 + 32 + 2] / 255.0)


def test_missing_cifar10_files_say_how_to_get_them(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AUDIT_DATA_DIR", raising=False)
    _cifar_fixture(tmp_path / "partial")
    (tmp_path / "partial" / "test_batch.bin").unlink()
    with pytest.raises(UserError, match="test_batch.bin not found .*cifar-10-binary.tar.gz"):
        load_dataset("cifar10", tmp_path / "partial")
    assert main(["run", "membership", "--target", "dpsgd_cifar10", "--quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--data-dir" in err and "cifar.html" in err


def test_cifar10_targets_train_the_cnn_on_colour_images(tmp_path):
    from targets.catalogue import trained_target
    from targets.training import train_models

    _cifar_fixture(tmp_path)
    data = load_dataset("cifar10", tmp_path)
    target = trained_target("dpsgd_cifar10")
    assert target.dataset == "cifar10" and target.arch == "cnn"
    config = replace(target.train_config(1.0), epochs=0.4)  # two DP-SGD steps
    masks = np.zeros((2, len(data)), dtype=bool)
    masks[:, :64] = True
    params = train_models(data, masks, config, [1, 2])
    assert params["conv1.weight"].shape == (2, 16, 3, 8, 8) and params["fc1.weight"].shape == (2, 32, 800)


def test_plugin_dataset_from_npz_and_csv(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)), rng.integers(0, 3, size=30)
    np.savez(tmp_path / "data.npz", X=X, y=y)
    rows = "\n".join(",".join(f"{v:.6f}" for v in x) + f",{label}" for x, label in zip(X, y, strict=True))
    (tmp_path / "data.csv").write_text("a,b,c,d,label\n" + rows + "\n")
    for name in ("data.npz", "data.csv"):
        data = load_dataset(str(tmp_path / name))
        assert data.X.shape == (30, 4) and data.n_classes == int(y.max()) + 1
        np.testing.assert_allclose(data.X, X, atol=1e-5)
        np.testing.assert_array_equal(data.y, y)
    np.savez(tmp_path / "bad.npz", features=X)
    with pytest.raises(UserError, match="arrays named X and y"):
        load_dataset(str(tmp_path / "bad.npz"))


PLUGIN = textwrap.dedent('''
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    def train(X, y, seed):
        return LogisticRegression(C=10.0, max_iter=200).fit(X, y).predict_proba

    def trainer():
        return {"kind": "trainer", "dataset": DATA, "train": train, "name": "my_logreg",
                "claim": {"epsilon": 1.0, "delta": 1e-5}}
''')


def test_membership_suite_runs_on_a_user_trainer(tmp_path, monkeypatch, capsys):
    """``run membership --target module:trainer``: the one-run game and every attack on the user's
    model, shadows and references trained by its own ``train`` (here on an .npz file)."""
    from targets.datasets import load_digits

    digits = load_digits()
    np.savez(tmp_path / "digits.npz", X=digits.X, y=digits.y)
    (tmp_path / "my_user_model.py").write_text(PLUGIN.replace("DATA", repr(str(tmp_path / "digits.npz"))))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_plugin("my_user_model:trainer").dataset == str(tmp_path / "digits.npz")
    out = tmp_path / "runs"
    assert main(["run", "membership", "--target", "my_user_model:trainer", "--canaries", "100", "--shadows", "2",
                 "--references", "4", "--quiet", "--out", str(out)]) == 0
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    assert set(results["attacks"]) == {"shadow", "lira_online", "lira_offline", "rmia_online", "rmia_offline", "loss",
                                       "confidence"}
    assert results["target"] == "my_logreg" and results["params"]["plugin"] == "my_user_model:trainer"
    assert results["epsilon_theory"] == pytest.approx(1.0) and results["game"]["canaries"] == 100
    assert results["model"]["train_accuracy"] > 0.9
    config = json.loads((run / "config.json").read_text())
    assert config["plugin"]["spec"] == "my_user_model:trainer"
    assert "theory:    epsilon = 1.000" in capsys.readouterr().out


def test_extraction_and_inversion_take_a_plugin_exposing_probabilities(tmp_path, monkeypatch):
    """``run extraction`` steals the user's logistic regression through its predict_proba (no parameter
    error: its parameters are not visible); ``run inversion`` runs black-box MI-FACE on it and on a
    reference model its own train fits to the non-members."""
    (tmp_path / "my_user_model.py").write_text(PLUGIN.replace("DATA", repr("digits")))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "runs"
    assert main(["run", "extraction", "--target", "my_user_model:trainer", "--quick", "--round", "3", "--quiet",
                 "--out", str(out)]) == 0
    assert main(["run", "inversion", "--target", "my_user_model:trainer", "--quick", "--black-box-steps", "3",
                 "--quiet", "--out", str(out)]) == 0
    runs = {p.name.split("-")[1]: json.loads((p / "results.json").read_text()) for p in out.iterdir()
            if p.is_dir() and p.name != "cache"}
    extraction = runs["extraction"]["extraction"]
    assert extraction["param_rel_error"] is None and extraction["agreement_test"] > 0.99
    assert runs["extraction"]["target"] == "my_logreg" and runs["extraction"]["epsilon_theory"] == pytest.approx(1.0)
    inversion = runs["inversion"]
    assert inversion["model"]["access"] == "black-box" and "black_box" not in inversion["inversion"]
    assert inversion["inversion"]["queries"] > 0 and inversion["params"]["plugin"] == "my_user_model:trainer"
    # a black-box-only target with --black-box-steps 0 has no attack left: one line, exit 2, before any training
    assert main(["run", "inversion", "--target", "my_user_model:trainer", "--quick", "--black-box-steps", "0",
                 "--quiet", "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "none").exists() or not any((tmp_path / "none").glob("*/results.json"))


def test_gradmax_canaries_on_a_user_trainer(tmp_path, monkeypatch):
    """``--canary gradmax`` on a trainer plugin: the public model is one more call of the user's ``train`` on
    shadow-pool rows only, and its candidates are ranked by ``1 - p(label)`` (the plugin's gradients cannot be read)."""
    from targets.datasets import load_digits

    digits = load_digits()
    np.savez(tmp_path / "digits.npz", X=digits.X, y=digits.y)
    (tmp_path / "my_gradmax_model.py").write_text(PLUGIN.replace("DATA", repr(str(tmp_path / "digits.npz"))))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "runs"
    assert main(["run", "membership", "--target", "my_gradmax_model:trainer", "--canary", "gradmax", "--canaries",
                 "100", "--shadows", "2", "--attack", "loss", "--quiet", "--out", str(out)]) == 0
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "cache"]
    results = json.loads((run / "results.json").read_text())
    assert results["game"]["canary_kind"] == "gradmax" and results["game"]["canaries"] == 100
    assert "public model (canary design): trained 1 model(s)" in (run / "log.txt").read_text()
