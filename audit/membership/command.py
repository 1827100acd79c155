"""``python -m audit run membership --target NAME``: the flagship membership audit."""

from __future__ import annotations

import argparse

from attacks.names import ATTACK_GROUPS, ATTACKS, VARIANCES, expand_attacks
from audit.arguments import non_negative_int, number, positive_int
from audit.choices import DEFAULT_MEMBERSHIP_CANARY, MEMBERSHIP_CANARIES, NONPRIVATE_MEMBERSHIP_CANARY
from audit.errors import UserError
from audit.kinds import CLAIM_AUDIT, RunKind
from audit.run_parser import add_kind
from reports.presentation import Presentation


def _attacks(text: str) -> tuple[str, ...]:
    try:
        return expand_attacks(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory(text: str) -> str:
    """argparse type: a memory size accepted by :func:`targets.training.parse_memory`."""
    from targets.training import parse_memory  # only when the option is given: --help stays fast (no torch)

    try:
        parse_memory(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = add_kind(kinds, RUN_KIND, common,
                      help="membership inference (shadow, LiRA, RMIA, loss, confidence) with the one-run canary game",
                      description="Train the target once with canaries (each in by a fair coin), train shadow and "
                                  "reference models, attack every canary, report AUC and TPR at low FPR per attack, "
                                  "and bound epsilon from below.")
    parser.add_argument("--attack", dest="attacks", type=_attacks, default=tuple(ATTACKS),
                        help=f"comma-separated attacks or groups: {', '.join(ATTACKS)}, "
                             f"{', '.join(ATTACK_GROUPS)} (lira = lira_online + lira_offline; default all, "
                             "every attack in one report)")
    parser.add_argument("--canary", default=None, choices=MEMBERSHIP_CANARIES,
                        help=f"canary kind (default {DEFAULT_MEMBERSHIP_CANARY} for a DP target, "
                             f"{NONPRIVATE_MEMBERSHIP_CANARY} for a non-private one): mislabelled / natural (held-out "
                             "examples with a wrong / their true label), sparse / blank (synthetic inputs with random "
                             "labels appended to the data: random pixels on a blank image / constant images), quiet "
                             "(sparse on the stillest pixels of the public data), gradmax (designed before the "
                             "training on a public model trained on the shadow pool: the sparse candidates of largest "
                             "gradient, labelled with a class it does not predict)")
    parser.add_argument("--canaries", type=positive_int, default=None,
                        help="number of canaries m (default 6000 for a DP target, 500 for a non-private one; "
                             "quick 200)")
    parser.add_argument("--shadows", type=positive_int, default=None,
                        help="number of shadow models K (default 2; quick 3)")
    parser.add_argument("--references", type=non_negative_int, default=None,
                        help="LiRA and RMIA reference models R; each canary is IN exactly floor(R/2) of them "
                             "(default 4, 8 for a non-private target; LiRA needs 4, RMIA 1); a trained model "
                             "({'kind': 'model'}): 0, 1, 2 or 4 trained on its population records (default 2 with "
                             "'train' and 'population', else 0)")
    parser.add_argument("--lira-variance", default="auto", choices=VARIANCES,
                        help="LiRA Gaussian variance: per-example, one global variance (Carlini et al.'s choice "
                             "for few reference models), or auto (global below 64 reference models)")
    parser.add_argument("--rmia-a", type=number(float, minimum=0, maximum=1), default=None, metavar="A",
                        help="RMIA offline mixing parameter a in [0, 1] (default: chosen on the calibration games)")
    parser.add_argument("--max-memory", type=_memory, default=None, metavar="SIZE",
                        help="memory budget for training, e.g. 2GiB or 512MiB (default 2GiB): sets how many models "
                             "train at once; results do not depend on it")
    parser.set_defaults(func=RUN_KIND.main)


RUN_KIND = RunKind(name="membership", command="run membership", options="audit.membership.runner:MembershipOptions",
                   run="audit.membership.runner:run_membership", summary="audit.membership.runner:summary_lines",
                   register=register, applies_to="audit.membership.texts:takes_lm_target",
                   detail="audit.membership.detail:MembershipDetail",
                   report=Presentation(sentences="audit.membership.report:sentences",
                                       game="audit.membership.report:game_phrase"),
                   plugin_help=(
                       "your own training code, a trainer plugin; trained on up to 1,000 rows of its dataset, game "
                       "defaults for plugins: 500 canaries, 2 shadow and 4 reference models (not 6000/2/4); or a "
                       "trained model ({'kind': 'model'}) or language model ({'kind': 'lm'}), audited on its own "
                       "members and non-members, an LM's texts after the text blind split check",),
                   results={"allOf": [CLAIM_AUDIT, {"required": ["primary_attack", "model", "dataset"]}]})
