"""Lower bounds: what an attack's outcome proves, at the confidence it states.

Error rates and Clopper–Pearson bounds (:mod:`.rates`, :mod:`.clopper_pearson`), Gaussian-DP
bounds (:mod:`.gdp`), one-run auditing (:mod:`.one_run`: Steinke et al.'s bound, the f-DP test and
the design by simulating the claim), the sampling check on batch logs
(:mod:`.sampling_check`), threshold selection (:mod:`.thresholds`),
per-step auditing (:mod:`.per_step`), attack metrics (:mod:`.metrics`), learned test statistics
(:mod:`.score_fit`), the blind split check on members vs non-members (:mod:`.split_check`), the
bound record (:mod:`.lower_bound`), the verdict with family-wise confidence (:mod:`.verdict`), and
the typed outcome of an audit, the blocks of results.json (:mod:`.outcome`, on :mod:`.blocks`).
Depends on numpy, scipy, scikit-learn, :mod:`audit.theory` and :mod:`audit.errors` only. Formulas
and sources: docs/references.md.
"""
