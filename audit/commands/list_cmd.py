"""``python -m audit list``: the targets, attacks, canary kinds and datasets available."""

from __future__ import annotations

import argparse

from attacks.membership import ATTACKS
from audit.games import CANARY_KINDS
from audit.target_theory import catalogue
from targets.datasets import DATASETS

#: Headings of the target families and the run kinds that audit them.
FAMILY_HEADINGS = {
    "trained": "trained-model targets (python -m audit run membership|dp|inversion|extraction --target NAME)",
    "mechanism": "mechanism targets (python -m audit run mechanism --target NAME)",
    "dp-erm": "DP-ERM output-perturbation targets (python -m audit run mechanism --target NAME)",
    "control": "deliberately broken controls an audit must flag (python -m audit run mechanism --target NAME)",
    "plugin": "plugin-form trainers, audited black-box (python -m audit run dp --target NAME --threat black-box "
              "--canary crafted); your own code: --target module:factory",
}


def list_everything(args: argparse.Namespace) -> int:
    targets = catalogue()
    width = max(map(len, targets))
    for family, heading in FAMILY_HEADINGS.items():
        print(f"{heading}:")
        for name, (fam, description) in targets.items():
            if fam == family:
                print(f"  {name:<{width}} {description}")
    print("every DP target's theoretical epsilon: python -m audit bound --target NAME")
    print("membership attacks:")
    for name, text in ATTACKS.items():
        print(f"  {name:<22} {text}")
    print("canary kinds:")
    for name in CANARY_KINDS:
        print(f"  {name}")
    print("datasets:")
    for name, text in DATASETS.items():
        print(f"  {name:<22} {text}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="list targets, attacks, canary kinds and datasets")
    parser.set_defaults(func=list_everything)
