"""The ``run dp`` adapter of the project's DP-SGD targets: gradient or input canaries under the
black-box, white-box and updates threat models, with random or pre-trained initial parameters."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from audit.choices import INITS, THREATS
from audit.dp.canaries import GRADIENT_CANARIES, gradient_canary, input_canary
from audit.dp.dpsgd_observer import Canary, DPSGDObserver
from audit.dp.options import DPOptions
from audit.dp.setup_types import DPAuditSetup
from audit.errors import UserError
from audit.theory.claims import Neighbouring
from audit.theory.dpsgd import DPSGDClaim, calibrate_noise_multiplier
from targets.catalogue import trained_target
from targets.dataset import Dataset
from targets.datasets import load_dataset
from targets.dpsgd_audit import dead_coordinate, param_shapes
from targets.registry import TrainedTarget
from targets.training import TrainConfig, resolve_device, train_models

#: The non-private pre-training of ``--init pretrained``: epochs and expected batch size of plain SGD.
PRETRAIN_EPOCHS, PRETRAIN_BATCH = 20, 64
#: Runs of an audit by threat model when ``--runs`` is not given (``--quick``: 400).
DEFAULT_RUNS = {"updates": 4000, "white-box": 4000, "black-box": 1000}


@functools.lru_cache(maxsize=64)
def _noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """PLD-calibrated sigma (as TrainedTarget.noise_multiplier), cached: a sweep over threat
    models calibrates each epsilon once."""

    return float(calibrate_noise_multiplier(epsilon, delta, sample_rate, steps))


def pretrained_init(data, rows: np.ndarray, config, seed: int, device) -> dict:
    """One model trained without privacy on ``data[rows]`` by the project's trainer
    (:func:`targets.training.train_models`, plain SGD: :data:`PRETRAIN_EPOCHS` epochs at expected batch
    :data:`PRETRAIN_BATCH`, the target's learning rate): the public starting point of ``--init pretrained``."""
    q = min(1.0, PRETRAIN_BATCH / rows.size)
    plain = replace(config, clip_norm=None, noise_multiplier=0.0, epochs=float(PRETRAIN_EPOCHS), sample_rate=q,
                    expected_batch_size=q * rows.size)
    mask = np.zeros((1, len(data)), dtype=bool)
    mask[0, rows] = True
    params = train_models(data, mask, plain, [int(np.random.SeedSequence([seed, 47]).generate_state(1)[0])],
                          device=device, progress=False, desc="pre-training")
    return {k: v[0] for k, v in params.items()}


def dpsgd_setup(opts: DPOptions) -> DPAuditSetup:
    """A registry DP-SGD target audited with a gradient or input canary under a threat model.

    Scores (:class:`audit.dp.dpsgd_observer.DPSGDObserver`): ``updates`` — per-step observations
    (:mod:`targets.dpsgd_audit`) and, per run, their summed log-likelihood ratio (for ``dirac-replace``:
    :func:`audit.dp.dpsgd_observer._one_step_per_epoch_llr`, with the claim read for replace-one
    neighbours); ``white-box`` — the final minus initial parameters projected on the canary direction
    (the adversary knows the initialisation: the runs' seeds are public); ``black-box`` — minus the final model's
    cross-entropy loss on the input canary.

    ``opts.init``: ``random`` (each run's own initialisation) or ``pretrained`` (every run starts from
    one model trained without privacy on data disjoint from the training set and the canary,
    :func:`pretrained_init`; Annamalai & De Cristofaro 2024). ``opts.calibration_runs`` > 0 trains that
    many more runs with their own coins and seeds and fixes the threshold on them
    (:func:`audit.dp.dpsgd_observer.calibrated_threshold`); otherwise the Bonferroni grid is used.
    """
    target = dpsgd_target(opts)
    device = resolve_device(opts.device)
    data = load_dataset(target.dataset, opts.data_dir)
    train_index, pool_index, pre_rows = split_records(opts, target, data)
    sigma = _noise_multiplier(target.epsilon, target.delta, target.sample_rate, target.steps)
    config = target.train_config(sigma)
    init, init_info = initial_parameters(opts, data, pre_rows, config, device)
    claimed = target.claim(sigma)
    replace_pair = opts.canary == "dirac-replace"
    claim = claimed
    if replace_pair:  # what the claimed (Poisson) DP-SGD promises a replace-one pair
        claim = DPSGDClaim(sigma, target.sample_rate, target.steps, neighbouring=Neighbouring.REPLACE)
    shapes = param_shapes(target.arch, data)
    n_params = int(sum(np.prod(s) for s in shapes.values()))
    canary = make_canary(opts, target, data, n_params, train_index, pool_index)
    observer = DPSGDObserver(opts=opts, data=data, train_index=train_index, config=config, canary=canary, init=init,
                             device=device, arch=target.arch, shapes=shapes, claim=claim, delta=target.delta,
                             sigma=sigma)
    return DPAuditSetup(
        name=target.name, description=target.description, dataset=data.name,
        model={"name": target.arch, "parameters": n_params},
        neighbouring=("replace one record (crafted dataset: every other record's gradient is -g, the audited "
                      "record's +g or -g); claim read for replace-one neighbours" if replace_pair
                      else "add/remove one record (the canary)"),
        claim=claim, delta=target.delta, params=dpsgd_params(target, config, sigma, claimed) | init_info,
        canary={"kind": opts.canary} | canary.info, threat=opts.threat, observe=observer,
        default_runs=400 if opts.quick else DEFAULT_RUNS[opts.threat])


def dpsgd_target(opts: DPOptions) -> TrainedTarget:
    """The registry target of ``opts`` at the claimed epsilon and delta, once the options and the target
    are checked: a known initialisation and threat model, a private target trained by plain DP-SGD
    (no momentum), a canary the threat model can observe."""
    if opts.init not in INITS:
        raise UserError(f"unknown initialisation {opts.init!r}; choose one of {', '.join(INITS)}")
    if opts.calibration_runs and opts.threat == "updates":
        raise UserError("--calibration-runs fixes the threshold of a black-box or white-box audit; the updates "
                        "threat model fixes its own")
    target = trained_target(opts.target).with_privacy(opts.epsilon, opts.delta)
    if not target.private:
        raise UserError(f"target {target.name} is not private; run dp audits DP targets")
    if opts.threat not in THREATS:
        raise UserError(f"unknown threat model {opts.threat!r}; choose one of {', '.join(THREATS)}")
    if target.momentum:
        raise UserError(f"target {target.name} uses momentum; DP audits need plain DP-SGD (momentum 0)")
    if opts.canary in GRADIENT_CANARIES and opts.threat == "black-box":
        raise UserError("a gradient canary has no input to query: use --threat white-box or updates, "
                        "or an input canary (natural, mislabelled, crafted)")
    return target


def split_records(opts: DPOptions, target: TrainedTarget, data: Dataset) -> tuple[np.ndarray, np.ndarray, Any]:
    """(training set, canary pool, pre-training rows) of the audit, from a seeded permutation: the first
    ``n_train`` records train; with ``--init pretrained`` the last ``n_train`` of the rest pre-train (a
    disjoint half; canaries come from the pool's front); pre-training rows None otherwise."""
    if len(data) < target.n_train + 1:
        raise UserError(f"dataset {data.name} has {len(data)} examples; target needs {target.n_train} + 1")
    perm = np.random.default_rng([opts.seed, 5]).permutation(len(data))
    train_index, pool_index = perm[:target.n_train], perm[target.n_train:]
    if opts.init != "pretrained":
        return train_index, pool_index, None
    if pool_index.size < 2 * target.n_train:
        raise UserError(f"--init pretrained needs {target.n_train} more records than the target's training set "
                        f"and its canary pool; dataset {data.name} has {len(data)}")
    return train_index, pool_index[:-target.n_train], pool_index[-target.n_train:]


def initial_parameters(opts: DPOptions, data: Dataset, pre_rows: np.ndarray | None, config: TrainConfig,
                       device) -> tuple[dict | None, dict]:
    """The shared starting point of every run (None: each run's own random initialisation) and what
    results.json's ``params`` says about it."""
    init_info = {"init": opts.init}
    if opts.init != "pretrained":
        return None, init_info
    init = pretrained_init(data, pre_rows, config, opts.seed, device)
    return init, init_info | {
        "pretrained_on": f"{pre_rows.size} records disjoint from the training set and the canary",
        "pretraining": f"non-private SGD, {PRETRAIN_EPOCHS} epochs, expected batch {PRETRAIN_BATCH}, lr {config.lr}"}


def make_canary(opts: DPOptions, target: TrainedTarget, data: Dataset, n_params: int, train_index: np.ndarray,
                pool_index: np.ndarray) -> Canary:
    """The canary of ``opts.canary`` (seeded): a gradient canary of norm C (``dirac`` on a coordinate no
    training example's gradient touches) or an input canary from the pool (:mod:`audit.dp.canaries`)."""
    crng = np.random.default_rng([opts.seed, 17])
    if opts.canary in GRADIENT_CANARIES:
        dead = dead_coordinate(target.arch, data, train_index) if opts.canary == "dirac" else None
        gvec, info = gradient_canary(opts.canary, n_params, float(target.clip_norm), dead, crng)
        return Canary(gvec, None, info)
    cx, cy, info = input_canary(opts.canary, data, train_index, pool_index, crng)
    return Canary(None, (cx, cy), info)


def dpsgd_params(target: TrainedTarget, config: TrainConfig, sigma: float, claimed) -> dict:
    """results.json's ``params`` of a DP-SGD audit: the training recipe (noise multiplier ``sigma``) and the
    epsilon claimed for add/remove neighbours."""
    q = config.sample_rate
    return {"noise_multiplier": sigma, "clip_norm": target.clip_norm, "sample_rate": q,
            "steps": config.steps, "epochs": target.epochs, "lr": config.lr,
            "expected_batch_size": config.expected_batch_size, "n_train": target.n_train, "full_batch": q >= 1.0,
            "sampling": target.sampling, "claimed_epsilon_add_remove": float(claimed.epsilon(target.delta))}
