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
which RMIA's offline ``a`` is chosen (:func:`trained_rmia_a`).

:func:`record_audit` is what :func:`audit.membership.runner.run_trained_membership` does particular to such a
model (its options, the queries, the attacks that need no retraining of it, its results); the runner does the
rest, on records as on texts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from tqdm.auto import tqdm

from attacks.lira import resolve_variance
from attacks.membership import AttackInputs, AttackOptions
from attacks.names import ATTACKS, LIRA_ATTACKS, REFERENCE_ATTACKS, TRAINED_ATTACKS, expand_attacks
from attacks.rmia import A_GRID, choose_offline_a, label_probability
from attacks.trained_membership import run_trained_attacks
from audit.errors import UserError
from audit.membership.detail import MembershipDetail
from audit.membership.options import MembershipOptions
from audit.membership.trained_results import Scored, TrainedFindings, attack_entry, trained_meaning, trained_table
from audit.results_header import ADD_REMOVE_RECORD, ResultsHeader, accountant
from audit.run_context import RunContext
from audit.run_results import RunResults
from audit.stats.outcome import AttackMetrics, EpsilonBound, Game, LastIterate
from audit.stats.split_check import SplitCheck
from targets.datasets import Dataset
from targets.plugins.loading import ModelPlugin
from targets.trained_model import TrainedModel, load_trained_model

#: Largest number of RMIA population samples ``Z`` taken from the user's population.
RMIA_POPULATION = 1000
#: Largest number of pool records the reference models are queried on for RMIA's calibration games.
CALIBRATION_ROWS = 2000
#: Reference models allowed by ``--references`` for a trained model.
TRAINED_REFERENCES = (0, 1, 2, 4)
#: RMIA offline parameter on a trained model with one reference model (no calibration game to choose it on)
#: unless --rmia-a is given: a = 1, p(x) = p_OUT(x) of the reference model.
TRAINED_RMIA_A = 1.0


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
                        f"reference models; use --attack {','.join(TRAINED_ATTACKS)}")
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


def trained_rmia_a(q: TrainedQueries, given: float | None) -> tuple[float, str]:
    """RMIA's offline ``a`` on a trained model and where it comes from: ``--rmia-a`` when given; with 2 or more
    reference models, chosen on their calibration games (each reference model the target of the others, on
    pool records; :func:`attacks.rmia.choose_offline_a` over the records another model left out), never on
    the audited records; with one, :data:`TRAINED_RMIA_A`."""
    if given is not None:
        return float(given), "given"
    if q.reference_calibration_lp is None:
        return TRAINED_RMIA_A, "fixed (one reference model: no calibration game)"
    logp = label_probability(q.reference_calibration_lp, q.calibration_labels)
    pop = label_probability(q.reference_population_lp, q.population_labels)
    R, c = q.calibration_in.shape
    try:
        a, _ = choose_offline_a(logp, q.calibration_in, pop, with_out_only=True)
    except UserError:  # too few pool records for a game of each reference model
        return TRAINED_RMIA_A, f"fixed: the {c} pool records leave a calibration game without members or non-members"
    return a, (f"{R} reference games on {c} pool records (each reference model the target of the others), "
               f"largest mean AUC over a = {A_GRID[0]:g}, {A_GRID[1]:g}, ..., {A_GRID[-1]:g}")


def trained_scores(names: tuple[str, ...], q: TrainedQueries, lira_variance: str,
                   rmia_a: float | None) -> dict[str, np.ndarray]:
    """Each attack's scores (n,) on the audited records (higher = member), by the scorers registered on
    ``"trained"`` records (:mod:`attacks.trained_membership`: loss, confidence, LiRA offline, RMIA offline), RMIA
    with offline parameter ``rmia_a`` (None: :data:`TRAINED_RMIA_A`; :func:`trained_rmia_a`)."""
    inp = AttackInputs(n_classes=q.target_lp.shape[-1], labels=q.labels, target_lp=q.target_lp,
                       reference_lp=q.reference_lp, population_labels=q.population_labels,
                       population_lp=q.population_lp, reference_population_lp=q.reference_population_lp)
    options = AttackOptions(lira_variance=lira_variance, rmia_a=TRAINED_RMIA_A if rmia_a is None else rmia_a)
    return run_trained_attacks(names, inp, options)


def _trained_attack_entries(scores: dict[str, np.ndarray], q: TrainedQueries, split: SplitCheck, opts,
                            references: int, rmia_a: tuple[float, str] | None) -> dict[str, AttackMetrics]:
    """Each attack's results entry (:func:`audit.membership.trained_results.attack_entry`) with what it used: the
    reference models, LiRA's variance, RMIA's ``a`` and where it comes from."""
    attacks_out = {}
    for name, s in scores.items():
        a, a_chosen_on = rmia_a if name == "rmia_offline" else (None, None)
        attacks_out[name] = replace(
            attack_entry(s, q.member, split, opts.confidence, ATTACKS[name]),
            reference_models=references if name in REFERENCE_ATTACKS else None,
            lira_variance=resolve_variance(opts.lira_variance, references) if name in LIRA_ATTACKS else None,
            a=a, a_chosen_on=a_chosen_on)
    return attacks_out


