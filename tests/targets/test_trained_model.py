"""A trained model brought by the user (targets.trained_model): every way to give the model and its
members / non-members, and a one-line UserError naming the fix for every bad input."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from sklearn.linear_model import LogisticRegression

from audit.errors import TargetCodeError, UserError
from targets.datasets import load_digits
from targets.trained_model import (
    TrainedModel,
    check_probabilities,
    load_trained_model,
    model_from_dict,
    shared_rows,
)

DIGITS = load_digits()
MEMBERS, NONMEMBERS = np.arange(0, 300), np.arange(300, 600)


@pytest.fixture(scope="module")
def logreg() -> LogisticRegression:
    return LogisticRegression(max_iter=300).fit(DIGITS.X[MEMBERS], DIGITS.y[MEMBERS])


def _data(index):
    return DIGITS.X[index], DIGITS.y[index]


def _spec(model, **extra) -> dict:
    return {"kind": "model", "predict_proba": model, "members": _data(MEMBERS), "nonmembers": _data(NONMEMBERS)} | extra


class MLP(torch.nn.Module):
    """A tiny MLP on 8x8 images (n, 1, 8, 8); dropout shows eval mode is on."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.5), torch.nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@pytest.fixture(scope="module")
def mlp_weights(tmp_path_factory):
    torch.manual_seed(0)
    model = MLP()
    path = tmp_path_factory.mktemp("weights") / "mlp.safetensors"
    save_file(model.state_dict(), str(path))
    return model, path


def _images(index):
    return DIGITS.X[index].reshape(-1, 1, 8, 8), DIGITS.y[index]


def test_scikit_learn_estimator_is_wrapped_and_batched(logreg):
    calls = []
    target = model_from_dict("t:logreg", _spec(logreg, batch_size=128, membership="seeded-split: first 300 digits"))
    assert isinstance(target, TrainedModel) and target.n_classes == 10 and target.input_shape == (64,)
    assert target.members.n_classes == target.nonmembers.n_classes == 10
    assert target.model_kind == "scikit-learn LogisticRegression" and target.train is None and target.claim is None
    proba = target.predict_proba(DIGITS.X[:300], progress=lambda done, total: calls.append((done, total)))
    np.testing.assert_allclose(proba, logreg.predict_proba(DIGITS.X[:300]), rtol=1e-5, atol=1e-6)
    assert calls == [(128, 300), (256, 300), (300, 300)]
    assert (target.membership, target.membership_note) == ("seeded-split", "first 300 digits")
    assert not target.allows_epsilon_bound
    record = json.loads(json.dumps(target.to_dict()))
    assert record["n_members"] == 300 and record["membership"] == "seeded-split" and record["model"].startswith("sci")
    assert "scikit-learn" in record["packages"]


def test_plain_function_with_dict_data_claim_and_coins(logreg):
    spec = _spec(logreg.predict_proba, claim={"epsilon": 2.0, "delta": 1e-5}, membership="independent-coins")
    spec["members"] = {"X": DIGITS.X[MEMBERS], "y": DIGITS.y[MEMBERS]}
    target = model_from_dict("t:fn", spec)
    assert target.model_kind == "predict_proba function" and target.allows_epsilon_bound
    assert target.claim.epsilon(1e-5) == pytest.approx(2.0) and target.delta == 1e-5
    assert target.membership_note.startswith("each candidate record")
    unstated = model_from_dict("t:fn", _spec(logreg))
    assert unstated.membership == "unstated" and "blind split check" in unstated.membership_note


