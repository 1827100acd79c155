"""What an extraction run measures a stolen model by (Tramèr et al. 2016): the input domain the thief
queries and the held-out and uniform inputs it is compared on (:class:`Domain`), the figures of one
stolen model (:func:`measure`) and, for a DP target, what the theft gives beside the non-private
model (:func:`post_processing`). docs/references.md, section "Inversion and extraction"."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.extraction import (
    ExtractedModel,
    agreement,
    canonical,
    relative_error,
    softmax,
    tv_distance,
    uniform_inputs,
)
from audit.extraction.victim import Victim
from audit.stats.outcome import ExtractionMethod

#: Uniform random inputs used for 1 - R_unif (Tramèr et al. 2016 use 10,000).
N_UNIFORM = 10_000


@dataclass(frozen=True, kw_only=True)
class Domain:
    """What the thief queries and what stolen models are measured on: ``d`` input features in the box
    [``low``, ``high``], ``K`` classes, ``p`` features after the victim's feature map; the served
    model's outputs ``test_p`` on the victim's held-out inputs and ``unif_p`` on :data:`N_UNIFORM`
    uniform random inputs ``unif_X``."""

    d: int
    K: int
    p: int
    low: np.ndarray
    high: np.ndarray
    unif_X: np.ndarray
    test_p: np.ndarray
    unif_p: np.ndarray

    @property
    def unknowns(self) -> int:
        """The parameters of the canonical form theta_k - theta_0: (K - 1) p."""
        return (self.K - 1) * self.p


def query_domain(victim: Victim, seed: int) -> Domain:
    """The :class:`Domain` of ``victim``: the box [min, max]^d of all feature values (for images, [0, 1]
    per pixel; a per-feature box would pin always-blank pixels to 0 and leave their weights
    unidentifiable) and the served outputs on the held-out and the seeded uniform inputs."""
    X_all = victim.dataset.X.reshape(len(victim.dataset), -1).astype(np.float64)
    d = X_all.shape[1]
    low, high = np.full(d, X_all.min()), np.full(d, X_all.max())
    K = victim.dataset.n_classes if victim.theta is None else victim.theta.shape[0]
    p = victim.feature_map(X_all[:1]).shape[1]
    unif_X = uniform_inputs(N_UNIFORM, low, high, np.random.default_rng([int(seed), 271828]))
    test_p = victim.predict_proba(victim.test_X)
    unif_p = victim.predict_proba(unif_X)
    return Domain(d=d, K=K, p=p, low=low, high=high, unif_X=unif_X, test_p=test_p, unif_p=unif_p)


def measure(name: str, model: ExtractedModel, victim: Victim, round_decimals: int | None,
            domain: Domain) -> ExtractionMethod:
    """One row of results.json's ``extraction.methods``: the queries a stolen ``model`` cost, its relative
    parameter error (canonical form; null when the victim's parameters are not visible), its label
    agreement 1 - R and mean total-variation distance to the served model on the test and uniform inputs
    (``round_decimals`` null: exact outputs)."""
    stolen_test = model.predict_proba(victim.test_X)
    stolen_unif = model.predict_proba(domain.unif_X)
    error = None if victim.theta is None else relative_error(model.theta, canonical(victim.theta))
    return ExtractionMethod(method=name, round_decimals=round_decimals, queries=model.queries, param_rel_error=error,
                            agreement_test=agreement(stolen_test, domain.test_p),
                            agreement_uniform=agreement(stolen_unif, domain.unif_p),
                            tv_distance=tv_distance(stolen_test, domain.test_p),
                            tv_distance_uniform=tv_distance(stolen_unif, domain.unif_p), details=model.details,
                            nulls=frozenset(k for k, v in (("round_decimals", round_decimals),
                                                           ("param_rel_error", error)) if v is None))


def post_processing(victim: Victim, stolen: ExtractedModel) -> dict:
    """For a DP target with a non-private counterpart: the stolen model's distance to the released
    (noisy) model and to the non-private one — extraction is post-processing of the DP release and
    cannot undo its noise."""
    np_canon = canonical(victim.theta_nonprivate)
    released = canonical(victim.theta)
    to_released = relative_error(stolen.theta, released)
    to_np = relative_error(stolen.theta, np_canon)
    np_api_p = softmax(victim.feature_map(victim.test_X) @ victim.theta_nonprivate.T)
    return {
        "stolen_vs_released_rel_error": to_released,
        "stolen_vs_nonprivate_rel_error": to_np,
        "released_vs_nonprivate_rel_error": relative_error(released, np_canon),
        "agreement_test_stolen_vs_nonprivate": agreement(stolen.predict_proba(victim.test_X), np_api_p),
        "nonprivate_model": victim.nonprivate_label,
        "equals_released": bool(to_released < to_np),
        "text": f"the stolen model is the released noisy model (relative distance {to_released:.2g}), not the "
                f"non-private one ({victim.nonprivate_label}; relative distance {to_np:.2g}): extraction is "
                f"post-processing of the DP release and cannot undo its noise",
    }
