"""``run membership`` with the attacks of attacks.membership: a quick DP target end to end, every attack's
advantage within the DP bound, and an unknown attack refused (the attacks on synthetic targets:
tests/attacks/test_membership_scores.py)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from attacks.names import ATTACKS
from audit.report_step import write_report
from audit.stats.metrics import dp_advantage_bound


def test_cli_rejects_unknown_attack(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "audit", "run", "membership", "--target", "dpsgd_digits",
                           "--attack", "nope", "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown attack" in proc.stderr and "Traceback" not in proc.stderr


def test_quick_dp_target_every_attack_within_advantage_bound(tmp_path):
    """DP-SGD MLP on digits at epsilon 1 (bound 0.462): every attack's advantage interval starts
    below the bound. The best-threshold point estimate is biased upwards, so the valid check is the
    interval's lower end (audit.stats.metrics.advantage_interval)."""
    from audit.membership.runner import MembershipOptions, run_membership

    run_dir, outcome = run_membership(MembershipOptions(target="dpsgd_digits", out=str(tmp_path), quick=True,
                                                        epsilon=1.0, quiet=True, attacks=("all",)))
    bound = dp_advantage_bound(outcome.epsilon_theory, outcome.delta)
    assert bound == pytest.approx(math.tanh(0.5), abs=1e-4)
    assert set(outcome.attacks) == set(ATTACKS)
    for name, attack in outcome.attacks.items():
        assert attack.advantage_dp_bound == pytest.approx(bound)
        lo, hi = attack.advantage_ci
        assert lo <= attack.advantage <= hi
        assert lo <= bound and attack.advantage_ci_low_vs_dp_bound == "below", name
    for entry in outcome.lower_bounds:
        assert not entry.valid or entry.epsilon <= outcome.epsilon_theory
    assert write_report(run_dir, outcome).is_file()
