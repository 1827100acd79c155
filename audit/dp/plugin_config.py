"""``run dp --target module:factory --check-config``: the accounting check of a trainer plugin alone,
in about two trainings of the code (:mod:`audit.plugins.accounting`): the probe on the plugin's whole
dataset (one training, and its first steps again for the reproducibility check), one training on the
dataset plus one record, no attack. Each stage prints one line when it starts, with an estimate from
the probe's time (:class:`audit.run_context.Stages`; nothing with ``-q``), and goes to log.txt.

What each stage needs of the code: the probe, a whole training (the steps it takes are only known at
its end); the repeat, a few steps (:data:`audit.plugins.probe.REPEAT_STEPS`); the dataset plus one
record, a whole training again (its step count, rate and normaliser against the probe's: the steps
only show at the end of the run). The verdict is the check's: a violation
(exit 1 with ``--fail-above-claim``) when the code's configuration is less private than its claim,
does not clip, or moves with one record into an epsilon above the claim.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from audit.dp.options import DPOptions
from audit.errors import UserError
from audit.plugins.accounting import accounting_check, config_table
from audit.plugins.probe import claim_and_mechanism, probe
from audit.plugins.training import plugin_dataset
from audit.run_context import RunContext, Stages
from targets.catalogue import is_plugin
from targets.plugins import TrainerPlugin, load_plugin, plugin_config


def config_verdict(block: dict) -> dict:
    """The verdict of an accounting check alone."""
    problems = [f for f in block["findings"] if f["problem"]]
    if block["status"] == "violation":
        text = "; ".join(f["message"] for f in problems if f["violation"])
        return {"status": "violation", "text": f"accounting check: {text}", "source": "config_check"}
    text = ("the configuration the code runs is as private as claimed" if not problems else
            "within the claim, with findings: " + "; ".join(f["message"] for f in problems))
    return {"status": "consistent", "text": f"accounting check: {text}", "source": "config_check"}


#: The stages of ``--check-config`` that print a line (:class:`audit.run_context.Stages`).
CHECK_STAGES = ("probe", "repeat", "other_world")


def plugin_probe(plugin: TrainerPlugin, data_dir: str | None, seed: int, stages: Stages | None = None) -> dict:
    """The probe on the plugin's whole dataset (a training and the first steps of its repeat): ``probe``,
    ``claim``, ``mechanism``, ``data``; ``stages`` times and announces them."""
    data = plugin_dataset(plugin, data_dir)
    found = probe(plugin, data.X, data.y, seed, plugin.delta, stages)
    claim, mech = claim_and_mechanism(plugin, found)
    return {"claim": claim, "mechanism": mech, "probe": found, "data": data}


def plugin_accounting(plugin: TrainerPlugin, data_dir: str | None, seed: int, confidence: float,
                      probed: dict | None = None, stages: Stages | None = None) -> dict:
    """Probe the plugin on its whole dataset (or take ``probed``, :func:`plugin_probe`) and run the accounting
    check; returns the ``config_check`` block with the claim and code facts (``claim``, ``mechanism``,
    ``probe``, ``data``) for the caller. ``stages`` (default: a fresh one) times and announces the stages."""
    stages = stages or Stages()
    probed = probed or plugin_probe(plugin, data_dir, seed, stages)
    found, claim, data = probed["probe"], probed["claim"], probed["data"]
    X, y = data.X, data.y
    with stages.stage("other_world", f"other world: training the code on its {len(X)} rows plus one record, the "
                                     f"configuration read again (accounting check)"):
        block = accounting_check(plugin, X, y, seed, found, claim, found.source.noise_multiplier, plugin.delta,
                                 confidence)
    block["driver"] = found.source.kind
    block["n_train"] = int(len(X))
    if found.opacus is not None:
        block["opacus_reported_epsilon"] = found.opacus["epsilon"]
    return probed | {"block": block}


def run_check_config(opts: DPOptions) -> tuple[Path, dict]:
    """The accounting check of ``opts.target`` (a trainer plugin) as a run of its own."""
    if not is_plugin(opts.target):
        raise UserError("--check-config reads the DP-SGD of a trainer plugin (--target module:factory or a built-in "
                        "plugin such as opacus_mnist); the project's DP-SGD targets state their configuration")
    plugin = load_plugin(opts.target)
    if not isinstance(plugin, TrainerPlugin):
        raise UserError(f"plugin {opts.target} is a mechanism; --check-config applies to DP-SGD trainers")
    stages = Stages.for_command(CHECK_STAGES, {"other_world": 1.0})
    ctx = RunContext(opts.out, "dp", plugin.name, seed=opts.seed, quiet=opts.quiet, stages=stages)
    with ctx:
        found = plugin_accounting(plugin, opts.data_dir, opts.seed, opts.confidence, stages=stages)
        block, claim = found["block"], found["claim"]
        results = {"target_description": plugin.description, "dataset": found["data"].name,
                   "model": {"name": f"user trainer {plugin.spec}"}, "delta": plugin.delta,
                   "confidence": opts.confidence, "epsilon_theory": float(claim.epsilon(plugin.delta)),
                   "accountant": getattr(claim, "description", None), "params": {"plugin": plugin.spec},
                   "lower_bounds": [], "best_lower_bound": None, "config_check": block,
                   "verdict": config_verdict(block), "tables": [config_table(block)]}
        config = {"command": "run dp", "check_config": True, "seed": opts.seed, "options": asdict(opts),
                  "plugin": plugin_config(plugin)}
        return ctx.run_dir, ctx.finish(results, config, report=True)
