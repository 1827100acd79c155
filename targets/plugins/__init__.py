"""User plugins loaded and wrapped as targets: :mod:`.loading` (importing ``module:factory`` and
validating the plugin dict), :mod:`.mechanism` (a mechanism plugin as a :class:`targets.mechanisms.Mechanism`),
:mod:`.outputs` (its outputs as vectors or categories) and :mod:`.rng` (the randomness it takes).
Contract: docs/reference/plugins.md."""
