"""``python -m audit run dp --target NAME [--runs R] [--canary KIND] [--threat MODEL]``: multi-run DP audit."""

from __future__ import annotations

import argparse

from audit.arguments import guess_form, non_negative_int, positive_int
from audit.choices import DP_CANARIES, TEXT_CANARIES, THREATS
from audit.kinds import CLAIM_AUDIT, RunKind
from audit.run_parser import add_kind, dpsgd_start_options
from reports.presentation import Presentation


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(
        kinds, RUN_KIND, common, help="multi-run DP audit: canary in by fair coins, CP/GDP/per-step bounds",
        description="Train R runs of a DP target (vectorised), each with the canary by a fair coin, score the "
                    "canary under a threat model and bound epsilon from below: Clopper-Pearson (valid), GDP "
                    "(Gaussian tradeoff) and, for --threat updates, per-step observations composed by the "
                    "accountant. Threat and canary default to the strongest the target supports (listed below).")
    parser.add_argument("--runs", type=positive_int, default=None,
                        help="training runs R (default: 4000 for DP-SGD updates/white-box, 1000 black-box, "
                             "2000000 noise draws for DP-ERM; trainer plugins: 200 black-box, 1000 updates/white-box, "
                             "each on at most 1000 rows of the plugin's data; --quick: 400 / 20000 / 50 for plugins)")
    parser.add_argument("--canary", default=None, choices=DP_CANARIES + TEXT_CANARIES,
                        help="canary: dirac/gradient (gradient canaries, DP-SGD), dirac-replace (replace-one pair "
                             "on a crafted dataset: catches shuffled batches accounted as Poisson), natural, "
                             "mislabelled, crafted, blank (input canaries; crafted = low-variance direction, or the "
                             "crafted pair for DP-ERM; blank = all-zero input, last class), new-token, rare-unigram, "
                             "random-suffix, rare-bytes (canary texts of a language-model trainer, --one-run --threat "
                             "black-box); default: the target's (below)")
    parser.add_argument("--threat", default=None, choices=THREATS,
                        help="what the adversary sees: black-box (final model's loss), white-box (final "
                             "parameters), updates (every intermediate update); default: the target's (below)")
    parser.add_argument("--check-config", action="store_true",
                        help="trainer plugins: only the accounting check, in about two trainings of the code — read "
                             "the DP-SGD the code runs (steps, Poisson rate, clip, noise, which records each step "
                             "held): once on the dataset and the first steps again from the same seed, once with "
                             "one more record; its epsilon by the PLD accountant against the claim; a violation "
                             "exits 1 with --fail-above-claim; each stage prints a line with an estimate")
    parser.add_argument("--one-run", action="store_true",
                        help="audit ONE training run: M gradient canaries, each in by its own fair coin and joining "
                             "every step like one more Poisson-sampled record; threats updates (default) and "
                             "white-box (built-in targets, Opacus plugins); a trainer plugin trains once on its whole "
                             "dataset, after the accounting check (about 3 trainings in all, each stage announced "
                             "with an estimate); the one-run black-box game "
                             "is `run membership`")
    parser.add_argument("--canaries", type=positive_int, default=None, metavar="M",
                        help="--one-run: number of gradient canaries (default: chosen by simulating the claim — for "
                             "a trainer plugin the DP-SGD its probe read — at most 20000 and the model's parameter "
                             "count; --quick: at most 2000)")
    parser.add_argument("--input-canaries", type=non_negative_int, default=None, metavar="M",
                        help="--one-run of a trainer plugin: input-space canaries (records, or texts for a "
                             "language-model trainer) in the same training, each by a fair coin, to catch passes "
                             "over the data outside the DP steps (default: 40%% of the dataset's size, at most 1000, "
                             "none below 64; 0: none; audit.dp.plugins.input_canaries)")
    parser.add_argument("--guesses", type=guess_form, default=None, metavar="K[:0|:K]",
                        help="--one-run --threat black-box of a language-model trainer: the guesses fixed in "
                             "advance: K:0 'in' for the K highest scores only (one-sided), K:K also 'out' for the K "
                             "lowest, K either shape, whichever expects the larger bound on games of the claimed "
                             "training's final model (default: the count and shape of the largest expected bound "
                             "among those that can reject the claim, audit.stats.one_run.final_model)")
    dpsgd_start_options(parser)
    parser.set_defaults(func=RUN_KIND.main)


RUN_KIND = RunKind(name="dp", command="run dp", options="audit.dp.options:DPOptions",
                   run="audit.dp.runner:run_dp", summary="audit.dp.runner:summary_lines",
                   register=register, target_details=True, detail="audit.dp.detail:DpDetail",
                   report=Presentation(game="audit.dp.report:game_phrase", sections="audit.dp.report:sections"),
                   plugin_help=(
                       "your own code, a trainer plugin. Defaults: black-box with the crafted input canary, 200 "
                       "runs;",
                       "--threat updates (Opacus or a loop with the audit hooks): Dirac gradient canary, 1000 runs; "
                       "many-run games",
                       "train each run on at most 1000 rows of the plugin's data; --quick: 50 runs.",
                       "--one-run: the accounting check, then ONE training on the whole dataset with M gradient "
                       "canaries (default M",
                       "by simulating the DP-SGD the code runs, at most 20000 and the parameter count; --quick: at "
                       "most 2000).",
                       "--check-config: the accounting check alone."),
                   results={
                       # a run of the accounting check alone (--check-config): no bounds, no game
                       "if": {"properties": {"lower_bounds": {"maxItems": 0}}, "required": ["config_check"]},
                       "then": {"required": ["config_check", "family", "model", "dataset", "params", "accountant",
                                             "tradeoff"]},
                       "else": {"allOf": [CLAIM_AUDIT, {
                           "required": ["best_estimate", "model", "dataset"],
                           "properties": {"game": {"required": ["runs", "threat", "canary_kind",
                                                                "threshold_strategy"]}}}]}})
