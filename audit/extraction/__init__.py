"""``run extraction``: equation-solving extraction of (multinomial) logistic regressions.
Modules, bottom up: :mod:`.victim` (what is extracted), :mod:`.plugins` (a plugin as victim),
:mod:`.measures` (the query domain and the figures of a stolen model), :mod:`.presentation`
(tables, verdict), :mod:`.runner`, :mod:`.command`."""
