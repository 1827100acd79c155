"""The accounting check of a user's DP-SGD code, in seconds: read the configuration it runs and test
it against its claim, before (or instead of) any attack [Abadi et al. 2016, Alg. 1; Chua et al.
2024; the class of Opacus issues 571 and 819]. Sources: docs/references.md, "Configuration checks".

From the probe (:func:`audit.plugins.probe.probe`: the plugin's ``train`` once on its dataset, no
canary) and one more instrumented call on the dataset plus one record (its first row duplicated):

* **epsilon**: the configuration the code runs — noise multiplier (measured from the noise the probe
  added, per parameter tensor: the largest value consistent with the least noisy tensor,
  :func:`measured_sigma`; Opacus: its optimizer's figure when smaller, reported beside it), the
  Poisson rate it samples with, the noisy steps it took — by our PLD accountant
  (:func:`audit.theory.config_check.check_config_against_claim`). Above the claim: a violation.
* **noise** (:func:`audit.stats.noise_check.check_noise`, alpha ``1 - confidence`` split among its
  tests): noise below the multiplier the claim needs in any tensor or step, noise not drawn afresh at
  every step, noise that is not Gaussian, and noise that does not change with the seed (the probe
  against the run on the dataset plus one record, from another seed): each a violation.
* **sampling**: which records each step held (``add_canary(batch=...)`` or the training set's data
  loaders, whatever loader the loop iterates) tested for Poisson sampling
  (:func:`audit.stats.sampling_check.sampling_from_batches`). Not Poisson while accounted as Poisson:
  a finding (the accountant's epsilon does not cover it).
* **clipping**: every step's clipped data sum has norm at most ``C`` times its batch size (triangle
  inequality); a larger one proves the code does not clip each example to C: a violation.
* **worlds**: the configuration read with and without the added record
  (:func:`audit.theory.config_check.compare_world_configs`). A rate, step count or normaliser that
  moves with one record is a finding with the fix sentence; a violation when either world's epsilon
  exceeds the claim. (Opacus derives its rate from ``len(loader)``, which moves only where the
  dataset size crosses a multiple of the batch size; counting every such move a violation would flag
  every Opacus program at those sizes, so the move itself is reported, the epsilon decides.)

:func:`accounting_check` returns the ``config_check`` block of results.json and the lines printed
first on the command line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.plugins.probe import Probe, require_steps, run_once
from audit.stats.noise_check import NoiseCheck, check_noise
from audit.stats.sampling_check import sampling_from_batches
from audit.theory.config_check import (
    ConfigFinding,
    DPSGDConfig,
    check_config_against_claim,
    compare_world_configs,
    config_epsilon,
)
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import UpdateRecorder
from targets.plugins import TrainerPlugin

#: Relative slack of the clipping check (float32 sums).
CLIP_SLACK = 1e-3
#: Below this fraction of the noise the claim needs, the check reports the noise itself (the PLD of a
#: nearly noiseless step is huge and slow to compute).
MIN_SIGMA = 0.25


def read_config(recorder: UpdateRecorder, sigma: float, dataset_size: int) -> DPSGDConfig:
    """The :class:`DPSGDConfig` one instrumented run shows (``sigma``: the noise multiplier taken)."""
    sizes = [b.size for b in recorder.batches if b is not None]
    return DPSGDConfig(noise_multiplier=float(sigma), steps=recorder.steps, sample_rate=recorder.source.sample_rate,
                       dataset_size=int(dataset_size), clip=recorder.clip_norm,
                       normalisation=recorder.normalisation or "expected", normaliser=recorder.normaliser,
                       batch_sizes=tuple(sizes) if len(sizes) == recorder.steps else ())


def clipping_check(recorder: UpdateRecorder) -> dict[str, Any]:
    """Whether every step's clipped data sum has norm <= C x its batch size (module docstring)."""
    pairs = [(norm, b.size) for norm, b in zip(recorder.data_norms, recorder.batches, strict=True) if b is not None]
    if not pairs:
        return {"checked": False, "problem": False,
                "message": "The records of each step were not seen (pass batch= to add_canary): clipping not checked."}
    c = float(recorder.clip_norm)
    ratio = max(norm / (c * max(size, 1)) if norm > 0 else 0.0 for norm, size in pairs)
    worst = max(range(len(pairs)), key=lambda i: pairs[i][0] - c * pairs[i][1])
    bad = sum(norm > c * size * (1 + CLIP_SLACK) + 1e-9 for norm, size in pairs)
    out = {"checked": True, "problem": bad > 0, "steps_checked": len(pairs), "steps_over": int(bad),
           "largest_norm_over_c_times_batch": ratio, "worst_step": {"norm": pairs[worst][0], "batch": pairs[worst][1]}}
    out["message"] = (f"{bad} of {len(pairs)} steps have a clipped data sum longer than C x batch size (largest "
                      f"ratio {ratio:.3g}): the code does not clip each example to C." if bad else
                      f"Every step's clipped data sum is within C x its batch size ({len(pairs)} steps).")
    return out


def _finding(check: str, problem: bool, violation: bool, message: str, fix: str = "", details: dict | None = None):
    return {"check": check, "problem": bool(problem), "violation": bool(problem and violation), "message": message,
            "fix": fix, "details": details or {}}


def _from(finding: ConfigFinding, violation: bool) -> dict[str, Any]:
    return _finding(finding.check, finding.problem, violation, finding.message, finding.fix, finding.details)


def measured_sigma(noise: NoiseCheck, sigma_code: float | None) -> float:
    """The noise multiplier the configuration's epsilon is computed with: the largest value consistent with
    the noise measured in the least noisy tensor, or the optimizer's (Opacus) when that is smaller."""
    return float(noise.sigma_upper if sigma_code is None else min(sigma_code, noise.sigma_upper))


