"""The language-model trainer contract (targets.plugins.lm): a well-formed dict becomes a trainer plugin over
texts; each malformed field is one line naming it (exit status 2 through the CLI; in a process of its own:
tests/e2e/test_lm_plugin_exit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from audit.errors import UserError
from targets.plugins.loading import TrainerPlugin, plugin_from_dict

TEXTS = [f"speech number {i}" for i in range(12)]


def _train(texts, seed):
    return lambda batch: [np.zeros(len(t)) for t in batch]


def _made(**changes):
    made = {"kind": "lm_trainer", "texts": TEXTS, "train": _train, "claim": {"epsilon": 4.0, "delta": 1e-5},
            "canary_tokens": ["<|r0|>", "<|r1|>"]}
    made.update(changes)
    return {k: v for k, v in made.items() if v is not None}


def test_well_formed_lm_trainer_is_a_trainer_plugin_over_texts():
    plugin = plugin_from_dict("m:f", _made())
    assert isinstance(plugin, TrainerPlugin) and plugin.lm.claimed and plugin.rng == "seed"
    X, y = plugin.dataset
    assert X.dtype == object and list(X) == TEXTS and not y.any()
    # the accounting check's other worlds: one text more, one less
    assert len(np.concatenate([X, X[:1]])) == 13 and list(X[1:]) == TEXTS[1:]
    model = plugin.train(X, y, 0)
    assert [len(a) for a in model(["ab"])] == [2]


def test_lm_trainer_without_claim_is_non_private():
    plugin = plugin_from_dict("m:f", _made(claim=None))
    assert plugin.claim is None and not plugin.lm.claimed


@pytest.mark.parametrize(("changes", "message"), [
    ({"texts": None}, "needs field 'texts'"),
    ({"texts": "one long text"}, "field 'texts' must be a list of str"),
    ({"texts": TEXTS[:3]}, "needs at least 10 texts"),
    ({"texts": TEXTS[:11] + [7]}, "item 11"),
    ({"train": "not callable"}, "field 'train' must be a function train(texts, seed)"),
    ({"canary_tokens": ["speech"]}, "canary token 'speech' occurs in the texts"),
    ({"prompts": TEXTS}, "unknown key 'prompts'"),
    ({"claims": {"epsilon": 4.0}}, "unknown key 'claims'; did you mean 'claim'?"),
    ({"texts": [t.encode() for t in TEXTS]}, "field 'texts' must hold non-empty str; item 0 is b'speech"),
    ({"claim": {"epsilon": -1}}, "epsilon"),
])
def test_malformed_lm_trainer_is_one_line(changes, message):
    with pytest.raises(UserError, match=None) as err:
        plugin_from_dict("m:f", _made(**changes))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_canary_texts_of_each_kind_are_seeded_and_fit_the_contract():
    from audit.dp.plugins.lm_blackbox import (
        BYTE_SECRET_CHARS,
        NEW_TOKEN_REPEATS,
        PREFIX_CHARS,
        RARE_BYTE_BLOCK,
        SUFFIX_CHARS,
        canary_texts,
        rare_characters,
    )

    held_out = "a held-out prefix that is longer than the prefix the canary keeps"
    plugin = plugin_from_dict("m:f", _made(canary_prefixes=[held_out] * 3))
    prefixes, secrets = canary_texts(plugin, "new-token", 2, seed=0)
    # each canary's own token, repeated inside its one text; the prefix a short cut of a held-out text
    assert NEW_TOKEN_REPEATS > 1 and secrets == ["<|r0|>" * NEW_TOKEN_REPEATS, "<|r1|>" * NEW_TOKEN_REPEATS]
    assert prefixes == [held_out[:PREFIX_CHARS]] * 2 and 0 < PREFIX_CHARS < len(held_out)
    assert canary_texts(plugin, "rare-unigram", 5, seed=3) == canary_texts(plugin, "rare-unigram", 5, seed=3)
    rare = set(rare_characters(TEXTS))
    for kind, allowed in (("rare-unigram", rare), ("random-suffix", set("abcdefghijklmnopqrstuvwxyz"))):
        _, secrets = canary_texts(plugin, kind, 5, seed=0)
        assert all(len(s) == SUFFIX_CHARS + 1 and set(s[1:]) <= allowed for s in secrets)
    assert rare_characters(["aab", "b!c"])[:2] == ["!", "c"]
    # rare-bytes: characters of the two-byte block that no record contains (existing byte tokens, for LoRA)
    _, secrets = canary_texts(plugin, "rare-bytes", 20, seed=0)
    used = set("".join(TEXTS))
    assert all(len(s) == BYTE_SECRET_CHARS and len(s.encode()) == 2 * BYTE_SECRET_CHARS for s in secrets)
    assert all(RARE_BYTE_BLOCK[0] <= ord(c) < RARE_BYTE_BLOCK[1] and c not in used for s in secrets for c in s)
    assert len(set(secrets)) == 20 and secrets == canary_texts(plugin, "rare-bytes", 20, seed=0)[1]
    with pytest.raises(UserError, match="gives 2 canary tokens"):
        canary_texts(plugin, "new-token", 3, seed=0)


def test_logprobs_that_break_the_contract_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from audit.cli import main

    (tmp_path / "short_lm.py").write_text(
        "def lm():\n"
        "    texts = [f'speech number {i}' for i in range(12)]\n"
        "    return {'kind': 'lm_trainer', 'texts': texts, 'train': lambda texts, seed: (lambda batch: []),\n"
        "            'canary_tokens': ['<|r0|>', '<|r1|>', '<|r2|>', '<|r3|>']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["run", "dp", "--target", "short_lm:lm", "--one-run", "--threat", "black-box", "--epsilon", "1",
                 "--quick", "-q", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "must return one 1-D array of token log-probabilities per text" in err[0]
