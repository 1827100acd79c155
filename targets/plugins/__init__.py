"""User plugins loaded and wrapped as targets: :mod:`.loading` (importing ``module:factory`` and
validating the plugin dict), :mod:`.mechanism` (a mechanism plugin as a :class:`targets.mechanisms.Mechanism`),
:mod:`.outputs` (its outputs as vectors or categories), :mod:`.rng` (the randomness it takes) and :mod:`.lm`
(the language-model trainer contract, ``"kind": "lm_trainer"``: texts in, per-token log-probabilities out).
Contract: docs/reference/plugins.md."""
