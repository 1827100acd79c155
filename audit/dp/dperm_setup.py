"""The ``run dp`` adapter of DP-ERM output perturbation (white-box)."""

from __future__ import annotations

import numpy as np

from audit.dp.options import DPOptions
from audit.dp.setup_types import DPAuditSetup, Observation
from audit.errors import UserError
from targets.dperm import make_dperm


def dperm_setup(opts: DPOptions) -> DPAuditSetup:
    """DP-ERM output perturbation, white-box: the auditor sees the released parameters.

    ``--canary crafted`` uses :func:`targets.dperm.crafted_pair` (replace-one pair pushing the
    minimiser towards 2/(n lambda)); ``mislabelled`` the label flip of the least-used input. The
    minimiser is deterministic given the data, so the two worlds' minimisers are fitted once and
    each run is one fresh noise draw of the mechanism (``DPERMMechanism.sample``). Score: the
    released parameters projected on theta1 - theta0 (Neyman–Pearson for the Gaussian pair).
    """

    if opts.threat != "white-box":
        raise UserError("DP-ERM audits observe the released parameters: use --threat white-box")
    pairs = {"crafted": "crafted-pair", "mislabelled": "label-flip"}
    if opts.canary not in pairs:
        raise UserError("DP-ERM canaries: --canary crafted (crafted replace-one pair) or mislabelled (label flip)")
    mech = make_dperm(opts.target, epsilon=opts.epsilon, delta=opts.delta, pair=pairs[opts.canary])
    d0, d1 = mech.neighbouring_pair()
    shift = mech.minimiser_shift()

    def observe(included: np.ndarray, seed: int) -> Observation:
        rng = np.random.default_rng([seed, 31])
        scores = np.empty(included.size)
        for world, data in ((1, d1), (0, d0)):
            idx = np.flatnonzero(included == bool(world))
            for start in range(0, idx.size, 50_000):
                part = idx[start:start + 50_000]
                scores[part] = mech.score(mech.sample(data, part.size, rng))
        return Observation(scores=scores, info={"minimiser_shift": shift}, gaussian=True)

    claim = mech.claim
    return DPAuditSetup(
        name=opts.target, description=mech.description, dataset=opts.target.removeprefix("dperm_"),
        model={"name": "logistic regression (DP-ERM output perturbation)"}, neighbouring="replace one record",
        claim=claim, delta=mech.erm.delta, params=mech.params() | {
            "shift_over_sensitivity": shift / mech.sensitivity},
        canary={"kind": opts.canary, "pair": mech.pair, "minimiser_shift": shift, "sensitivity": mech.sensitivity},
        threat="white-box", observe=observe, default_runs=20_000 if opts.quick else 2_000_000)
