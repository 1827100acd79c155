"""The membership game's model cache: adding an attack never retrains (the canaries:
tests/kinds/membership/test_canary_games.py)."""

from __future__ import annotations

import re
from dataclasses import replace


def test_adding_an_attack_reuses_cached_models(tmp_path):
    """Target, shadow and reference models are cached on their own: a run with another attack reuses
    every model it shares with an earlier run and trains only what is new."""
    from audit.membership.runner import MembershipOptions, run_membership

    opts = MembershipOptions(target="nonprivate_logreg_digits", quick=True, quiet=True, out=str(tmp_path),
                             attacks=("loss",), canaries=100, shadows=2, canary="sparse")

    def trained(run_dir):  # per training call: were any of its chunks trained (not reused from the cache)?
        calls = re.findall(r"(?m)^\S+ (\w[\w ]* models?): \d+ model\(s\), .* from the cache, (\d+) trained",
                           (run_dir / "log.txt").read_text())
        return {name.strip(): int(count) > 0 for name, count in calls}

    first, _ = run_membership(opts)
    assert trained(first) == {"target model": True, "2 shadow models": True}
    second, outcome = run_membership(replace(opts, attacks=("loss", "rmia"), references=2))
    assert trained(second) == {"target model": False, "2 shadow models": False, "2 reference models": True}
    assert outcome.attacks["rmia_offline"].reference_models == 2
    third, _ = run_membership(replace(opts, attacks=("rmia_online", "shadow", "confidence"), references=2))
    assert not any(trained(third).values())