def test_torch_module_from_safetensors_runs_in_eval_mode(mlp_weights):
    model, path = mlp_weights
    target = model_from_dict("t:mlp", {"kind": "model", "architecture": MLP, "weights": path, "device": "cpu",
                                       "members": _images(MEMBERS), "nonmembers": _images(NONMEMBERS)})
    assert target.input_shape == (1, 8, 8) and target.n_classes == 10 and "from safetensors" in target.model_kind
    X = _images(MEMBERS)[0]
    first, second = target.predict_proba(X), target.predict_proba(X)
    np.testing.assert_array_equal(first, second)  # dropout off: eval mode
    with torch.no_grad():
        expected = torch.softmax(model.eval()(torch.as_tensor(X)).double(), dim=1).numpy()
    np.testing.assert_allclose(first, expected, rtol=1e-6, atol=1e-9)
    # an nn.Module given directly, and an architecture given as an instance
    direct = model_from_dict("t:mlp", {"kind": "model", "predict_proba": model, "members": _images(MEMBERS),
                                       "nonmembers": _images(NONMEMBERS)})
    np.testing.assert_allclose(direct.predict_proba(X), expected, rtol=1e-6, atol=1e-9)
    instance = model_from_dict("t:mlp", {"kind": "model", "architecture": MLP(), "weights": str(path),
                                         "members": _images(MEMBERS), "nonmembers": _images(NONMEMBERS)})
    np.testing.assert_allclose(instance.predict_proba(X), expected, rtol=1e-6, atol=1e-9)


def test_a_users_module_is_neither_moved_nor_left_in_eval_mode(mlp_weights):
    """A module given as ``predict_proba`` runs where it is and in eval mode only while queried (found on a GPU
    machine: moving the user's module to CUDA in place broke the user's own later CPU calls)."""
    model, _ = mlp_weights
    model.train()
    target = model_from_dict("t:mlp", {"kind": "model", "predict_proba": model, "members": _images(MEMBERS),
                                       "nonmembers": _images(NONMEMBERS)})
    X = _images(MEMBERS)[0]
    np.testing.assert_array_equal(target.predict_proba(X), target.predict_proba(X))  # dropout off while queried
    assert model.training and next(model.parameters()).device.type == "cpu"
    model.eval()


