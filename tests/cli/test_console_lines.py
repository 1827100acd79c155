"""What the CLI prints: a trained model with a claim prints its ``theory:`` and ``verdict:`` lines; ``-q``
restores the libraries' logging and warnings after its block (that it silences them in a run:
tests/e2e/test_console_runs.py); a mistyped plugin key or target is named with the closest matches, in one line,
exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import typed_outcome

from audit.cli import main
from audit.membership.trained_results import trained_summary_lines


def _trained_results(epsilon_theory: float | None):
    best = {"epsilon": 0.457, "attack": "rmia_offline", "family_confidence": 0.95, "family_size": 12, "n": 600,
            "details": {"v": 88, "r": 120}, "method": "one-run", "confidence": 0.95, "valid": True, "role": "verdict",
            "statement": "epsilon >= 0.457"}
    status = "no-claim" if epsilon_theory is None else "violation"
    return typed_outcome({"kind": "membership",
            "split_check": {"blind_auc": 0.512, "blind_auc_ci": [0.438, 0.587], "passed": True},
            "game": {"members": 274, "nonmembers": 326, "reference_records": "2 reference models"},
            "best_lower_bound": best, "epsilon_theory": epsilon_theory, "delta": 1e-5,
            "accountant": "(0.1, 1e-05)-DP, add/remove neighbours", "meaning": "…",
            "attacks": {"loss": {"auc": 0.7, "blind_auc": 0.512, "tpr_at_fpr": {"0.001": 0.004}, "tpr_at_fpr_ci": {},
                                  "roc": {"fpr": [0, 1], "tpr": [0, 1]}}},
            "verdict": {"status": status, "text": "empirical lower bound 0.457 exceeds the theoretical epsilon 0.100"}})


def test_a_trained_model_with_a_claim_prints_theory_and_verdict():
    lines = trained_summary_lines(Path("run"), _trained_results(0.1))
    assert "theory:    epsilon = 0.100 at delta = 1e-05; (0.1, 1e-05)-DP, add/remove neighbours" in lines
    assert lines[-1] == "verdict:   violation: empirical lower bound 0.457 exceeds the theoretical epsilon 0.100"
    assert lines.index(next(x for x in lines if x.startswith("theory:"))) < lines.index(
        next(x for x in lines if x.startswith("empirical:")))
    unclaimed = trained_summary_lines(Path("run"), _trained_results(None))
    assert "theory:    no claim (the model states none)" in unclaimed
    assert unclaimed[-1].startswith("verdict:   no-claim")


def test_quiet_libraries_restores_everything():
    import logging
    import warnings

    from audit.quiet import quiet_libraries

    before = (logging.getLogger().level, logging.getLogger("opacus").level, list(warnings.filters))
    audit_level = logging.getLogger("audit").getEffectiveLevel()
    with quiet_libraries(True):
        assert logging.getLogger().level == logging.ERROR and logging.getLogger("opacus").level == logging.ERROR
        assert logging.getLogger("audit").getEffectiveLevel() == audit_level  # the workbench's own console
    assert (logging.getLogger().level, logging.getLogger("opacus").level, list(warnings.filters)) == before
    assert logging.getLogger("audit").getEffectiveLevel() == audit_level


def typo_claims() -> dict:
    """A trainer plugin whose claim is under a mistyped key."""
    from hooked_softmax import hooked_plugin

    plugin = hooked_plugin("typo")
    return {k: v for k, v in plugin.items() if k != "claim"} | {"claims": plugin["claim"]}


@pytest.mark.parametrize("target, expected", [
    (f"{Path(__file__).stem}:typo_claims", "unknown key 'claims'; did you mean 'claim'? (a trainer plugin takes"),
    ("dpsgd_mnst", "unknown target 'dpsgd_mnst'; did you mean 'dpsgd_mnist'"),
    (Path(__file__).stem, f"target '{Path(__file__).stem}' is a module: name the function in it that returns the "
                          f"plugin dict, as module:factory (e.g. --target {Path(__file__).stem}:trainer)"),
    (f"{Path(__file__).stem}:typo_claim", "has no callable 'typo_claim'; did you mean 'typo_claims'?"),
    ("examples.opacus_tutoral_cnn:small_trainer", "did you mean 'examples.opacus_tutorial_cnn'?"),
])
def test_a_mistyped_plugin_key_or_target_is_named_with_close_matches(tmp_path, capsys, target, expected):
    code = main(["run", "dp", "--target", target, "--check-config", "-q", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and err.count("\n") == 1
