"""Adapter of ``run membership`` for a model that already exists (``--target module:factory`` returning
``{"kind": "model", ...}``, :mod:`targets.trained_model`): the model is queried, never retrained.

What it produces (:class:`TrainedQueries`): the model's log-probabilities on every member and non-member
the user gave (no cap; batched, with a progress bar), and, when the user's ``train`` and ``"population"``
records are given, those of ``R`` reference models on the same records.

Reference models [Carlini et al. 2022, Sec. IV-C "offline"; Zarifzadeh, Liu, Shokri 2024, Sec. 3
"offline"]: the population is split by a seeded permutation into RMIA's population samples ``Z`` (the
first :data:`RMIA_POPULATION` records at most, a fifth of the population at most: no model trains on
them) and a training pool; reference model ``r`` is the user's ``train`` on its own random subset of the
pool, as many records as the model was trained on (``training_size``, default the members; at most half
the pool when ``R >= 2``, so the references differ in
data, not only in seed). No reference model sees a member or a non-member, so every reference model is
OUT for every audited record: the offline attacks (LiRA offline, RMIA offline) are the ones this
allows; the online attacks and the shadow attack need models trained on the audited records or like the
target, which a trained-model audit does not have. With 2 or more reference models, each is also queried on
up to :data:`CALIBRATION_ROWS` pool records: the games in which each plays the target of the others, on
which RMIA's offline ``a`` is chosen (:func:`audit.membership.trained_runner.trained_rmia_a`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from audit.errors import UserError
from targets.datasets import Dataset
from targets.trained_model import TrainedModel

#: Largest number of RMIA population samples ``Z`` taken from the user's population.
RMIA_POPULATION = 1000
#: Largest number of pool records the reference models are queried on for RMIA's calibration games.
CALIBRATION_ROWS = 2000
#: Attacks a trained model supports, by the reference models they need (0: none; LiRA offline fits a
#: variance, so 2).
TRAINED_ATTACKS = {"loss": 0, "confidence": 0, "rmia_offline": 1, "lira_offline": 2}
#: Reference models allowed by ``--references`` for a trained model.
TRAINED_REFERENCES = (0, 1, 2, 4)


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainedQueries:
    """Outputs of a trained model (and its reference models) on the audited records.

    ``labels`` (n,) and ``member`` (n,) (members first, then non-members); ``target_lp`` (n, C)
    log-probabilities; ``reference_lp`` (R, n, C) or None; RMIA's population samples: ``population_labels``
    (Z,), ``population_lp`` (Z, C) under the target and ``reference_population_lp`` (R, Z, C).
    ``reference_records`` says what the reference models trained on. With 2 or more reference models, their
    calibration games (each in turn the target, the others its references; :func:`attacks.rmia.choose_offline_a`):
    ``calibration_labels`` (c,) of pool records, ``calibration_in`` (R, c) which reference trained on which, and
    ``reference_calibration_lp`` (R, c, C); None otherwise.
    """

    labels: np.ndarray
    member: np.ndarray
    target_lp: np.ndarray
    reference_lp: np.ndarray | None
    population_labels: np.ndarray | None
    population_lp: np.ndarray | None
    reference_population_lp: np.ndarray | None
    reference_records: str
    accuracy: dict
    calibration_labels: np.ndarray | None = None
    calibration_in: np.ndarray | None = None
    reference_calibration_lp: np.ndarray | None = None


def _log(proba: np.ndarray) -> np.ndarray:
    return np.log(np.clip(proba, 1e-300, None))


def _query(fn, X: np.ndarray, desc: str, quiet: bool) -> np.ndarray:
    """Log-probabilities of the batched probability function ``fn`` on ``X``, with a tqdm bar."""
    with tqdm(total=len(X), desc=desc, unit="record", disable=quiet, leave=False) as bar:
        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        return _log(fn(X, progress))


def default_references(model: TrainedModel) -> int:
    """2 when the model can have reference models (its ``train`` and a population), else 0."""
    return 2 if model.train is not None and model.population is not None else 0


def check_trained_references(model: TrainedModel, references: int) -> None:
    """UserError unless ``references`` reference models can be trained for ``model``."""
    if references not in TRAINED_REFERENCES:
        raise UserError(f"a trained model is audited with {', '.join(map(str, TRAINED_REFERENCES))} reference models, "
                        f"got --references {references}")
    if references and model.train is None:
        raise UserError(f"--references {references} needs reference models, but model target {model.spec} has no "
                        f"'train'; add train(X, y, seed) to its dict or pass --references 0")
    if references and model.population is None:
        raise UserError(f"--references {references} needs records to train reference models on, but model target "
                        f"{model.spec} has no 'population'; add records from the members' distribution that are "
                        f"in neither set and were not trained on, or pass --references 0")


def trained_attacks(requested: tuple[str, ...], references: int) -> tuple[tuple[str, ...], dict[str, str]]:
    """The requested attacks a trained model with ``references`` reference models supports, and why each
    other requested attack is not run."""
    run, skipped = [], {}
    for name in requested:
        need = TRAINED_ATTACKS.get(name)
        if need is None:
            skipped[name] = ("needs models trained like the target on the audited records (shadow models or IN "
                             "reference models), which a trained-model audit does not train")
        elif references < need:
            skipped[name] = f"needs {need} reference model(s); pass --references {max(need, 2)}"
        else:
            run.append(name)
    if not run:
        raise UserError(f"none of the attacks {', '.join(requested)} applies to a trained model with {references} "
                        f"reference models; use --attack loss,confidence,rmia_offline,lira_offline")
    return tuple(run), skipped


def _pool_split(population: Dataset, references: int, n_members: int,
                seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """RMIA's population rows and each reference model's training rows (module docstring)."""
    rng = np.random.default_rng([seed, 21])
    order = rng.permutation(len(population))
    n_z = min(RMIA_POPULATION, len(population) // 5)
    z, pool = order[:n_z], order[n_z:]
    size = min(n_members, len(pool) // 2 if references >= 2 else len(pool))
    if size < 1 or n_z < 1:
        raise UserError(f"the population has {len(population)} records, too few for reference models; give at "
                        f"least 10")
    return z, [np.sort(rng.choice(pool, size=size, replace=False)) for _ in range(references)]


def query_trained(model: TrainedModel, references: int, seed: int, quiet: bool = False) -> TrainedQueries:
    """Query ``model`` on all its members and non-members and, with ``references`` > 0, train that many
    reference models with the user's ``train`` on population records and query them too."""
    X = np.concatenate([model.members.X, model.nonmembers.X])
    labels = np.concatenate([model.members.y, model.nonmembers.y])
    member = np.concatenate([np.ones(len(model.members), bool), np.zeros(len(model.nonmembers), bool)])
    target_lp = _query(model.predict_proba, X, "querying the model", quiet)
    correct = target_lp.argmax(axis=1) == labels
    accuracy = {"members": float(correct[member].mean()), "nonmembers": float(correct[~member].mean())}
    if not references:
        return TrainedQueries(labels=labels, member=member, target_lp=target_lp, reference_lp=None,
                              population_labels=None, population_lp=None, reference_population_lp=None,
                              reference_records="no reference models", accuracy=accuracy)
    population = model.population
    z, rows = _pool_split(population, references, model.training_size or len(model.members), seed)
    seeds = np.random.SeedSequence([seed, 22]).generate_state(references).tolist()
    pop_X, pop_y = population.X[z], population.y[z]
    cal = _calibration_rows(len(population), z, references, seed)
    ref_lp, ref_pop_lp, ref_cal_lp = [], [], []
    for r, (part, s) in enumerate(zip(rows, seeds, strict=True)):
        if not quiet:
            print(f"training reference model {r + 1}/{references} on {len(part)} population records", flush=True)
        fn = model.fit_reference(population.X[part], population.y[part], int(s))
        ref_lp.append(_query(fn, X, f"querying reference model {r + 1}", quiet))
        ref_pop_lp.append(_query(fn, pop_X, f"reference model {r + 1} on the population", quiet))
        if cal is not None:
            ref_cal_lp.append(_query(fn, population.X[cal], f"reference model {r + 1} on its calibration games", quiet))
    text = (f"{references} reference model(s), each the user's train on its own random {len(rows[0])} of "
            f"{len(population) - len(z)} population records (none a member or non-member); {len(z)} other "
            f"population records are RMIA's population samples, trained on by no model")
    population_lp = _query(model.predict_proba, pop_X, "querying the model on the population", quiet)
    calibration = {} if cal is None else {
        "calibration_labels": population.y[cal], "calibration_in": np.stack([np.isin(cal, part) for part in rows]),
        "reference_calibration_lp": np.stack(ref_cal_lp)}
    return TrainedQueries(labels=labels, member=member, target_lp=target_lp, reference_lp=np.stack(ref_lp),
                          population_labels=pop_y, population_lp=population_lp,
                          reference_population_lp=np.stack(ref_pop_lp), reference_records=text, accuracy=accuracy,
                          **calibration)


def _calibration_rows(n_population: int, z: np.ndarray, references: int, seed: int) -> np.ndarray | None:
    """Pool records (not RMIA's population samples) for the reference models' calibration games: at most
    :data:`CALIBRATION_ROWS`, in a seeded random choice; None with fewer than 2 reference models."""
    if references < 2:
        return None
    pool = np.setdiff1d(np.arange(n_population), z)
    if len(pool) <= CALIBRATION_ROWS:
        return pool
    return np.sort(np.random.default_rng([seed, 23]).choice(pool, size=CALIBRATION_ROWS, replace=False))
