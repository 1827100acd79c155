"""``run extraction``: equation-solving extraction of (multinomial) logistic regressions.
Modules, bottom up: :mod:`.victim` (what is extracted), :mod:`.plugin` (a plugin as victim),
:mod:`.runner`, :mod:`.command`."""
