"""``run dp --one-run``: :mod:`.bounds` (the rows, bounds and verdict of M canaries' scores, shared by
built-in targets and trainer plugins) and :mod:`.game` (the one-run game on the project's DP-SGD
targets; a trainer plugin's is :mod:`audit.dp.plugins.one_run`)."""
