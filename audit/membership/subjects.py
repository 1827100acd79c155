"""What ``run membership`` attacks: a built-in trained target or a user's trainer plugin.

The one-run game (:mod:`audit.membership.game`) needs a target model, shadow models and LiRA reference
models trained *the same way* on the rows the game chooses, and their log-probabilities on
chosen examples. A :class:`MembershipSubject` supplies exactly that:

* :func:`registry_subject` — a registry target (:mod:`targets.registry`): the models are trained
  in cached chunks by :func:`audit.executors.train_cached_models` (vectorised, on the run's
  executor);
* :func:`plugin_subject` — a trainer plugin (``--target module:factory``): every model is one call
  of the user's ``train(X, y, seed)`` on its rows (:func:`audit.plugins.training.train_once`), scored
  by its ``predict_proba``; nothing is cached (a user's model is a function). The training-set size
  is the largest (up to :data:`MAX_TRAIN`) the game's split allows for the dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from audit.audited_model import AuditedModel
from audit.choices import SYNTHETIC_CANARIES
from audit.errors import UserError
from audit.executors import CachedExecutor, TrainingCall, train_cached_models
from audit.plugins.probe import resolved_claim
from audit.plugins.training import plugin_dataset, predictions, train_once
from audit.run_context import RunPaths
from audit.trained_targets import quick_target
from targets.catalogue import resolve, trained_target
from targets.datasets import Dataset, load_dataset
from targets.example_gradients import gradient_norms
from targets.plugins.loading import TrainerPlugin, load_plugin, plugin_config
from targets.training import log_softmax, predict_logits, resolve_device

#: Largest target training set of a plugin in the membership game.
MAX_TRAIN = 1000


@dataclass(kw_only=True)
class MembershipSubject(AuditedModel):
    """A target for the membership game (the fields of :class:`audit.audited_model.AuditedModel`, then:).

    ``fit(paths, data, calls, appended_rows)`` trains, for each :class:`audit.executors.TrainingCall`, one model per
    row of its ``masks`` (over the rows of ``data``, the game's: its last ``appended_rows`` rows are appended canaries)
    and returns the trained models per call;
    ``log_probs(trained, X)`` returns (models, n, classes) log-probabilities. ``claim`` is None for a
    non-private target; ``theory_line`` is what the run prints about its accounting; ``config`` goes to config.json.
    ``gradient_norms(trained, X, y)`` (registry targets; None for a plugin, whose model is a function): the norms of
    the per-example gradients that gradient-max canaries are chosen by (:mod:`audit.membership.crafted`).
    """

    fit: Callable[[RunPaths, Dataset, list[TrainingCall], int], list]
    log_probs: Callable[[Any, np.ndarray], np.ndarray]
    gradient_norms: Callable[[Any, np.ndarray, np.ndarray], np.ndarray] | None = None
    theory_line: str | None = None
    config: dict = field(default_factory=dict)


def registry_subject(opts: Any) -> MembershipSubject:
    """A registry target (with ``--epsilon``/``--delta`` recalibration and the ``--quick`` preset)."""

    target = trained_target(opts.target).with_privacy(opts.epsilon, opts.delta)
    if opts.quick:
        target = quick_target(target)
    device = resolve_device(opts.device)
    sigma = target.noise_multiplier()
    claim = target.claim(sigma)
    config = target.train_config(sigma)
    data = load_dataset(target.dataset, opts.data_dir)

    def fit(paths: RunPaths, game_data: Dataset, calls: list[TrainingCall], appended_rows: int) -> list:
        with opts.make_executor() as executor:  # every call's chunks run side by side
            runner = CachedExecutor(executor=executor, cache_dir=paths.cache_dir, log=paths.log)
            return train_cached_models(runner, game_data, config, calls, device, max_memory=opts.max_memory,
                                       progress=not opts.quiet, appended_rows=appended_rows)

    line = (f"{target.name}: sigma = {sigma:.4f} for epsilon {target.epsilon:g} at delta {target.delta:g} "
            f"(q = {target.sample_rate:.4f}, {target.steps} steps, PLD accountant)" if claim is not None else None)
    return MembershipSubject(
        name=target.name, description=target.description, data=data, n_train=target.n_train, model=target.arch,
        claim=claim, delta=target.delta,
        params=target.params(sigma) | {"expected_batch_size": config.expected_batch_size}, fit=fit,
        log_probs=lambda params, X: log_softmax(predict_logits(target.arch, params, X, device)), theory_line=line,
        gradient_norms=partial(gradient_norms, target.arch),
        config={"target": asdict(target), "train_config": config.to_dict()})


def plugin_n_train(n: int, pooled_canaries: int) -> int:
    """The largest target training set (up to MAX_TRAIN) for which :func:`audit.membership.game.build_canary_game`
    leaves a shadow pool of at least half of it, with ``pooled_canaries`` canaries taken from the ``n`` records
    (none for synthetic canaries, which are appended) and a tenth of the data as test set."""
    room = n - min(500, n // 10) - pooled_canaries
    return max(1, min(MAX_TRAIN, int(room / 1.5)))


def plugin_subject(opts: Any, m: int, plugin: Any = None) -> MembershipSubject:
    """A trainer plugin (``--target module:factory``; ``plugin`` when already loaded) with ``m`` canaries
    per side."""

    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
    plugin = plugin if plugin is not None else load_plugin(opts.target)
    if not isinstance(plugin, TrainerPlugin):
        raise UserError(f"plugin {opts.target} is a mechanism; membership inference needs a trainer plugin")
    data = plugin_dataset(plugin, opts.data_dir)
    n_train = plugin_n_train(len(data), 0 if opts.canary in SYNTHETIC_CANARIES else 2 * m)
    claim = plugin.claim
    if claim is None:  # "claim": "opacus": read off a probe training run

        claim = resolved_claim(plugin, data.X[:n_train], data.y[:n_train], opts.seed)

    def fit(paths: RunPaths, game_data: Dataset, calls: list[TrainingCall], appended_rows: int) -> list:

        trained = []
        for call in calls:
            jobs = list(zip(call.masks, call.seeds, strict=True))
            trained.append([train_once(plugin, game_data.X[mask], game_data.y[mask], int(seed))
                            for mask, seed in tqdm(jobs, desc=call.desc, unit="model", disable=opts.quiet)])
            paths.log(f"{call.desc}: trained {len(trained[-1])} model(s) with the plugin's train")
        return trained

    def log_probs(models: list, X: np.ndarray) -> np.ndarray:
        out = []
        for model in models:
            proba = predictions(plugin, model, X)
            if proba.shape != (len(X), data.n_classes) or not np.all(np.isfinite(proba)):
                raise UserError(f"predict_proba of plugin {plugin.spec} must return finite probabilities of shape "
                                f"(n, {data.n_classes}); got {proba.shape}")
            out.append(np.log(np.clip(proba, 1e-300, None)))
        return np.stack(out)

    return MembershipSubject(
        name=plugin.name, description=plugin.description, data=data, n_train=n_train,
        model=f"user trainer {plugin.spec}", claim=claim, delta=plugin.delta,
        params={"plugin": plugin.spec, "rng": plugin.rng, "n_train": n_train} | plugin.params, fit=fit,
        log_probs=log_probs,
        theory_line=None if claim is None else f"{plugin.name}: {claim.description}",
        config={"plugin": plugin_config(plugin)})


def membership_subject(opts: Any, m: int, plugin: Any = None) -> MembershipSubject:
    """The subject ``opts.target`` names: a trainer plugin (``plugin`` when already loaded) or a registry
    target."""

    return plugin_subject(opts, m, plugin) if resolve(opts.target).family == "plugin" else registry_subject(opts)
