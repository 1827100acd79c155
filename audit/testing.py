"""Privacy regression tests for anyone's code: ``assert_private`` for pytest.

A five-line test audits a training function or a mechanism and fails the build when the empirical
epsilon lower bound exceeds what the code claims::

    from audit.testing import assert_private

    def test_my_dpsgd_is_private():
        assert_private("my_package.dp_plugin:factory", runs=200, seed=0)

    def test_my_dpsgd_in_one_run():                 # one training of the code, gradient canaries, accounting check
        assert_private("my_package.dp_plugin:factory", one_run=True, seed=0)

``target`` is a built-in target name (``python -m audit list``), a plugin spec
``module:factory``, a plugin dict (the form :mod:`targets.plugins.loading` documents) or a zero-argument
factory returning one. Mechanisms are audited with :func:`audit.mechanism.runner.run_mechanism`
(``runs`` = draws per world), trainers and trained DP targets with the multi-run game of
:mod:`audit.dp.runner` (``runs`` = trainings). A bound above the claim at the stated confidence
raises ``AssertionError`` naming the bound, its method and the claim; otherwise the run's typed
outcome (:class:`audit.stats.outcome.Outcome`, what ``results.json`` holds) is returned. The verdict
holds at ``confidence`` across every bound that competed for it
(:mod:`audit.stats.verdict`), so a correct implementation fails such a test with probability at
most ``1 - confidence``; keep the seed fixed in CI.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.choices import MECHANISM_DRAWS
from audit.dp.options import DPOptions
from audit.dp.plugins.one_run import run_plugin_one_run
from audit.dp.runner import PlayOptions, play, run_dp
from audit.dp.setup import trainer_setup
from audit.errors import UserError
from audit.mechanism.runner import MechanismOptions, run_mechanism
from audit.plugins.accounting import deciding_findings
from audit.report_step import write_report
from audit.results_file import load_outcome
from audit.stats.outcome import Outcome
from audit.supervisor import call_in_child
from audit.target_defaults import plugin_canary, trainer_plugin_use
from targets.catalogue import resolve
from targets.plugins.loading import MechanismPlugin, TrainerPlugin, plugin_from_dict, plugin_from_factory
from targets.plugins.mechanism import PluginMechanism


def _resolve(target: Any) -> tuple[str, Any]:
    """(label, what): ``what`` is a built-in name, or a validated plugin object."""

    if isinstance(target, str):
        entry = resolve(target)
        return target, (entry.factory() if entry.family == "plugin" else target)
    if isinstance(target, dict):
        return str(target.get("name", "plugin dict")), plugin_from_dict(str(target.get("name", "plugin dict")), target)
    if callable(target):
        plugin = plugin_from_factory(f"{getattr(target, '__module__', '?')}:{getattr(target, '__name__', 'factory')}",
                                     target)
        return plugin.name, plugin
    raise TypeError("assert_private: target must be a target name, 'module:factory', a plugin dict or a factory")


@dataclass(frozen=True, kw_only=True)
class AuditRequest:
    """The audit :func:`assert_private` asks for (its keyword arguments, and ``quiet``).

    Attributes:
        attack: as for :func:`assert_private`.
        runs: as for :func:`assert_private`.
        confidence: as for :func:`assert_private`.
        seed: as for :func:`assert_private`.
        out: as for :func:`assert_private` (None: a fresh temporary folder).
        quiet: print nothing while the audit runs.
        one_run: as for :func:`assert_private`.
        canaries: as for :func:`assert_private`.
    """

    attack: str | None = None
    runs: int | None = None
    confidence: float = 0.95
    seed: int = 0
    out: str | Path | None = None
    quiet: bool = True
    one_run: bool = False
    canaries: int | None = None


def _one_run(label: str, what: Any, request: AuditRequest, out: str) -> tuple[Path, Outcome]:
    """The one-run audit of ``assert_private(..., one_run=True)``: one training with gradient canaries
    (:mod:`audit.dp.plugins.one_run` for a trainer plugin, :mod:`audit.dp.one_run.game` for a built-in target)."""
    if request.runs is not None:
        raise UserError("one_run=True trains once; leave runs out (the number of canaries is canaries=M)")
    threat, _, canary = (request.attack or "").partition("/")
    if canary:
        raise UserError(f"one_run=True uses gradient canaries; attack is the threat alone (got {request.attack!r})")
    options = DPOptions(target=label if isinstance(what, TrainerPlugin) else what, out=out, seed=request.seed,
                        quiet=request.quiet, confidence=request.confidence, threat=threat or None, one_run=True,
                        canaries=request.canaries)
    if isinstance(what, TrainerPlugin):
        return run_plugin_one_run(options, plugin=what)
    if isinstance(what, MechanismPlugin) or (isinstance(what, str) and
                                             resolve(what).family in ("mechanism", "dp-erm", "control")):
        raise UserError(f"one_run=True audits DP-SGD training; {label} is a mechanism (leave one_run out)")
    return run_dp(options)


def audit_target(target: Any, request: AuditRequest) -> tuple[Path, Outcome]:
    """Run the audit ``assert_private`` runs and render its report (:func:`audit.report_step.write_report`, as the
    command line does); returns (run directory, outcome).

    The audit runs in a child process (:func:`audit.supervisor.call_in_child`): the audited code's own ending of
    its process (``os._exit``, a signal) cannot end the caller's, and raises instead. The target is sent there
    with cloudpickle (lambdas and closures by value, importable functions by name: a monkeypatch of a module does
    not reach the child); the outcome is read back from the run's ``results.json``.

    Args:
        target: as for :func:`assert_private`.
        request: the audit asked for (:class:`AuditRequest`).

    Returns:
        The run directory (results.json, config.json, report.html) and the run's
        :class:`audit.stats.outcome.Outcome`, whatever the verdict.

    Raises:
        UserError: as for :func:`assert_private`.
        AuditIncomplete: the audited code raised, or ended the audit's process without a verdict.
    """
    run_dir = Path(call_in_child(_audit_and_report, target, request))
    outcome = load_outcome(run_dir)
    assert isinstance(outcome, Outcome)  # a run directory holds a run's results
    return run_dir, outcome


def _audit_and_report(target: Any, request: AuditRequest) -> str:
    """In the audit's child process: the audit and its report; returns the run directory."""
    run_dir, outcome = _run_audit(target, request)
    write_report(run_dir, outcome)
    return str(run_dir)


