"""``run extraction`` on a user's trainer plugin: :mod:`.blackbox` (its ``predict_proba`` is the only
access). The machinery every kind shares is :mod:`audit.plugins`."""
