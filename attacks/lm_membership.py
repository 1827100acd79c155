"""Membership scores of a language model from its per-token log-probabilities. Higher score = "more
likely a member" everywhere; each function takes, per text, the array of ``log p(token_t | tokens_<t)``
(what a per-token log-probability function returns, e.g. :func:`targets.lm.model.token_logprobs`).

* Loss [Yeom et al. 2018; Carlini et al. 2021, Sec. 6.1]: the mean token log-probability (minus the
  text's loss, the log-perplexity).
* zlib ratio [Carlini et al. 2021, Sec. 6.1]: the log-perplexity divided by the zlib entropy of the text
  (bits of its ``zlib``-compressed UTF-8 bytes), negated: text that compresses poorly yet is predicted
  well is likelier memorised.
* Min-K% [Shi et al. 2024, Eq. 1]: the mean of the ``k`` fraction of lowest token log-probabilities.
* Min-K%++ [Zhang et al. 2025, Eq. 2-3]: each token's log-probability standardised by the mean and
  standard deviation of ``log p(z | tokens_<t)`` over ``z`` drawn from the model's own next-token
  distribution, then Min-K% of those.
* Reference-calibrated loss [Carlini et al. 2021, Sec. 6.1 ("small" model comparison); Mireshghallah
  et al. 2022; Watson et al. 2022]: the target's mean log-probability minus a reference model's (the base
  model before fine-tuning), or minus the mean over reference models trained like the target on other
  texts (:func:`mean_reference_scores`): the difficulty of the text itself cancels.
* Text log-likelihood ratio [Carlini et al. 2022, Sec. III-B and IV-C ("offline"); Neyman and Pearson
  1933]: ``log p_target(text) - log p_reference(text)``, the SUM of the per-token log-ratios
  (:func:`likelihood_ratio_scores`), against the base model or the mean over reference models. The
  reference-calibrated loss above is this divided by the text's token count (a perplexity ratio): it
  weighs every text's fine-tuning noise by ``1 / T``, so short non-members with a noisy per-token gain
  fill the low-FPR tail; the whole text's log-likelihood ratio is the Neyman-Pearson statistic for "the
  model that saw the text against one that did not" and keeps every token's evidence.

Each is declared in :data:`attacks.names.ATTACK_SPECS` (on texts, with what it needs of the target) and
registered here (:func:`attacks.membership.register_scorer`); :func:`run_text_attacks` scores every one whose
needs a target meets. Scores only: thresholds, ROC and bounds come from :mod:`audit.stats`
(docs/references.md, "Language model membership").
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attacks.membership import SCORERS, register_scorer
from attacks.names import ATTACK_SPECS, TEXT_ATTACKS
from audit.errors import UserError

__all__ = ["loss_scores", "zlib_scores", "min_k_scores", "min_k_plus_plus_scores", "reference_scores",
           "mean_reference_scores", "likelihood_ratio_scores", "DEFAULT_K", "TextInputs", "run_text_attacks"]

#: The fraction of tokens Min-K% and Min-K%++ average (Shi et al. 2024 and Zhang et al. 2025 report 20%).
DEFAULT_K = 0.2


def _checked(logprobs: Sequence[np.ndarray], what: str) -> list[np.ndarray]:
    out = [np.asarray(x, dtype=float).reshape(-1) for x in logprobs]
    if not out or any(len(x) == 0 for x in out):
        raise UserError(f"{what}: give at least one text, each with at least one scored token")
    if any(not np.all(np.isfinite(x)) or np.any(x > 1e-9) for x in out):
        raise UserError(f"{what}: token log-probabilities must be finite and <= 0; pass log p, not p or logits")
    return out


def _lowest_mean(values: np.ndarray, k: float) -> float:
    count = max(1, int(np.ceil(k * len(values))))
    return float(np.mean(np.sort(values)[:count]))


def _check_k(k: float) -> None:
    if not 0 < k <= 1:
        raise UserError(f"Min-K%: k must be in (0, 1], got {k}; e.g. 0.2")


def loss_scores(logprobs: Sequence[np.ndarray]) -> np.ndarray:
    """Mean token log-probability of each text (minus its loss)."""
    return np.array([x.mean() for x in _checked(logprobs, "loss attack")])


def zlib_scores(logprobs: Sequence[np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """Minus (log-perplexity / zlib entropy in bits) of each text (module docstring)."""
    values = _checked(logprobs, "zlib attack")
    if len(texts) != len(values):
        raise UserError(f"zlib attack: {len(texts)} texts for {len(values)} log-probability arrays; give one each")
    bits = np.array([8.0 * len(zlib.compress(t.encode("utf-8"))) for t in texts])
    return np.array([x.mean() for x in values]) / bits


def min_k_scores(logprobs: Sequence[np.ndarray], k: float = DEFAULT_K) -> np.ndarray:
    """Min-K% [Shi et al. 2024, Eq. 1]: mean of each text's ``k`` fraction of lowest token log-probs."""
    _check_k(k)
    return np.array([_lowest_mean(x, k) for x in _checked(logprobs, "Min-K% attack")])


