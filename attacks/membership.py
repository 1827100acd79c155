"""Black-box membership-inference scores. Higher score = "more likely a member" everywhere.

* Loss threshold [Yeom et al. 2018, sec. 3.2]: the score is the log-probability the model gives to
  the example's (training) label, i.e. minus its cross-entropy loss.
* Confidence baseline [Salem et al. 2019, "ML-Leaks", adversary 3]: the model's top-1
  probability ``max_c p(c | x)``, without the label.
* Shadow models [Shokri et al. 2017, sec. IV]: K shadow models trained like the target on data
  disjoint from the target's training set, drawn from the same distribution, provide labelled
  (member / non-member) prediction vectors; one attack classifier per class learns to tell them
  apart from the prediction vector sorted in decreasing order. Our canaries may carry wrong
  labels, so each feature vector also holds the log-probability of the example's label (which
  class the attack model belongs to is the label itself, as in the paper).
* LiRA online / offline [Carlini et al. 2022]: see :mod:`attacks.lira`.
* RMIA online / offline [Zarifzadeh, Liu, Shokri 2024]: see :mod:`attacks.rmia`.

:func:`run_attacks` is the Python API: it takes the target's, the shadow models' and the reference
models' log-probabilities and returns, per attack, the target's scores and the *calibration games*
(scores with known membership, never the target's) on which guess counts and thresholds may be
chosen.

Adversary knowledge. Loss and confidence: only the target's outputs (and the label for loss).
Shadow: in addition, data from the target's distribution disjoint from its training set, the
training algorithm, and the canary construction (to build shadow canaries of the same kind).
LiRA and RMIA: in addition, the candidate examples themselves, on which it trains reference models
(:mod:`attacks.lira`); RMIA also population samples that no model trained on (:mod:`attacks.rmia`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from attacks.lira import lira_leave_one_out, lira_scores, logit_confidence
from attacks.names import ATTACK_SPECS, LIRA_ATTACKS, RECORD_KINDS, RMIA_ATTACKS, check_references, expand_attacks
from attacks.rmia import A_GRID, choose_offline_a, label_probability, leave_one_out, rmia_scores
from audit.errors import UserError


def loss_scores(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Yeom et al.'s loss attack: ``log p(label | x)`` per model and example.

    ``log_probs`` is (..., n, C) log-softmax output, ``labels`` (n,); returns (..., n).

    Args:
        log_probs: log-softmax outputs, (..., n, C).
        labels: the examples' labels, (n,).

    Returns:
        The scores, (..., n), higher = more likely a member.
    """
    index = np.broadcast_to(labels.astype(np.int64), log_probs.shape[:-1])[..., None]
    return np.take_along_axis(log_probs, index, axis=-1)[..., 0]


def confidence_scores(log_probs: np.ndarray) -> np.ndarray:
    """Salem et al.'s top-1 confidence baseline: ``max_c p(c | x)`` as a log-probability, (..., n, C) -> (..., n).

    Args:
        log_probs: log-softmax outputs, (..., n, C).

    Returns:
        The scores, (..., n).
    """
    return np.max(log_probs, axis=-1)


