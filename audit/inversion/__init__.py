"""``run inversion``: MI-FACE model inversion against a trained target or a trainer plugin.
Modules, bottom up: :mod:`.target` (what is inverted), :mod:`.plugins` (a plugin as target),
:mod:`.measures` (the record split, the yardstick and the member gap), :mod:`.presentation` (grid,
tables, verdict), :mod:`.runner`, :mod:`.command`."""