def min_k_plus_plus_scores(logprobs: Sequence[np.ndarray], moments: Sequence[np.ndarray],
                           k: float = DEFAULT_K) -> np.ndarray:
    """Min-K%++ [Zhang et al. 2025, Eq. 2-3]: ``(log p(x_t) - mu_t) / sigma_t`` per token, with ``moments``
    per text ``(T, 2)`` = (mu_t, sigma_t) of the next-token log-probability under the model
    (:func:`targets.lm.model.token_moments`), then the mean of the lowest ``k`` fraction."""
    _check_k(k)
    values = _checked(logprobs, "Min-K%++ attack")
    if len(moments) != len(values):
        raise UserError(f"Min-K%++: {len(moments)} moment arrays for {len(values)} texts; give one per text")
    out = []
    for x, m in zip(values, moments, strict=True):
        m = np.asarray(m, dtype=float)
        if m.shape != (len(x), 2):
            raise UserError(f"Min-K%++: moments must be (tokens, 2) = (mean, std) per token, got {m.shape} for "
                            f"{len(x)} tokens")
        out.append(_lowest_mean((x - m[:, 0]) / np.maximum(m[:, 1], 1e-12), k))
    return np.array(out)


def reference_scores(logprobs: Sequence[np.ndarray], reference_logprobs: Sequence[np.ndarray]) -> np.ndarray:
    """Target's mean token log-probability minus the reference model's, per text (module docstring)."""
    target = loss_scores(logprobs)
    reference = loss_scores(reference_logprobs)
    if len(reference) != len(target):
        raise UserError(f"reference attack: {len(reference)} reference texts for {len(target)} target texts")
    return target - reference


def mean_reference_scores(logprobs: Sequence[np.ndarray],
                          references: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Target's mean token log-probability minus the mean over ``references`` (one list of per-text arrays
    per reference model) of theirs, per text (module docstring)."""
    if len(references) == 0:
        raise UserError("reference attack: give at least one reference model's log-probabilities")
    return np.mean([reference_scores(logprobs, r) for r in references], axis=0)


def likelihood_ratio_scores(logprobs: Sequence[np.ndarray],
                            references: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Text log-likelihood ratio (module docstring): ``sum_t log p(x_t)`` of the target minus the mean over
    ``references`` (one list of per-text arrays per reference model: the base model alone, or reference
    models trained like the target) of theirs, per text."""
    if len(references) == 0:
        raise UserError("likelihood-ratio attack: give at least one reference model's log-probabilities")
    target = np.array([x.sum() for x in _checked(logprobs, "likelihood-ratio attack")])
    totals = []
    for r in references:
        values = _checked(r, "likelihood-ratio attack (reference)")
        if len(values) != len(target):
            raise UserError(f"likelihood-ratio attack: {len(values)} reference texts for {len(target)} target texts")
        totals.append([x.sum() for x in values])
    return target - np.mean(totals, axis=0)


@dataclass(frozen=True, eq=False, kw_only=True)
class TextInputs:
    """What the attacks on texts consume, one entry per text: the ``texts``, the target's per-token
    ``logprobs``, and what an attack may need beyond them (:data:`attacks.names.TEXT_NEEDS`), each None when
    the target has none: the next-token ``moments`` ((T, 2) per text), the ``base`` model's log-probabilities,
    and the ``references``' (one list per reference model)."""

    texts: list[str]
    logprobs: list[np.ndarray]
    moments: list[np.ndarray] | None = None
    base: list[np.ndarray] | None = None
    references: list[list[np.ndarray]] | None = None

    def has(self, need: str | None) -> bool:
        """Whether these inputs meet ``need`` (one of :data:`attacks.names.TEXT_NEEDS`, or None)."""
        return need is None or getattr(self, need) is not None


@register_scorer("loss", records="texts")
def _loss_attack(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    return {"loss": loss_scores(inp.logprobs)}


@register_scorer("zlib", records="texts")
def _zlib_attack(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    return {"zlib": zlib_scores(inp.logprobs, inp.texts)}


@register_scorer("min_k", records="texts")
def _min_k_attack(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    return {"min_k": min_k_scores(inp.logprobs)}


@register_scorer("min_k_plus_plus", records="texts")
def _min_k_plus_plus_attack(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    return {"min_k_plus_plus": min_k_plus_plus_scores(inp.logprobs, inp.moments)}


@register_scorer("reference_base", "llr_base", records="texts")
def _base_attacks(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    out = {"reference_base": reference_scores(inp.logprobs, inp.base)} if "reference_base" in chosen else {}
    return out | ({"llr_base": likelihood_ratio_scores(inp.logprobs, [inp.base])} if "llr_base" in chosen else {})


@register_scorer("reference", "llr_reference", records="texts")
def _reference_attacks(chosen: tuple[str, ...], inp: TextInputs) -> dict[str, np.ndarray]:
    out = {"reference": mean_reference_scores(inp.logprobs, inp.references)} if "reference" in chosen else {}
    return out | ({"llr_reference": likelihood_ratio_scores(inp.logprobs, inp.references)}
                  if "llr_reference" in chosen else {})


def run_text_attacks(inp: TextInputs) -> dict[str, np.ndarray]:
    """Every attack on texts (:data:`attacks.names.TEXT_ATTACKS`) whose needs ``inp`` meets, scored on its texts
    (higher = more likely a member), in the order the scorers are registered.

    Args:
        inp: the target's log-probabilities and what it has beyond them.

    Returns:
        Each attack's scores (one per text), by name.
    """
    chosen = tuple(name for name in TEXT_ATTACKS if inp.has(ATTACK_SPECS[name].needs))
    out: dict[str, np.ndarray] = {}
    for registered, scorer in SCORERS["texts"].items():
        names = tuple(name for name in registered if name in chosen)
        if names:
            out |= scorer(names, inp)
    return out
