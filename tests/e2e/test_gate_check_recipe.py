"""The recipe "Add a gate check" of ``docs/contributing.md`` works: its two modules, written from the page into a copy
of the packages, plus its one import line in ``audit/plugins/accounting.py``, add a check to the gate. In the copy,
on a small hooked DP-SGD loop: the new finding is in the block, the alpha split holds its share as the registry
computes it, a loop that breaks what it checks (noise drawn with ``torch.rand``) is a violation named by it, and a
mechanism its ``supports`` declines makes it could-not-read.

The recipe runs in a subprocess on the copy, so its registration never reaches this process's registry
(``audit.plugins.gate_checks`` is module-global). About 10 s: the copy, one interpreter, two gates of a linear model
on 200 rows.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from helpers import ROOT, python_in

CONTRIBUTING = ROOT / "docs" / "contributing.md"
#: The recipe's modules: fenced blocks ``{.python title="PATH" data-recipe="gate-check"}``.
MODULE = re.compile(r'^```\{\.python title="(?P<path>[^"]+)" data-recipe="gate-check"\}\n(?P<body>.*?)^```$',
                    re.M | re.S)
#: Its import line: the block ``{.python data-recipe="gate-check-import"}``.
IMPORT = re.compile(r'^```\{\.python data-recipe="gate-check-import"\}\n(?P<body>.*?)^```$', re.M | re.S)
#: Where the page puts the import line: before the first ``from audit.plugins.`` import of ``accounting.py`` (isort's
#: order: ``audit.plugins`` sorts before its submodules).
ANCHOR = re.compile(r"^from audit\.plugins\.", re.M)

#: Run in the copy: the gate on a correct loop and on one whose noise is torch.rand; the registry's view.
SCRIPT = r'''
import json

import numpy as np
import torch

from audit.dp.plugins.config import plugin_accounting
from audit.plugins.accounting import deciding_findings
from audit.plugins.gate_checks import _REGISTRY, alpha_split, registered, unsupported_finding
from audit.theory.declared_mechanism import DPSGD, DeclaredMechanism, NoisingMatrix, PoissonParticipation
from audit.theory.dpsgd import calibrate_noise_multiplier
from targets.audit_hooks import add_canary, report_update
from targets.plugins.loading import plugin_from_dict

EPS, DELTA, Q, STEPS, C, N, ALPHA = 2.0, 1e-5, 0.1, 20, 1.0, 200, 0.05
SIGMA = float(calibrate_noise_multiplier(EPS, DELTA, Q, STEPS))


def loop(draw):
    def train(X, y, seed):
        gen = torch.manual_seed(seed)
        X, y = torch.as_tensor(X), torch.as_tensor(y)
        w = torch.zeros(X.shape[1], 2)
        for _ in range(STEPS):
            batch = torch.nonzero(torch.rand(len(X), generator=gen) < Q).reshape(-1)
            p = torch.softmax(X[batch] @ w, 1)
            g = X[batch][:, :, None] * (p - torch.nn.functional.one_hot(y[batch], 2))[:, None, :]
            norms = g.flatten(1).norm(dim=1).clamp(min=1e-12)
            summed = (g * (C / norms).clamp(max=1.0)[:, None, None]).sum(0)
            add_canary(summed, clip_norm=C, sample_rate=Q, batch=batch)
            noisy = summed + SIGMA * C * draw(summed.shape, generator=gen)
            report_update(noisy)
            w = w - 0.5 * noisy / (Q * N)
        return lambda Z: torch.softmax(torch.as_tensor(Z, dtype=torch.float32) @ w, 1).numpy()

    return train


def gate(draw):
    rng = np.random.default_rng(0)
    data = rng.normal(size=(N, 5)).astype(np.float32), rng.integers(0, 2, N)
    plugin = plugin_from_dict("recipe:loop", {"kind": "trainer", "name": "loop", "dataset": data, "train": loop(draw),
                                              "claim": {"epsilon": EPS, "delta": DELTA}})
    block = plugin_accounting(plugin, None, 0, ALPHA).block
    return {"block": block.to_dict(), "deciding": [f.check for f in deciding_findings(block)]}


blt = DeclaredMechanism(PoissonParticipation(rate=Q), NoisingMatrix("blt", ((0.9, 0.5), (0.2, 0.1))))
check = _REGISTRY["noise-mean"]
print(json.dumps({
    "shares": {c.name: c.alpha_share for c in registered(DPSGD) if c.alpha_share > 0},
    "split": alpha_split(ALPHA),
    "bandmf_split": alpha_split(ALPHA, DeclaredMechanism(PoissonParticipation(rate=0.4, cycle=4),
                                                         NoisingMatrix("banded-toeplitz", (0.7, 0.5, 0.4, 0.3)))),
    "blt_reason": check.supports(blt),
    "blt_finding": unsupported_finding(check, check.supports(blt)).to_dict(),
    "correct": gate(torch.randn),
    "uniform": gate(torch.rand),
}))
'''


def _finding(block: dict, check: str) -> dict:
    (found,) = [f for f in block["findings"] if f["check"] == check]
    return found


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The recipe applied to a copy of the packages and the gate run there (SCRIPT's JSON)."""
    pytest.importorskip("torch")
    copy = tmp_path_factory.mktemp("recipe") / "repo"
    for package in ("audit", "targets", "attacks", "reports"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    page = CONTRIBUTING.read_text(encoding="utf-8")
    modules = {m["path"]: m["body"] for m in MODULE.finditer(page)}
    assert sorted(modules) == ["audit/plugins/noise_mean_check.py", "audit/stats/noise_mean.py"]
    for path, body in modules.items():
        assert not (copy / path).exists(), f"{path} exists already: the recipe must add it"
        (copy / path).write_text(body, encoding="utf-8")
    (line,) = [m["body"] for m in IMPORT.finditer(page)]
    accounting = copy / "audit" / "plugins" / "accounting.py"
    text = accounting.read_text(encoding="utf-8")
    first = ANCHOR.search(text)
    assert first and line.count("\n") == 1 and line not in text
    accounting.write_text(text[:first.start()] + line + text[first.start():], encoding="utf-8")
    done = python_in(copy, "-c", SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_new_check_touches_three_modules_and_its_finding_is_in_the_block(recipe_run: dict) -> None:
    block = recipe_run["correct"]["block"]
    assert block["status"] == "ok", [f for f in block["findings"] if f["problem"] or not f["read"]]
    found = _finding(block, "noise-mean")
    assert found["read"] and not found["problem"] and "centred" in found["message"]
    details = found["details"]
    assert details["values"] > 0 and details["alpha"] == pytest.approx(block["alpha_split"]["noise-mean"])


def test_the_alpha_split_holds_its_share_computed_from_the_registry(recipe_run: dict) -> None:
    from audit.plugins.accounting import CHECKS  # noqa: F401  (this process: the registry without the recipe)
    from audit.plugins.gate_checks import registered

    before = {c.name: c.alpha_share for c in registered() if c.alpha_share > 0}
    assert "noise-mean" not in before  # the recipe ran in its copy only
    shares = recipe_run["shares"]
    assert shares == before | {"noise-mean": 1.0}
    alpha, total = 0.05, sum(shares.values())
    expected = {name: alpha * share / total for name, share in shares.items()}
    assert recipe_run["split"] == pytest.approx(expected)
    split = recipe_run["correct"]["block"]["alpha_split"]
    assert {name: split[name] for name in expected} == pytest.approx(expected)
    assert sum(split[name] for name in expected) == pytest.approx(alpha)
    # under a declared BandMF the checks of plain Poisson do not apply: participation 2, noise 1, noise-mean 1
    assert recipe_run["bandmf_split"] == pytest.approx({"participation": alpha / 2, "noise": alpha / 4,
                                                        "noise-mean": alpha / 4})


def test_a_loop_that_breaks_it_is_a_violation_named_by_it(recipe_run: dict) -> None:
    uniform = recipe_run["uniform"]
    block = uniform["block"]
    assert block["status"] == "violation"
    assert uniform["deciding"][0] == "noise-mean", uniform["deciding"]  # order 85: before the noise tests (90)
    found = _finding(block, "noise-mean")
    assert found["violation"] and "not centred" in found["message"] and "torch.randn" in found["fix"]


def test_a_mechanism_it_does_not_support_is_could_not_read(recipe_run: dict) -> None:
    assert "blt strategy" in recipe_run["blt_reason"]
    finding = recipe_run["blt_finding"]
    assert finding["check"] == "noise-mean" and not finding["read"] and not finding["violation"]
    assert finding["message"].startswith("Could not read: the noise-mean check cannot test the declared mechanism")
