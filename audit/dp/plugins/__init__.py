"""``run dp`` on a user's trainer plugin (``--target module:factory``), one module per access the audit
has to the code: :mod:`.blackbox` (``train`` and ``predict_proba`` only), :mod:`.updates` (its DP-SGD
instrumented: update-level and white-box), :mod:`.config` (the accounting check, ``--check-config``)
and :mod:`.one_run` (``--one-run``, with the input canaries of :mod:`.input_canaries`; a language-model
trainer's black-box threat, canary texts: :mod:`.lm_blackbox`). The machinery every kind shares is
:mod:`audit.plugins`."""
