"""privacy-audit: empirical privacy auditing of ML models and DP mechanisms.

Sub-modules: :mod:`audit.accounting` (theoretical upper bounds), :mod:`audit.bounds` (empirical
lower bounds), :mod:`audit.metrics` (ROC, AUC, TPR at FPR), :mod:`audit.games` (who trains on
which canaries), :mod:`audit.runner` (drivers), :mod:`audit.cli` (the command line).
"""

__version__ = "0.1.0"
