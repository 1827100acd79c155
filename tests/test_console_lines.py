"""What the CLI prints: a trained model with a claim prints its ``theory:`` and ``verdict:`` lines; ``-q``
silences the warnings of the user's code and libraries; a mistyped plugin key or target is named with the
closest matches, in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

from audit.membership.trained_runner import trained_summary_lines


def _trained_results(epsilon_theory: float | None) -> dict:
    best = {"epsilon": 0.457, "attack": "rmia_offline", "family_confidence": 0.95, "family_size": 12, "n": 600,
            "details": {"v": 88, "r": 120}}
    status = "no-claim" if epsilon_theory is None else "violation"
    return {"split_check": {"blind_auc": 0.512, "blind_auc_ci": [0.438, 0.587], "passed": True},
            "game": {"members": 274, "nonmembers": 326, "reference_records": "2 reference models"},
            "best_lower_bound": best, "epsilon_theory": epsilon_theory, "delta": 1e-5,
            "accountant": "(0.1, 1e-05)-DP, add/remove neighbours", "meaning": "…",
            "attacks": {"loss": {"auc": 0.7, "blind_auc": 0.512, "tpr_at_fpr": {"0.001": 0.004}}},
            "verdict": {"status": status, "text": "empirical lower bound 0.457 exceeds the theoretical epsilon 0.100"}}


def test_a_trained_model_with_a_claim_prints_theory_and_verdict():
    lines = trained_summary_lines(Path("run"), _trained_results(0.1))
    assert "theory:    epsilon = 0.100 at delta = 1e-05; (0.1, 1e-05)-DP, add/remove neighbours" in lines
    assert lines[-1] == "verdict:   violation: empirical lower bound 0.457 exceeds the theoretical epsilon 0.100"
    assert lines.index(next(x for x in lines if x.startswith("theory:"))) < lines.index(
        next(x for x in lines if x.startswith("empirical:")))
    unclaimed = trained_summary_lines(Path("run"), _trained_results(None))
    assert "theory:    no claim (the model states none)" in unclaimed
    assert unclaimed[-1].startswith("verdict:   no-claim")
