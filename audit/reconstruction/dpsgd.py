"""The reconstruction game on the project's DP-SGD targets (:mod:`targets.reconstruction_runs`).

Candidates: gradient canaries of norm ``C`` (the informed adversary's candidates of Hayes, Mahloujifar &
Balle 2023). ``updates``: a regular simplex of ``n`` vertices (the best-separated ``n`` points of norm
``C``, :func:`attacks.reconstruction.candidate_arrangement`) in a random ``n``-dimensional subspace of the
parameters, or ``n`` random directions when ``n`` exceeds the parameter count; the adversary subtracts
the other records' clipped sum at every step and picks the maximum-likelihood candidate
(:func:`attacks.reconstruction.informed_update_guess`). ``white-box``: the simplex (or random
directions) in the span of the weights on input features that are zero in every training record (no
other record's gradient reaches them: final minus initial parameters there is the target's summed
clipped gradient plus noise), scored by :func:`attacks.reconstruction.summed_update_log_likelihoods`.
The non-private twin: the same runs with noise 0 (clipping kept), scored with a noise scale of
``1e-3 C`` (float32 round-off of the updates is far below it).
docs/references.md, "Reconstruction robustness".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attacks.reconstruction import candidate_arrangement, summed_update_log_likelihoods, update_log_likelihoods
from audit.errors import UserError
from audit.reconstruction.game import GameResult
from targets.datasets import Dataset
from targets.dpsgd_audit import dead_coordinate, param_shapes
from targets.dpsgd_step import DPSGDStep, TrainConfig
from targets.reconstruction_runs import CandidateDraw, CandidateRuns, train_candidate_runs

#: Noise scale of the twin's likelihood, in units of the clip norm.
TWIN_NOISE = 1e-3


def white_box_coordinates(arch: str, data: Dataset, train_index: np.ndarray) -> np.ndarray:
    """Flattened indices of every weight on an input feature that is zero in every training record
    (logreg: one per class; the extra row of the game is zero too)."""
    dead_coordinate(arch, data, train_index)  # a one-line UserError when there is none
    X = np.asarray(data.X[train_index]).reshape(len(train_index), -1)
    dead = np.flatnonzero(np.all(X == 0, axis=0))
    shapes = list(param_shapes(arch, data).values())
    rows, cols = shapes[0][0], shapes[0][1]
    if cols != X.shape[1]:
        raise UserError(f"white-box reconstruction needs a first layer on the inputs (got {arch})")
    return np.array([r * cols + c for r in range(rows) for c in dead], dtype=np.int64)


def design_candidates(n: int, coordinates: np.ndarray, n_params: int, clip: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    """``(candidates (n, P), basis (P, k), arrangement)``: a simplex of norm ``clip`` in a random
    n-dimensional subspace of ``coordinates``, or ``n`` random unit directions there (times ``clip``) when
    ``n`` exceeds their count; the basis spans the candidates (orthonormal columns)."""
    k = coordinates.size
    if n <= k:
        Q, _ = np.linalg.qr(rng.standard_normal((k, n)))
        local, arrangement = candidate_arrangement(n, "simplex", clip) @ Q.T, "simplex"
        basis_local = Q
    else:
        local = rng.standard_normal((n, k))
        local *= clip / np.linalg.norm(local, axis=1, keepdims=True)
        basis_local, arrangement = np.eye(k), f"random directions ({n} > {k} dimensions)"
    candidates = np.zeros((n, n_params))
    candidates[:, coordinates] = local
    basis = np.zeros((n_params, basis_local.shape[1]))
    basis[coordinates] = basis_local
    return candidates, basis, arrangement


def guesses(runs, candidates: np.ndarray, basis: np.ndarray, config: TrainConfig, noise_std: float,
            threat: str) -> np.ndarray:
    """The adversary's maximum-likelihood candidate for every run."""
    proj = candidates @ basis
    if threat == "updates":
        return np.argmax(update_log_likelihoods(runs.residuals, proj, config.sample_rate, noise_std), axis=-1)
    total = (runs.initial - runs.final).double().numpy() * config.expected_batch_size / config.lr
    return np.argmax(summed_update_log_likelihoods(total @ basis, proj, config.steps, config.sample_rate,
                                                   noise_std), axis=-1)


@dataclass(frozen=True, kw_only=True)
class GamePlan:
    """The reconstruction games to play on a DP-SGD target.

    Attributes:
        counts: the candidate counts, one game each.
        runs: the rounds of each game, one training run each.
        threat: ``"updates"`` (every noisy update observed) or the white-box final model.
        seed: the seed of the candidates, the drawn candidates and the runs' seeds.
        twin: also play the non-private twin (noise 0) on the same rounds.
    """

    counts: tuple[int, ...]
    runs: int
    threat: str
    seed: int
    twin: bool = True


def dpsgd_games(data: Dataset, train_index: np.ndarray, config: TrainConfig, plan: GamePlan, device, *,
                step_type: type[DPSGDStep] = DPSGDStep, progress: bool = False,
                train: Callable[..., CandidateRuns] = train_candidate_runs) -> tuple[list[GameResult], dict]:
    """One game per candidate count of ``plan``: ``plan.runs`` rounds, each a training run of ``config`` with a
    uniformly drawn candidate; the non-private twin (noise 0) on the same rounds when ``plan.twin``. Returns the
    games and a description of the candidates. ``train`` trains the runs, with the arguments of
    :func:`targets.reconstruction_runs.train_candidate_runs` (the runner passes
    :meth:`audit.executors.CachedExecutor.candidate_runs` of the run's executor and model cache)."""
    counts, runs, threat, seed, twin = plan.counts, plan.runs, plan.threat, plan.seed, plan.twin
    shapes = param_shapes(config.arch, data)
    n_params = int(sum(np.prod(s) for s in shapes.values()))
    coords = (np.arange(n_params) if threat == "updates"
              else white_box_coordinates(config.arch, data, train_index))
    clip = float(config.clip_norm)
    games, arrangements = [], {}
    for n in counts:
        rng = np.random.default_rng([seed, 61, n])
        candidates, basis, arrangements[n] = design_candidates(n, coords, n_params, clip, rng)
        chosen = rng.integers(n, size=runs)
        seeds = np.random.SeedSequence([seed, 67, n]).generate_state(runs).tolist()
        configs = [(config, config.noise_multiplier * clip)]
        if twin:
            configs.append((replace(config, noise_multiplier=0.0), TWIN_NOISE * clip))
        wins = []
        for cfg, noise_std in configs:
            draw = CandidateDraw(candidates=candidates, chosen=chosen, basis=basis if threat == "updates" else None)
            out = train(data, train_index, cfg, seeds, draw, device=device,
                        step_type=step_type if cfg is config else DPSGDStep, progress=progress)
            wins.append(int(np.sum(guesses(out, candidates, basis, config, noise_std, threat) == chosen)))
        games.append(GameResult(n, wins[0], runs, wins[1] if twin else None))
    info = {"candidates": "gradient canaries of norm C (the clip norm): " + "; ".join(
                f"n = {n}: {a}" for n, a in arrangements.items())
            + (" in a random subspace of the parameters" if threat == "updates"
               else f" in the span of the {coords.size} weights on always-zero input features"),
            "observation": ("every noisy update minus the other records' clipped sum (they, their sampling and "
                            "theta_t are known)" if threat == "updates" else
                            "initial and final parameters (the other records' gradients do not reach the candidates' "
                            "coordinates)"),
            "twin": "the same runs with noise 0 (clipping kept)" if twin else None}
    return games, info
