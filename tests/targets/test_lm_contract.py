"""The contract of a trained language model as a plugin (``{"kind": "lm"}``, targets.lm.contract): a valid dict
loads; every malformed field, bad output of the user's functions and overlap of the sets is one line naming the
fix (a UserError: exit 2 on the command line); the user's own exceptions are TargetCodeErrors (exit 3)."""

from __future__ import annotations

import numpy as np
import pytest

from audit.errors import TargetCodeError, UserError
from targets.lm.contract import MIN_TEXTS, check_logprobs, lm_from_dict
from targets.plugins.loading import ModelPlugin, plugin_from_dict

MEMBERS = [f"member text number {i}" for i in range(MIN_TEXTS)]
NONMEMBERS = [f"another text, {i}" for i in range(MIN_TEXTS)]


def uniform(texts):
    """A byte-uniform language model: log(1/257) for every byte and the end."""
    return [np.full(len(t.encode()) + 1, -np.log(257.0)) for t in texts]


def moments(texts):
    return [np.tile([-np.log(257.0), 0.0], (len(t.encode()) + 1, 1)) for t in texts]


def valid(**changes) -> dict:
    made = {"kind": "lm", "logprobs": uniform, "members": MEMBERS, "nonmembers": NONMEMBERS, "moments": moments,
            "base_logprobs": uniform, "train": lambda texts, seed: uniform,
            "population": [f"population {i}" for i in range(10)], "membership": "independent-coins"}
    return {k: v for k, v in (made | changes).items() if v is not None}


def test_a_valid_dict_loads_with_what_it_gives():
    lm = lm_from_dict("t:lm", valid(claim={"epsilon": 2.0, "delta": 1e-5}))
    assert lm.allows_epsilon_bound and lm.delta == 1e-5 and lm.rng == "seed"
    assert len(lm.token_logprobs(MEMBERS[:3])) == 3 and lm.token_moments(MEMBERS[:1])[0].shape[1] == 2
    ref = lm.fit_reference(lm.population, 0)
    assert np.allclose(ref(["ab"])[0], -np.log(257.0))
    info = lm.to_dict()
    assert info["moments"] and info["base_model"] and info["reference_training"] and info["n_population"] == 10


def test_plugins_hand_an_lm_dict_on_unvalidated():
    plugin = plugin_from_dict("t:lm", valid())
    assert isinstance(plugin, ModelPlugin) and plugin.made["kind"] == "lm"
    with pytest.raises(UserError, match="unknown key 'member'; did you mean 'members'"):
        plugin_from_dict("t:lm", valid(member=MEMBERS))


@pytest.mark.parametrize(("changes", "message"), [
    ({"logprobs": None}, "field 'logprobs' is missing"),
    ({"logprobs": "model.bin"}, "field 'logprobs' must be a function"),
    ({"members": "one text"}, "field 'members' must be a list of strings"),
    ({"nonmembers": NONMEMBERS[:3]}, f"needs at least {MIN_TEXTS} non-empty texts, got 3"),
    ({"members": MEMBERS[:-1] + [""]}, "needs at least"),
    ({"nonmembers": NONMEMBERS[:-1] + [MEMBERS[0]]}, "1 text\\(s\\) are both members and non-members"),
    ({"population": [MEMBERS[0]]}, "population text\\(s\\) are also members or non-members"),
    ({"population": None}, "field 'train' needs 'population'"),
    ({"train": 3}, "field 'train' must be a function"),
    ({"moments": [1, 2]}, "field 'moments' must be a function"),
    ({"membership": "coins"}, "field 'membership' must be 'independent-coins'"),
    ({"batch_size": 0}, "field 'batch_size' must be a whole number >= 1"),
    ({"training_size": 3}, "field 'training_size' must be a whole number"),
    ({"params": [1]}, "field 'params' must be a dict"),
    ({"claim": {"epsilon": -1}}, "epsilon"),
    ({"kind": "model"}, "must be a dict with 'kind': 'lm'"),
])
def test_malformed_fields_are_one_line(changes, message):
    with pytest.raises(UserError, match=message) as info:
        lm_from_dict("t:lm", valid(**changes))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("logprobs", "message"), [
    (lambda texts: [np.full(3, -1.0)], "must return one 1-D array of token log-probabilities per text \\(8 texts\\), "
                                       "got 1"),
    (lambda texts: [np.full(3, 0.5) for _ in texts], "0.5 > 0 .*return log-probabilities \\(log p\\), not"),
    (lambda texts: [np.array([np.nan]) for _ in texts], "NaN or infinity"),
    (lambda texts: [np.zeros(0) for _ in texts], "returned no token for text 0"),
    (lambda texts: [np.zeros((2, 2)) - 1 for _ in texts], "returned shape \\(2, 2\\) for text 0"),
    (lambda texts: 3.0, "got float"),
])
def test_bad_outputs_of_logprobs_are_one_line(logprobs, message):
    with pytest.raises(UserError, match=message) as info:
        lm_from_dict("t:lm", valid(logprobs=logprobs))
    assert "\n" not in str(info.value)


def test_moments_must_match_the_tokens_and_have_a_std():
    short = valid(moments=lambda texts: [np.zeros((2, 2)) for _ in texts])
    with pytest.raises(UserError, match="'moments' gave \\[2, 2"):
        lm_from_dict("t:lm", short)
    with pytest.raises(UserError, match="negative standard deviation"):
        check_logprobs([np.array([[-1.0, -0.5]])], ["x"], "moments", moments=True)


def test_the_users_exceptions_are_target_code_errors():
    def broken(texts):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(TargetCodeError, match="logprobs of t:lm raised RuntimeError: CUDA out of memory"):
        lm_from_dict("t:lm", valid(logprobs=broken))
    lm = lm_from_dict("t:lm", valid(train=lambda texts, seed: "not a function"))
    with pytest.raises(UserError, match="train of t:lm must return a function"):
        lm.fit_reference(lm.population, 0)
