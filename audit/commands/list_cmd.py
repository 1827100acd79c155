"""``python -m audit list``: the targets, attacks, canary kinds and datasets available."""

from __future__ import annotations

import argparse

from attacks.membership import ATTACKS
from audit.games import CANARY_KINDS
from targets.datasets import DATASETS
from targets.registry import TARGETS


def list_everything(args: argparse.Namespace) -> int:
    print("targets:")
    for target in TARGETS.values():
        claim = f"epsilon {target.epsilon:g}, delta {target.delta:g}" if target.private else "non-private"
        print(f"  {target.name:<22} {claim:<26} {target.description}")
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
