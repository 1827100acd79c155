"""Worked examples: user code audited by the workbench (from the repository root: --target examples.NAME:factory)."""
