"""``run inversion`` on a user's trainer plugin: :mod:`.blackbox` (MI-FACE by finite differences through
its ``predict_proba``). The machinery every kind shares is :mod:`audit.plugins`."""