def shadow_features(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Shokri et al.'s attack input: the probability vector sorted in decreasing order, plus the
    log-probability of the label. ``log_probs`` (n, C) -> features (n, C + 1).

    Args:
        log_probs: log-softmax outputs, (n, C).
        labels: the examples' labels, (n,).

    Returns:
        The features, (n, C + 1).
    """
    probs = np.exp(log_probs)
    sorted_probs = -np.sort(-probs, axis=1)
    label_logp = log_probs[np.arange(labels.shape[0]), labels]
    return np.column_stack([sorted_probs, np.maximum(label_logp, -50.0)])


class ShadowAttack:
    """Per-class attack classifiers trained on shadow models' member / non-member outputs.

    Classes with too few shadow examples of both kinds fall back to one classifier pooled over
    all classes.

    Args:
        n_classes: the number of classes C.
        min_per_class: the fewest shadow examples of each kind a class needs for its own classifier.
    """

    def __init__(self, n_classes: int, min_per_class: int = 20):
        self.n_classes = n_classes
        self.min_per_class = min_per_class
        self.models: dict[int, object] = {}
        self.pooled = None

    def _classifier(self):
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))

    def fit(self, features: np.ndarray, labels: np.ndarray, member: np.ndarray) -> ShadowAttack:
        """Fit on shadow outputs: ``features`` (n, F), the examples' ``labels`` (n,), ``member`` (n,) bool.

        Args:
            features: :func:`shadow_features` of the shadow examples, (n, F).
            labels: the examples' labels, (n,).
            member: whether each example trained its shadow model, (n,) bool.

        Returns:
            The fitted attack (self).

        Raises:
            ValueError: no members or no non-members.
        """
        member = member.astype(int)
        if member.min() == member.max():
            raise ValueError("the shadow attack needs both members and non-members among the shadow examples")
        self.pooled = self._classifier().fit(features, member)
        for c in range(self.n_classes):
            sel = labels == c
            if sel.sum() >= self.min_per_class and 0 < member[sel].sum() < sel.sum():
                self.models[c] = self._classifier().fit(features[sel], member[sel])
        return self

    def score(self, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Estimated probability of membership per example (higher = member).

        Args:
            features: :func:`shadow_features` of the target's candidates, (n, F).
            labels: the candidates' labels, (n,).

        Returns:
            The scores, (n,).
        """
        scores = self.pooled.predict_proba(features)[:, 1]
        for c, model in self.models.items():
            sel = labels == c
            if sel.any():
                scores[sel] = model.predict_proba(features[sel])[:, 1]
        return scores


@dataclass(frozen=True, eq=False, kw_only=True)
class AttackInputs:
    """Model outputs the attacks consume (log-softmax arrays; ``m`` candidates, ``C`` classes).

    ``target_lp`` (m, C): the target on its candidates, whose training labels are ``labels`` (m,).
    ``shadow_lp`` (K, m', C): shadow models on their own canaries (labels ``shadow_labels``,
    membership ``shadow_in`` (K, m')). ``reference_lp`` (R, m, C): reference models on the
    target's candidates, membership ``reference_in`` (R, m); needed by LiRA and RMIA only.
    RMIA also needs population samples that no model trained on (labels ``population_labels`` (Z,)):
    the target's outputs on them ``population_lp`` (Z, C), the reference models' (R, Z, C) and, with
    a single reference model, the shadow models' ``shadow_population_lp`` (K, Z, C).
    """

    n_classes: int
    labels: np.ndarray
    target_lp: np.ndarray
    shadow_labels: np.ndarray | None = None
    shadow_lp: np.ndarray | None = None
    shadow_in: np.ndarray | None = None
    reference_lp: np.ndarray | None = None
    reference_in: np.ndarray | None = None
    population_labels: np.ndarray | None = None
    population_lp: np.ndarray | None = None
    reference_population_lp: np.ndarray | None = None
    shadow_population_lp: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class AttackScores:
    """One attack's scores on the target (m,) and its calibration games: ``calibration`` (G, m')
    scores with membership ``calibration_in`` (G, m'), from shadow or reference models only."""

    target: np.ndarray
    calibration: np.ndarray
    calibration_in: np.ndarray
    calibrated_on: str
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AttackOptions:
    """The attacks' own options: LiRA's Gaussian variance (:data:`attacks.names.VARIANCES`) and RMIA's
    offline ``a`` (None: chosen on the calibration games)."""

    lira_variance: str = "auto"
    rmia_a: float | None = None


#: A scorer: ``scorer(chosen, inp, options) -> {name: AttackScores}`` for the attacks ``chosen`` (those it
#: registered for that the caller asked for); on texts ``scorer(chosen, inp) -> {name: scores}``
#: (:mod:`attacks.lm_membership`).
Scorer = Callable[..., dict]
#: The registered scorers, by what they score (:data:`attacks.names.RECORD_KINDS`), each in the order they run
#: (as Opacus registers its grad samplers by layer type).
SCORERS: dict[str, dict[tuple[str, ...], Scorer]] = {kind: {} for kind in RECORD_KINDS}


def register_scorer(*names: str, records: str = "records") -> Callable[[Scorer], Scorer]:
    """Decorator registering the scorer of the attacks ``names`` on ``records`` (declared in
    :data:`attacks.names.ATTACK_SPECS` for them); attacks that share their work (LiRA online and offline)
    register one scorer together.

    Args:
        *names: the attacks the scorer scores.
        records: what it scores, ``"records"`` or ``"texts"`` (:data:`attacks.names.RECORD_KINDS`).

    Returns:
        The decorator.

    Raises:
        ValueError: a name not declared in :data:`attacks.names.ATTACK_SPECS` for ``records``.
    """
    unknown = [n for n in names if n not in ATTACK_SPECS or records not in ATTACK_SPECS[n].records]
    if unknown:
        raise ValueError(f"declare {unknown} in attacks.names.ATTACK_SPECS (on {records}) before registering a "
                         f"scorer")

    def register(scorer: Scorer) -> Scorer:
        SCORERS[records][names] = scorer
        return scorer

    return register


@register_scorer("loss")
def _loss_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, AttackScores]:
    K = inp.shadow_lp.shape[0]
    return {"loss": AttackScores(loss_scores(inp.target_lp, inp.labels), loss_scores(inp.shadow_lp, inp.shadow_labels),
                                 inp.shadow_in, f"{K} shadow games")}


