"""Is the flagship's bound limited by its score, its guesses or its canaries? Scores of the released model's canaries
beyond the shipped attacks, on the flagship's own game (issue 42).

``run membership --target dpsgd_mnist`` certifies ε ≥ 1.124 at seed 0; 1.5 needs the canaries' scores separated by
``d`` about 0.70 (attack AUC 0.69) where the attacks measure 0.53 (``benchmarks/bench_one_run_separation.py``). Per
seed this plays the flagship's game (the same split, coins, canaries and models as the audit, reused from the model
cache under ``--out``) and measures, on the target's 6,000 canaries:

1. **the shipped attacks**: each attack's AUC, its bound at the guesses chosen on its calibration games (what the audit
   reports) and, descriptively, at fixed two-sided designs of 30 to 120 "in" guesses (chosen here on the target's own
   coins, so not an audit: how much a better guess count could have given);
2. **scores of the target model alone, calibrated without its coins** (the Gaussian-equivalent ``d = sqrt(2)
   Phi^-1(AUC)`` beside each AUC): the label's logit-scaled confidence ``phi`` (Carlini et al. 2022, eq. 4; the loss
   attack's order); ``phi`` minus the target's mean ``phi`` of the same class over :data:`POPULATION` fresh sparse
   inputs that no model trained on (the class bias of this model); ``phi`` minus ``beta`` times a pixel-additive
   surrogate of the target (per class, a ridge regression of the target's log-probabilities on the population's
   pixels, evaluated at the canary): the part of this model's response to a canary that its pixels explain; ``phi``
   minus ``beta`` times the mean ``phi`` of :data:`NEIGHBOURS` neighbours (the canary with 10 of its 20 pixels moved
   at random); ``phi`` minus ``beta`` times the mean of the reference models that left the canary out, each
   class-calibrated on the population like the target;
3. **the class-calibrated loss as an audit would play it** (:func:`class_calibrated_audit`): ``phi`` minus the
   model's mean ``phi`` of the canary's class over the game's own population (the 1,000 fresh sparse inputs RMIA
   uses, queried on every model), on the target and on each shadow model's game, its guesses chosen on the shadow
   games as the audit chooses them (:func:`audit.membership.bounds.choose_guesses`), its bound on the target, and
   whether its mean calibration bound would have made it the primary attack;
4. **cross-talk between canaries (an oracle, with the coins)**: a regression of ``phi`` on the canary's own coin and
   on the pixels it shares with member canaries of its label and of other labels (minus their expectation): how much
   of the spread the other canaries' coins explain, and the AUC once it is removed.

Usage: ``python benchmarks/bench_flagship_scores.py [--seeds 0 1 2] [--out DIR] [--json
benchmarks/results_flagship_scores.json]`` (about 3 minutes a seed on a 2-core machine when its models are not
cached). Sources: docs/references.md, "Membership inference attacks" and "One-run auditing".
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attacks.lira import logit_confidence  # noqa: E402
from attacks.membership import run_attacks  # noqa: E402
from attacks.names import expand_attacks  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.membership.bounds import Guesses, choose_guesses, one_run  # noqa: E402
from audit.membership.game import SPARSE_PIXELS, build_canary_game, synthetic_canaries  # noqa: E402
from audit.membership.options import MembershipOptions  # noqa: E402
from audit.membership.runner import GAME_SIZES, attack_inputs, train_game_models  # noqa: E402
from audit.membership.subjects import membership_subject  # noqa: E402
from audit.run_context import RunContext, host_info, utc_now  # noqa: E402

DELTA, CONFIDENCE = 1e-5, 0.95
#: Fresh sparse inputs (no model trains on them) the class bias and the pixel surrogate are fitted on.
POPULATION = 30000
#: Neighbours of each canary (10 of its 20 pixels moved at random) whose mean phi is subtracted.
NEIGHBOURS = 4
#: Ridge penalty of the pixel surrogate.
RIDGE = 5.0
#: Fixed two-sided designs ("in" guesses = "out" guesses) evaluated descriptively on the target.
FIXED_GUESSES = (30, 40, 60, 120)
BETAS = (0.5, 1.0)


def separation(auc: float) -> float:
    """The Gaussian-equivalent separation ``d`` of an AUC: ``sqrt(2) Phi^-1(AUC)``."""
    return float(math.sqrt(2) * stats.norm.ppf(auc))


def flagship(seed: int, out: str):
    """The flagship's subject, game, models and every shipped attack's scores at ``seed`` (as the audit plays it)."""
    opts = MembershipOptions(target="dpsgd_mnist", canary="sparse", seed=seed, quiet=True, out=out)
    m, shadows, references = GAME_SIZES["default"]
    subject = membership_subject(opts, m)
    names = expand_attacks(("all",))
    with RunContext(out, "membership", subject.name, seed=seed, quiet=True) as ctx:
        game = build_canary_game(subject.data, subject.n_train, m, shadows, "sparse", seed, references=references)
        seeds = np.random.SeedSequence(seed).generate_state(1 + shadows + references).tolist()
        models = train_game_models(ctx, subject, game, seeds, shadows, references)
        inputs, _ = attack_inputs(subject, game, models, names)
        scored = run_attacks(names, inputs, "auto", None)
    return subject, game, models, inputs, scored


def shipped_attacks(scored: dict, member: np.ndarray) -> dict:
    """Each attack's AUC, its bound at the guesses chosen on its calibration games, and at fixed designs."""
    rows = {}
    for name, sc in scored.items():
        chosen = choose_guesses(sc.calibration, sc.calibration_in, DELTA, CONFIDENCE)
        fixed = {str(k): one_run(Guesses(method="one-run", k_pos=k, k_neg=k), sc.target, member, DELTA,
                                 CONFIDENCE).epsilon for k in FIXED_GUESSES}
        rows[name] = {"auc": float(roc_auc_score(member, sc.target)), "chosen": asdict(chosen),
                      "epsilon_chosen": one_run(chosen, sc.target, member, DELTA, CONFIDENCE).epsilon,
                      "epsilon_fixed_two_sided_on_target": fixed}
    return rows