def _run_audit(target: Any, request: AuditRequest) -> tuple[Path, Outcome]:
    """The runner of the audit :func:`audit_target` asks for, run; returns (run directory, outcome)."""
    label, what = _resolve(target)
    out = str(request.out) if request.out is not None else tempfile.mkdtemp(prefix="privacy-audit-")
    if request.one_run:
        return _one_run(label, what, request, out)
    if request.canaries is not None:
        raise UserError("canaries=M applies to one_run=True")
    attack, runs, seed, confidence = request.attack, request.runs, request.seed, request.confidence
    quiet = request.quiet
    threat, _, canary = (attack or "").partition("/")
    if isinstance(what, TrainerPlugin):

        threat = threat or trainer_plugin_use(what.description).default_threat
        setup = trainer_setup(what, plugin_canary(threat, canary or None), threat, seed, None, quiet, confidence)
        return play(setup, runs or setup.default_runs, seed, confidence, PlayOptions(out=out, quiet=quiet))
    family = None if isinstance(what, MechanismPlugin) else resolve(what).family
    if isinstance(what, MechanismPlugin) or family in ("mechanism", "dp-erm", "control"):

        if attack not in (None, "threshold"):
            raise UserError(f"mechanism audits have one attack, 'threshold' (got {attack!r})")
        options = MechanismOptions(target=label if isinstance(what, MechanismPlugin) else what, out=out, seed=seed,
                                   quiet=quiet, draws=runs or MECHANISM_DRAWS, confidence=confidence)
        mechanism = PluginMechanism(what) if isinstance(what, MechanismPlugin) else None
        return run_mechanism(options, mechanism=mechanism)

    return run_dp(DPOptions(target=what, out=out, seed=seed, quiet=quiet, runs=runs, confidence=confidence,
                            canary=canary or None, threat=threat or None))


