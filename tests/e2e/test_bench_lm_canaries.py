"""The canary constructions of benchmarks/bench_lm_canaries.py (no training): each construction's prefix
length, repeated secret and alphabet, its decoy drawn alike, and new tokens distinct across constructions and
never a decoy's."""

import importlib.util
import re

import numpy as np
import pytest
from helpers import ROOT

pytest.importorskip("torch")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_lm_canaries", ROOT / "benchmarks" / "bench_lm_canaries.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_constructions_repeat_their_secret_after_a_prefix_of_the_stated_length():
    bench = _bench()
    from audit.dp.plugins.lm_blackbox import SUFFIX_CHARS, rare_characters

    texts = ["abc qz!", "hello world", "zz top"] * 4
    made = {"texts": texts, "canary_prefixes": [f"held-out speech number {i:03d} and more" for i in range(40)],
            "canary_tokens": [f"<|r{i}|>" for i in range(200)]}
    per_kind = 7
    got = bench._canaries(made, per_kind, list(bench.CONSTRUCTIONS), np.random.default_rng(0))
    assert got.keys() == bench.CONSTRUCTIONS.keys()
    tokens, decoys = [], []
    for name, (prefixes, secrets, decoy_secrets) in got.items():
        kind, prefix, repeats = bench.CONSTRUCTIONS[name]
        assert len(prefixes) == len(secrets) == len(decoy_secrets) == per_kind
        assert all(len(p) == prefix for p in prefixes)
        for secret, decoy in zip(secrets, decoy_secrets, strict=True):
            for text, found in ((secret, tokens), (decoy, decoys)):
                unit = text[: len(text) // repeats]
                assert unit * repeats == text
                if kind == "new-token":
                    assert re.fullmatch(r"<\|r\d+\|>", unit)
                    found.append(unit)
                elif kind in bench.BYTE_ALPHABETS:
                    assert len(unit) == 4 and set(unit) <= set(bench.BYTE_ALPHABETS[kind])
                else:
                    allowed = (set(rare_characters(texts)) if kind == "rare-unigram" else
                               set("abcdefghijklmnopqrstuvwxyz"))
                    assert len(unit) == SUFFIX_CHARS + 1 and unit[0] == " " and set(unit[1:]) <= allowed
    assert len(tokens) == len(set(tokens)) == per_kind * 3  # one token per canary, never shared
    assert not set(tokens) & set(decoys) and len(set(decoys)) <= bench.SPARE_TOKENS  # decoys: the spare tokens
    again = bench._canaries(made, per_kind, list(bench.CONSTRUCTIONS), np.random.default_rng(0))
    assert again == got  # seeded
