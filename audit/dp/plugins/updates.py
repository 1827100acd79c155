"""Update-level (``--threat updates``) and white-box audits of a trainer plugin whose ``train`` runs
Opacus or a DP-SGD loop with the audit hooks — the user's code unchanged, its model and data its own.

Each training run is one call of the plugin's ``train(X, y, seed)`` on the same training set (the
canary is a gradient, not a row) inside :func:`instrumented`: Opacus is patched
(:mod:`targets.opacus_hooks`) and the hooks of :mod:`targets.audit_hooks` record. Before the audit:

1. **Probe** (:func:`audit.plugins.probe.probe`): ``train`` runs once, seed from its own stream, with no
   canary. It tells
   how many noisy steps the code really takes (T), the Poisson rate it samples with, its clip norm,
   for Opacus its noise multiplier and what Opacus's own accountant reports, and which parameter
   coordinate the data's clipped gradients never reach (the smallest summed ``|grad_sum|``, zero
   for a dead coordinate such as a weight on an always-zero pixel: Nasr et al. 2023 put their Dirac
   canary there). The probe runs twice from the same seed (reproducibility check). Nothing of it
   enters the bound.
2. **Claim**: the plugin's dict, or with ``"claim": "opacus"`` the epsilon Opacus reported for the
   probe at the plugin's delta. The mechanism the code runs (:class:`audit.plugins.probe.StepMechanism`:
   the optimizer's noise multiplier — for a hooked loop the claim's, or the one the claim implies at
   the observed rate and steps — the observed rate and T) is recomputed by our PLD accountant and shown
   beside the claim.
3. **Runs**: R calls of ``train``, the Dirac canary (norm C on the chosen coordinate) joining each
   real step with the code's Poisson rate in the runs whose fair coin says so. ``updates``: the
   per-step observations go through :func:`audit.dp.canary_steps.step_observation` — the same path as
   the built-in DP-SGD targets. ``white-box`` (Opacus): the final minus initial parameter on the
   coordinate, with the Bonferroni grid; both test the claim's tradeoff curve.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from audit.dp.canary_steps import step_observation
from audit.dp.setup_types import DPAuditSetup, Observation
from audit.errors import UserError
from audit.plugins.probe import Probe, StepMechanism, claim_and_mechanism, probe, run_once
from audit.plugins.training import MAX_TRAIN, plugin_dataset
from audit.stats.outcome import Table
from audit.theory.claims import PrivacyClaim
from targets.audit_hooks import UpdateRecorder
from targets.plugins.loading import TrainerPlugin, plugin_config

#: Threat models of an instrumented plugin.
UPDATE_THREATS = ("updates", "white-box")


def _comparison_table(claim: PrivacyClaim, mech: StepMechanism, delta: float, found: Probe) -> Table:
    """Report table: the claim's accounting beside the DP-SGD the code was seen to run."""
    stated = claim.params() if hasattr(claim, "noise_multiplier") else {}
    rows = [[key, stated.get(key), getattr(mech, key)] for key in ("noise_multiplier", "sample_rate", "steps")]
    rows.append(["epsilon at delta (PLD)", float(claim.epsilon(delta)), float(mech.claim().epsilon(delta))])
    if found.opacus is not None:
        rows.append([f"epsilon reported by Opacus ({found.opacus['accountant']})", None, found.opacus["epsilon"]])
    return Table(title="Claim and the DP-SGD the code runs", columns=["", "claim", "code (probe run)"], rows=rows,
                 caption="code: the noise multiplier of its optimizer (a hooked loop: the claim's), the Poisson rate "
                         "it samples with, and the noisy steps it took, seen while the probe run trained; its epsilon "
                         "by our PLD accountant. A code epsilon above the claim's is an accounting mismatch the audit "
                         "then tests with a threshold designed for it.")


