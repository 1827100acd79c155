"""The record every empirical lower bound is reported in (one row of ``results.json``'s
``lower_bounds``), and the roles a row can play in the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from audit.stats.outcome import Bound

__all__ = ["LowerBound", "bound_statement", "VERDICT", "SECONDARY", "ESTIMATE", "ROLES"]

#: Statistically valid and competing for the reported best bound: computed at the family's
#: per-member confidence (:mod:`audit.stats.verdict`).
VERDICT = "verdict"
#: Statistically valid at its own stated confidence, but not part of the family that decides the
#: verdict (e.g. the attacks other than the primary one): reported, never used for the verdict.
SECONDARY = "secondary"
#: Rests on a stated assumption (e.g. a Gaussian tradeoff): labelled, never decides a verdict.
ESTIMATE = "estimate"
ROLES = (VERDICT, SECONDARY, ESTIMATE)


@dataclass(frozen=True, kw_only=True)
class LowerBound:
    """An empirical lower bound on epsilon.

    Attributes:
        method: e.g. "clopper-pearson", "gdp", "one-run", "gaussian-fit", "per-step-composed".
        epsilon: the epsilon lower bound (>= 0; ``inf`` only for degenerate inputs; None when the
            row bounds mu only).
        confidence: the probability with which this bound alone holds (1 - alpha).
        n: number of observations (trials / canaries) the bound uses.
        valid: True only if ``epsilon`` is a statistically valid lower bound without further
            assumptions (Clopper–Pearson, one-run, GDP of an exactly Gaussian pair).
        details: JSON-serialisable method-specific numbers (counts, rate bounds, mu, ...).
        role: :data:`VERDICT`, :data:`SECONDARY` or :data:`ESTIMATE` (default: verdict when valid,
            estimate otherwise).
    """

    method: str
    epsilon: float | None
    confidence: float
    n: int
    valid: bool
    details: dict = field(default_factory=dict)
    role: str = ""

    def __post_init__(self) -> None:
        role = self.role or (VERDICT if self.valid else ESTIMATE)
        if role not in ROLES or (role != ESTIMATE) != bool(self.valid):
            raise ValueError(f"role {role!r} does not fit valid={self.valid}")
        object.__setattr__(self, "role", role)

    @property
    def statement(self) -> str:
        """What the row bounds and under which assumption, in words (:func:`bound_statement`).

        Returns:
            The sentence.
        """
        return bound_statement(self.method, self.epsilon, self.valid, self.role, self.details)

    def block(self, attack: str | None = None) -> Bound:
        """The row of ``results.json``'s ``lower_bounds`` this bound is (:class:`audit.stats.outcome.Bound`, with
        its role and statement): the one conversion from the computing record to the block, which the verdict
        (:func:`audit.stats.judgement.judge`) reads. Values may be numpy numbers or inf in ``details``
        (:func:`audit.io.write_json` converts them).

        Args:
            attack: the attack whose scores it reads (None: not known here; the runner names it).

        Returns:
            The block.
        """
        return Bound(method=self.method, epsilon=None if self.epsilon is None else float(self.epsilon),
                     confidence=float(self.confidence), n=int(self.n), valid=bool(self.valid), role=self.role,
                     statement=self.statement, attack=attack, details=dict(self.details))


def bound_statement(method: str, epsilon: float | None, valid: bool, role: str, details: dict) -> str:
    """One sentence a report prints beside a bound: what it bounds, at which standing, and under
    which assumption. A row with a ``mu_lb`` always bounds mu rigorously; its epsilon is valid only
    when the row is (e.g. an exactly Gaussian pair), otherwise it is read off G_mu_lb and is an
    estimate.

    Args:
        method: the bound's method.
        epsilon: its epsilon (None when it bounds mu only).
        valid: whether the epsilon is valid without further assumptions.
        role: :data:`VERDICT`, :data:`SECONDARY` or :data:`ESTIMATE`.
        details: the bound's details (``mu_lb``, ``assumption``, ...).

    Returns:
        The sentence.
    """
    assumption = details.get("assumption") or details.get("gdp_assumption")
    standing = {VERDICT: "competes for the verdict", SECONDARY: "valid at its own confidence, does not decide the "
                "verdict", ESTIMATE: "never decides the verdict"}[role or (VERDICT if valid else ESTIMATE)]
    if method == "gdp":
        if epsilon is None:
            return f"valid bound on mu; no epsilon ({details.get('epsilon_omitted', 'none at this delta')}); {standing}"
        if valid:
            why = (assumption or "the pair is Gaussian").removeprefix("none: ")
            return f"valid bound on mu and on epsilon ({why}); {standing}"
        return f"bound on mu (valid) with epsilon read as Gaussian — estimate ({assumption}); {standing}"
    if valid:
        return f"valid bound on epsilon, no assumption; {standing}"
    return f"estimate of epsilon ({assumption or 'assumption-based'}); {standing}"
