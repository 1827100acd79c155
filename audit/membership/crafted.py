"""Canaries designed for the final model before the training: the gradient-max construction (``--canary gradmax``).

A released-model audit sees a canary only through the final model's output on it, which its own clipped steps move.
The "gradient max" baseline of Boglioni, Liu, Ilyas and Wu (ICLR 2026; the cheap alternative to their
metagradient-optimised canaries) keeps, among candidate inputs, those whose loss gradient on a model trained on
held-out data is largest, each with a label that model does not predict: a canary whose loss stays high keeps a
gradient that DP-SGD clips to the full norm ``C`` at every step it joins, and a large gradient means that its output
moves the most under the model's steps, its own included. For ``count`` canaries (:func:`gradient_max_canaries`):

1. a **public model**: one model trained by the target's own recipe (:meth:`MembershipSubject.fit`) on public data,
   ``n_train`` records of the game's shadow pool: records the target never trains on, disjoint from every canary
   (canaries are appended rows), seeded from the audit's seed (:data:`PUBLIC_MODEL_STREAM`);
2. :data:`CANDIDATES_PER_CANARY` times ``count`` **candidates**: sparse inputs (:func:`audit.membership.game.
   synthetic_canaries`), each labelled with a uniformly random class other than the public model's prediction
   (:func:`audit.membership.game.mislabel`: labels stay spread over the classes; the least likely class instead
   gives most canaries the same few labels, and they are learnt together: ε ≥ 0.140 on the flagship);
3. each candidate's **score**: the norm of its loss gradient at the public model
   (:func:`targets.example_gradients.gradient_norms`); the ``count`` largest, in a random order.

A trainer plugin's model is a function (no gradients): its candidates are scored by the output factor of the
gradient, ``1 - p(label)`` under the public model (the gradient is the Jacobian times ``p - e_label``).

Validity: everything here is fixed before the game's coins are drawn, from the audit's seed, the public records and
the public model only: never the target's records, coins or model. The one-run bound holds for any canaries fixed
in advance; the construction only decides its power. RMIA's population is made the same way (fresh candidates).
Measured power (docs/science/membership.md): below the flagship's sparse canaries on its CNN. Sources:
docs/references.md, "Canaries and threat models".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from audit.executors import TrainingCall
from audit.membership.game import Crafter, mislabel, synthetic_canaries

#: Candidates drawn per canary kept (the others are those of smallest gradient).
CANDIDATES_PER_CANARY = 2
#: The public model's seed: ``SeedSequence([seed, PUBLIC_MODEL_STREAM])`` (the game's own streams are 7 to 10).
PUBLIC_MODEL_STREAM = 11


def output_factor_score(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``1 - p(label)`` per candidate: how far the model's output is from the label (the gradient's output factor)."""
    return 1.0 - np.exp(log_probs[np.arange(len(labels)), labels])


def gradient_max_canaries(subject: Any, params: Any, count: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` gradient-max canaries (inputs (count, *shape), labels (count,)) of ``subject``'s dataset, chosen on
    the public model ``params`` (module docstring); candidates and labels drawn from ``rng``."""
    data = subject.data
    candidates, _ = synthetic_canaries("sparse", CANDIDATES_PER_CANARY * count, data.shape, data.n_classes, rng)
    log_probs = subject.log_probs(params, candidates)[0]
    labels = mislabel(log_probs.argmax(axis=1), data.n_classes, rng)
    if subject.gradient_norms is None:
        score = output_factor_score(log_probs, labels)
    else:
        score = subject.gradient_norms(params, candidates, labels)
    chosen = rng.permutation(np.argsort(-score, kind="stable")[:count])
    return candidates[chosen], labels[chosen].astype(data.y.dtype)


def canary_crafter(subject: Any, paths: Any, seed: int, log: Callable[[str], None]) -> Crafter:
    """The :data:`audit.membership.game.Crafter` of ``gradmax`` canaries for ``subject``: it trains the public model
    on the first call's public rows (``n_train`` of them) and keeps it for the next calls on the same rows."""
    kept: dict[bytes, Any] = {}

    def craft(public: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        rows = np.asarray(public)[:subject.n_train]
        key = np.sort(rows).tobytes()
        if key not in kept:
            mask = np.zeros(len(subject.data), dtype=bool)
            mask[rows] = True
            model_seed = int(np.random.SeedSequence([seed, PUBLIC_MODEL_STREAM]).generate_state(1)[0])
            call = TrainingCall("public model (canary design)", mask[None], [model_seed])
            [kept[key]] = subject.fit(paths, subject.data, [call], 0)
            log(f"gradmax canaries: designed on a public model trained on {rows.size} shadow-pool records "
                f"(seed {model_seed})")
        return gradient_max_canaries(subject, kept[key], count, rng)

    return craft
