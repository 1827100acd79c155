"""Names of the membership attacks and their options, importable without numpy or scikit-learn
(the command line builds its parser from them; :mod:`attacks.membership` runs the attacks)."""

from __future__ import annotations

from audit.errors import UserError

#: Membership attacks available to ``python -m audit run membership --attack`` (results.json names).
ATTACKS = {
    "shadow": "shadow-model attack, per-class classifiers on sorted prediction vectors (Shokri et al. 2017)",
    "lira_online": "LiRA online: likelihood ratio of per-example IN/OUT Gaussians of the logit-scaled confidence "
                   "(Carlini et al. 2022)",
    "lira_offline": "LiRA offline: one-sided test against the per-example OUT Gaussian (Carlini et al. 2022)",
    "rmia_online": "RMIA online: fraction of population samples whose pairwise likelihood ratio the candidate "
                   "dominates, p(x) from all reference models (Zarifzadeh et al. 2024)",
    "rmia_offline": "RMIA offline: as rmia_online with p(x) = (1+a)/2 p_OUT(x) + (1-a)/2 from the reference "
                    "models that left the candidate out (Zarifzadeh et al. 2024)",
    "loss": "loss threshold: log-probability of the label (Yeom et al. 2018)",
    "confidence": "confidence threshold: top-1 probability, label not used (Salem et al. 2019)",
}
#: Names accepted by ``--attack`` that stand for several attacks.
ATTACK_GROUPS = {"lira": ("lira_online", "lira_offline"), "rmia": ("rmia_online", "rmia_offline"),
                 "all": tuple(ATTACKS)}
LIRA_ATTACKS = ("lira_online", "lira_offline")
RMIA_ATTACKS = ("rmia_online", "rmia_offline")
#: Attacks that need reference models trained on the target's candidates.
REFERENCE_ATTACKS = LIRA_ATTACKS + RMIA_ATTACKS
#: LiRA fits a Gaussian to at least 2 IN and 2 OUT reference models per candidate.
LIRA_MIN_REFERENCES = 4
#: LiRA's Gaussian variance: ``auto`` (global below 64 reference models), one global, or per example.
VARIANCES = ("auto", "global", "per-example")


def check_references(names: tuple[str, ...], references: int) -> None:
    """UserError unless ``references`` reference models suffice for the attacks ``names``: LiRA needs
    :data:`LIRA_MIN_REFERENCES`, RMIA one."""
    if any(n in LIRA_ATTACKS for n in names) and references < LIRA_MIN_REFERENCES:
        raise UserError(f"LiRA needs at least {LIRA_MIN_REFERENCES} reference models (2 IN, 2 OUT per canary), got "
                        f"{references}; raise --references or use --attack rmia, which works with 1")
    if any(n in RMIA_ATTACKS for n in names) and references < 1:
        raise UserError("RMIA needs at least 1 reference model; pass --references 1 or more")


def expand_attacks(names: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"shadow,lira"`` or a list of names/groups -> attack names in :data:`ATTACKS` order."""
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
