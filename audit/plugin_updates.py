"""Update-level (``--threat updates``) and white-box audits of a trainer plugin whose ``train`` runs
Opacus or a DP-SGD loop with the audit hooks — the user's code unchanged, its model and data its own.

Each training run is one call of the plugin's ``train(X, y, seed)`` on the same training set (the
canary is a gradient, not a row) inside :func:`instrumented`: Opacus is patched
(:mod:`targets.opacus_hooks`) and the hooks of :mod:`targets.audit_hooks` record. Before the audit:

1. **Probe** (:func:`probe`): ``train`` runs once, seed from its own stream, with no canary. It tells
   how many noisy steps the code really takes (T), the Poisson rate it samples with, its clip norm,
   for Opacus its noise multiplier and what Opacus's own accountant reports, and which parameter
   coordinate the data's clipped gradients never reach (the smallest summed ``|grad_sum|``, zero
   for a dead coordinate such as a weight on an always-zero pixel: Nasr et al. 2023 put their Dirac
   canary there). The probe runs twice from the same seed (reproducibility check). Nothing of it
   enters the bound.
2. **Claim**: the plugin's dict, or with ``"claim": "opacus"`` the epsilon Opacus reported for the
   probe at the plugin's delta. The mechanism the code runs (:class:`audit.canary_steps.StepMechanism`:
   the optimizer's noise multiplier — for a hooked loop the claim's, or the one the claim implies at
   the observed rate and steps — the observed rate and T) is recomputed by our PLD accountant and shown
   beside the claim.
3. **Runs**: R calls of ``train``, the Dirac canary (norm C on the chosen coordinate) joining each
   real step with the code's Poisson rate in the runs whose fair coin says so. ``updates``: the
   per-step observations go through :func:`audit.canary_steps.step_observation` — the same path as
   the built-in DP-SGD targets. ``white-box`` (Opacus): the final minus initial parameter on the
   coordinate, with the Bonferroni grid; both test the claim's tradeoff curve.
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
from tqdm.auto import tqdm

from audit.canary_steps import StepMechanism, step_observation
from audit.errors import UserError
from audit.plugin_trainer import MAX_TRAIN, plugin_dataset, train_once
from audit.run_dp import DPAuditSetup, Observation
from audit.theory.claims import PURE_DP_DELTA, ApproxDPClaim
from targets.audit_hooks import StepSource, UpdateRecorder, recording
from targets.plugin_rng import reproducibility, reproducibility_table
from targets.plugins import TrainerPlugin, plugin_config

#: Threat models of an instrumented plugin.
UPDATE_THREATS = ("updates", "white-box")


def _opacus_status() -> str | None:
    """None when Opacus can be instrumented (or is absent), else why not (an untested version)."""
    if importlib.util.find_spec("opacus") is None:
        return None
    from targets.opacus_hooks import require_opacus

    try:
        require_opacus()
    except UserError as exc:
        return str(exc)
    return None


@contextmanager
def instrumented(recorder: UpdateRecorder) -> Iterator[UpdateRecorder]:
    """``recorder`` receives the hooks' calls and, when Opacus is installed (a tested version), every
    Opacus DP optimizer's steps."""
    if importlib.util.find_spec("opacus") is not None and _opacus_status() is None:
        from targets.opacus_hooks import instrument_opacus

        with instrument_opacus(recorder):
            yield recorder
    else:
        with recording(recorder):
            yield recorder


def run_once(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, recorder: UpdateRecorder) -> Any:
    """One instrumented call of ``train``; returns its ``predict_proba`` (the recorder holds the steps)."""
    with instrumented(recorder):
        return train_once(plugin, X, y, seed)


@dataclass(frozen=True)
class Probe:
    """What the probe run showed (module docstring, step 1)."""

    steps: int
    source: StepSource
    clip_norm: float
    n_params: int
    coordinate: int
    touched: float
    opacus: dict | None
    check: dict = field(default_factory=dict)


def probe(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, delta: float) -> Probe:
    """Train once without a canary (twice, for the reproducibility check) and read the code's DP-SGD."""
    probe_seed = int(np.random.SeedSequence([seed, 29]).generate_state(1)[0])
    first, second = UpdateRecorder(None, 0), UpdateRecorder(None, 0)
    run_once(plugin, X, y, probe_seed, first)
    if first.steps == 0:
        why = _opacus_status()
        raise UserError(f"train of plugin {plugin.spec} took no DP-SGD step the audit could see: use Opacus's "
                        f"PrivacyEngine.make_private or call targets.audit_hooks.add_canary / report_update in the "
                        f"loop, or audit it black-box (--threat black-box)" + (f"; {why}" if why else ""))
    run_once(plugin, X, y, probe_seed, second)
    same = np.array_equal(np.asarray(first.observations), np.asarray(second.observations))
    check = reproducibility(same, plugin.rng, f"the probe run trained twice from the same seed ({first.steps} noisy "
                                              f"steps compared)")
    coordinate = int(np.argmin(first.touched))
    return Probe(first.steps, first.source, float(first.clip_norm), int(first.touched.size), coordinate,
                 float(first.touched[coordinate]), _opacus_report(first, delta), check)


