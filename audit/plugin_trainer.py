"""Black-box multi-run audit of a user's trainer plugin (``run dp --target module:factory``).

The user's ``train(X, y, seed) -> predict_proba`` is a black box: the audit fixes a training set
drawn from the plugin's dataset, builds one input canary (``natural``, ``mislabelled`` or
``crafted``, :func:`audit.canaries.input_canary`), and in each of R runs — the canary included by
an independent fair coin (:func:`audit.dp_game.fair_coins`) — trains once with a fresh seed and
scores the canary by its log-probability of the canary's label under the returned model (the
loss attack of Yeom et al. 2018, the black-box threat model of Jagielski, Ullman, Oprea 2020).
:func:`audit.run_dp.play` turns the scores into Clopper–Pearson and GDP lower bounds, the
threshold chosen on half of the runs and the bound computed on the other half.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from audit.canaries import INPUT_CANARIES, input_canary
from audit.errors import TargetCodeError, UserError
from audit.run_dp import DPAuditSetup, Observation
from targets.datasets import Dataset, load_dataset
from targets.plugins import TrainerPlugin

#: Largest training set drawn from the plugin's dataset (the rest is the canary pool).
MAX_TRAIN = 1000


def plugin_dataset(plugin: TrainerPlugin, data_dir: str | None) -> Dataset:
    """The plugin's dataset as a :class:`targets.datasets.Dataset`."""
    if isinstance(plugin.dataset, str):
        return load_dataset(plugin.dataset, data_dir)
    X, y = plugin.dataset
    return Dataset(X, y, f"user data of {plugin.spec}", int(y.max()) + 1, tuple(X.shape[1:]), "plugin factory")


def canary_log_prob(plugin: TrainerPlugin, model, x: np.ndarray, label: int) -> float:
    """log P(label | x) under the user's ``predict_proba``; bad outputs are one-line errors."""
    try:
        proba = np.asarray(model(x[None]), dtype=np.float64)
    except Exception as exc:
        raise TargetCodeError(f"predict_proba of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    if proba.ndim != 2 or proba.shape[0] != 1 or proba.shape[1] <= label or not np.all(np.isfinite(proba)):
        raise UserError(f"predict_proba of plugin {plugin.spec} must return finite probabilities of shape "
                        f"(n, n_classes); got shape {proba.shape}")
    return float(np.log(max(proba[0, label], 1e-300)))


def plugin_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                 quiet: bool) -> DPAuditSetup:
    """A :class:`audit.run_dp.DPAuditSetup` that trains the plugin once per run."""
    if threat != "black-box":
        raise UserError(f"a trainer plugin is a black box: use --threat black-box (got {threat})")
    if canary not in INPUT_CANARIES:
        raise UserError(f"a trainer plugin takes an input canary: --canary {' | '.join(INPUT_CANARIES)}")
    data = plugin_dataset(plugin, data_dir)
    perm = np.random.default_rng([seed, 5]).permutation(len(data))
    n_train = min(MAX_TRAIN, len(data) - 1)
    train_index, pool_index = perm[:n_train], perm[n_train:]
    cx, cy, cinfo = input_canary(canary, data, train_index, pool_index, np.random.default_rng([seed, 17]))
    X, y = data.X[train_index], data.y[train_index]
    X_in, y_in = np.concatenate([X, cx[None]]), np.append(y, cy)

    def observe(included: np.ndarray, run_seed: int) -> Observation:
        seeds = np.random.SeedSequence([run_seed, 23]).generate_state(included.size).tolist()
        scores = np.empty(included.size)
        for r in tqdm(range(included.size), desc=f"training {plugin.name}", unit="run", disable=quiet):
            Xr, yr = (X_in, y_in) if included[r] else (X, y)
            try:
                model = plugin.train(Xr.copy(), yr.copy(), int(seeds[r]))
            except Exception as exc:
                raise TargetCodeError(f"train of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
            if not callable(model):
                raise UserError(f"train of plugin {plugin.spec} must return predict_proba, a function; got "
                                f"{type(model).__name__}")
            scores[r] = canary_log_prob(plugin, model, cx, cy)
        return Observation(scores, info={"score": "log-probability of the canary's label (loss attack)"})

    return DPAuditSetup(
        name=plugin.name, description=plugin.description, dataset=data.name,
        model={"name": f"user trainer {plugin.spec}"}, neighbouring=plugin.neighbouring,
        claim=plugin.claim, delta=plugin.delta if plugin.delta > 0 else 1e-5,
        params={"plugin": plugin.spec, "claimed_epsilon": plugin.claim.epsilon(plugin.delta),
                "claimed_delta": plugin.delta, "n_train": int(n_train)} | plugin.params,
        canary={"kind": canary} | cinfo, threat=threat, observe=observe, default_runs=200)