class Probabilities(torch.nn.Module):
    """A module that returns probabilities, not logits."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.inner(x), dim=-1)


def test_modules_that_train_returns_take_the_targets_outputs_and_device(mlp_weights):
    model, _ = mlp_weights
    target = model_from_dict("t:mlp", {"kind": "model", "predict_proba": Probabilities(model), "device": "cpu",
                                       "outputs": "probabilities", "train": lambda X, y, seed: Probabilities(model),
                                       "members": _images(MEMBERS), "nonmembers": _images(NONMEMBERS)})
    X = _images(MEMBERS)[0]
    reference = target.fit_reference(*_images(np.arange(600, 700)), seed=0)
    np.testing.assert_allclose(reference(X), target.predict_proba(X), rtol=1e-12)  # not a softmax of probabilities
    with pytest.raises(UserError, match="field 'device' must be"):
        model_from_dict("t:mlp", {"kind": "model", "predict_proba": model, "device": 0, "members": _images(MEMBERS),
                                  "nonmembers": _images(NONMEMBERS)})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_torch_module_predicts_on_cuda(mlp_weights):
    model, path = mlp_weights
    target = model_from_dict("t:mlp", {"kind": "model", "architecture": MLP, "weights": path, "device": "cuda",
                                       "members": _images(MEMBERS), "nonmembers": _images(NONMEMBERS),
                                       "batch_size": 100})
    X = _images(MEMBERS)[0]
    with torch.no_grad():
        expected = torch.softmax(model.eval()(torch.as_tensor(X)).double(), dim=1).numpy()
    np.testing.assert_allclose(target.predict_proba(X), expected, rtol=1e-4, atol=1e-6)


def test_the_split_check_runs_on_the_targets_records(logreg):
    """The records a classifier target supplies (features and labels) are what the runner's blind split check
    reads (:func:`audit.membership.runner.split_check`): a fair split passes, a split by label is flagged."""
    from threadpoolctl import threadpool_limits

    from audit.membership.runner import split_check

    rng = np.random.default_rng(0)
    order = rng.permutation(len(DIGITS))
    fair = model_from_dict("t:x", {"kind": "model", "predict_proba": logreg, "members": _data(order[:300]),
                                   "nonmembers": _data(order[300:600])})
    skewed = model_from_dict("t:x", {"kind": "model", "predict_proba": logreg,
                                     "members": _data(np.flatnonzero(DIGITS.y < 5)[:300]),
                                     "nonmembers": _data(np.flatnonzero(DIGITS.y >= 5)[:300])})
    with threadpool_limits(1):
        assert split_check(fair, 0.95, 1).passed
        check = split_check(skewed, 0.95, 1)
    assert not check.passed and check.uses_labels and check.blind_auc > 0.95


def test_npz_csv_and_builtin_dataset_records(logreg, tmp_path):
    npz, csv, csv_first = tmp_path / "members.npz", tmp_path / "nonmembers.csv", tmp_path / "label_first.csv"
    np.savez(npz, X=DIGITS.X[MEMBERS], y=DIGITS.y[MEMBERS])
    np.savetxt(csv, np.column_stack([DIGITS.X[NONMEMBERS], DIGITS.y[NONMEMBERS]]), delimiter=",")
    header = ",".join(["label"] + [f"p{i}" for i in range(64)])
    np.savetxt(csv_first, np.column_stack([DIGITS.y[NONMEMBERS], DIGITS.X[NONMEMBERS]]), delimiter=",",
               header=header, comments="")
    for members, nonmembers in [(npz, str(csv)), (str(npz), {"path": csv_first, "label_column": 0}),
                                ({"dataset": "digits", "indices": MEMBERS.tolist()}, {"path": str(csv)})]:
        target = model_from_dict("t:files", {"kind": "model", "predict_proba": logreg, "members": members,
                                             "nonmembers": nonmembers})
        np.testing.assert_allclose(target.members.X, DIGITS.X[MEMBERS], atol=1e-6)
        np.testing.assert_array_equal(target.nonmembers.y, DIGITS.y[NONMEMBERS])
    assert target.members.source == "scikit-learn load_digits"


def test_module_factory_and_reference_training(tmp_path, monkeypatch):
    (tmp_path / "my_model.py").write_text(textwrap.dedent("""
        import numpy as np
        from sklearn.linear_model import LogisticRegression
        from targets.datasets import load_digits

        def train(X, y, seed):
            return LogisticRegression(max_iter=200, random_state=seed).fit(X, y)

        def model():
            d = load_digits()
            return {"kind": "model", "predict_proba": train(d.X[:300], d.y[:300], 0), "train": train,
                    "members": (d.X[:300], d.y[:300]), "nonmembers": (d.X[300:600], d.y[300:600]),
                    "name": "digits logreg"}

        def broken():
            raise RuntimeError("no model today")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    target = load_trained_model("my_model:model")
    assert target.spec == "my_model:model" and target.name == "digits logreg" and target.rng == "seed"
    reference = target.fit_reference(DIGITS.X[600:900], DIGITS.y[600:900], seed=3)
    assert reference(DIGITS.X[:5]).shape == (5, 10)
    with pytest.raises(TargetCodeError, match="model factory my_model:broken raised RuntimeError: no model today"):
        load_trained_model("my_model:broken")
    with pytest.raises(UserError, match="cannot import model module 'no_such_module'"):
        load_trained_model("no_such_module:model")
    from my_model import model

    assert load_trained_model(model).spec == "my_model:model"


def test_reference_training_errors(logreg):
    target = model_from_dict("t:x", _spec(logreg, train=lambda X, y, seed: 1 / 0))
    with pytest.raises(TargetCodeError, match="train of t:x raised ZeroDivisionError"):
        target.fit_reference(DIGITS.X[:50], DIGITS.y[:50], 0)
    with pytest.raises(UserError, match="has no 'train'; add train"):
        model_from_dict("t:x", _spec(logreg)).fit_reference(DIGITS.X[:50], DIGITS.y[:50], 0)


def test_shared_rows_are_found_by_hash():
    X = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    assert shared_rows(X, np.array([[4.0, 5.0], [-0.0, 1.0]])) == [(0, 1), (2, 0)]
    assert shared_rows(X, X + 1e-3) == []


