"""The names of every run kind's choices (threat models, canaries, starts, draws), importable without
numpy, torch or scikit-learn: the command line builds its parser from them and the runners check
their options against them."""

from __future__ import annotations

#: What the adversary of ``run dp`` sees: the final model's loss on an input canary, the final
#: parameters, or every intermediate update.
THREATS = ("black-box", "white-box", "updates")
#: Canaries that enter training like any other example (:func:`audit.dp.canaries.input_canary`).
INPUT_CANARIES = ("natural", "mislabelled", "crafted", "blank")
#: DP-SGD gradient canaries (:func:`audit.dp.canaries.gradient_canary`).
GRADIENT_CANARIES = ("gradient", "dirac", "dirac-replace")
#: Canary texts of a language-model trainer's black-box one-run audit (:mod:`audit.dp.plugins.lm_blackbox`).
TEXT_CANARIES = ("new-token", "rare-unigram", "random-suffix", "rare-bytes")
#: Every canary of ``run dp`` and ``sweep dp`` on a classifier (``run dp --one-run`` of a language-model trainer
#: also takes :data:`TEXT_CANARIES`).
DP_CANARIES = INPUT_CANARIES + GRADIENT_CANARIES
#: Initial parameters of ``run dp``'s DP-SGD runs: each run's own random start, or one model pre-trained
#: without privacy on a disjoint half of the data.
INITS = ("random", "pretrained")
#: Membership canaries taken from the data pool (held-out examples with a wrong / their true label).
POOL_CANARIES = ("mislabelled", "natural")
#: Membership canaries designed for the final model on a public model before the training, appended to the data
#: (:mod:`audit.membership.crafted`).
CRAFTED_CANARIES = ("gradmax",)
#: Synthetic membership canaries appended to the data (:func:`audit.membership.game.synthetic_canaries`, and the
#: crafted ones).
SYNTHETIC_CANARIES = ("sparse", "blank", "quiet", *CRAFTED_CANARIES)
#: Canaries of the membership game (:func:`audit.membership.game.build_canary_game`).
MEMBERSHIP_CANARIES = POOL_CANARIES + SYNTHETIC_CANARIES
#: The flagship's membership canary kind (targets that claim DP: the one-run preset).
DEFAULT_MEMBERSHIP_CANARY = "sparse"
#: The membership canary kind of a non-private registry target: real held-out records of the data with a wrong
#: label, the outliers a model memorises (measured on nonprivate_mnist: TPR at 0.1% FPR about 0.2 with 500
#: of them; natural records, 0.015; the sparse preset, <= 0.003).
NONPRIVATE_MEMBERSHIP_CANARY = "mislabelled"
#: Neutral starts of MI-FACE model inversion.
INVERSION_STARTS = {"grey": "constant image at the mean intensity of the auxiliary data",
                    "mean": "mean image of the auxiliary data (all classes together)"}
#: Outputs drawn per dataset by ``run mechanism``: 10^5 resolves error rates near 1e-3 well enough for a
#: useful bound.
MECHANISM_DRAWS = 100_000
