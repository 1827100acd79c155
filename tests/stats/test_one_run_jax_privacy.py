"""Our one-run statistics against jax_privacy's auditor (``jax_privacy.auditing.CanaryScoreAuditor``, 2.0) on
the same guesses: Steinke et al. 2023 agree; jax_privacy's ``epsilon_one_run_fdp`` tests the Gaussian mechanism
calibrated to (eps, delta) (its ``_gaussian_dp_blow_up_inverse``), so it equals our f-DP bound under a mu-GDP
null read as epsilon (``fdp_mu_lb`` then ``gaussian_epsilon``: an estimate under a Gaussian tradeoff), and lies
above our valid (eps, delta) f-DP bound (``fdp_epsilon_lb``), which tests the (eps, delta) curve itself
(docs/references.md, "One-run auditing")."""

from __future__ import annotations

import numpy as np
import pytest

auditing = pytest.importorskip("jax_privacy.auditing")

from audit.stats.one_run.fdp import fdp_epsilon_lb, fdp_mu_lb  # noqa: E402
from audit.stats.one_run.steinke import one_run_epsilon_lb  # noqa: E402
from audit.theory.gaussian import gaussian_epsilon  # noqa: E402

DELTA, CONFIDENCE = 1e-5, 0.95


def _auditor(m: int, k: int, v: int) -> tuple[object, float]:
    """Scores of m/2 'in' and m/2 'out' canaries whose k highest (>= threshold 0.5) hold v 'in' canaries."""
    n_in = m // 2
    in_scores = np.r_[np.ones(v), np.zeros(n_in - v)]
    out_scores = np.r_[np.ones(k - v), np.zeros(m - n_in - (k - v))]
    return auditing.CanaryScoreAuditor(in_scores, out_scores), 0.5


@pytest.mark.parametrize(("m", "k", "v"), [(1000, 100, 80), (650, 168, 106), (5000, 300, 290), (200, 20, 20)])
def test_one_run_bounds_agree_with_jax_privacy_on_the_same_guesses(m, k, v):
    auditor, threshold = _auditor(m, k, v)
    explicit = auditing.Explicit(threshold)
    steinke_jp = auditor.epsilon_one_run(1 - CONFIDENCE, DELTA, threshold_strategy=explicit)
    assert one_run_epsilon_lb(k, v, m, DELTA, CONFIDENCE) == pytest.approx(steinke_jp, abs=2e-3)
    fdp_jp = auditor.epsilon_one_run_fdp(1 - CONFIDENCE, DELTA, threshold_strategy=explicit)
    ours_gdp = gaussian_epsilon(fdp_mu_lb(k, v, m, CONFIDENCE), DELTA)
    assert ours_gdp == pytest.approx(fdp_jp, abs=2e-3)
    assert fdp_epsilon_lb(k, v, m, DELTA, CONFIDENCE) <= fdp_jp + 1e-6
