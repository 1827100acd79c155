"""``python -m audit bound --target NAME [--delta D] [--epsilon E] [--json]``: a target's theory.

Prints epsilon at delta (the upper bound every audit of the target is compared against), the
accountant, the target's parameters and a few points of its f-DP tradeoff curve, and writes a PNG
of the curve with its Gaussian-DP summary overlaid. ``--json`` prints one JSON object instead:
``epsilon``, ``delta``, ``params`` (named as in ``results.json``), ``tradeoff`` (``[alpha, beta]``
pairs including alpha = 1e-3, 1e-2, 0.1), plus ``target``, ``family``, ``description``,
``neighbouring``, ``accountant`` and ``gdp`` (mu and how it was obtained).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from audit.arguments import delta_value, epsilon_value
from audit.commands.run import check_target
from audit.errors import UserError
from audit.io import to_jsonable
from audit.run_context import safe_name

if TYPE_CHECKING:
    from audit.target_theory import TargetTheory


def bound_json(theory: TargetTheory) -> dict:
    """The ``--json`` object of a DP target."""
    mu, how = theory.gdp_summary()
    return {
        "target": theory.name,
        "family": theory.family,
        "description": theory.description,
        "epsilon": theory.epsilon,
        "delta": theory.delta,
        "neighbouring": theory.neighbouring,
        "accountant": theory.claim.description,
        "params": theory.params,
        "gdp": {"mu": mu, "method": how} if math.isfinite(mu) else {"mu": None,
                                                                   "method": "the claim implies no mu-GDP (delta > 0)"},
        "tradeoff": theory.tradeoff_pairs(),
    }


def write_bound_plot(theory: TargetTheory, path: Path) -> Path:
    """PNG of the claim's tradeoff curve with its Gaussian-DP summary (dashed) overlaid."""
    from audit.target_theory import tradeoff_alphas
    from audit.theory.gaussian import gaussian_tradeoff
    from reports.plots import claim_plot

    alpha = tradeoff_alphas()
    mu, how = theory.gdp_summary()
    curves = [{"alpha": alpha, "beta": theory.claim.tradeoff(alpha),
               "label": f"claim ({theory.claim.accountant} accountant): f(α)"}]
    if math.isfinite(mu):  # an (eps, delta > 0) claim implies no mu-GDP at all
        curves.append({"alpha": alpha, "beta": gaussian_tradeoff(alpha, mu), "label": f"G_μ, μ = {mu:.4g} ({how})",
                       "style": "--"})
    title = f"{theory.name}: ε = {theory.epsilon:.4g} at δ = {theory.delta:g}"
    return claim_plot(curves, path, title)


def show_bound(args: argparse.Namespace) -> int:
    check_target("bound", args.target)
    from audit.target_theory import REQUIRED_ALPHAS, theory_for

    theory = theory_for(args.target, args.epsilon, args.delta)
    if theory.claim is None:
        raise UserError(f"target {args.target} is non-private: it makes no claim to bound; "
                        f"pick a DP target from `python -m audit list`")
    if args.json:
        sys.stdout.write(json.dumps(to_jsonable(bound_json(theory)), sort_keys=True) + "\n")
        return 0
    out = Path(args.out).expanduser()
    path = Path(args.png).expanduser() if args.png else out / f"bound-{safe_name(theory.name)}.png"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bound_plot(theory, path)
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror}); pass a writable --out DIR or --png FILE") from None
    mu, how = theory.gdp_summary()
    print(f"target:       {theory.name} ({theory.family}) — {theory.description}")
    print(f"epsilon:      {theory.epsilon:.6g} at delta = {theory.delta:g}")
    print(f"accountant:   {theory.claim.description}")
    print(f"neighbouring: {theory.neighbouring}")
    print(f"GDP summary:  mu = {mu:.6g} ({how})" if math.isfinite(mu) else
          "GDP summary:  none (an (epsilon, delta > 0) claim implies no mu-GDP)")
    print("parameters:")
    for key in sorted(theory.params):
        print(f"  {key:<22} {theory.params[key]}")
    print("tradeoff f(alpha) (least FNR of any test at FPR alpha):")
    pairs = dict((a, b) for a, b in theory.tradeoff_pairs())
    for alpha in REQUIRED_ALPHAS:
        print(f"  alpha = {alpha:<6g} beta >= {pairs[alpha]:.6f}")
    print(f"plot:         {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bound", help="theoretical epsilon, parameters and tradeoff curve of a DP target",
        description="Print the theoretical privacy of a DP target: epsilon at delta, its parameters and its "
                    "f-DP tradeoff curve; write a PNG of the curve with the Gaussian-DP summary overlaid.")
    parser.add_argument("--target", required=True, help="a DP target (see `python -m audit list`)")
    parser.add_argument("--delta", type=delta_value, default=None,
                        help="delta at which to report epsilon (default: the target's; 1e-5 for pure-DP mechanisms)")
    parser.add_argument("--epsilon", type=epsilon_value, default=None,
                        help="claimed epsilon to calibrate the target to (default: the target's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text and a plot")
    parser.add_argument("--out", default="runs", help="folder for the PNG (default: runs)")
    parser.add_argument("--png", default=None, help="path of the PNG (default: OUT/bound-TARGET.png)")
    parser.set_defaults(func=show_bound)
