"""What the black-box one-run audit of a DP language-model target can certify, as a function of how far its
canaries' scores separate and of how many canaries it plays: a simulation, before any training (issue 42,
item 2).

    python benchmarks/bench_lm_blackbox_reach.py --json benchmarks/results_lm_blackbox_reach.json
                                                 [--games 200] [--canaries 500,1000,2000,4000,8000]

The claim is the built-in DP targets' (``dpsgd_tinygpt`` and ``dpsgd_tinygpt_lora``: DP-SGD at rate 0.1 over 100
steps, epsilon 4 at delta 1e-5, the noise multiplier the recipe calibrates). For each canary count M the guesses are
those the audit itself fixes before its training (:func:`audit.dp.plugins.lm_blackbox.design_mechanism` and
:func:`audit.stats.one_run.final_model.choose_final_model_design` with the audit's
:data:`audit.dp.one_run.game.DESIGN_SIMULATIONS` games and seed 0's stream). Then ``--games`` games of fair coins
with unit-variance Gaussian scores, the members' shifted by ``mu`` (AUC ``Phi(mu / sqrt(2))``), give the f-DP
bound's mean, its 5-95% range, and the share of games at epsilon > 0 and at epsilon >= 0.5 (the acceptance figure
of issue 42). The measured shifts (``benchmarks/results_lm_blackbox.json``: new-token x16 canaries, 1,000 of them,
mu 0.26-0.33 under full fine-tuning, 0.02-0.12 under LoRA) read off the table what the audit can expect and what
canary count would reach a target figure at that shift. The perfect attack of the design (a linear model's last
iterate) sits near mu 0.7 (q sqrt(T) / sqrt(sigma^2 + q(1 - q))). Sources: docs/references.md, "One-run
auditing" and "Language models".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.dp.one_run.game import DESIGN_SIMULATIONS  # noqa: E402
from audit.dp.plugins.lm_blackbox import design_mechanism  # noqa: E402
from audit.io import write_json  # noqa: E402
from audit.run_context import host_info, utc_now  # noqa: E402
from audit.stats.one_run.design import DesignObjective, grid_bounds  # noqa: E402
from audit.stats.one_run.final_model import choose_final_model_design  # noqa: E402
from targets.lm.recipes import lm_recipe  # noqa: E402
from targets.plugins.loading import claim_from_plugin  # noqa: E402

SHIFTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.7)
TARGET_EPSILON = 0.5


def dp_claim():
    """The built-in DP targets' claim (DP-SGD, epsilon 4 at delta 1e-5) and its delta."""
    recipe = lm_recipe("dpsgd_tinygpt")
    ft = recipe.finetune
    return claim_from_plugin("dpsgd_tinygpt", {
        "epsilon": recipe.epsilon, "delta": recipe.delta,
        "dpsgd": {"noise_multiplier": ft.noise_multiplier, "sample_rate": ft.sample_rate,
                  "steps": ft.steps(recipe.n_members)}})


def reach(m: int, games: int) -> dict:
    """The audit's design for ``m`` canaries and the bound it gives at every shift of :data:`SHIFTS`."""
    claim, delta = dp_claim()
    objective = DesignObjective(delta=delta, confidence=0.95)
    design = choose_final_model_design(design_mechanism(claim, delta), m, float(claim.epsilon(delta)), objective,
                                       np.random.default_rng([0, 61]), simulations=DESIGN_SIMULATIONS)
    shape = [(design.k_pos, design.k_neg)]
    rows = {}
    for mu in SHIFTS:
        rng = np.random.default_rng([m, int(round(mu * 100))])
        bounds = []
        for _ in range(games):
            members = rng.random(m) < 0.5
            bounds.append(grid_bounds(rng.normal(size=m) + mu * members, members, shape, "fdp", delta, 0.95)[0])
        b = np.array(bounds)
        rows[f"{mu:.1f}"] = {"auc": float(stats.norm.cdf(mu / math.sqrt(2))), "mean": float(b.mean()),
                             "range_5_95": [float(np.quantile(b, 0.05)), float(np.quantile(b, 0.95))],
                             "share_above_0": float(np.mean(b > 0)),
                             "share_at_target": float(np.mean(b >= TARGET_EPSILON))}
        print(f"M {m} guesses {shape[0]} mu {mu}: mean {b.mean():.3f}, P(>0) {np.mean(b > 0):.2f}, "
              f"P(>={TARGET_EPSILON}) {np.mean(b >= TARGET_EPSILON):.2f}", file=sys.stderr)
    return {"canaries": m, "guesses": list(shape[0]), "ceiling": float(design.ceiling),
            "expected_perfect": float(design.expected_epsilon), "shifts": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--canaries", default="500,1000,2000,4000,8000")
    args = parser.parse_args(argv)
    records = [reach(int(m), args.games) for m in args.canaries.split(",")]
    claim, delta = dp_claim()
    write_json(args.json, {"date": utc_now(), "machine": host_info(), "games": args.games,
                           "design_simulations": DESIGN_SIMULATIONS, "target_epsilon": TARGET_EPSILON,
                           "claim": {"epsilon": float(claim.epsilon(delta)), "delta": delta,
                                     "description": claim.description},
                           "records": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