def test_model_errors_raised_after_loading_are_the_targets_own(logreg):
    target = model_from_dict("t:x", _spec(logreg))
    with pytest.raises(TargetCodeError, match="predict_proba of t:x raised ValueError"):
        target.predict_proba(DIGITS.X[:4, :10])
    assert check_probabilities([[0.25, 0.75]], 1, "f").shape == (1, 2)


def _bad(logreg, tmp_path) -> list:
    """(dict, expected message) pairs, one per rule of the contract."""
    wrong = tmp_path / "wrong.safetensors"
    save_file({"other.weight": torch.zeros(2, 2)}, str(wrong))
    shared = (np.concatenate([DIGITS.X[NONMEMBERS], DIGITS.X[[3, 5, 7]]]),
              np.concatenate([DIGITS.y[NONMEMBERS], DIGITS.y[[3, 5, 7]]]))
    p = logreg.predict_proba
    return [
        ({"kind": "trainer"}, "field 'kind' must be 'model'"),
        (_spec(logreg) | {"members": None}, "field 'members' is missing"),
        (_spec(logreg) | {"members": (DIGITS.X[:0], DIGITS.y[:0])}, "members: X must be a non-empty array"),
        (_spec(logreg) | {"nonmembers": (DIGITS.X[:50, :63], DIGITS.y[:50])},
         r"members have records of shape \(64,\) and non-members \(63,\)"),
        (_spec(logreg) | {"nonmembers": None}, "field 'nonmembers' is missing"),
        (_spec(logreg) | {"members": (DIGITS.X[:50, :63], DIGITS.y[:50]),
                          "nonmembers": (DIGITS.X[300:350, :63], DIGITS.y[300:350])},
         "the model takes 64 features per record but members and non-members have 63"),
        (_spec(MLP()) | {"members": (DIGITS.X[:50, :63], DIGITS.y[:50]),
                         "nonmembers": (DIGITS.X[300:350, :63], DIGITS.y[300:350])},
         r"predict_proba fails on records of shape \(63,\) \(RuntimeError: .*\); give members and non-members in"),
        (_spec(lambda X: p(X)[:, 0]), r"must return probabilities of shape \(16, n_classes >= 2\)"),
        (_spec(lambda X: np.full((len(X), 10), np.nan)), "returned NaN or infinity"),
        (_spec(lambda X: logreg.decision_function(X)), "negative values|summing to 1"),
        (_spec(lambda X: 2 * p(X)), r"returned a row summing to 2 \(more than 0.001 from 1\); .*softmax"),
        (_spec(lambda X: "probabilities"), "must return an array of probabilities"),
        (_spec(lambda X: np.full((len(X), 5), 0.2)), "labels go up to 9 but predict_proba returns 5 columns"),
        (_spec(logreg) | {"nonmembers": shared},
         r"3 record\(s\) are both members and non-members \(first: member 3 = non-member 300\)"),
        (_spec(logreg) | {"members": (DIGITS.X[:50], DIGITS.y[:50] - 1)}, "labels y must be non-negative integers"),
        (_spec(logreg) | {"members": (DIGITS.X[:50], DIGITS.y[:40])}, r"y must hold one label per record"),
        (_spec(logreg) | {"members": (np.where(DIGITS.X[:50] > 0.9, np.nan, DIGITS.X[:50]), DIGITS.y[:50])},
         "X must be finite numbers"),
        (_spec(logreg) | {"membership": "random"}, "'membership' must be 'independent-coins' or 'seeded-split:"),
        (_spec(logreg) | {"membership": "seeded-split:"}, "'membership' must be"),
        (_spec(logreg) | {"architecture": MLP, "weights": wrong}, "give exactly one of 'predict_proba'"),
        ({k: v for k, v in _spec(None).items() if k != "predict_proba"} | {"architecture": MLP},
         "'architecture' needs 'weights'"),
        ({k: v for k, v in _spec(None).items() if k != "predict_proba"} | {"architecture": MLP, "weights": "w.pt"},
         "must be an existing .safetensors file"),
        ({k: v for k, v in _spec(None).items() if k != "predict_proba"} | {"architecture": MLP, "weights": wrong},
         "the weights in wrong.safetensors do not fit the architecture"),
        ({k: v for k, v in _spec(None).items() if k != "predict_proba"} | {"architecture": 3, "weights": wrong},
         "'architecture' must be a torch nn.Module or a callable"),
        (_spec(42), "must be a function X -> probabilities, a fitted scikit-learn classifier or a torch nn.Module"),
        (_spec(LogisticRegression()), "the estimator has no classes_; fit it"),
        (_spec(logreg) | {"batch_size": 0}, "'batch_size' must be a whole number >= 1"),
        (_spec(logreg) | {"train": "fit"}, "field 'train' must be a function"),
        (_spec(logreg) | {"claim": {"epsilon": -1}}, "claim epsilon"),
        (_spec(logreg) | {"members": "digits"}, r"a built-in dataset needs its record numbers"),
        (_spec(logreg) | {"members": {"dataset": "digits", "indices": [0, 5000]}}, r"'indices' must lie in 0..1796"),
        (_spec(logreg) | {"members": {"dataset": "nope", "indices": [0]}}, "unknown dataset 'nope'"),
        (_spec(logreg) | {"members": "data.parquet"}, "is not a .npz or .csv file"),
        (_spec(logreg) | {"members": {"path": tmp_path / "missing.csv"}}, "missing.csv not found; give the path"),
        (_spec(logreg) | {"members": {"rows": 3}}, "a dict must be"),
        (_spec(logreg) | {"members": 7}, r"give \(X, y\)"),
        (_spec(MLP()) | {"outputs": "scores"}, r"field 'outputs' \(what a torch module returns\) must be 'logits'"),
    ]


