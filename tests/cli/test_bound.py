"""`python -m audit bound`: the theoretical privacy of every DP target."""

from __future__ import annotations

import json
import re

import matplotlib.image as mpimg
import numpy as np
import pytest
from scipy import stats

from audit.cli import main
from audit.target_defaults import load_catalogue
from audit.target_theory import REQUIRED_ALPHAS, REQUIRED_KAPPAS, theory_for
from audit.theory.claims import LaplaceClaim, PureDPClaim
from audit.theory.gaussian import gaussian_tradeoff
from audit.theory.tradeoff import implied_gdp_mu

#: The targets `bound` applies to, by the catalogue (collecting reads no accountant): each has a claim, asserted below.
DP_TARGETS = [name for name, use in load_catalogue().items() if "bound" in use.run_kinds]


def _bound_json(capsys, *args: str) -> dict:
    assert main(["bound", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", DP_TARGETS)
def test_bound_json_for_every_dp_target(name, capsys):
    out = _bound_json(capsys, "--target", name)
    theory = theory_for(name)
    assert theory.claim is not None, f"the catalogue offers bound for {name}, which claims no privacy"
    assert {"epsilon", "delta", "params", "tradeoff"} <= set(out)
    assert out["epsilon"] == pytest.approx(theory.epsilon, rel=1e-9)
    assert 0 < out["delta"] < 1
    pairs = np.array(out["tradeoff"])
    alphas = set(pairs[:, 0].tolist())
    assert set(REQUIRED_ALPHAS) <= alphas
    # A tradeoff curve: non-increasing, within [0, 1 - alpha], convex (second differences >= 0 up to noise).
    a, b = pairs[:, 0], pairs[:, 1]
    assert np.all(np.diff(a) > 0) and np.all(np.diff(b) <= 1e-9)
    assert np.all(b <= 1 - a + 1e-9) and np.all(b >= -1e-12)
    # The nominal epsilon of the registered target (as registered) is what bound reports.
    family = load_catalogue()[name].family
    if family == "trained":
        assert set(out["params"]) >= {"noise_multiplier", "clip_norm", "sample_rate", "steps"}
    assert out["gdp"]["mu"] is None or out["gdp"]["mu"] > 0


def test_bound_text_writes_png_with_gdp_overlay(tmp_path, capsys):
    png = tmp_path / "curve.png"
    assert main(["bound", "--target", "laplace_count", "--png", str(png)]) == 0
    text = capsys.readouterr().out
    assert "epsilon:" in text and "alpha = 0.001" in text and "mu = 1.03" in text
    image = mpimg.imread(png)
    assert image.shape[0] > 200 and image[..., :3].std() > 0.05


def test_bound_epsilon_and_delta_overrides(capsys):
    out = _bound_json(capsys, "--target", "gaussian_analytic", "--epsilon", "2", "--delta", "1e-6")
    assert out["epsilon"] == pytest.approx(2.0, abs=1e-6) and out["delta"] == 1e-6
    out = _bound_json(capsys, "--target", "laplace_count", "--delta", "1e-3")
    assert out["epsilon"] == pytest.approx(LaplaceClaim(1.0).epsilon(1e-3)) and out["epsilon"] < 1.0


@pytest.mark.parametrize("argv, message", [
    (["--target", "nonprivate_mnist"], "non-private"),
    (["--target", "nope"], "unknown target"),
    (["--target", "laplace_count", "--delta", "1.5"], "delta must lie in (0, 1)"),
    (["--target", "laplace_count", "--epsilon", "-1"], "epsilon must be a positive"),
])
def test_bound_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert main(["bound", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_implied_gdp_mu_is_the_tightest_dominated_gaussian():
    alpha = np.linspace(0, 1, 2001)
    for claim in (PureDPClaim(1.0), LaplaceClaim(0.5)):
        mu = implied_gdp_mu(claim)
        f = claim.tradeoff(alpha)
        assert np.all(gaussian_tradeoff(alpha, mu) <= f + 1e-9)
        assert np.any(gaussian_tradeoff(alpha, mu * 0.99) > f + 1e-9)
    # Laplace(eps) is closer to Gaussian than (eps, 0)-DP: its implied mu is smaller.
    assert implied_gdp_mu(LaplaceClaim(1.0)) < implied_gdp_mu(PureDPClaim(1.0))


@pytest.mark.parametrize("name", DP_TARGETS)
def test_bound_json_rero_curve_for_every_dp_target(name, capsys):
    # the ReRo bound 1 - f(kappa) (Hayes, Mahloujifar & Balle 2023): between kappa and 1, non-decreasing
    pairs = np.array(_bound_json(capsys, "--target", name)["rero"])
    kappa, bound = pairs[:, 0], pairs[:, 1]
    assert set(REQUIRED_KAPPAS) <= set(kappa.tolist())
    assert np.all(np.diff(kappa) > 0) and np.all(np.diff(bound) >= -1e-9)
    assert np.all(bound >= kappa - 1e-12) and np.all(bound <= 1.0)


@pytest.mark.parametrize("name", ["gaussian_analytic", "gaussian_classic", "dperm_digits"])
def test_bound_rero_of_gaussian_claims_is_the_closed_form(name, tmp_path, capsys):
    # mu-GDP: 1 - G_mu(kappa) = Phi(Phi^-1(kappa) + mu) (Kaissis et al. 2023), in the JSON and the text output
    mu = theory_for(name).claim.mu
    out = _bound_json(capsys, "--target", name)
    kappa, bound = np.array(out["rero"]).T
    np.testing.assert_allclose(bound, stats.norm.cdf(stats.norm.ppf(kappa) + mu), rtol=0, atol=1e-9)
    assert main(["bound", "--target", name, "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    printed = dict((float(k), float(b)) for k, b in re.findall(r"kappa = (\S+)\s+success <= (\S+)", text))
    assert set(printed) == set(REQUIRED_KAPPAS)
    for k, b in printed.items():
        assert abs(b - stats.norm.cdf(stats.norm.ppf(k) + mu)) <= 1e-9
    assert (tmp_path / f"bound-{name}-rero.png").stat().st_size > 10_000
