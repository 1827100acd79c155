"""Black-box multi-run audit of a user's trainer plugin (``run dp --target module:factory``).

The user's ``train(X, y, seed) -> predict_proba`` is a black box (:mod:`audit.plugins.training`):
the audit fixes a training set drawn from the plugin's dataset, builds one input canary
(``natural``, ``mislabelled`` or ``crafted``, :func:`audit.dp.canaries.input_canary`), and in each
of R runs — the canary included by an independent fair coin (:func:`audit.dp.game.fair_coins`) —
trains once with a fresh seed and scores the canary by its log-probability of the canary's label
under the returned model (the loss attack of Yeom et al. 2018, the black-box threat model of
Jagielski, Ullman, Oprea 2020). :func:`audit.dp.runner.play` turns the scores into bounds. The
first run is trained twice from the same seed: different predictions mean the plugin ignores its
seed, which results.json states (``reproducible``, ``reproducibility_note``); the audit goes on.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from audit.dp.canaries import INPUT_CANARIES, input_canary
from audit.dp.setup_types import DPAuditSetup, Observation
from audit.errors import UserError
from audit.plugins.probe import resolved_claim
from audit.plugins.training import MAX_TRAIN, canary_log_prob, plugin_dataset, predictions, train_once
from targets.plugins.loading import TrainerPlugin, plugin_config
from targets.plugins.rng import reproducibility

#: Training points whose predictions (with the canary's) are compared in the reproducibility check.
CHECK_POINTS = 7


def plugin_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                 quiet: bool) -> DPAuditSetup:
    """A :class:`audit.dp.setup_types.DPAuditSetup` that trains the plugin once per run."""
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
    claim = resolved_claim(plugin, X, y, seed)  # "claim": "opacus": what Opacus reports after a training run

    def observe(included: np.ndarray, run_seed: int) -> Observation:
        seeds = np.random.SeedSequence([run_seed, 23]).generate_state(included.size).tolist()
        scores = np.empty(included.size)
        check = None
        for r in tqdm(range(included.size), desc=f"training {plugin.name}", unit="run", disable=quiet):
            Xr, yr = (X_in, y_in) if included[r] else (X, y)
            model = train_once(plugin, Xr, yr, int(seeds[r]))
            scores[r] = canary_log_prob(plugin, model, cx, cy)
            if r == 0:
                again = train_once(plugin, Xr, yr, int(seeds[r]))
                same = np.array_equal(predictions(plugin, model, probe), predictions(plugin, again, probe))
                check = reproducibility(same, plugin.rng, f"the first run trained twice from the same seed "
                                                          f"({probe.shape[0]} predictions compared)")
        return Observation(scores=scores, info={"score": "log-probability of the canary's label (loss attack)"},
                           reproducibility=check, tables=(check.table(),))

    return DPAuditSetup(
        name=plugin.name, description=plugin.description, dataset=data.name,
        model={"name": f"user trainer {plugin.spec}"}, neighbouring=plugin.neighbouring,
        claim=claim, delta=plugin.delta,
        params={"plugin": plugin.spec, "rng": plugin.rng, "claimed_epsilon": claim.epsilon(plugin.delta),
                "claimed_delta": plugin.delta, "n_train": int(n_train)} | plugin.params,
        canary={"kind": canary} | cinfo, threat=threat, observe=observe, default_runs=200,
        config={"plugin": plugin_config(plugin)})
