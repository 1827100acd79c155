"""Black-box multi-run audit of a user's trainer plugin (``run dp --target module:factory``).

The user's ``train(X, y, seed) -> predict_proba`` is a black box (its randomness argument adapted
to what it takes, :mod:`targets.plugin_rng`; run under the plugin thread policy,
:mod:`targets.threads`): the audit fixes a training set
drawn from the plugin's dataset, builds one input canary (``natural``, ``mislabelled`` or
``crafted``, :func:`audit.canaries.input_canary`), and in each of R runs — the canary included by
an independent fair coin (:func:`audit.dp_game.fair_coins`) — trains once with a fresh seed and
scores the canary by its log-probability of the canary's label under the returned model (the
loss attack of Yeom et al. 2018, the black-box threat model of Jagielski, Ullman, Oprea 2020).
:func:`audit.run_dp.play` turns the scores into Clopper–Pearson and GDP lower bounds, the
threshold chosen on half of the runs and the bound computed on the other half. The first run is
trained twice from the same seed: different predictions mean the plugin ignores its seed, which
results.json states (``reproducible``, ``reproducibility_note``); the audit goes on.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from audit.canaries import INPUT_CANARIES, input_canary
from audit.errors import TargetCodeError, UserError
from audit.run_dp import DPAuditSetup, Observation
from targets.datasets import Dataset, load_dataset
from targets.plugin_rng import reproducibility, reproducibility_table, trainer_args
from targets.plugins import TrainerPlugin, plugin_config
from targets.threads import thread_limit

#: Largest training set drawn from the plugin's dataset (the rest is the canary pool).
MAX_TRAIN = 1000
#: Training points whose predictions (with the canary's) are compared in the reproducibility check.
CHECK_POINTS = 7


def plugin_dataset(plugin: TrainerPlugin, data_dir: str | None) -> Dataset:
    """The plugin's dataset as a :class:`targets.datasets.Dataset`."""
    if isinstance(plugin.dataset, str):
        return load_dataset(plugin.dataset, data_dir)
    X, y = plugin.dataset
    return Dataset(X, y, f"user data of {plugin.spec}", int(y.max()) + 1, tuple(X.shape[1:]), "plugin factory")


def canary_log_prob(plugin: TrainerPlugin, model, x: np.ndarray, label: int) -> float:
    """log P(label | x) under the user's ``predict_proba``; bad outputs are one-line errors."""
    proba = predictions(plugin, model, x[None])
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

    probe = np.concatenate([cx[None], X[:CHECK_POINTS]])
    claim = plugin.claim
    if claim is None:  # "claim": "opacus": what Opacus reports after a training run
        from audit.plugin_updates import resolved_claim

        claim = resolved_claim(plugin, X, y, seed)

    def observe(included: np.ndarray, run_seed: int) -> Observation:
        seeds = np.random.SeedSequence([run_seed, 23]).generate_state(included.size).tolist()
        scores = np.empty(included.size)
        check = {}
        for r in tqdm(range(included.size), desc=f"training {plugin.name}", unit="run", disable=quiet):
            Xr, yr = (X_in, y_in) if included[r] else (X, y)
            model = train_once(plugin, Xr, yr, int(seeds[r]))
            scores[r] = canary_log_prob(plugin, model, cx, cy)
            if r == 0:
                again = train_once(plugin, Xr, yr, int(seeds[r]))
                same = np.array_equal(predictions(plugin, model, probe), predictions(plugin, again, probe))
                check = reproducibility(same, plugin.rng, f"the first run trained twice from the same seed "
                                                          f"({probe.shape[0]} predictions compared)")
        return Observation(scores, info={"score": "log-probability of the canary's label (loss attack)"},
                           results=check | {"tables": [reproducibility_table(check)]})

    return DPAuditSetup(
        name=plugin.name, description=plugin.description, dataset=data.name,
        model={"name": f"user trainer {plugin.spec}"}, neighbouring=plugin.neighbouring,
        claim=claim, delta=plugin.delta,
        params={"plugin": plugin.spec, "rng": plugin.rng, "claimed_epsilon": claim.epsilon(plugin.delta),
                "claimed_delta": plugin.delta, "n_train": int(n_train)} | plugin.params,
        canary={"kind": canary} | cinfo, threat=threat, observe=observe, default_runs=200,
        config={"plugin": plugin_config(plugin)})


def train_once(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int):
    """One call of the plugin's ``train`` (copies of the data, its randomness from ``seed``, under the
    thread policy); returns its ``predict_proba``."""
    try:
        with thread_limit(plugin.threads):
            model = plugin.train(X.copy(), y.copy(), *trainer_args(plugin.rng, seed))
    except UserError:  # the audit's instrumentation refusing what the loop does (audit.plugin_updates)
        raise
    except Exception as exc:
        raise TargetCodeError(f"train of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    if not callable(model):
        raise UserError(f"train of plugin {plugin.spec} must return predict_proba, a function; got "
                        f"{type(model).__name__}")
    return model


def predictions(plugin: TrainerPlugin, model, X: np.ndarray) -> np.ndarray:
    """``model(X)`` as floats, under the thread policy; its exceptions are the target's own."""
    try:
        with thread_limit(plugin.threads):
            out = model(X)
    except Exception as exc:
        raise TargetCodeError(f"predict_proba of plugin {plugin.spec} raised {type(exc).__name__}: {exc}") from exc
    try:
        return np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"predict_proba of plugin {plugin.spec} must return an array of probabilities (n, n_classes); "
                        f"got {type(out).__name__}") from None
