"""The membership attacks on a classifier that exists (``run membership`` of a trained model), registered on
``"trained"`` records (:func:`attacks.membership.register_scorer`, :data:`attacks.names.RECORD_KINDS`): the
model is queried on its own members and non-members, and its reference models, trained on population records
that are neither, are OUT for every audited record, so the attacks are the offline ones. Each declares in
:data:`attacks.names.ATTACK_SPECS` the reference models it needs there (``trained_references``).

* Loss [Yeom et al. 2018] and confidence [Salem et al. 2019]: the model's outputs only.
* LiRA offline [Carlini et al. 2022, Eq. 4 and Sec. IV-C]: the one-sided test against the reference models'
  OUT Gaussian of the logit-scaled confidence (:func:`attacks.lira.lira_offline_scores`).
* RMIA offline [Zarifzadeh, Liu, Shokri 2024, Eq. 5]: every reference model OUT, offline parameter ``a`` as
  given (:attr:`attacks.membership.AttackOptions.rmia_a`; the runner chooses it, ``audit.membership.trained``).

Sources: docs/references.md, "Membership attacks".
"""

from __future__ import annotations

import numpy as np

from attacks.lira import lira_offline_scores, logit_confidence
from attacks.membership import SCORERS, AttackInputs, AttackOptions, confidence_scores, loss_scores, register_scorer
from attacks.rmia import label_probability, rmia_scores

__all__ = ["run_trained_attacks"]


@register_scorer("loss", records="trained")
def _loss_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, np.ndarray]:
    return {"loss": loss_scores(inp.target_lp, inp.labels)}


@register_scorer("confidence", records="trained")
def _confidence_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, np.ndarray]:
    return {"confidence": confidence_scores(inp.target_lp)}


@register_scorer("lira_offline", records="trained")
def _lira_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, np.ndarray]:
    return {"lira_offline": lira_offline_scores(logit_confidence(inp.target_lp, inp.labels),
                                                logit_confidence(inp.reference_lp, inp.labels), options.lira_variance)}


@register_scorer("rmia_offline", records="trained")
def _rmia_attack(chosen: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, np.ndarray]:
    every_out = np.zeros(inp.reference_lp.shape[:2], dtype=bool)
    return {"rmia_offline": rmia_scores(label_probability(inp.target_lp, inp.labels),
                                        label_probability(inp.reference_lp, inp.labels), every_out,
                                        label_probability(inp.population_lp, inp.population_labels),
                                        label_probability(inp.reference_population_lp, inp.population_labels),
                                        options.rmia_a)}


def run_trained_attacks(names: tuple[str, ...], inp: AttackInputs, options: AttackOptions) -> dict[str, np.ndarray]:
    """Score a trained model's members and non-members with the attacks ``names`` (each registered on
    ``"trained"`` records; the caller checked their reference models, :data:`attacks.names.TRAINED_ATTACKS`).

    Args:
        names: the attacks to run.
        inp: the model's log-probabilities on the records (``target_lp``, ``labels``), and, for LiRA and RMIA,
            the reference models' (``reference_lp``) and RMIA's population samples under both.
        options: LiRA's variance and RMIA's offline ``a`` (set: it is never chosen here).

    Returns:
        Each attack's scores (one per record, higher = more likely a member), in the order of ``names``.
    """
    out: dict[str, np.ndarray] = {}
    for registered, scorer in SCORERS["trained"].items():
        chosen = tuple(name for name in registered if name in names)
        if chosen:
            out |= scorer(chosen, inp, options)
    return {name: out[name] for name in names}
