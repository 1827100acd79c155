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
    "loss": "loss threshold: log-probability of the label (Yeom et al. 2018)",
    "confidence": "confidence threshold: top-1 probability, label not used (Salem et al. 2019)",
}
#: Names accepted by ``--attack`` that stand for several attacks.
ATTACK_GROUPS = {"lira": ("lira_online", "lira_offline"), "all": tuple(ATTACKS)}
LIRA_ATTACKS = ("lira_online", "lira_offline")
#: LiRA's Gaussian variance: ``auto`` (global below 64 reference models), one global, or per example.
VARIANCES = ("auto", "global", "per-example")


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
        raise UserError("no attack given; pass --attack shadow|lira|loss|confidence|all (comma-separated)")
    return tuple(name for name in ATTACKS if name in chosen)
