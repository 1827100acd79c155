"""Names of the membership attacks and their options, importable without numpy or scikit-learn
(the command line builds its parser from them; :mod:`attacks.membership` runs the attacks)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.errors import UserError

#: What an attack scores: ``"records"``, labelled records through the model's class log-probabilities in the
#: one-run canary game (``run membership`` of a classifier the audit trains, with shadow and reference models
#: trained on the candidates); ``"trained"``, the labelled members and non-members of a classifier that exists
#: (``run membership`` of a trained model: only reference models that are OUT for every record, so the offline
#: attacks); or ``"texts"``, texts through the model's per-token log-probabilities (``run membership`` of a
#: language model).
RECORD_KINDS = ("records", "trained", "texts")
#: What an attack on texts may need of the target beyond its per-token log-probabilities (the fields of
#: :class:`attacks.lm_membership.TextInputs`): the next-token moments, the base model before fine-tuning, or
#: reference models trained like the target on population texts.
TEXT_NEEDS = ("moments", "base", "references")


@dataclass(frozen=True)
class AttackSpec:
    """What the command line and the runners need to know of a membership attack (its scores are
    registered in :mod:`attacks.membership` and, on texts, :mod:`attacks.lm_membership`:
    :func:`attacks.membership.register_scorer`).

    Attributes:
        description: One line with its paper (``list``, ``--help``, results.json).
        calibration: The models its calibration games are played on: ``"shadow"`` or ``"references"``
            (reference models trained on the target's candidates); records only.
        group: The ``--attack`` group it belongs to (``lira``, ``rmia``), or None.
        population: Whether it needs population samples scored by every model (RMIA).
        records: What it scores (:data:`RECORD_KINDS`).
        on_texts: Its description on texts where it scores both records and texts (``loss``: the same attack,
            minus the model's loss on the record, read from the label's log-probability of a record and from
            the mean token log-probability of a text); None otherwise.
        needs: On texts, what it needs beyond the target's log-probabilities (one of :data:`TEXT_NEEDS`), or None.
        trained_references: On a trained model (``"trained"`` in ``records``), the reference models it needs
            (RMIA offline one; LiRA offline two, to fit a variance; 0: none).
    """

    description: str
    calibration: str = "shadow"
    group: str | None = None
    population: bool = False
    records: tuple[str, ...] = ("records",)
    on_texts: str | None = None
    needs: str | None = None
    trained_references: int = 0

    def __post_init__(self) -> None:
        if not set(self.records) <= set(RECORD_KINDS) or self.needs not in (None, *TEXT_NEEDS):
            raise ValueError(f"an attack scores {RECORD_KINDS} and needs one of {TEXT_NEEDS} or nothing")
        if self.trained_references and "trained" not in self.records:
            raise ValueError("only an attack on a trained model needs reference models there")


def _on_texts(description: str, needs: str | None = None) -> AttackSpec:
    """The declaration of an attack on texts only."""
    return AttackSpec(description, records=("texts",), needs=needs)


#: Membership attacks (results.json names), in the order they are run and reported: on records those
#: ``python -m audit run membership --attack`` takes, on texts (a language model) each that the target
#: supports. ``loss`` is one attack on both, minus the model's loss on the record (Yeom et al. 2018), its
#: formula read from what the record is (:attr:`AttackSpec.on_texts`).
ATTACK_SPECS = {
    "shadow": AttackSpec("shadow-model attack, per-class classifiers on sorted prediction vectors (Shokri et al. "
                         "2017)"),
    "lira_online": AttackSpec("LiRA online: likelihood ratio of per-example IN/OUT Gaussians of the logit-scaled "
                              "confidence (Carlini et al. 2022)", "references", "lira"),
    "lira_offline": AttackSpec("LiRA offline: one-sided test against the per-example OUT Gaussian (Carlini et al. "
                               "2022)", "references", "lira", records=("records", "trained"), trained_references=2),
    "rmia_online": AttackSpec("RMIA online: fraction of population samples whose pairwise likelihood ratio the "
                              "candidate dominates, p(x) from all reference models (Zarifzadeh et al. 2024)",
                              "references", "rmia", population=True),
    "rmia_offline": AttackSpec("RMIA offline: as rmia_online with p(x) = (1+a)/2 p_OUT(x) + (1-a)/2 from the "
                               "reference models that left the candidate out (Zarifzadeh et al. 2024)",
                               "references", "rmia", population=True, records=("records", "trained"),
                               trained_references=1),
    "loss": AttackSpec("loss threshold: log-probability of the label (Yeom et al. 2018)", records=RECORD_KINDS,
                       on_texts="mean token log-probability of the text (Yeom et al. 2018; Carlini et al. 2021)"),
    "confidence": AttackSpec("confidence threshold: top-1 probability, label not used (Salem et al. 2019)",
                             records=("records", "trained")),
    "zlib": _on_texts("log-perplexity over the zlib entropy of the text (Carlini et al. 2021)"),
    "min_k": _on_texts("Min-K%: mean of the 20% lowest token log-probabilities (Shi et al. 2024)"),
    "min_k_plus_plus": _on_texts("Min-K%++: Min-K% of token log-probabilities standardised by the next-token "
                                 "distribution (Zhang et al. 2025); needs the model's moments", "moments"),
    "reference_base": _on_texts("loss minus the base model's (before fine-tuning) on the text (Carlini et al. 2021)",
                                "base"),
    "reference": _on_texts("loss minus the mean loss of reference models trained like the target on population "
                           "texts (Carlini et al. 2021; Mireshghallah et al. 2022; Watson et al. 2022)", "references"),
    "llr_base": _on_texts("text log-likelihood ratio: the text's summed token log-probability minus the base "
                          "model's (Carlini et al. 2022, LiRA offline; Neyman-Pearson)", "base"),
    "llr_reference": _on_texts("text log-likelihood ratio against the mean of reference models trained like the "
                               "target on population texts (Carlini et al. 2022, LiRA offline)", "references"),
}
#: Each attack on texts, by name, with its description there: those a language model is audited with
#: (``run membership`` of an LM target), in the order they are reported.
TEXT_ATTACKS = {name: spec.on_texts or spec.description for name, spec in ATTACK_SPECS.items()
                if "texts" in spec.records}
#: Each attack on records, by name (those ``--attack`` takes).
ATTACKS = {name: spec.description for name, spec in ATTACK_SPECS.items() if "records" in spec.records}
#: The attacks a trained model supports (:data:`RECORD_KINDS`), by the reference models they need there.
TRAINED_ATTACKS = {name: spec.trained_references for name, spec in ATTACK_SPECS.items() if "trained" in spec.records}
#: Names accepted by ``--attack`` that stand for several attacks.
ATTACK_GROUPS = {group: tuple(n for n, s in ATTACK_SPECS.items() if s.group == group)
                 for group in dict.fromkeys(s.group for s in ATTACK_SPECS.values() if s.group)}
ATTACK_GROUPS["all"] = tuple(ATTACKS)
LIRA_ATTACKS = ATTACK_GROUPS["lira"]
RMIA_ATTACKS = ATTACK_GROUPS["rmia"]
#: Attacks that need reference models trained on the target's candidates.
REFERENCE_ATTACKS = tuple(n for n in ATTACKS if ATTACK_SPECS[n].calibration == "references")
#: LiRA fits a Gaussian to at least 2 IN and 2 OUT reference models per candidate.
LIRA_MIN_REFERENCES = 4
#: LiRA's Gaussian variance: ``auto`` (global below 64 reference models), one global, or per example.
VARIANCES = ("auto", "global", "per-example")


def check_references(names: tuple[str, ...], references: int) -> None:
    """UserError unless ``references`` reference models suffice for the attacks ``names``: LiRA needs
    :data:`LIRA_MIN_REFERENCES`, RMIA one.

    Args:
        names: the attacks to run.
        references: the number of reference models.

    Raises:
        UserError: too few reference models for LiRA or RMIA.
    """
    if any(n in LIRA_ATTACKS for n in names) and references < LIRA_MIN_REFERENCES:
        raise UserError(f"LiRA needs at least {LIRA_MIN_REFERENCES} reference models (2 IN, 2 OUT per canary), got "
                        f"{references}; raise --references or use --attack rmia, which works with 1")
    if any(n in RMIA_ATTACKS for n in names) and references < 1:
        raise UserError("RMIA needs at least 1 reference model; pass --references 1 or more")


def expand_attacks(names: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"shadow,lira"`` or a list of names/groups -> attack names in :data:`ATTACKS` order.

    Args:
        names: a comma-separated string or a list of attack names and groups.

    Returns:
        The attack names.

    Raises:
        UserError: an unknown name, or none.
    """
    parts = [t.strip() for t in names.split(",")] if isinstance(names, str) else list(names)
    chosen: set[str] = set()
    for part in (p for p in parts if p):
        if part in ATTACK_GROUPS:
            chosen.update(ATTACK_GROUPS[part])
        elif part in ATTACKS:
            chosen.add(part)
        else:
            raise UserError(f"unknown attack {part!r}; choose from {', '.join(list(ATTACKS) + list(ATTACK_GROUPS))}")
    if not chosen:
        raise UserError("no attack given; pass --attack shadow|lira|rmia|loss|confidence|all (comma-separated)")
    return tuple(name for name in ATTACKS if name in chosen)