@dataclass(frozen=True, eq=False)
class RecordAudit:
    """What ``run membership`` does particular to a trained classifier (its labelled records): the model, its
    reference models, the attacks it runs (``names``) and those it does not (``skipped``, with why)."""

    subject: TrainedModel
    references: int
    names: tuple[str, ...]
    skipped: dict[str, str]
    stages = None  # no progress lines: the records' stages are timed only

    def split_line(self) -> None:
        """No progress line for the blind split check of records."""
        return None

    def prepare(self, ctx: RunContext) -> None:
        """Nothing: the model exists."""

    def score(self, ctx: RunContext, split: SplitCheck, opts: MembershipOptions) -> Scored:
        """The model (and its reference models) queried on every member and non-member, and each attack's scores
        and entry (:func:`trained_scores`)."""
        names, references = self.names, self.references
        with ctx.stage("queries"):
            q = query_trained(self.subject, references, opts.seed, opts.quiet)
        rmia_a = trained_rmia_a(q, opts.rmia_a) if "rmia_offline" in names else None
        scores = trained_scores(names, q, opts.lira_variance, rmia_a[0] if rmia_a else None)
        attacks_out = _trained_attack_entries(scores, q, split, opts, references, rmia_a)
        return Scored(scores=scores, member=q.member, attacks=attacks_out, skipped=self.skipped, detail=q)

    def results(self, opts: MembershipOptions, scored: Scored, found: TrainedFindings) -> RunResults:
        """The typed results of the audit (:func:`record_results`)."""
        return record_results(opts, self.subject, scored.detail, found)


def record_audit(opts: MembershipOptions, plugin: ModelPlugin) -> RecordAudit:
    """The audit of the trained model of ``plugin`` (``{"kind": "model"}``): its options checked (one-line
    errors), the model loaded and validated, its reference models and attacks chosen."""
    if opts.epsilon is not None or opts.delta is not None:
        raise UserError("--epsilon/--delta do not apply to a model target: its factory states the claim")
    if opts.canaries is not None or opts.shadows is not None:
        raise UserError("--canaries/--shadows do not apply to a trained model: it is audited on its own members and "
                        "non-members")
    model = load_trained_model(plugin, opts.data_dir)
    references = default_references(model) if opts.references is None else opts.references
    check_trained_references(model, references)
    names, skipped = trained_attacks(expand_attacks(tuple(opts.attacks)), references)
    return RecordAudit(model, references, names, skipped)


def record_results(opts: MembershipOptions, model: TrainedModel, q: TrainedQueries,
                   found: TrainedFindings) -> RunResults:
    """The typed results of a trained-model audit: the common header
    (:func:`audit.results_header.results_header`), then the split check, the attacks, the game and the
    comparison with the claim."""
    split, attacks_out, delta, judgement = found.split, found.attacks, found.delta, found.judgement
    best = judgement.best_lower_bound
    header = ResultsHeader(
        description=model.description, dataset=model.members.name, dataset_source=model.members.source,
        model={"arch": model.model_kind, "member_accuracy": q.accuracy["members"],
               "nonmember_accuracy": q.accuracy["nonmembers"]},
        neighbouring=ADD_REMOVE_RECORD, delta=delta, confidence=opts.confidence,
        primary_attack=best.attack if best else None, epsilon_theory=judgement.epsilon_theory,
        accountant=accountant(model.claim), params=model.params)
    game = Game(kind="trained model", members=len(model.members), nonmembers=len(model.nonmembers),
                records=f"the {len(model.members)} members and {len(model.nonmembers)} non-members the user gave "
                        f"({model.members.source}; {model.nonmembers.source})",
                membership=model.membership, membership_note=model.membership_note,
                reference_models=found.references, reference_records=q.reference_records)
    detail = MembershipDetail(epsilon_bound=EpsilonBound(allowed=found.allowed, reason=found.why),
                              attacks_not_run=found.skipped, split_check=split, trained_model=model.to_dict(),
                              meaning=trained_meaning(model, split, attacks_out, best, delta))
    return RunResults(
        header=header, judgement=judgement,
        last_iterate=LastIterate.of(model.params, delta, ADD_REMOVE_RECORD, model.claim),
        attacks=attacks_out, tables=(trained_table(attacks_out, split),), game=game,
        detail=detail, quick=opts.quick)
