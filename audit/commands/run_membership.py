"""``python -m audit run membership --target NAME``: the flagship membership audit."""

from __future__ import annotations

import argparse

from attacks.membership import ATTACKS
from audit.commands.run import positive_int
from audit.games import CANARY_KINDS
from audit.run_membership import MembershipOptions, run_membership, summary_lines


def _attacks(text: str) -> tuple[str, ...]:
    names = tuple(ATTACKS) if text == "all" else tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [n for n in names if n not in ATTACKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown attack {', '.join(unknown) or text!r}; choose from "
                                         f"{', '.join(ATTACKS)} or all")
    return names


def execute(args: argparse.Namespace) -> int:
    opts = MembershipOptions(target=args.target, out=args.out, seed=args.seed, device=args.device, quick=args.quick,
                             epsilon=args.epsilon, delta=args.delta, data_dir=args.data_dir, quiet=args.quiet,
                             canary=args.canary, canaries=args.canaries, shadows=args.shadows, attacks=args.attack)
    run_dir, results = run_membership(opts)
    print("\n".join(summary_lines(run_dir, results)))
    return 0


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = kinds.add_parser("membership", parents=[common], help="membership inference with the one-run canary game",
                              description="Train the target once with canaries (each in by a fair coin), train "
                                          "shadow models, attack every canary, and bound epsilon from below.")
    parser.add_argument("--attack", type=_attacks, default=tuple(ATTACKS),
                        help=f"comma-separated attacks or 'all' (default all: {', '.join(ATTACKS)})")
    parser.add_argument("--canary", default="mislabelled", choices=CANARY_KINDS,
                        help="canary kind (default mislabelled: held-out examples with a wrong label)")
    parser.add_argument("--canaries", type=positive_int, default=None, help="number of canaries m (default 500; quick 200)")
    parser.add_argument("--shadows", type=positive_int, default=None, help="number of shadow models K (default 4; quick 3)")
    parser.set_defaults(func=execute)
