"""The mechanism zoo (examples/zoo/jax_mechanisms.py; issue 49; docs/references.md, "Configuration checks",
"Correlated noise" and "Bug zoo"): jax_privacy loops of the mechanisms the gate reads from a plugin's
``"mechanism"`` — Band-MF with cyclic Poisson, truncated Poisson, cyclic Poisson and balls-in-bins with
independent noise — and four mistakes, each at 40 and 200 steps, audited by ``run dp --check-config
--fail-above-claim`` as a user runs it.

The assertions are the target: a correct loop exits 0 with the accounting check "ok" and prints the declared
mechanism's epsilon (within 2% of jax_privacy's, its claim); a mistake exits 1 with a violation by the finding
that names it. What the gate does not do yet is a strict xfail naming what is missing (:data:`PENDING`), so the
file passes today and a loop the gate starts to get right fails as XPASS until its mark is removed.

At the wired gate every loop meets it: the seed-0 participation false alarm of Band-MF and cyclic Poisson at 40
steps (p = 0.0046) is not confirmed on a second training and stays a note; the truncation is named by its cap;
balls-in-bins is could-not-read for want of an accountant (jax_privacy has no DpEvent for it), as it should be
until one is given.

Every loop runs at 40 steps, and at 200 those of :data:`LONG`; ``benchmarks/bench_mechanism_zoo.py`` runs them all
at both lengths (its JSON is the mechanism zoo's catch table). 3 to 17 s a loop on the shared 2-core machine (the
steps compile once per loop, padded to a fixed capacity; the noise the claim needs is calibrated once and
remembered on disk).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jax")
pytest.importorskip("jax_privacy")

from audit.cli import main  # noqa: E402
from examples.zoo import jax_mechanisms as zoo  # noqa: E402

#: The finding that names each mistake: (the checks that may report it, words one of which its message holds). A
#: violation for another cause ("shuffled", "fixed-size", a rate off by the cap) is not it: its fix is wrong.
NAMED = {
    "cyclic_as_poisson": (("sampling", "participation", "periodicity"), ("cycl", "period", "residue")),
    "truncation_not_accounted": (("sampling", "participation", "truncation"), ("truncat", "cap")),
    "bandmf_without_cycle": (("sampling", "participation"), ("cycl", "residue", "separat")),
    "wrong_noising_matrix": (("noise", "noise-level", "noise-independence"),
                             ("correlat", "strateg", "matrix", "independ")),
}

#: What the gate lacks for a loop to meet its target: the xfail reason (none left at the gate of issue 49's wiring:
#: the seed-0 participation false alarm of Band-MF and cyclic Poisson at 40 steps (p = 0.0046) is not confirmed on
#: a second training and stays a note; the cap is named by the truncation finding).
PENDING: dict[tuple[str, int], str] = {}


#: The loops the suite also runs at 200 steps (every loop at 40): the headline mechanism, and the mistake whose
#: verdict followed the training's length (issue 49). ``benchmarks/bench_mechanism_zoo.py`` runs every loop at both.
LONG = ("bandmf", "cyclic_as_poisson")


def _lengths(name: str) -> tuple[int, ...]:
    return zoo.LENGTHS if name in LONG else zoo.LENGTHS[:1]


def _param(name: str, steps: int):
    target = f"examples.zoo.jax_mechanisms:{name}_{steps}"
    missing = PENDING.get((name, steps))
    marks = [pytest.mark.xfail(strict=True, reason=f"issue 49: {missing}")] if missing else []
    return pytest.param(target, name, id=f"{name}_{steps}", marks=marks)


def _audit(target: str, out) -> tuple[int, dict]:
    code = main(["run", "dp", "--target", target, "--check-config", "--fail-above-claim", "-q", "--out", str(out)])
    (path,) = out.glob("*/results.json")
    return code, json.loads(path.read_text())


def _findings(results: dict) -> list[str]:
    """Every finding that is not plainly ok, for the assertion messages."""
    return [f"{f['check']} ({'violation' if f.get('violation') else 'unread' if not f.get('read', True) else 'note'})"
            f": {f['message'][:200]}" for f in results["config_check"]["findings"]
            if f.get("problem") or f.get("violation") or not f.get("read", True)]


@pytest.mark.parametrize(("target", "name"), [_param(name, steps) for name in zoo.CORRECT if name != "balls_in_bins"
                                                for steps in _lengths(name)])
def test_the_correct_mechanism_passes(target, name, tmp_path):
    code, results = _audit(target, tmp_path)
    assert code == 0, (results["verdict"]["text"][:400], _findings(results))
    assert results["config_check"]["status"] in ("ok", "finding"), _findings(results)  # a note: not confirmed
    claimed = results["config_check"]["claimed_epsilon"]
    (printed,) = [f["details"]["epsilon"] for f in results["config_check"]["findings"] if f["check"] == "epsilon"]
    assert printed == pytest.approx(claimed, rel=0.02), "the printed epsilon is not the declared mechanism's"


@pytest.mark.parametrize("steps", _lengths("balls_in_bins"))
def test_balls_in_bins_is_unread_for_want_of_an_accountant(steps, tmp_path):
    """jax_privacy has no DpEvent for balls-in-bins (a Monte Carlo estimate only): the epsilon check says
    could-not-read (exit 2), and nothing of the correct loop is a violation."""
    code, results = _audit(f"examples.zoo.jax_mechanisms:balls_in_bins_{steps}", tmp_path)
    assert code == 2, (results["verdict"]["text"][:400], _findings(results))
    findings = results["config_check"]["findings"]
    assert not any(f.get("violation") for f in findings), _findings(results)
    (epsilon,) = [f for f in findings if f["check"] == "epsilon"]
    assert not epsilon["read"] and "dpevent" in epsilon["message"].lower()


@pytest.mark.parametrize(("target", "name"), [_param(name, steps) for name in zoo.MISTAKES for steps in _lengths(name)])
def test_the_mechanism_mistake_fails_by_its_finding(target, name, tmp_path):
    code, results = _audit(target, tmp_path)
    assert code == 1, (results["verdict"]["text"][:400], _findings(results))
    assert results["verdict"]["status"] == "violation"
    checks, words = NAMED[name]
    named = [f for f in results["config_check"]["findings"] if f.get("violation") and f["check"] in checks
             and any(word in f["message"].lower() for word in words)]
    assert named and all(f.get("fix") for f in named), _findings(results)