@register_scorer("confidence")
def _confidence_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, AttackScores]:
    K = inp.shadow_lp.shape[0]
    return {"confidence": AttackScores(confidence_scores(inp.target_lp), confidence_scores(inp.shadow_lp),
                                       inp.shadow_in, f"{K} shadow games")}


@register_scorer("shadow")
def _shadow_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, AttackScores]:
    K = inp.shadow_lp.shape[0]
    feats = np.stack([shadow_features(lp, inp.shadow_labels) for lp in inp.shadow_lp])
    labels = inp.shadow_labels
    loo = []
    for k in range(K):  # leave-one-shadow-out scores of each shadow game
        others = [j for j in range(K) if j != k]
        attack = ShadowAttack(inp.n_classes).fit(np.concatenate(feats[others]), np.tile(labels, len(others)),
                                                 np.concatenate(inp.shadow_in[others]))
        loo.append(attack.score(feats[k], labels))
    attack = ShadowAttack(inp.n_classes).fit(np.concatenate(feats), np.tile(labels, K), np.concatenate(inp.shadow_in))
    target = attack.score(shadow_features(inp.target_lp, inp.labels), inp.labels)
    return {"shadow": AttackScores(target, np.stack(loo), inp.shadow_in, f"{K} shadow games (leave-one-shadow-out)")}


@register_scorer(*RMIA_ATTACKS)
def _rmia_attack(names: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, AttackScores]:
    """RMIA online/offline (:mod:`attacks.rmia`): target scores and calibration games; offline ``a`` chosen
    on the calibration games by mean AUC unless given."""
    if inp.population_lp is None or inp.population_labels is None or inp.reference_population_lp is None:
        raise UserError("RMIA needs population samples scored by the target and the reference models")
    pop_labels = inp.population_labels
    ref = label_probability(inp.reference_lp, inp.labels)
    ref_pop = label_probability(inp.reference_population_lp, pop_labels)
    R = ref.shape[0]
    if R >= 2:  # leave-one-reference-out games on the target's candidates
        games = (ref, inp.reference_in, ref_pop, f"{R} reference games (leave-one-reference-out)")
    else:  # one reference model: the shadow models play target and references on their own canaries
        if inp.shadow_lp is None or inp.shadow_population_lp is None:
            raise UserError("RMIA with one reference model calibrates on shadow models; train shadow models")
        games = (label_probability(inp.shadow_lp, inp.shadow_labels), inp.shadow_in,
                 label_probability(inp.shadow_population_lp, pop_labels),
                 f"{inp.shadow_lp.shape[0]} shadow games (leave-one-shadow-out as references)")
    logp, member, pop_logp, text = games
    target = label_probability(inp.target_lp, inp.labels)
    target_pop = label_probability(inp.population_lp, pop_labels)
    out, rmia_a = {}, options.rmia_a
    for name in names:
        if name == "rmia_online":
            a, params = None, {}
        elif rmia_a is not None:
            a, params = float(rmia_a), {"a": float(rmia_a), "a_chosen_on": "given"}
        else:
            a, _ = choose_offline_a(logp, member, pop_logp)
            params = {"a": float(a), "a_chosen_on": f"{text}, largest mean AUC over a = {A_GRID[0]:g}, {A_GRID[1]:g}, "
                                                     f"..., {A_GRID[-1]:g}"}
        out[name] = AttackScores(rmia_scores(target, ref, inp.reference_in, target_pop, ref_pop, a),
                                 leave_one_out(logp, member, pop_logp, a), member, text,
                                 params | {"population": int(target_pop.shape[-1])})
    return out