def update_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                 quiet: bool, confidence: float = 0.95) -> DPAuditSetup:
    """A :class:`audit.dp.runner.DPAuditSetup` auditing the plugin's DP-SGD steps (module docstring);
    ``confidence`` is the audit's (the threshold is designed for it)."""
    if threat not in UPDATE_THREATS:
        raise UserError(f"an instrumented trainer plugin is audited with --threat {' or '.join(UPDATE_THREATS)}")
    if canary != "dirac":
        raise UserError("update-level audits of a trainer plugin use the Dirac gradient canary: --canary dirac")
    data = plugin_dataset(plugin, data_dir)
    perm = np.random.default_rng([seed, 5]).permutation(len(data))
    n_train = min(MAX_TRAIN, len(data))
    X, y = data.X[perm[:n_train]], data.y[perm[:n_train]]
    found = probe(plugin, X, y, seed, plugin.delta)
    claim, mech = claim_and_mechanism(plugin, found)
    if threat == "white-box" and found.recorder.initial is None:
        raise UserError("a hooked loop reports its updates, not its parameters: audit it with --threat updates (a JAX "
                        "loop: pass params= to both hooks of targets.jax_hooks)")

    def observe(included: np.ndarray, run_seed: int) -> Observation:
        seeds = np.random.SeedSequence([run_seed, 23]).generate_state(included.size).tolist()
        steps, joined, moved = [], np.zeros(included.size, dtype=np.int64), np.zeros(included.size)
        for r in tqdm(range(included.size), desc=f"training {plugin.name}", unit="run", disable=quiet):
            recorder = UpdateRecorder(found.coordinate, [int(seeds[r]), 3], include=bool(included[r]))
            run_once(plugin, X, y, int(seeds[r]), recorder)
            if recorder.steps == 0 or recorder.sizes is None or sum(recorder.sizes) != found.n_params:
                raise UserError(f"run {r} of plugin {plugin.spec} trained another model or took no noisy step; "
                                f"the audit needs the same DP-SGD loop in every run")
            steps.append(np.asarray(recorder.observations))
            joined[r] = int(np.sum(recorder.joined))
            if threat == "white-box":
                moved[r] = recorder.initial[found.coordinate] - recorder.final[found.coordinate]
        lengths = np.array([s.size for s in steps])
        info = {"canary_steps_mean_in": float(joined[included].mean()) if included.any() else None,
                "steps_taken": {"min": int(lengths.min()), "max": int(lengths.max())},
                "coordinate": found.coordinate, "coordinate_data_gradient": found.touched,
                "source": found.source.kind}
        tables = (found.check.table(), _comparison_table(claim, mech, plugin.delta, found))
        if threat == "white-box":
            return Observation(scores=moved,
                               info=info | {"score": "initial minus final parameter on the canary's coordinate"},
                               reproducibility=found.check, tables=tables)
        padded = np.full((included.size, int(lengths.max())), np.nan)
        for r, s in enumerate(steps):
            padded[r, :s.size] = s
        out = step_observation(padded, mech, claim, plugin.delta, confidence, info)
        out.reproducibility, out.tables = found.check, tables
        return out

    return DPAuditSetup(
        name=plugin.name, description=plugin.description, dataset=data.name,
        model={"name": f"user trainer {plugin.spec}", "parameters": found.n_params},
        neighbouring="add/remove one record (a gradient canary of norm C joining each step by the code's Poisson rate)",
        claim=claim, delta=plugin.delta,
        params={"plugin": plugin.spec, "rng": plugin.rng, "claimed_epsilon": float(claim.epsilon(plugin.delta)),
                "claimed_delta": plugin.delta, "n_train": int(n_train), "clip_norm": found.clip_norm,
                "code": mech.to_dict() | {"epsilon_pld": float(mech.claim().epsilon(plugin.delta)),
                                          "sampling": "poisson" if found.source.poisson else "not poisson",
                                          "driver": found.source.kind},
                "opacus_reported": found.opacus} | plugin.params,
        canary={"kind": canary, "coordinate": found.coordinate, "dead": found.touched == 0.0,
                "norm": found.clip_norm},
        threat=threat, observe=observe, default_runs=1000, config={"plugin": plugin_config(plugin)})
