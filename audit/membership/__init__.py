"""``run membership``: the one-run membership game with shadow, LiRA, RMIA, loss and confidence
attacks. Modules, bottom up: :mod:`.game` (canaries and masks), :mod:`.subjects` (what is
trained: a built-in target or a plugin), :mod:`.bounds` (the one-run guess counts and bounds), :mod:`.runner`
and :mod:`.command`."""