def class_calibrated(log_probs: np.ndarray, labels: np.ndarray, population_lp: np.ndarray) -> np.ndarray:
    """``phi`` of each canary minus the same model's mean ``phi`` of the canary's class over population inputs."""
    return logit_confidence(log_probs, labels) - class_phi(population_lp).mean(axis=0)[labels]


def class_calibrated_audit(inputs, scored: dict, member: np.ndarray) -> dict:
    """The class-calibrated loss played as the audit plays an attack: scores on the target and on each shadow
    game, guesses chosen on the shadow games, the bound on the target, and the best other attack's calibration mean
    (module docstring, 3)."""
    target = class_calibrated(inputs.target_lp, inputs.labels, inputs.population_lp)
    calibration = np.stack([class_calibrated(lp, inputs.shadow_labels, pop)
                            for lp, pop in zip(inputs.shadow_lp, inputs.shadow_population_lp, strict=True)])
    chosen = choose_guesses(calibration, inputs.shadow_in, DELTA, CONFIDENCE)
    others = {name: choose_guesses(sc.calibration, sc.calibration_in, DELTA, CONFIDENCE).shadow_mean_epsilon
              for name, sc in scored.items()}
    primary = max(others, key=others.get)
    return {"auc": float(roc_auc_score(member, target)), "chosen": asdict(chosen),
            "epsilon": one_run(chosen, target, member, DELTA, CONFIDENCE).epsilon,
            "shipped_primary": primary, "shipped_primary_calibration_mean": others[primary],
            "would_be_primary": chosen.shadow_mean_epsilon > others[primary]}


def class_phi(log_probs: np.ndarray) -> np.ndarray:
    """phi of every class (n, C) from log-probabilities (n, C)."""
    return np.stack([logit_confidence(log_probs, np.full(len(log_probs), c)) for c in range(log_probs.shape[1])], 1)


