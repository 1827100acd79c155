"""Which ``run dp`` adapter a target takes: DP-ERM, a trainer plugin (black-box or its DP-SGD
steps) or a DP-SGD target, with the target's default threat model and canary."""

from __future__ import annotations

import sys
from dataclasses import replace

from audit.choices import THREATS
from audit.dp.dperm_setup import dperm_setup
from audit.dp.dpsgd_setup import dpsgd_setup
from audit.dp.options import DPOptions
from audit.dp.plugins.blackbox import plugin_setup
from audit.dp.plugins.updates import update_setup
from audit.dp.setup_types import DPAuditSetup
from audit.errors import UserError
from audit.plugins.training import MAX_TRAIN, QUICK_RUNS, plugin_dataset
from audit.target_defaults import TargetUse, dp_choice, plugin_canary, target_use, trainer_plugin_use
from audit.theory.checks import check_confidence
from targets.catalogue import is_language_model, resolve
from targets.plugins.loading import ModelPlugin, TrainerPlugin


def with_defaults(opts: DPOptions, use: TargetUse) -> DPOptions:
    """``opts`` with the target's default threat and canary where none was given; a target that takes no
    ``run dp`` is a one-line error naming the run kinds it does take."""
    if "dp" not in use.run_kinds:
        raise UserError(f"target {opts.target} ({use.family}) is not audited by run dp; it takes: "
                        f"{', '.join(use.run_kinds)}")
    threat, canary = dp_choice(use, opts.threat, opts.canary)
    return replace(opts, threat=threat, canary=canary)


def build_setup(opts: DPOptions) -> DPAuditSetup:
    """The setup for a target: DP-ERM targets (targets.dperm), trainer plugins (``module:factory``)
    or trained DP-SGD targets. A threat model or canary left out is the target's default
    (:mod:`audit.target_defaults`)."""
    if opts.threat is not None and opts.threat not in THREATS:
        raise UserError(f"unknown threat model {opts.threat!r}; choose one of {', '.join(THREATS)}")
    check_confidence(opts.confidence)
    if opts.calibration_runs < 0:
        raise UserError(f"--calibration-runs must be 0 or more, got {opts.calibration_runs}")
    entry = resolve(opts.target)
    dperm = entry.family == "dp-erm"
    plugin_target = entry.family == "plugin"
    dpsgd_only = [flag for flag, given in (("--init pretrained", opts.init != "random"),
                                           ("--calibration-runs", opts.calibration_runs > 0)) if given]
    if dpsgd_only and (dperm or plugin_target):
        raise UserError(f"{' and '.join(dpsgd_only)} {'apply' if len(dpsgd_only) > 1 else 'applies'} to the "
                        f"project's DP-SGD targets, not to {'a plugin' if plugin_target else opts.target}")
    if dperm:
        return dperm_setup(with_defaults(opts, target_use(opts.target)))
    if plugin_target:  # a user's trainer: black-box, or its DP-SGD steps
        plugin = entry.factory()
        if isinstance(plugin, ModelPlugin):  # {"kind": "model"} or {"kind": "lm"}: audited on its members
            raise UserError(f"plugin {opts.target} is a trained model; audit it with `python -m audit run membership "
                            f"--target {opts.target}`")
        if not isinstance(plugin, TrainerPlugin):
            raise UserError(f"plugin {opts.target} is a mechanism; audit it with `python -m audit run mechanism "
                            f"--target {opts.target}`")
        if is_language_model(plugin):
            raise UserError(f"{opts.target} is a language-model trainer: audit it in one run, python -m audit run dp "
                            f"--target {opts.target} --one-run [--threat updates | white-box | black-box]")
        if opts.epsilon is not None or opts.delta is not None:
            raise UserError("--epsilon/--delta do not apply to a plugin: its factory states the claim")
        threat = opts.threat or trainer_plugin_use(plugin.description).default_threat
        return trainer_setup(plugin, plugin_canary(threat, opts.canary), threat, opts.seed, opts.data_dir, opts.quiet,
                             opts.confidence, opts.quick)
    return dpsgd_setup(with_defaults(opts, target_use(opts.target)))


def trainer_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                  quiet: bool, confidence: float = 0.95, quick: bool = False) -> DPAuditSetup:
    """The setup of any trainer-plugin audit: black-box (:func:`audit.dp.plugins.blackbox.plugin_setup`) or
    update-level / white-box (:func:`audit.dp.plugins.updates.update_setup`); ``quick``: their default run
    count is :data:`audit.plugins.training.QUICK_RUNS`. The many-run games train on at most
    :data:`audit.plugins.training.MAX_TRAIN` rows of the plugin's dataset, and say so on stderr."""
    data = plugin_dataset(plugin, data_dir)
    if len(data) > MAX_TRAIN and not quiet:
        print(f"{plugin.name}: the many-run game trains each run on {MAX_TRAIN} of the dataset's {len(data)} rows "
              f"(--one-run trains once on all of them)", file=sys.stderr)
    if threat == "black-box":
        setup = plugin_setup(plugin, canary, threat, seed, data_dir, quiet)
    else:
        setup = update_setup(plugin, canary, threat, seed, data_dir, quiet, confidence)
    return replace(setup, default_runs=QUICK_RUNS) if quick else setup