@register_scorer(*LIRA_ATTACKS)
def _lira_attack(names: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, AttackScores]:
    """LiRA online/offline (:mod:`attacks.lira`): one Gaussian fit per candidate serves both."""
    ref_phi = logit_confidence(inp.reference_lp, inp.labels)
    target = lira_scores(logit_confidence(inp.target_lp, inp.labels), ref_phi, inp.reference_in,
                         options.lira_variance)
    loo = lira_leave_one_out(ref_phi, inp.reference_in, options.lira_variance)
    R = ref_phi.shape[0]
    return {name: AttackScores(target[key], loo[key], inp.reference_in,
                               f"{R} reference games (leave-one-reference-out)")
            for name, key in (("lira_online", "online"), ("lira_offline", "offline")) if name in names}


def run_attacks(names: tuple[str, ...] | list[str], inp: AttackInputs, lira_variance: str = "auto",
                rmia_a: float | None = None) -> dict[str, AttackScores]:
    """Score the target's candidates with every attack in ``names`` (see :data:`attacks.names.ATTACKS`).

    Loss, confidence and shadow calibrate on the shadow games; LiRA and RMIA on leave-one-out games
    over the reference models [Carlini et al. 2022, Sec. V-A] (RMIA with one reference model: over the
    shadow models). ``rmia_a`` fixes RMIA's offline parameter (default: chosen on the calibration
    games). Raises UserError when an attack's inputs are missing.

    Args:
        names: the attacks to run.
        inp: the model outputs they consume.
        lira_variance: LiRA's variance (:data:`attacks.names.VARIANCES`).
        rmia_a: RMIA's offline parameter, or None.

    Returns:
        Each attack's scores and calibration games, by name.

    Raises:
        UserError: too few shadow or reference models, or population samples missing, for an attack.
    """
    names = expand_attacks(tuple(names))
    needs_shadow = any(ATTACK_SPECS[n].calibration == "shadow" for n in names)
    if needs_shadow and (inp.shadow_lp is None or inp.shadow_in is None or inp.shadow_labels is None):
        raise UserError("the shadow, loss and confidence attacks need shadow-model outputs; train shadow models")
    if needs_shadow and inp.shadow_lp.shape[0] < 2:
        raise UserError(f"need at least 2 shadow models, got {inp.shadow_lp.shape[0]}; raise --shadows")
    if any(ATTACK_SPECS[n].calibration == "references" for n in names):
        if inp.reference_lp is None or inp.reference_in is None:
            raise UserError("LiRA and RMIA need reference models trained on the target's candidates; "
                            "raise --references")
        check_references(names, inp.reference_lp.shape[0])
    options = AttackOptions(lira_variance=lira_variance, rmia_a=rmia_a)
    out: dict[str, AttackScores] = {}
    for registered, scorer in SCORERS["records"].items():
        chosen = tuple(n for n in registered if n in names)
        if chosen:
            out |= scorer(chosen, inp, options)
    return {name: out[name] for name in names}
