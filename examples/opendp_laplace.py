"""Auditing an OpenDP measurement: a bounded sum released with Laplace noise.

The plugin hands the measurement itself to the workbench: an OpenDP ``Measurement`` is called on a
dataset and returns one release, so it *is* a mechanism ``f(data)``. Its claim is read off OpenDP's
own privacy map (``meas.map(1)``: epsilon for datasets at symmetric distance 1, i.e. one record
added or removed), so the audit checks OpenDP's accounting, not a number copied by hand.

OpenDP samples its noise from its own cryptographically secure generator and takes no seed
(``"rng": "none"``): the audit is valid, but two runs with the same ``--seed`` differ, which the
summary, the report and results.json (``reproducible: false``) state. Docs: https://docs.opendp.org

    pip install -e '.[opendp]'
    PYTHONPATH=examples python -m audit run mechanism --target opendp_laplace:mechanism

or in pytest: ``assert_private(opendp_laplace.mechanism)`` (tests/e2e/test_examples.py).
"""

from __future__ import annotations

import opendp.prelude as dp

dp.enable_features("contrib")

#: Laplace scale for a sum of records clipped to [0, 1] (sensitivity 1): epsilon = 1 / SCALE.
SCALE = 1.0


def measurement(scale: float = SCALE) -> dp.Measurement:
    """Sum of a list of floats in [0, 1], plus Laplace(scale) noise (OpenDP's transformation chain)."""
    space = dp.vector_domain(dp.atom_domain(bounds=(0.0, 1.0))), dp.symmetric_distance()
    return space >> dp.t.then_sum() >> dp.m.then_laplace(scale=scale)


def mechanism(scale: float = SCALE, claimed_epsilon: float | None = None) -> dict:
    """The plugin dict; ``claimed_epsilon`` overrides OpenDP's own figure (to see a wrong claim caught)."""
    meas = measurement(scale)
    return {"kind": "mechanism", "name": "opendp_laplace_sum", "mechanism": meas, "rng": "none",
            "neighbours": ([0.0] * 10, [0.0] * 10 + [1.0]),
            "claim": {"epsilon": claimed_epsilon or meas.map(1), "delta": 0},
            "description": f"OpenDP bounded sum + Laplace(scale={scale:g})"}
