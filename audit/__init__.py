"""privacy-audit: empirical privacy auditing of ML models and DP mechanisms.

Layers, bottom up: :mod:`audit.errors`; :mod:`audit.theory` (upper bounds: claims, accounting,
tradeoff curves) and :mod:`audit.stats` (lower bounds and the verdict); then the games
(:mod:`audit.games`, :mod:`audit.dp_game`), the runners (``audit.run_*``, sharing
:mod:`audit.run_context`) and the command line (:mod:`audit.cli`). Sources: docs/references.md.
"""

__version__ = "0.2.0"
