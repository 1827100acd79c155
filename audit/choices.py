"""The names of every run kind's choices (threat models, canaries, starts, draws), importable without
numpy, torch or scikit-learn: the command line builds its parser from them and the runners check
their options against them."""

from __future__ import annotations

#: What the adversary of ``run dp`` sees: the final model's loss on an input canary, the final
#: parameters, or every intermediate update.
THREATS = ("black-box", "white-box", "updates")
#: Canaries that enter training like any other example (:func:`audit.canaries.input_canary`).
INPUT_CANARIES = ("natural", "mislabelled", "crafted")
#: DP-SGD gradient canaries (:func:`audit.canaries.gradient_canary`).
GRADIENT_CANARIES = ("gradient", "dirac", "dirac-replace")
#: Every canary of ``run dp`` and ``sweep dp``.
DP_CANARIES = INPUT_CANARIES + GRADIENT_CANARIES
#: Canaries of the membership game (:func:`audit.games.build_canary_game`).
MEMBERSHIP_CANARIES = ("mislabelled", "natural")
#: Neutral starts of MI-FACE model inversion.
INVERSION_STARTS = {"grey": "constant image at the mean intensity of the auxiliary data",
                    "mean": "mean image of the auxiliary data (all classes together)"}
#: Outputs drawn per dataset by ``run mechanism``: 10^5 resolves error rates near 1e-3 well enough for a
#: useful bound.
MECHANISM_DRAWS = 100_000
