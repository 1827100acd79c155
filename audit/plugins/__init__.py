"""Shared adapters of a user's trainer plugin, used by every audit kind: :mod:`.training` (calling
the user's ``train`` and ``predict_proba`` under the thread policy) and :mod:`.probe` (running the
user's DP-SGD once, instrumented, to read the configuration it runs and its claim)."""
