"""What a report's headline says and draws must match what decided the verdict (reports.summary,
reports.plots, reports.html): "above the claimed ε" only when the bound is; "strong enough to expose a
violation" only when the perfect-attack expectation exceeds the claim; a --check-config report reads as a
check; the headline figure of a violation draws what decided it. Unit tests on small results dicts, read
into the typed outcome the reports take (helpers.typed_outcome)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import typed_outcome as typed

from audit.dp.report import one_run_sentences
from audit.stats.outcome import AttackMetrics
from audit.theory.claims import ApproxDPClaim
from reports import plots
from reports.html import build_context, make_plots
from reports.summary import CEILING_NAME, EXPECTATION_NAME, headline_sentences

ALPHA = np.logspace(-5, 0, 41)


def _bound(eps: float, rejected: bool = False) -> dict:
    return {"method": "one-run-fdp", "attack": "updates/one-run-dirac", "epsilon": eps, "confidence": 0.95,
            "family_confidence": 0.95, "family_size": 1, "role": "verdict", "valid": True, "n": 200,
            "statement": "valid bound on epsilon", "details": {"claim_rejected": rejected, "ceiling": 2.18}}


def _one_run(eps: float, theory: float = 2.0, expected: float = 1.06, status: str = "consistent",
             rejected: bool = False, source: str | None = None, config_eps: float | None = None) -> dict:
    """A one-run dp results dict: bound ``eps``, claim ``theory``, perfect-attack expectation ``expected``,
    ceiling 3.78."""
    best = _bound(eps, rejected)
    verdict = {"status": status, "text": "…"} | ({"source": source} if source else {})
    results = {"kind": "dp", "target": "loop", "epsilon_theory": theory, "delta": 1e-5, "confidence": 0.95,
               "game": {"one_run": True, "canaries": 200, "canary_kind": "dirac", "threat": "updates"},
               "lower_bounds": [best], "best_lower_bound": best, "ceiling": {"epsilon": 3.78, "text": ""},
               "verdict": verdict,
               "tradeoff": {"alpha": ALPHA.tolist(), "beta": ApproxDPClaim(theory, 1e-5).tradeoff(ALPHA).tolist()},
               "one_run": {"canaries": 200, "included": 100, "k_pos": 28, "correct": 21, "ceiling": 3.78,
                           "claim_rejected": rejected,
                           "expected_perfect": {"mean": expected, "sd": 0.3, "range_5_95": [0.5, 1.5], "games": 5},
                           "design": {"rule": "r", "simulations": 5}}}
    if config_eps is not None:
        results["config_check"] = {"status": status, "config": {"epsilon": config_eps},
                                   "findings": [{"check": "epsilon", "violation": True, "problem": True,
                                                 "message": f"The configuration is only ({config_eps}, 1e-05)-DP."}]}
    return results


def test_a_violation_below_the_claim_names_the_rejected_tradeoff_curve():
    found = headline_sentences(typed(_one_run(0.554, status="violation", rejected=True)))[1]
    assert "above the claimed" not in found
    assert "below the claimed ε = 2.00" in found and "tradeoff curve (ε = 2.00) is rejected at 95%" in found


def test_a_violation_the_accounting_check_decided_names_the_check():
    found = headline_sentences(typed(_one_run(0.554, status="violation", source="config_check", config_eps=4.77)))[1]
    assert "above the claimed" not in found and "below the claimed ε = 2.00" in found
    assert "the accounting check found: The configuration is only (4.77, 1e-05)-DP" in found


def test_a_bound_above_the_claim_says_so():
    found = headline_sentences(typed(_one_run(2.5, status="violation")))[1]
    assert "ε ≥ 2.50" in found and "above the claimed ε = 2.00" in found and "below" not in found


def test_strong_enough_only_when_the_expectation_exceeds_the_claim():
    weak = headline_sentences(typed(_one_run(0.554, theory=2.12, expected=1.06)))[1]  # ceiling 3.78 > claim
    assert "strong enough" not in weak
    assert f"{EXPECTATION_NAME} with this M is ε ≥ 1.06" in weak and f"{CEILING_NAME} 3.78" in weak
    strong = headline_sentences(typed(_one_run(0.554, theory=0.9, expected=1.06)))[1]
    assert "strong enough to expose a violation and found none" in strong


def test_the_one_run_section_uses_the_two_names():
    text = " ".join(one_run_sentences(typed(_one_run(0.554))))
    assert f"The {EXPECTATION_NAME} with this M: ε ≥ 1.06" in text and f"{CEILING_NAME}: ε ≥ 3.78" in text
    assert "could reach" not in text


def test_the_one_run_section_names_both_sides_of_two_sided_guesses():
    one_sided = " ".join(one_run_sentences(typed(_one_run(0.554))))
    results = _one_run(0.554)
    results["one_run"] |= {"k_neg": 28, "correct": 50}
    two_sided = " ".join(one_run_sentences(typed(results)))
    assert "'in' for the 28 highest scores, 21 right" in one_sided and "'out'" not in one_sided
    assert "'in' for the 28 highest scores and 'out' for the 28 lowest, 50 right" in two_sided


def _check_only(status: str = "violation", config_eps: float = 4.77) -> dict:
    results = _one_run(0.0, status=status, source="config_check", config_eps=config_eps)
    for key in ("game", "one_run", "ceiling", "best_lower_bound"):
        results.pop(key)
    return results | {"lower_bounds": [], "best_lower_bound": None}


def test_a_check_config_report_reads_as_a_check():
    audited, found = headline_sentences(typed(_check_only()))
    assert "None" not in audited and "accounting check alone" in audited and "no attack" in audited
    assert found.startswith("What was found: the accounting check found: The configuration is only (4.77")


def test_the_headline_figure_of_a_config_violation_draws_the_configuration_curve(tmp_path: Path):
    results = _check_only()
    assert plots.deciding_configuration_epsilon(typed(results)) == 4.77
    figures = make_plots(tmp_path, typed(results))
    headline = build_context(typed(results), None, figures)["headline"]
    assert headline["name"] == "tradeoff.png" and "configuration the code runs (ε = 4.77" in headline["caption"]
    consistent = typed(results | {"verdict": {"status": "consistent", "text": ""}})
    plain = make_plots(tmp_path / "plain", consistent)
    assert plots.deciding_configuration_epsilon(consistent) is None
    assert Path(plain[0]["path"]).read_bytes() != Path(figures[0]["path"]).read_bytes()


def test_the_headline_figure_of_a_rejection_marks_the_rejected_claim(tmp_path: Path):
    results = _one_run(0.554, status="violation", rejected=True)
    assert plots.rejected_claim(typed(results)) == "one-run-fdp test at 95%"
    caption = build_context(typed(results), None, make_plots(tmp_path, typed(results)))["headline"]["caption"]
    assert "claim's own tradeoff curve, rejected by the one-run-fdp test at 95%" in caption
    bound_decided = typed(_one_run(2.5, status="violation", rejected=True))
    assert plots.rejected_claim(bound_decided) is None


def test_the_one_run_roc_draws_its_clopper_pearson_band(tmp_path: Path):
    from scipy import stats

    fpr, tpr = np.array([0.0, 0.01, 0.5, 1.0]), np.array([0.05, 0.1, 0.6, 1.0])
    attack = {"n_members": 100, "n_nonmembers": 100, "auc": 0.7, "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
              "tpr_at_fpr": {}, "tpr_at_fpr_ci": {}}
    x, y = plots.roc_band(fpr, tpr, AttackMetrics.from_dict(attack), 0.95)
    # the TPR 0.05 point (5 of 100 members): its two-sided 95% interval is the band's extent there
    assert np.isclose(y.max(), 1.0) and np.isclose(y[0], stats.beta.ppf(0.975, 6, 95))
    assert np.isclose(y[-1], stats.beta.ppf(0.025, 5, 96))
    assert np.isclose(x[-1], stats.beta.ppf(0.975, 1, 100))  # FPR 0 of 100 non-members: up to 3.6%
    unknown = {k: v for k, v in attack.items() if k not in ("n_members", "n_nonmembers")}
    assert plots.roc_band(fpr, tpr, AttackMetrics.from_dict(unknown), 0.95) is None
    results = _one_run(0.554) | {"attacks": {"a": attack}}
    with_band = Path(make_plots(tmp_path / "one", typed(results))[0]["path"]).read_bytes()
    without = {k: v for k, v in results.items() if k != "one_run"}
    plain = Path(make_plots(tmp_path / "many", typed(without))[0]["path"]).read_bytes()
    assert with_band != plain  # only one-run ROCs change


def test_without_an_expectation_the_ceiling_never_claims_strength():
    results = {k: v for k, v in _one_run(0.554).items() if k != "one_run"} | {"kind": "membership"}
    found = headline_sentences(typed(results))[1]
    assert "strong enough" not in found and f"the {CEILING_NAME} is 3.78, above the claim" in found
    low = headline_sentences(typed(results | {"ceiling": {"epsilon": 1.5, "text": ""}}))[1]
    assert f"The {CEILING_NAME} is only 1.50" in low


def test_a_trained_model_with_a_claim_says_how_its_bound_compares():
    best = _bound(0.457)
    results = {"kind": "membership", "target": "m", "target_description": "a model", "epsilon_theory": 0.1,
               "delta": 1e-5, "split_check": {"passed": True, "blind_auc": 0.51, "blind_auc_ci": [0.44, 0.59]},
               "game": {}, "meaning": "The split looks random.", "best_lower_bound": best, "lower_bounds": [best],
               "ceiling": {"epsilon": 2.99, "text": ""}, "verdict": {"status": "violation", "text": ""}}
    found = headline_sentences(typed(results))[-1]
    assert "Against its claim (ε = 0.100): the audit certifies ε ≥ 0.457" in found
    assert "above the claimed ε = 0.100" in found


def test_a_built_in_language_model_is_said_to_be_fine_tuned_in_the_run():
    base = {"kind": "membership", "target": "nonprivate_tinygpt", "target_description": "a tiny GPT",
            "delta": 1e-5, "split_check": {"passed": True, "blind_auc": 0.51, "blind_auc_ci": [0.44, 0.59]},
            "meaning": "", "verdict": {"status": "no-claim", "text": ""}}
    built_in = headline_sentences(typed(base | {"game": {"members": 3, "fine_tuned_in_run": True}}))[0]
    given = headline_sentences(typed(base | {"game": {"members": 3}}))[0]
    assert "fine-tuned in this run" in built_in and "already exists" not in built_in
    assert "a model that already exists, queried without retraining on 3 members" in given


def test_a_final_model_audit_of_dpsgd_shows_the_last_iterate_reference_as_a_reference():
    from audit.stats.outcome import LastIterate

    reference = LastIterate.of({"noise_multiplier": 1.0, "sample_rate": 0.05, "steps": 200}, 1e-5).to_dict()
    sentences = headline_sentences(typed(_one_run(0.554) | {"last_iterate": reference}))
    assert len(sentences) == 3 and sentences[2].startswith(f"Last-iterate reference: ε ≈ {reference['epsilon']:.3g}")
    assert "the bound ε ≥ 0.554" in sentences[2] and f"{CEILING_NAME} 3.78" in sentences[2]
    assert f"{EXPECTATION_NAME} 1.06" in sentences[2] and "not a bound" in sentences[2]
    assert len(headline_sentences(typed(_one_run(0.554)))) == 2  # no DP-SGD training, no reference
    final = reference | {"expected_bound": {"mean": 2.76, "range_5_95": [2.32, 3.1], "games": 100}}
    assert "linear model's final iterate expects with these guesses, ε ≥ 2.76 (5" in headline_sentences(
        typed(_one_run(0.554) | {"last_iterate": final}))[2]
