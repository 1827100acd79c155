"""A user's trainer plugin as the victim of ``run extraction``: its ``train`` fits the model on the
members, and its ``predict_proba`` is the only access — a probability API (Tramèr et al. 2016 query
one). Equation-solving extraction (:mod:`attacks.extraction`) assumes a (multinomial) logistic
regression on the flattened inputs; for any other model it fits the closest one the queries allow,
and the agreement figures say how close. The plugin's parameters are not visible, so no parameter
error is reported."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from attacks.extraction import linear_features
from audit.extraction.victim import Victim
from audit.plugins.probe import resolved_claim
from audit.plugins.training import MAX_TRAIN, plugin_dataset, probability_api, train_once, trainer_plugin
from audit.run_context import RunPaths
from audit.trained_targets import member_split
from targets.plugins.loading import plugin_config


def extraction_victim(opts: Any, paths: RunPaths) -> Any:
    """The :class:`audit.extraction.victim.Victim` of a trainer plugin: trained once on a seeded member set
    (up to MAX_TRAIN records, at most half the data), served through its ``predict_proba``."""
    plugin = trainer_plugin(opts)
    data = plugin_dataset(plugin, opts.data_dir)
    n = min(MAX_TRAIN, len(data) // 2)
    perm = member_split(len(data), n, opts.seed)
    seed = int(np.random.SeedSequence(opts.seed).generate_state(1)[0])
    model = train_once(plugin, data.X[perm[:n]], data.y[perm[:n]], seed)
    paths.log(f"target model: trained by the plugin's train on {n} members")
    flat = replace(data, X=data.X.reshape(len(data), -1), shape=(int(np.prod(data.shape)),))
    claim = resolved_claim(plugin, data.X[:n], data.y[:n], opts.seed)
    test = perm[n:]
    return Victim(name=plugin.name, description=plugin.description, dataset=flat, theta=None,
                  feature_map=linear_features, test_X=flat.X[test], test_y=flat.y[test],
                  test_label=f"{test.size} held-out records", private=claim is not None, theta_nonprivate=None,
                  nonprivate_label=None, epsilon_theory=claim.epsilon(plugin.delta) if claim else None,
                  delta=plugin.delta if claim else None, accountant=claim.description if claim else None,
                  neighbouring=plugin.neighbouring,
                  params={"plugin": plugin.spec, "n_train": n} | plugin.params,
                  config={"plugin": plugin_config(plugin), "seed": seed},
                  api=probability_api(plugin, model, data.shape, data.n_classes))
