"""privacy-audit: empirical privacy auditing of ML models and DP mechanisms.

Layers, bottom up: :mod:`audit.errors`; :mod:`audit.theory` (upper bounds: claims, accounting,
tradeoff curves) and :mod:`audit.stats` (lower bounds and the verdict); then the games
(:mod:`audit.membership.game`, :mod:`audit.dp.game`), the runners (``audit.<kind>.runner``, sharing
:mod:`audit.run_context` and the results header of :mod:`audit.results_header`) and the command
line (:mod:`audit.cli`), which renders each run's report after its runner (:mod:`audit.report_step`).
Sources: docs/references.md.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("privacy-audit")  # one source of truth: pyproject.toml
except PackageNotFoundError:  # a checkout used without installing it
    __version__ = "unknown (not installed)"
