"""``python -m audit list``: the targets (with the commands, threat models and canaries that apply to
each, and the defaults), attacks, canary kinds and datasets. Reads the stored catalogue
(:func:`audit.target_defaults.load_catalogue`): nothing heavy is imported."""

from __future__ import annotations

import argparse

from attacks.names import ATTACKS, TEXT_ATTACKS
from audit.choices import DP_CANARIES, MEMBERSHIP_CANARIES
from audit.run_parser import describe_use
from audit.target_defaults import load_catalogue, stored_catalogue

#: Headings of the target families.
FAMILY_HEADINGS = {
    "trained": "trained-model targets",
    "lm": "language-model targets (a byte-level tiny GPT fine-tuned on Shakespeare speeches; run membership audits "
          "it on its texts, as it does your own LM: --target module:factory returning {'kind': 'lm'})",
    "mechanism": "mechanism targets",
    "dp-erm": "DP-ERM output-perturbation targets",
    "control": "deliberately broken controls an audit must flag",
    "plugin": "plugin-form trainers (your own code: --target module:factory; a trainer is audited by run dp "
              "black-box with an input canary, crafted by default)",
}


def list_everything(args: argparse.Namespace) -> int:
    targets = load_catalogue()
    width = max(map(len, targets))
    for family, heading in FAMILY_HEADINGS.items():
        print(f"{heading}:")
        for name, use in targets.items():
            if use.family == family:
                print(f"  {name:<{width}} {use.description}")
                print(f"  {'':<{width}}   -> {describe_use(use)}")
    print("every DP target's theoretical epsilon: python -m audit bound --target NAME")
    print("membership attacks (run membership --attack):")
    for name, text in ATTACKS.items():
        print(f"  {name:<22} {text}")
    print("language-model membership attacks (run membership on an LM target, each that the target supports):")
    for name, text in TEXT_ATTACKS.items():
        print(f"  {name:<22} {text}")
    print(f"canary kinds: run membership {'|'.join(MEMBERSHIP_CANARIES)}; run dp {'|'.join(DP_CANARIES)}")
    print("datasets:")
    for name, text in stored_catalogue()["datasets"].items():
        print(f"  {name:<22} {text}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="list targets (with the run kinds, threats, canaries and defaults "
                                                "that apply), attacks, canary kinds and datasets")
    parser.set_defaults(func=list_everything)
