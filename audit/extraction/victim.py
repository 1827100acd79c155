"""What ``run extraction`` steals: a model behind a prediction API (:class:`Victim`), built from a
softmax-regression target of the registry (trained on a seeded member set) or a DP-ERM target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from attacks.extraction import FeatureMap, linear_features, softmax
from audit.errors import UserError
from audit.run_context import RunPaths
from audit.trained_targets import member_split, resolve_trained, train_cached
from targets.catalogue import dperm_release, trained_targets
from targets.datasets import Dataset, load_dataset
from targets.dperm import DPERM, binary_labels, prepare_features
from targets.registry import TrainedTarget


@dataclass(kw_only=True)
class Victim:
    """A model behind an API: served canonical-able parameters ``theta`` (K, p) over ``feature_map``,
    or, for a user's trainer plugin, its ``predict_proba`` (``api``; ``theta`` None: not visible)."""

    name: str
    description: str
    dataset: Dataset
    theta: np.ndarray | None
    feature_map: FeatureMap
    test_X: np.ndarray
    test_y: np.ndarray
    test_label: str
    private: bool
    theta_nonprivate: np.ndarray | None
    nonprivate_label: str | None
    epsilon_theory: float | None
    delta: float | None
    accountant: str | None
    neighbouring: str
    params: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    api: Callable[[np.ndarray], np.ndarray] | None = None

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.api(X) if self.api is not None else softmax(self.feature_map(X) @ self.theta.T)


def linear_target(opts: Any) -> TrainedTarget:
    target = resolve_trained(opts.target, opts.epsilon, opts.delta, opts.quick)
    if target.arch != "logreg":
        linear = ", ".join(t.name for t in trained_targets() if t.arch == "logreg")
        raise UserError(f"extraction by equation solving needs a logistic-regression target; {target.name} is a "
                        f"{target.arch}; choose one of {linear} or a DP-ERM target")
    return target


def trained_victim(opts: Any, target: TrainedTarget, paths: RunPaths, device) -> Victim:
    data = load_dataset(target.dataset, opts.data_dir)
    data = replace(data, X=data.X.reshape(len(data), -1), shape=(int(np.prod(data.shape)),))
    perm = member_split(len(data), target.n_train, opts.seed)
    mask = np.zeros(len(data), dtype=bool)
    mask[perm[:target.n_train]] = True
    sigma = target.noise_multiplier()
    config = target.train_config(sigma)
    seed = int(np.random.SeedSequence(opts.seed).generate_state(1)[0])
    params = train_cached(opts, paths, data, mask, config, seed, device, "target model")
    theta = np.hstack([params["weight"][0].double().numpy(), params["bias"][0].double().numpy()[:, None]])
    theta_np, np_label, claim = None, None, None
    if target.private:
        claim = target.claim(sigma)
        np_config = replace(config, clip_norm=None, noise_multiplier=0.0)
        np_params = train_cached(opts, paths, data, mask, np_config, seed, device,
                                 "non-private comparison model")
        theta_np = np.hstack([np_params["weight"][0].double().numpy(), np_params["bias"][0].double().numpy()[:, None]])
        np_label = "the same members trained by non-private SGD with the same seed"
    test = ~mask
    return Victim(name=target.name, description=target.description, dataset=data, theta=theta,
                  feature_map=linear_features, test_X=data.X[test], test_y=data.y[test],
                  test_label=f"{int(test.sum())} held-out records", private=target.private, theta_nonprivate=theta_np,
                  nonprivate_label=np_label, epsilon_theory=claim.epsilon(target.delta) if claim else None,
                  delta=target.delta if claim else None, accountant=claim.description if claim else None,
                  neighbouring="add/remove one record",
                  params={"noise_multiplier": sigma, "clip_norm": target.clip_norm, "sample_rate": target.sample_rate,
                          "steps": target.steps, "epochs": target.epochs, "lr": target.lr, "n_train": target.n_train},
                  config={"target": asdict(target), "train_config": config.to_dict(), "seed": seed})


def dperm_victim(opts: Any) -> Victim:
    spec = dperm_release(opts.target)
    data = load_dataset(spec["dataset"], opts.data_dir)
    y = binary_labels(spec["dataset"], data.y)
    erm = DPERM(spec["epsilon"] if opts.epsilon is None else opts.epsilon,
                spec["delta"] if opts.delta is None else opts.delta, spec["l2_reg"], n=len(data))
    rng = np.random.default_rng([int(opts.seed), 104729])
    released = erm.release(data.X, y, rng)
    optimum = erm.minimiser(data.X, y)
    zeros = np.zeros_like(released)
    # Binary LR as a two-class softmax: class 0 is label -1, class 1 is label +1, theta_0 = 0.
    return Victim(name=opts.target, description=spec["description"], dataset=data, theta=np.vstack([zeros, released]),
                  feature_map=prepare_features, test_X=data.X, test_y=(y > 0).astype(np.int64),
                  test_label=f"all {len(data)} records (DP-ERM trains on the full set)", private=True,
                  theta_nonprivate=np.vstack([zeros, optimum]),
                  nonprivate_label="the exact non-private DP-ERM minimiser (no noise)",
                  epsilon_theory=erm.claim.epsilon(erm.delta), delta=erm.delta, accountant=erm.claim.description,
                  neighbouring="replace one record", params=erm.params(),
                  config={"dperm": spec | {"epsilon": erm.epsilon, "delta": erm.delta}})
