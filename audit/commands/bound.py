"""``python -m audit bound --target NAME [--delta D] [--epsilon E] [--json]``: a target's theory.

Prints epsilon at delta (the upper bound every audit of the target is compared against), the
accountant, the target's parameters, a few points of its f-DP tradeoff curve and of its ReRo curve
``1 - f(kappa)`` (the largest success of any reconstruction attack whose success without the output
is kappa; Hayes, Mahloujifar, Balle 2023; docs/references.md, "Reconstruction robustness"), and
writes two PNGs: the tradeoff curve and the ReRo curve, each with its Gaussian-DP summary overlaid.
``--json`` prints one JSON object instead: ``epsilon``, ``delta``, ``params`` (named as in
``results.json``), ``tradeoff`` (``[alpha, beta]`` pairs including alpha = 1e-3, 1e-2, 0.1), ``rero``
(``[kappa, 1 - f(kappa)]`` pairs including kappa = 1e-3, 1e-2, 0.1, 0.5), plus ``target``, ``family``,
``description``, ``neighbouring``, ``accountant`` and ``gdp`` (mu and how it was obtained).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from audit.arguments import DELTA_RANGE, EPSILON_RANGE, delta_value, epsilon_value, folder
from audit.errors import UserError
from audit.io import to_jsonable
from audit.run_context import safe_name
from audit.run_parser import check_target

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
        "rero": theory.rero_pairs(),
    }


def write_bound_plot(theory: TargetTheory, path: Path) -> Path:
    """PNG of the claim's tradeoff curve with its Gaussian-DP summary (dashed) overlaid."""
    # lazy: matplotlib and the theory stack load only when a plot is written (keeps `--help` fast)
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


def write_rero_plot(theory: TargetTheory, path: Path) -> Path:
    """PNG of the claim's ReRo curve ``1 - f(kappa)`` with its Gaussian-DP summary's (dashed) overlaid."""
    # lazy: matplotlib and the theory stack load only when a plot is written (keeps `--help` fast)
    from audit.target_theory import rero_kappas
    from audit.theory.rero import gaussian_rero_bound
    from reports.reconstruction_plots import rero_curve_plot

    kappa = rero_kappas()
    pairs = theory.rero_pairs(kappa)
    mu, how = theory.gdp_summary()
    curves = [{"kappa": kappa, "bound": [b for _, b in pairs],
               "label": f"claim ({theory.claim.accountant} accountant): 1 - f(κ)"}]
    if math.isfinite(mu):
        curves.append({"kappa": kappa, "bound": gaussian_rero_bound(mu, kappa),
                       "label": f"1 - G_μ(κ), μ = {mu:.4g} ({how})", "style": "--"})
    title = f"{theory.name}: reconstruction robustness (ε = {theory.epsilon:.4g} at δ = {theory.delta:g})"
    return rero_curve_plot(curves, path, title)


def print_bound(theory: TargetTheory, path: Path, rero_path: Path) -> None:
    """The text output of ``bound``."""
    from audit.target_theory import REQUIRED_ALPHAS, REQUIRED_KAPPAS  # lazy: keeps `--help` fast

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
    print("ReRo bound 1 - f(kappa) (largest success of any reconstruction attack of baseline kappa, e.g. 1/n "
          "for n candidates):")
    for kappa, bound in theory.rero_pairs(REQUIRED_KAPPAS):
        print(f"  kappa = {kappa:<6g} success <= {bound:.12f}")
    print(f"plot:         {path}")
    print(f"ReRo plot:    {rero_path}")


def show_bound(args: argparse.Namespace) -> int:
    check_target("bound", args.target)
    from audit.target_theory import theory_for  # lazy: the target catalogue imports torch (keeps `--help` fast)

    theory = theory_for(args.target, args.epsilon, args.delta)
    if theory.claim is None:
        raise UserError(f"target {args.target} is non-private: it makes no claim to bound; "
                        f"pick a DP target from `python -m audit list`")
    if args.json:
        sys.stdout.write(json.dumps(to_jsonable(bound_json(theory)), sort_keys=True) + "\n")
        return 0
    out = Path(args.out).expanduser()
    path = Path(args.png).expanduser() if args.png else out / f"bound-{safe_name(theory.name)}.png"
    rero_path = path.with_name(f"{path.stem}-rero{path.suffix or '.png'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bound_plot(theory, path)
        write_rero_plot(theory, rero_path)
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror}); pass a writable --out DIR or --png FILE") from None
    print_bound(theory, path, rero_path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bound", help="theoretical epsilon, parameters, tradeoff and ReRo curves of a DP target",
        description="Print the theoretical privacy of a DP target: epsilon at delta, its parameters, its "
                    "f-DP tradeoff curve and its reconstruction-robustness (ReRo) bound 1 - f(kappa); write a "
                    "PNG of each curve with the Gaussian-DP summary overlaid.")
    parser.add_argument("--target", required=True, help="a DP target (see `python -m audit list`)")
    parser.add_argument("--delta", type=delta_value, default=None,
                        help=f"delta at which to report epsilon, {DELTA_RANGE} (default: the target's; 1e-5 for "
                             "pure-DP mechanisms)")
    parser.add_argument("--epsilon", type=epsilon_value, default=None,
                        help=f"claimed epsilon to calibrate the target to, {EPSILON_RANGE} (default: the target's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text and a plot")
    parser.add_argument("--out", type=folder, default="runs",
                        help="folder for the PNGs, a non-empty path (default: runs)")
    parser.add_argument("--png", default=None,
                        help="path of the tradeoff PNG (default: OUT/bound-TARGET.png); the ReRo PNG is written "
                             "beside it as NAME-rero.png")
    parser.set_defaults(func=show_bound)
