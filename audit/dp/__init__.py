"""``run dp`` and ``sweep dp``: multi-run audits of DP training and DP-ERM.

Modules, bottom up: :mod:`.setup_types` (what a trainer adapter returns), :mod:`.game` (the
distinguishing game's statistics), :mod:`.canaries` and :mod:`.canary_steps` (canaries and the
update-level observation), the adapters (:mod:`.dperm_setup`, :mod:`.dpsgd_setup` with
:mod:`.dpsgd_observer` (how its runs are trained and scored),
:mod:`.plugins` for a user's trainer plugin), :mod:`.setup` (which adapter a target takes),
:mod:`.runner` (the game for any setup, results, report), :mod:`.one_run` (``--one-run``), :mod:`.sweep`
and :mod:`.command` (the command line).
"""