def _opacus_report(recorder: UpdateRecorder, delta: float) -> dict | None:
    """What the PrivacyEngine of a run reports at ``delta`` (None when the run used no Opacus)."""
    if not recorder.engines:
        return None
    if len(recorder.engines) > 1:
        raise UserError("train made more than one Opacus PrivacyEngine; the audit needs one DP-SGD loop per run")
    engine = recorder.engines[0]
    return {"epsilon": float(engine.get_epsilon(delta)), "accountant": str(engine.accountant.mechanism()),
            "history": [list(map(float, h)) for h in getattr(engine.accountant, "history", [])]}


def _claim_and_mechanism(plugin: TrainerPlugin, found: Probe) -> tuple[Any, StepMechanism]:
    """The claim audited and the DP-SGD the code runs (module docstring, step 2)."""
    from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier

    claim = plugin.claim
    if claim is None:  # "claim": "opacus"
        if found.opacus is None:
            raise UserError(f"plugin {plugin.spec} claims what Opacus reports ('claim': 'opacus'), but its train made "
                            f"no Opacus PrivacyEngine")
        claim = ApproxDPClaim(found.opacus["epsilon"], plugin.delta)
    sigma = found.source.noise_multiplier
    if sigma is None:  # a hooked loop: the noise the claim states, or the least it allows at the steps taken
        delta = plugin.delta or PURE_DP_DELTA
        sigma = (claim.noise_multiplier if isinstance(claim, DPSGDClaim) else
                 float(calibrate_noise_multiplier(claim.epsilon(delta), delta, found.source.sample_rate, found.steps)))
    if not sigma > 0:
        raise UserError(f"train of plugin {plugin.spec} adds no noise (noise multiplier {sigma}); it is not DP-SGD")
    return claim, StepMechanism(float(sigma), found.source.sample_rate, found.steps)


def _comparison_table(claim: Any, mech: StepMechanism, delta: float, found: Probe) -> dict:
    """Report table: the claim's accounting beside the DP-SGD the code was seen to run."""
    stated = claim.params() if hasattr(claim, "noise_multiplier") else {}
    rows = [[key, stated.get(key), getattr(mech, key)] for key in ("noise_multiplier", "sample_rate", "steps")]
    rows.append(["epsilon at delta (PLD)", float(claim.epsilon(delta)), float(mech.claim().epsilon(delta))])
    if found.opacus is not None:
        rows.append([f"epsilon reported by Opacus ({found.opacus['accountant']})", None, found.opacus["epsilon"]])
    return {"title": "Claim and the DP-SGD the code runs", "columns": ["", "claim", "code (probe run)"], "rows": rows,
            "caption": "code: the noise multiplier of its optimizer (a hooked loop: the claim's), the Poisson rate it "
                       "samples with, and the noisy steps it took, seen while the probe run trained; its epsilon by "
                       "our PLD accountant. A code epsilon above the claim's is an accounting mismatch the audit "
                       "then tests with a threshold designed for it."}


def update_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                 quiet: bool, confidence: float = 0.95) -> DPAuditSetup:
    """A :class:`audit.run_dp.DPAuditSetup` auditing the plugin's DP-SGD steps (module docstring);
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
    claim, mech = _claim_and_mechanism(plugin, found)
    if threat == "white-box" and found.source.kind != "opacus":
        raise UserError("a hooked loop reports its updates, not its parameters: audit it with --threat updates")

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
        results = found.check | {"tables": [reproducibility_table(found.check),
                                            _comparison_table(claim, mech, plugin.delta, found)]}
        if threat == "white-box":
            return Observation(moved, info=info | {"score": "initial minus final parameter on the canary's coordinate"},
                               results=results)
        padded = np.full((included.size, int(lengths.max())), np.nan)
        for r, s in enumerate(steps):
            padded[r, :s.size] = s
        out = step_observation(padded, mech, claim, plugin.delta, confidence, info)
        out.results = results
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


def trainer_setup(plugin: TrainerPlugin, canary: str, threat: str, seed: int, data_dir: str | None,
                  quiet: bool, confidence: float = 0.95) -> DPAuditSetup:
    """The setup of any trainer-plugin audit: black-box (:func:`audit.plugin_trainer.plugin_setup`) or
    update-level / white-box (:func:`update_setup`)."""
    if threat == "black-box":
        from audit.plugin_trainer import plugin_setup

        return plugin_setup(plugin, canary, threat, seed, data_dir, quiet)
    return update_setup(plugin, canary, threat, seed, data_dir, quiet, confidence)


def resolved_claim(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int) -> Any:
    """The claim of a plugin, reading Opacus's report from a probe run for ``"claim": "opacus"``."""
    if plugin.claim is not None:
        return plugin.claim
    return _claim_and_mechanism(plugin, probe(plugin, X, y, seed, plugin.delta))[0]
