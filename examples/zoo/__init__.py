"""A bug zoo: real DP-SGD mistakes, each a small trainer plugin beside its correct twin.

``examples.zoo.hooked``: hand-written loops with the two audit hooks (:mod:`targets.audit_hooks`);
``examples.zoo.opacus_loops``: Opacus loops; ``examples.zoo.lm_loops``: Opacus fine-tuning of a language
model. Every mistake is a factory ``NAME`` and its twin ``NAME_twin`` (the same loop, the mistake fixed; the
language-model loops pair each mistake with a correct loop in ``TWINS``); ``CORRECT`` lists correct loops
written as the docs show them, which must pass: ``python -m audit run dp --target
examples.zoo.hooked:noise_reused --check-config --fail-above-claim``. The catch table, the source of
each mistake and what the audit cannot catch: docs/reference/bug-zoo.md; tests/e2e/test_bug_zoo.py runs
every pair.
"""