def test_every_bad_input_is_a_one_line_user_error(logreg, tmp_path):
    csv = tmp_path / "three.csv"
    np.savetxt(csv, np.column_stack([DIGITS.X[:20], DIGITS.y[:20]]), delimiter=",")
    cases = _bad(logreg, tmp_path) + [
        (_spec(logreg) | {"members": {"path": csv, "label_column": 70}}, "label_column 70 is not a column"),
    ]
    for made, message in cases:
        with pytest.raises(UserError, match=message) as info:
            try:
                model_from_dict("t:bad", made)
            except UserError:
                raise
            else:
                pytest.fail(f"no UserError for the case expecting {message!r}")
        assert "\n" not in str(info.value), str(info.value)
    with pytest.raises(UserError, match="must be a dict, got list"):
        model_from_dict("t:bad", [1])
    target = model_from_dict("t:x", _spec(lambda X: logreg.predict_proba(X) if len(X) < 100 else np.ones((3, 10))))
    with pytest.raises(UserError, match=r"predict_proba of t:x must return probabilities of shape \(300, 10\)"):
        target.predict_proba(DIGITS.X[:300])


def test_rmia_offline_a_of_a_trained_model_says_where_it_comes_from():
    from audit.membership.trained import TRAINED_RMIA_A, TrainedQueries, trained_rmia_a

    half = np.log(np.full((2, 3, 2), 0.5))
    base = dict(labels=np.zeros(4, int), member=np.array([1, 1, 0, 0], bool), target_lp=np.zeros((4, 2)),
                reference_lp=None, population_labels=np.zeros(3, int), population_lp=np.zeros((3, 2)),
                reference_population_lp=half, reference_records="", accuracy={})
    assert trained_rmia_a(TrainedQueries(**base), 0.3) == (0.3, "given")
    assert trained_rmia_a(TrainedQueries(**base), None)[0] == TRAINED_RMIA_A  # one reference model: no game
    every_record_in_both = TrainedQueries(**base, calibration_labels=np.zeros(5, int),
                                          calibration_in=np.ones((2, 5), bool),
                                          reference_calibration_lp=np.log(np.full((2, 5, 2), 0.5)))
    a, source = trained_rmia_a(every_record_in_both, None)
    assert a == TRAINED_RMIA_A and "without members or non-members" in source
