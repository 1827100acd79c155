"""Upper bounds: what a target claims and what that claim allows.

Privacy claims (:mod:`.claims`, :mod:`.rdp`, :mod:`.pld`, :mod:`.dpsgd`), Gaussian DP and the
Gaussian mechanism (:mod:`.gaussian`), f-DP tradeoff curves (:mod:`.tradeoff`), composition and
amplification (:mod:`.composition`), reconstruction-robustness bounds (:mod:`.rero`), claims to
and from JSON (:mod:`.claim_json`), checks of a DP-SGD configuration read from code
(:mod:`.config_check`), and the one adapter to dp-accounting (:mod:`.dp_accounting_adapter`).
Depends on numpy, scipy, dp-accounting and :mod:`audit.errors` only. Formulas and sources:
docs/references.md.
"""
