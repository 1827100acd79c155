"""A bug zoo: real DP-SGD mistakes, each a small trainer plugin beside its correct twin.

``examples.zoo.hooked``: hand-written loops with the two audit hooks (:mod:`targets.audit_hooks`);
``examples.zoo.opacus_loops``: Opacus loops. Every mistake is a factory ``NAME`` and its twin
``NAME_twin`` (the same loop, the mistake fixed): ``python -m audit run dp --target
examples.zoo.hooked:noise_reused --check-config --fail-above-claim``. The catch table, the source of
each mistake and what the audit cannot catch: docs/reference/bug-zoo.md; tests/e2e/test_bug_zoo.py runs
every pair.
"""
