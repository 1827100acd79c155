"""The reconstruction game on DP-ERM output perturbation (:mod:`targets.dperm`): the closed-form
informed adversary against GLMs [Balle, Cherubin, Hayes, S&P 2022].

The target's data are split (seeded) into a pool of candidates (real records, as the model sees them
after :func:`targets.dperm.prepare_features`) and the other records, which the adversary knows. A round
draws the target among ``n`` candidates from the pool, releases ``theta*(others + target) + N(0, sigma^2 I)``
and the adversary picks the candidate whose gradient best explains the released parameters' first-order
condition (:func:`attacks.reconstruction.select_glm_candidate`, Newton metric); it also reconstructs the
record itself from the first-order condition (:func:`attacks.reconstruction.reconstruct_glm_record`),
whose error is reported. The twin releases the exact minimiser (no noise). The claim is the mechanism's
mu-GDP under replace-one neighbours: the ReRo bound compares the released parameters with those of the
others plus a fixed reference record (docs/references.md, "Reconstruction robustness").
"""

from __future__ import annotations

import math

import numpy as np

from attacks.reconstruction import reconstruct_glm_record, select_glm_candidate
from audit.errors import UserError
from audit.reconstruction.game import GameResult
from targets.catalogue import dperm_release
from targets.datasets import load_dataset
from targets.dperm import DPERM, binary_labels, fit_logreg, prepare_features


def dperm_data(name: str, pool_size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X_pool, y_pool, X_others, y_others)`` of DP-ERM target ``name``: features as the model sees them
    (with the intercept feature), labels in {-1, +1}; the pool holds ``pool_size`` records (seeded)."""
    spec = dperm_release(name)
    ds = load_dataset(spec["dataset"])
    X, y = prepare_features(ds.X.reshape(len(ds.X), -1)), binary_labels(spec["dataset"], ds.y)
    if pool_size > len(X) // 2:
        raise UserError(f"{name} has {len(X)} records: at most {len(X) // 2} candidates (the rest are the known "
                        f"records); use smaller --candidates")
    perm = np.random.default_rng([seed, 71]).permutation(len(X))
    pool, others = perm[:pool_size], perm[pool_size:]
    return X[pool], y[pool], X[others], y[others]


def dperm_round(erm: DPERM, theta_star: np.ndarray, X_others: np.ndarray, y_others: np.ndarray, cand_X: np.ndarray,
                cand_y: np.ndarray, target: int, noise: np.ndarray) -> tuple[bool, float]:
    """One round: release, guess, reconstruct; returns (guess correct, relative L2 error of the record)."""
    theta = theta_star + noise
    guess, _ = select_glm_candidate(theta, X_others, y_others, erm.l2_reg, erm.n, cand_X, cand_y)
    record = reconstruct_glm_record(theta, X_others, y_others, erm.l2_reg, erm.n, bias_feature=1 / math.sqrt(2))
    error = float(np.linalg.norm(record.features - cand_X[target]) / np.linalg.norm(cand_X[target]))
    return guess == target, error


def dperm_games(name: str, erm_for, counts: tuple[int, ...], runs: int, seed: int, twin: bool = True, *,
                minimisers: dict[int, np.ndarray] | None = None) -> tuple[list[GameResult], dict, DPERM]:
    """One game per candidate count on DP-ERM target ``name``; ``erm_for(n_records)`` builds the mechanism
    (its calibration depends on the number of records). Returns the games, a description and the mechanism.
    ``minimisers`` (pool index -> exact minimiser, filled as they are fitted) may be shared by calls with the
    same ``name``, ``counts``, ``seed`` and regularisation, e.g. an epsilon sweep (the noise scale does not
    enter the minimiser)."""
    cand_X_all, cand_y_all, X_others, y_others = dperm_data(name, max(counts), seed)
    erm = erm_for(len(X_others) + 1)
    minimisers = {} if minimisers is None else minimisers
    games = []
    for n in counts:
        rng = np.random.default_rng([seed, 73, n])
        pick = rng.choice(len(cand_X_all), size=n, replace=False)
        cand_X, cand_y = cand_X_all[pick], cand_y_all[pick]
        chosen = rng.integers(n, size=runs)
        noise = rng.normal(0.0, erm.sigma, size=(runs, X_others.shape[1]))
        wins, twin_wins, errors, twin_errors = 0, 0, [], []
        for r, c in enumerate(chosen):
            key = int(pick[c])
            if key not in minimisers:
                minimisers[key] = fit_logreg(np.vstack([X_others, cand_X[c]]), np.append(y_others, cand_y[c]),
                                             erm.l2_reg, erm.grad_tol)[0]
            ok, err = dperm_round(erm, minimisers[key], X_others, y_others, cand_X, cand_y, int(c), noise[r])
            wins, errors = wins + ok, errors + [err]
            if twin:
                ok, err = dperm_round(erm, minimisers[key], X_others, y_others, cand_X, cand_y, int(c), 0 * noise[r])
                twin_wins, twin_errors = twin_wins + ok, twin_errors + [err]
        games.append(GameResult(n, int(wins), runs, int(twin_wins) if twin else None,
                                record_error_median=float(np.median(errors)),
                                twin_record_error_median=float(np.median(twin_errors)) if twin else None))
    info = {"candidates": f"real records of the data set (a seeded pool of {max(counts)}), labels included",
            "observation": "the released parameters (minimiser plus Gaussian noise); the other "
                           f"{len(X_others)} records are known",
            "twin": "the exact minimiser (no noise)" if twin else None,
            "record_error": "relative L2 error of the closed-form reconstruction of the record's features "
                            "(first-order condition, Balle, Cherubin & Hayes 2022), median over the rounds"}
    return games, info, erm
