"""The range of claims the theory computes: the largest epsilon and the smallest and largest delta a claim may state.

Standard library only: the command line reads these limits when it parses ``--epsilon``, ``--epsilons`` and
``--delta`` (:mod:`audit.arguments`), before anything heavy is imported; :func:`audit.theory.checks.check_epsilon`
and :func:`audit.theory.checks.check_delta` with ``limited=True`` hold to the same range every epsilon and delta
the DP-SGD noise calibration searches with (a plugin's claim reaches it there, and ``rerun`` of an edited
config.json). Other claims are not limited: a DP-ERM or mechanism claim at epsilon 1e6 is computed in closed form.

The limits were measured on the DP-SGD noise calibration (:func:`audit.theory.dpsgd.calibrate_noise_multiplier`:
an RDP bracket, a Brent search on a coarse PLD, then dp-accounting's PLD at discretisation 1e-4; docs/references.md,
"DP-SGD accounting"), whose cost grows as the noise multiplier it looks for shrinks, with a larger epsilon or a
larger delta. CPU seconds of one search on the 2-core development machine (one core per process, 29 Nov 2026), for
the sampling rates and step counts of the built-in DP-SGD targets that take ``--epsilon``:

* the slowest, ``dpsgd_audit_logreg_digits`` (q = 0.05, 20 steps): 7 s at epsilon 4, 15 s at 16, 18 s at 24, 23 s
  at 32 and 54 s at 100 (delta 1e-5); 28 s at epsilon 32 and delta 1e-3, 25 s at 20 and 1e-2;
* the flagship's, ``dpsgd_mnist`` (q = 0.17, 88 steps): 5 s at epsilon 8, 12 s at 32, 15 s at 64, 21 s at 128,
  57 s at 200, over a minute at 300, and at 1000 the search fails (its bracket holds no root); at epsilon 8, 5 s at
  delta 1e-12, 7 s at 1e-13, 16 s at 1e-14, and at 1e-15 the search fails; 6 s at delta 1e-2, 12 s at 0.1, 18 s at
  0.5 and over a minute at 1 - 1e-6.

Within the limits every built-in target calibrates within 30 s; past ``exp(710)`` a float overflows, which the
pure-DP claims (Laplace, randomized response) compute.
"""

from __future__ import annotations

__all__ = ["EPSILON_MAX", "EPSILON_MAX_WHY", "DELTA_MIN", "DELTA_MIN_WHY", "DELTA_MAX", "DELTA_MAX_WHY"]

#: The largest epsilon a claim may state: at epsilon 32 and delta :data:`DELTA_MAX` the slowest built-in DP-SGD
#: target calibrates in 28 s (module docstring), and such a claim already allows a likelihood ratio of e^32, about
#: 8e13, between neighbouring datasets: no audit can tell a larger claim from no privacy at all.
EPSILON_MAX = 32.0
#: Why :data:`EPSILON_MAX` holds, for the error line that refuses a larger epsilon.
EPSILON_MAX_WHY = ("the DP-SGD noise calibration takes over 30 s beyond it (minutes, or fails, from about 200), and "
                   "a larger claim promises nothing an audit can test")
#: The smallest delta a claim may state (delta 0, pure DP, is a claim's own form, never a ``--delta``): the PLD
#: search slows below it and fails at 1e-15 (module docstring).
DELTA_MIN = 1e-12
#: Why :data:`DELTA_MIN` holds, for the error line that refuses a smaller delta.
DELTA_MIN_WHY = "dp-accounting's PLD search slows below it and fails at 1e-15"
#: The largest delta a claim may state: a larger delta slows the calibration as a larger epsilon does (module
#: docstring), and it lets a mechanism publish a record outright with that probability (a claim states delta
#: well below 1/n, 1e-5 for every built-in target).
DELTA_MAX = 1e-3
#: Why :data:`DELTA_MAX` holds, for the error line that refuses a larger delta.
DELTA_MAX_WHY = ("a larger delta lets a mechanism publish records outright, and the DP-SGD noise calibration takes "
                 "over 30 s beyond it")
