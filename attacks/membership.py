"""Black-box membership-inference scores. Higher score = "more likely a member" everywhere.

* Loss threshold [Yeom et al. 2018, sec. 3.2]: the score is the log-probability the model gives to
  the example's (training) label, i.e. minus its cross-entropy loss.
* Shadow models [Shokri et al. 2017, sec. IV]: shadow models trained like the target on disjoint
  data provide labelled (member / non-member) prediction vectors; one attack classifier per class
  learns to tell them apart from the prediction vector sorted in decreasing order. Our canaries
  may carry wrong labels, so each feature vector also holds the log-probability of the example's
  label (which class the attack model belongs to is the label itself, as in the paper).
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def loss_scores(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Yeom et al.'s loss attack: ``log p(label | x)`` per model and example.

    ``log_probs`` is (..., n, C) log-softmax output, ``labels`` (n,); returns (..., n).
    """
    index = np.broadcast_to(labels.astype(np.int64), log_probs.shape[:-1])[..., None]
    return np.take_along_axis(log_probs, index, axis=-1)[..., 0]


def shadow_features(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Shokri et al.'s attack input: the probability vector sorted in decreasing order, plus the
    log-probability of the label. ``log_probs`` (n, C) -> features (n, C + 1)."""
    probs = np.exp(log_probs)
    sorted_probs = -np.sort(-probs, axis=1)
    label_logp = log_probs[np.arange(labels.shape[0]), labels]
    return np.column_stack([sorted_probs, np.maximum(label_logp, -50.0)])


class ShadowAttack:
    """Per-class attack classifiers trained on shadow models' member / non-member outputs.

    Classes with too few shadow examples of both kinds fall back to one classifier pooled over
    all classes.
    """

    def __init__(self, n_classes: int, min_per_class: int = 20):
        self.n_classes = n_classes
        self.min_per_class = min_per_class
        self.models: dict[int, object] = {}
        self.pooled = None

    def _classifier(self):
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))

    def fit(self, features: np.ndarray, labels: np.ndarray, member: np.ndarray) -> "ShadowAttack":
        """Fit on shadow outputs: ``features`` (n, F), the examples' ``labels`` (n,), ``member`` (n,) bool."""
        member = member.astype(int)
        if member.min() == member.max():
            raise ValueError("the shadow attack needs both members and non-members among the shadow examples")
        self.pooled = self._classifier().fit(features, member)
        for c in range(self.n_classes):
            sel = labels == c
            if sel.sum() >= self.min_per_class and 0 < member[sel].sum() < sel.sum():
                self.models[c] = self._classifier().fit(features[sel], member[sel])
        return self

    def score(self, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Estimated probability of membership per example (higher = member)."""
        scores = self.pooled.predict_proba(features)[:, 1]
        for c, model in self.models.items():
            sel = labels == c
            if sel.any():
                scores[sel] = model.predict_proba(features[sel])[:, 1]
        return scores


#: Membership attacks available to ``python -m audit run membership --attack``.
ATTACKS = {
    "shadow": "shadow-model attack, per-class classifiers on sorted prediction vectors (Shokri et al. 2017)",
    "loss": "loss threshold: log-probability of the label (Yeom et al. 2018)",
}
