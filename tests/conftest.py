"""Test-suite settings: property-based tests draw their examples deterministically (a fixed
seed derived from each test), so every run of the suite checks the same cases."""

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")