def accounting_check(plugin: TrainerPlugin, X: np.ndarray, y: np.ndarray, seed: int, found: Probe, claim: Any,
                     sigma_code: float | None, delta: float, confidence: float) -> dict[str, Any]:
    """The ``config_check`` block (module docstring); ``sigma_code``: the optimizer's noise multiplier
    (Opacus: reported, and capped by the noise measured) or None (a hooked loop: measured only)."""
    recorder = found.recorder
    claimed = float(claim.epsilon(delta))
    needed = float(calibrate_noise_multiplier(claimed, delta, recorder.source.sample_rate, recorder.steps))
    other = UpdateRecorder(None, 0)
    X1, y1 = np.concatenate([X, X[:1]]), np.concatenate([y, y[:1]])
    run_once(plugin, X1, y1, int(np.random.SeedSequence([seed, 31]).generate_state(1)[0]), other)
    require_steps(plugin, other)
    noise = check_noise(recorder.noise, other.noise, recorder.clip_norm, needed, 1.0 - confidence)
    shown = measured_sigma(noise, sigma_code)
    sigma = max(shown, float(np.finfo(float).tiny))  # a tensor without noise measures 0: the least positive float
    config = read_config(recorder, sigma, len(X))
    if sigma < MIN_SIGMA * needed:  # far too little noise: say so without the PLD of a near-noiseless step
        findings = [_finding("epsilon", True, True, f"The loop adds noise of multiplier at most {shown:.3g}, where "
                             f"{config.rate:.4g} sampling and {config.steps} steps need at least {needed:.4g} for the "
                             f"claimed epsilon {claimed:.3g}.", f"raise the noise multiplier to at least {needed:.4g}",
                             {"config": config.to_dict(), "noise_multiplier_needed": needed})]
    else:
        findings = [_from(check_config_against_claim(config, claim, delta), True)]
    measured = noise.summary
    findings[0]["details"]["noise_multiplier_source"] = (
        (f"the optimizer's {sigma_code:.4g}, capped by " if sigma_code is not None else "")
        + f"the noise measured per parameter tensor: at most {measured['upper']:.4g} in the least noisy tensor "
        f"({measured['worst_tensor']}; estimate over all tensors {measured['estimate']:.4g}, "
        f"{measured['coordinates_x_steps']} coordinate-steps)")
    findings.extend(noise.findings)
    batches = [b for b in recorder.batches if b is not None]
    sampling = None
    if len(batches) == recorder.steps and recorder.steps >= 2:
        sampling = sampling_from_batches(batches, len(X)).to_dict()
        problem = sampling["verdict"] not in ("poisson", "inconclusive", "full-batch")
        findings.append(_finding("sampling", problem, False, f"Sampling read from the records each step held: "
                                 f"{sampling['verdict']}. {sampling['message']}",
                                 "sample each record by its own coin with rate q (iterate the data loader "
                                 "make_private returns, poisson_sampling=True)" if problem else "", sampling))
    clipping = clipping_check(recorder)
    findings.append(_finding("clipping", clipping["problem"], True, clipping["message"],
                             "clip each example's gradient to C before summing" if clipping["problem"] else "",
                             clipping))
    other_sigma = other.source.noise_multiplier if sigma_code is not None else sigma
    other_config = read_config(other, other_sigma, len(X1))
    noisy_enough = min(sigma, other_sigma) >= MIN_SIGMA * needed
    worlds = compare_world_configs(config, other_config, delta=delta if noisy_enough else None)
    over = not noisy_enough or max(worlds.details["epsilon_without"], worlds.details["epsilon_with"]) > claimed * 1.01
    findings.append(_from(worlds, over))
    status = ("violation" if any(f["violation"] for f in findings) else
              "finding" if any(f["problem"] for f in findings) else "ok")
    epsilon = config_epsilon(config, delta) if noisy_enough else None
    return {"status": status, "findings": findings, "config": config.to_dict() | {"epsilon": epsilon},
            "claimed_epsilon": claimed, "delta": delta, "noise_measured": measured | {"optimizer": sigma_code},
            "sampling": sampling, "clipping": clipping, "trainings": 3}


def check_lines(block: dict[str, Any]) -> list[str]:
    """The lines printed first: each finding with a problem, with its fix; else one line saying the
    configuration is as claimed."""
    problems = [f for f in block["findings"] if f["problem"]]
    if not problems:
        cfg = block["config"]
        return [f"config:    as claimed: epsilon {cfg['epsilon']:.3g} by the PLD accountant for the DP-SGD the code "
                f"runs (sigma {cfg['noise_multiplier']:.4g}, q {cfg['sample_rate']:.4g}, {cfg['steps']} steps) <= "
                f"claimed {block['claimed_epsilon']:.3g}"]
    return [f"CONFIG {'VIOLATION' if f['violation'] else 'FINDING'} ({f['check']}): {f['message']}"
            + (f" Fix: {f['fix']}." if f["fix"] else "") for f in problems]


def config_table(block: dict[str, Any]) -> dict[str, Any]:
    """Report table of the accounting check."""
    rows = [[f["check"], "violation" if f["violation"] else "finding" if f["problem"] else "ok", f["message"],
             f["fix"]] for f in block["findings"]]
    return {"title": "Accounting check: the DP-SGD the code runs", "columns": ["check", "status", "what", "fix"],
            "rows": rows, "caption": "Read from instrumented trainings of the code (probe, its repeat, and the "
                                      "dataset plus one record); epsilon by our PLD accountant."}