def _violation_message(outcome: Outcome, run_dir: Path) -> str:
    """What an AssertionError says: the accounting check's violations, the best bound and the claim, and
    which test rejected the claim."""
    best = outcome.best_lower_bound
    claim = f"claimed epsilon {float(outcome.epsilon_theory):.3f} at delta {outcome.delta:g}"
    bound = ("no lower bound" if best is None else
             f"empirical epsilon lower bound {float(best.epsilon):.3f} ({best.method}, "
             f"{float(best.family_confidence):.0%} confidence, family of {best.family_size})")
    parts = []
    check = outcome.kind_detail.accounting_check()
    if check and check.status == "violation":
        found = "; ".join(f.sentence() for f in deciding_findings(check))
        parts.append(f"the accounting check found the code less private than claimed ({found})")
    rejecting = [b for b in outcome.lower_bounds if b.role == "verdict" and (b.details or {}).get("claim_rejected")]
    if best is not None and float(best.epsilon) > float(outcome.epsilon_theory):
        parts.append(f"{bound} exceeds the {claim}")
    elif rejecting:
        test = rejecting[0].details["claim_test"]
        parts.append(f"the {rejecting[0].method} test rejects the claim's own tradeoff curve (FNR <= "
                     f"{test['fnr_ub']:.3f} where the claim allows no less than {test['claim_fnr']:.3f} at FPR <= "
                     f"{test['fpr_ub']:.3f}); {bound}, {claim}")
    else:
        parts.append(f"{bound}, {claim}")
    trainings = outcome.game.trainings if outcome.game else None
    where = f"{trainings} trainings; " if trainings else ""
    return (f"{outcome.target}: {'; '.join(parts)} ({outcome.audited.accountant}); {where}run directory: {run_dir}; "
            f"report: {run_dir / 'report.html'}")


def assert_private(target: Any, *, attack: str | None = None, runs: int | None = None, confidence: float = 0.95,
                   seed: int = 0, out: str | Path | None = None, one_run: bool = False,
                   canaries: int | None = None) -> Outcome:
    """Audit ``target`` and raise AssertionError when its epsilon lower bound exceeds the claim, or a
    test rejects the claim's own tradeoff curve (update-level and one-run audits), or the accounting check
    finds the code less private than claimed (one-run audits of trainer plugins).

    Args:
        target: a built-in target name (``python -m audit list``), a plugin spec ``"module:factory"``, a
            plugin dict (the form :mod:`targets.plugins.loading` documents) or a zero-argument factory returning one.
        attack: for trainers ``"THREAT/CANARY"`` (e.g. ``"black-box/mislabelled"``; plugins default to
            black-box with the crafted canary, ``"updates/dirac"`` audits the DP-SGD steps of an Opacus or
            hooked loop; built-in targets default as ``run dp`` does, :mod:`audit.target_defaults`); for
            mechanisms ``"threshold"``; with ``one_run=True`` the threat alone (``"updates"`` by default,
            or ``"white-box"``).
        runs: trainings (trainers) or draws per world (mechanisms); None for the target's default.
        confidence: the family-wise confidence of the verdict, across every bound that competed for it.
        seed: the audit's seed (same seed, same results).
        out: where the run directory goes (default: a fresh temporary folder).
        one_run: ONE training of the code with ``canaries`` gradient canaries after the accounting check,
            as ``run dp --one-run``.
        canaries: the number of gradient canaries M of a one-run audit (default: chosen by simulation).

    Returns:
        The run's :class:`audit.stats.outcome.Outcome` (what ``results.json`` holds, typed): read its
        attributes, e.g. ``outcome.best_lower_bound.epsilon``, ``outcome.verdict.status``,
        ``outcome.epsilon_theory``, ``outcome.lower_bounds[0].method``.

    Raises:
        AssertionError: the verdict is a violation (the message names the bound, its method, the claim
            and the run directory) or could-not-read (a check that could void the accounting was not read:
            never a pass).
        UserError: an option that does not apply (``runs`` or ``attack/canary`` with ``one_run=True``,
            ``canaries`` without it, an attack a mechanism does not take) or an unknown target.
        AuditIncomplete: the audited code raised, or ended the audit's process without a verdict (``os._exit``,
            ``sys.exit``, a signal): the audit runs in a child process (:func:`audit_target`), so such an ending
            fails the test instead of ending pytest.
    """
    run_dir, outcome = audit_target(target, AuditRequest(attack=attack, runs=runs, confidence=confidence, seed=seed,
                                                         out=out, one_run=one_run, canaries=canaries))
    if outcome.verdict.status == "violation":
        raise AssertionError(_violation_message(outcome, run_dir))
    if outcome.verdict.status == "could-not-read":  # nothing unread passes (exit 2 on the command line)
        raise AssertionError(f"{outcome.target}: {outcome.verdict.text} (run directory: {run_dir})")
    return outcome


__all__: list[str] = ["assert_private", "audit_target", "AuditRequest"]
