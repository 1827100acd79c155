"""The likelihood-ratio attack LiRA [Carlini et al. 2022, "Membership inference attacks from first
principles", Sec. IV, Algorithm 1].

Threat model (what the adversary is assumed to know): the candidate examples with the labels they
would be trained with, the data distribution (a pool of data disjoint from the target's natural
training data), the training algorithm and its hyper-parameters, and black-box access to the
target's output probabilities on the candidates. With that knowledge the adversary trains
*reference models* ("shadow models" in the paper): each candidate is IN the training set of about
half of them (exactly half here, Sec. IV-B) and OUT of the rest. The reference models never see the
target's coins, so LiRA scores are a post-processing of the target model plus independent
randomness and can feed the one-run epsilon bound.

For every candidate ``(x, y)`` and model ``f`` the statistic is the logit-scaled confidence
``phi = log(p / (1 - p))`` with ``p = f(x)_y`` (Sec. IV-C, eq. (4)), computed stably from
log-probabilities as ``log p_y - log sum_{y' != y} p_{y'}``. Per example, Gaussians are fitted to
``phi`` over the IN and the OUT reference models (Sec. IV-A):

* online (Algorithm 1): score = ``log N(phi_target; mu_in, s_in^2) - log N(phi_target; mu_out, s_out^2)``,
  the log likelihood ratio;
* offline (Sec. IV-D): only the OUT fits; the paper's statistic ``1 - Pr[Z > phi_target]`` with
  ``Z ~ N(mu_out, s_out^2)`` is ``Phi(z)`` with ``z = (phi_target - mu_out) / s_out``; we return ``z``,
  a strictly increasing transform of it with the same ROC that does not saturate at 1.

Variance: with few reference models per-example variances are noisy and the paper uses one
*global* variance for all examples (Sec. IV-B, "fixed variance"; per-example variance pays off
from about 64 reference models, Fig. 7). ``variance="auto"`` picks global below
:data:`PER_EXAMPLE_MIN_MODELS` reference models.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from attacks.names import VARIANCES
from attacks.reference_games import balanced_subset
from audit.errors import UserError

#: "auto" variance uses per-example variances from this many reference models on (Carlini et al. Fig. 7).
PER_EXAMPLE_MIN_MODELS = 64
#: Variance floor (in squared logit units) so that a degenerate fit never divides by zero.
MIN_VARIANCE = 1e-4


def logit_confidence(log_probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``phi = log p_y - log(1 - p_y)`` from log-softmax outputs [Carlini et al. 2022, eq. (4)].

    ``log_probs`` is (..., n, C), ``labels`` (n,); returns (..., n). Computed as
    ``log p_y - logsumexp_{y' != y} log p_{y'}`` so it stays finite when ``p_y`` rounds to 1.

    Args:
        log_probs: log-softmax outputs, (..., n, C).
        labels: the examples' labels, (n,).

    Returns:
        phi, (..., n).
    """
    lp = np.asarray(log_probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    index = np.broadcast_to(labels, lp.shape[:-1])[..., None]
    own = np.take_along_axis(lp, index, axis=-1)[..., 0]
    others = lp.copy()
    np.put_along_axis(others, index, -np.inf, axis=-1)
    return own - logsumexp(others, axis=-1)


def _means(phi: np.ndarray, side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-example mean of ``phi`` (R, n) over the models where ``side`` (R, n) holds, and their count;
    ``nan`` where no model is on this side."""
    count = side.sum(axis=0)
    total = np.where(side, phi, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan), count


def _variance(phi: np.ndarray, side: np.ndarray, mu: np.ndarray, count: np.ndarray, variance: str) -> np.ndarray:
    """One global or per-example variance of ``phi`` around ``mu`` over the models on ``side``."""
    sq = (np.where(side, phi - np.nan_to_num(mu)[None, :], 0.0) ** 2).sum(axis=0)
    if variance == "global":
        dof = int(np.sum(np.maximum(count - 1, 0)))
        if dof == 0:
            raise UserError("LiRA needs at least 2 reference models on each side (IN/OUT) for some example; "
                            "train more reference models (--references)")
        return np.full(phi.shape[1], max(float(sq.sum()) / dof, MIN_VARIANCE))
    if np.any(count < 2):
        raise UserError("per-example LiRA variance needs at least 2 IN and 2 OUT reference models per example; "
                        "use --lira-variance global or more --references")
    return np.maximum(sq / (count - 1), MIN_VARIANCE)


def _side_fit(phi: np.ndarray, side: np.ndarray, variance: str,
              use: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-example mean and variance of ``phi`` (R, n) over the models where ``side`` (R, n) holds.

    With ``use`` (R, n) the means (and per-example variances) come from the models ``side & use``
    only; a global variance still pools every model on the side (one number for all examples, so it
    carries no example's membership). Returns ``(mu, var, count)``; examples with no model on this
    side get ``mu = nan``.
    """
    mu, count = _means(phi, side)
    var = _variance(phi, side, mu, count, variance)
    if use is None:
        return mu, var, count
    mu, count = _means(phi, side & use)
    if variance != "global":
        var = _variance(phi, side & use, mu, count, variance)
    return mu, var, count


def _log_normal(x: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2 * math.pi * var) + (x - mu) ** 2 / var)


def resolve_variance(variance: str, n_models: int) -> str:
    """``auto`` -> ``global`` below :data:`PER_EXAMPLE_MIN_MODELS` reference models, else ``per-example``.

    Args:
        variance: ``"auto"``, ``"global"`` or ``"per-example"``.
        n_models: the number of reference models.

    Returns:
        ``"global"`` or ``"per-example"``.

    Raises:
        UserError: an unknown variance.
    """
    if variance not in VARIANCES:
        raise UserError(f"unknown LiRA variance {variance!r}; choose one of {', '.join(VARIANCES)}")
    if variance == "auto":
        return "per-example" if n_models >= PER_EXAMPLE_MIN_MODELS else "global"
    return variance


def lira_scores(target_phi: np.ndarray, ref_phi: np.ndarray, ref_in: np.ndarray,
                variance: str = "auto", use: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Online and offline LiRA scores of the target's statistics ``target_phi`` (..., n).

    ``ref_phi`` (R, n) are the reference models' statistics on the same candidates and ``ref_in``
    (R, n) says which reference models trained on which candidate; ``use`` (R, n), optional, which
    reference models the per-example fits of each candidate use (:func:`_side_fit`). Returns
    ``{"online": (..., n), "offline": (..., n)}``, higher = more likely a member.

    An example with no IN reference model (possible only with unbalanced assignments) gets the
    average IN-OUT shift of the other examples added to its OUT mean as its IN mean.

    Args:
        target_phi: the target's statistics, (..., n).
        ref_phi: the reference models' statistics, (R, n).
        ref_in: which reference model trained on which candidate, (R, n) bool.
        variance: ``"auto"``, ``"global"`` or ``"per-example"``.
        use: which reference models each candidate's fits use, (R, n) bool (default: all).

    Returns:
        The online and offline scores, as above.

    Raises:
        UserError: too few IN or OUT reference models for the variance asked for.
    """
    ref_phi = np.asarray(ref_phi, dtype=np.float64)
    ref_in = np.asarray(ref_in, dtype=bool)
    if ref_phi.ndim != 2 or ref_phi.shape != ref_in.shape:
        raise ValueError(f"ref_phi and ref_in must both be (models, examples), got {ref_phi.shape}, {ref_in.shape}")
    mode = resolve_variance(variance, ref_phi.shape[0])
    mu_in, var_in, n_in = _side_fit(ref_phi, ref_in, mode, use)
    mu_out, var_out, n_out = _side_fit(ref_phi, ~ref_in, mode, use)
    if not np.any(n_out > 0):
        raise UserError("LiRA needs OUT reference models; train more reference models (--references)")
    both = (n_in > 0) & (n_out > 0)
    shift = float(np.mean(mu_in[both] - mu_out[both])) if both.any() else 0.0
    mu_in = np.where(n_in > 0, mu_in, mu_out + shift)
    mu_out = np.where(n_out > 0, mu_out, mu_in - shift)
    x = np.asarray(target_phi, dtype=np.float64)
    online = _log_normal(x, mu_in, var_in) - _log_normal(x, mu_out, var_out)
    offline = (x - mu_out) / np.sqrt(var_out)
    return {"online": online, "offline": offline}


def lira_offline_scores(target_phi: np.ndarray, ref_phi: np.ndarray, variance: str = "auto") -> np.ndarray:
    """Offline LiRA [Carlini et al. 2022, Sec. IV-C] when every reference model is OUT for every candidate
    (reference models trained on other data, e.g. of a trained model audited as it is):
    ``(phi - mu_out) / sigma_out`` per candidate, ``ref_phi`` (R, n), ``target_phi`` (..., n); a global
    variance needs R >= 2, a per-example one too.

    Args:
        target_phi: the target's statistics, (..., n).
        ref_phi: the reference (all OUT) models' statistics, (R, n).
        variance: ``"auto"``, ``"global"`` or ``"per-example"``.

    Returns:
        The offline scores, (..., n).

    Raises:
        UserError: too few reference models for the variance.
    """
    ref_phi = np.asarray(ref_phi, dtype=np.float64)
    mu, var, _ = _side_fit(ref_phi, np.ones(ref_phi.shape, dtype=bool), resolve_variance(variance, ref_phi.shape[0]))
    return (np.asarray(target_phi, dtype=np.float64) - mu) / np.sqrt(var)


def lira_leave_one_out(ref_phi: np.ndarray, ref_in: np.ndarray, variance: str = "auto") -> dict[str, np.ndarray]:
    """LiRA scores of each reference model ``j`` on the candidates, using the other models as
    references (the paper's evaluation protocol, Sec. V-A). Returns ``{"online": (R, n), "offline": (R, n)}``;
    membership is ``ref_in``. Used to choose one-run guess counts without the target's coins.

    Each candidate is IN exactly half of the reference models, so the others hold one IN model fewer
    exactly when ``j`` trained on it: fits over all of them would tell ``j``'s membership through how
    many models they average (the OUT mean of an OUT candidate rests on one model fewer, which widens
    its scores). The per-example fits therefore use a balanced subset of the others
    (:func:`attacks.reference_games.balanced_subset`), whose make-up does not depend on ``j``.

    Args:
        ref_phi: the reference models' statistics, (R, n).
        ref_in: which reference model trained on which candidate, (R, n) bool.
        variance: ``"auto"``, ``"global"`` or ``"per-example"``.

    Returns:
        The online and offline scores of each reference model, as above.

    Raises:
        UserError: fewer than 3 reference models.
    """
    ref_phi = np.asarray(ref_phi, dtype=np.float64)
    ref_in = np.asarray(ref_in, dtype=bool)
    R = ref_phi.shape[0]
    if R < 3:
        raise UserError(f"LiRA needs at least 3 reference models for leave-one-out calibration, got {R}; "
                        "raise --references")
    mode = resolve_variance(variance, R)  # the same variance mode as the target's scores
    out: dict[str, list[np.ndarray]] = {"online": [], "offline": []}
    for j in range(R):
        keep = np.arange(R) != j
        scores = lira_scores(ref_phi[j], ref_phi[keep], ref_in[keep], mode, balanced_subset(ref_in[keep]))
        for key in out:
            out[key].append(scores[key])
    return {key: np.stack(value) for key, value in out.items()}