def surrogate_phi(population: np.ndarray, population_lp: np.ndarray, X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The pixel-additive surrogate's phi of each canary: per class, a ridge regression of the log-probabilities on
    the pixels (and a constant), fitted on the population, evaluated at the canaries and renormalised."""
    A = np.c_[population.reshape(len(population), -1), np.ones(len(population))]
    W = np.linalg.solve(A.T @ A + RIDGE * np.eye(A.shape[1]), A.T @ population_lp)
    pred = np.c_[X.reshape(len(X), -1), np.ones(len(X))] @ W
    pred -= np.log(np.exp(pred).sum(axis=1, keepdims=True))
    return logit_confidence(pred, labels)


def neighbours(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each sparse canary with half of its pixels moved to random pixels (same shape as ``X``)."""
    flat = X.reshape(len(X), -1)
    out = np.zeros_like(flat)
    keep = SPARSE_PIXELS // 2
    for i, row in enumerate(flat):
        on = np.flatnonzero(row)
        out[i, rng.choice(on, size=keep, replace=False)] = 1.0
        out[i, rng.choice(flat.shape[1], size=on.size - keep, replace=False)] = 1.0
    return out.reshape(X.shape)


def target_scores(subject, game, models, seed: int) -> dict:
    """AUC and separation of the target-only scores of the module docstring, and their correlations with phi."""
    X, labels, member = game.data.X[game.target_canaries], game.data.y[game.target_canaries], game.target_in
    rng = np.random.default_rng([seed, 99])
    population, _ = synthetic_canaries("sparse", POPULATION, subject.data.shape, subject.data.n_classes, rng)
    phi = logit_confidence(subject.log_probs(models.target, X)[0], labels)
    population_lp = subject.log_probs(models.target, population)[0]
    bias = class_phi(population_lp).mean(axis=0)[labels]
    surrogate = surrogate_phi(population, population_lp, X, labels)
    near = np.mean([logit_confidence(subject.log_probs(models.target, neighbours(X, rng))[0], labels)
                    for _ in range(NEIGHBOURS)], axis=0)
    ref_phi = logit_confidence(subject.log_probs(models.references, X), labels)
    ref_bias = np.stack([class_phi(lp).mean(axis=0)[labels]
                         for lp in subject.log_probs(models.references, population[:POPULATION // 5])])
    out_models = ~game.reference_in
    ref_out = ((ref_phi - ref_bias) * out_models).sum(axis=0) / out_models.sum(axis=0)
    scores = {"phi": phi, "phi - class bias": phi - bias, "pixel surrogate alone": surrogate,
              "neighbours alone": near, "reference OUT mean alone": ref_out}
    for beta in BETAS:
        scores[f"phi - {beta:g} pixel surrogate"] = phi - beta * surrogate
        scores[f"phi - {beta:g} neighbours"] = phi - beta * near
        scores[f"phi - class bias - {beta:g} reference OUT mean"] = phi - bias - beta * ref_out
    rows = {}
    for name, s in scores.items():
        auc = float(roc_auc_score(member, s))
        rows[name] = {"auc": auc, "d": separation(auc), "corr_with_phi": float(np.corrcoef(s, phi)[0, 1])}
    return rows | {"cross-talk oracle": cross_talk(X, labels, member, phi)}


def cross_talk(X: np.ndarray, labels: np.ndarray, member: np.ndarray, phi: np.ndarray) -> dict:
    """The oracle regression of phi on the canary's coin and its shared pixels with member canaries (module
    docstring, 4): coefficients, R^2, and the AUC of phi with the cross-talk terms removed."""
    flat = X.reshape(len(X), -1).astype(np.float64)
    overlap = flat @ flat.T
    np.fill_diagonal(overlap, 0.0)
    same = labels[:, None] == labels[None, :]
    coin = member.astype(np.float64)
    terms = [(overlap * same) @ (coin - 0.5), (overlap * ~same) @ (coin - 0.5)]
    F = np.c_[coin, *terms, np.ones(len(phi))]
    coef, *_ = np.linalg.lstsq(F, phi, rcond=None)
    fitted = F @ coef
    r2 = 1.0 - float(((phi - fitted) ** 2).sum() / ((phi - phi.mean()) ** 2).sum())
    cleaned = phi - F[:, 1:3] @ coef[1:3]
    return {"coef_own_coin": float(coef[0]), "coef_shared_pixel_same_label": float(coef[1]),
            "coef_shared_pixel_other_label": float(coef[2]), "r2": r2,
            "auc_removed": float(roc_auc_score(member, cleaned))}


def measure(seed: int, out: str) -> dict:
    """One seed: the shipped attacks and the target-only scores, with the load around them."""
    load_before, t0 = os.getloadavg()[0], time.perf_counter()
    subject, game, models, inputs, scored = flagship(seed, out)
    row = {"seed": seed, "attacks": shipped_attacks(scored, game.target_in),
           "class_calibrated_loss": class_calibrated_audit(inputs, scored, game.target_in),
           "target_scores": target_scores(subject, game, models, seed)}
    return row | {"wall_s": time.perf_counter() - t0, "load_1min_before": load_before,
                  "load_1min_after": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", default=None, help="run directory whose model cache is reused (default: a temporary one)")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results_flagship_scores.json"))
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            rows.append(measure(seed, args.out or tmp))
            best = max(rows[-1]["target_scores"].items(), key=lambda kv: kv[1].get("auc", 0.0))
            print(f"seed {seed}: phi AUC {rows[-1]['target_scores']['phi']['auc']:.3f}, best target-only score "
                  f"{best[0]!r} AUC {best[1]['auc']:.3f} (d {best[1]['d']:.2f}); {rows[-1]['wall_s']:.0f} s at load "
                  f"{rows[-1]['load_1min_before']:.1f}", flush=True)
    result = {"benchmark": "bench_flagship_scores", "when": utc_now(), "host": host_info(), "target": "dpsgd_mnist",
              "population": POPULATION, "neighbours": NEIGHBOURS, "rows": rows}
    write_json(Path(args.json), result)
    return result


if __name__ == "__main__":
    main()
