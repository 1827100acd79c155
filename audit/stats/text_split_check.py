"""Blind split check for texts: can a classifier that reads only the texts tell members from non-members?

Das, Zhang and Tramèr (2024) beat every published membership benchmark of language models without the
model, from bag-of-words and n-gram features of the texts alone (WikiMIA AUC 0.990; Gutenberg 0.961): the
member and non-member texts differed in time, source or format. :func:`text_split_check` is the text form
of :func:`audit.stats.split_check.blind_split_check` (docs/references.md, "Blind split check"), with the
same cross-fitting, per-fold Hanley–McNeil score intervals at ``1 - alpha/K`` and union bound over folds
(that module's docstring has the argument), and a text classifier:

* features: TF-IDF of character n-grams within word boundaries (scikit-learn ``TfidfVectorizer``,
  ``analyzer="char_wb"``, n = 1 to 4, case kept, sublinear term frequency, fitted on the training folds
  only) and standardised layout features of each text — length in characters, words and lines, mean line
  length, fractions of digits, upper-case letters, punctuation and whitespace, and the count of
  date-like tokens (years 1000-2099, ``dd/mm/yyyy``-style dates, month names) [Das et al. 2024, Sec. 3:
  bag-of-words, dates and length];
* word unigrams and bigrams, TF-IDF (lower-cased, sublinear; the bag of words of Das et al. 2024);
* one stacked feature: the log-odds of a multinomial naive Bayes on lower-cased word-unigram presence
  (``MultinomialNB``, add-one smoothing) [McCallum and Nigam 1998], standardised; for the training texts
  it is cross-fitted inside the training fold (2 seeded inner folds, so that the logistic regression sees
  the naive Bayes score of texts it was not fitted on), for the held-out texts it comes from the naive
  Bayes fitted on the whole training fold [Wolpert 1992, stacked generalisation]. Naive Bayes learns from
  few short texts faster than the logistic regression on TF-IDF (on the corpus's speeches, histories
  against comedies, seeds 0-4: mean AUC 0.69 without it and 0.72 with it at 300 of each, 0.76 and 0.80
  at 1,000 of each; docs/performance.md, "Text blind split check");
* classifier: ``LogisticRegression`` (L2, C = 1, lbfgs).

Nothing is tuned on the texts under test: the n-gram ranges, C, the smoothing and the inner folds are
fixed, and every score of a held-out text is a function of the texts and the training fold's labels only,
so under a random split the held-out labels stay exchangeable with the scores and the interval keeps its
level.

Texts beyond ``max_records`` in all are subsampled (seeded, in proportion), as in the records' check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import FeatureUnion
from sklearn.preprocessing import StandardScaler

from audit.errors import UserError
from audit.stats.split_check import (
    DEFAULT_FOLDS,
    MAX_RECORDS,
    MIN_PER_FOLD,
    SplitCheck,
    fold_statistics,
    proportional_subsample,
)

__all__ = ["text_split_check", "text_fold_scores", "layout_features", "LAYOUT_FEATURES", "NGRAM_RANGE"]

#: Character n-gram lengths of the TF-IDF features.
NGRAM_RANGE = (1, 4)
#: Word n-gram lengths of the bag-of-words TF-IDF features (Das et al. 2024's bag of words).
WORD_NGRAM_RANGE = (1, 2)
#: Inner folds that cross-fit the naive Bayes feature of the training texts.
NB_INNER_FOLDS = 2
#: Names of the layout features (:func:`layout_features`), in column order.
LAYOUT_FEATURES = ("chars", "words", "lines", "mean_line_chars", "digit_fraction", "upper_fraction",
                   "punctuation_fraction", "space_fraction", "dates")
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"\b(1[0-9]{{3}}|20[0-9]{{2}})\b|\b\d{{1,4}}[/.-]\d{{1,2}}[/.-]\d{{1,4}}\b|\b({_MONTHS})\b",
                   re.IGNORECASE)


def layout_features(texts: Sequence[str]) -> np.ndarray:
    """The :data:`LAYOUT_FEATURES` of each text, ``(n, 9)`` float64."""
    rows = []
    for text in texts:
        n = max(1, len(text))
        lines = text.splitlines() or [""]
        rows.append([len(text), len(text.split()), len(lines), np.mean([len(line) for line in lines]),
                     sum(c.isdigit() for c in text) / n, sum(c.isupper() for c in text) / n,
                     sum((not c.isalnum()) and not c.isspace() for c in text) / n,
                     sum(c.isspace() for c in text) / n, len(_DATE.findall(text))])
    return np.asarray(rows, dtype=float)


def _checked(members: Sequence[str], nonmembers: Sequence[str], confidence: float, folds: int,
             max_records: int) -> tuple[list[str], np.ndarray]:
    if not 0 < confidence < 1:
        raise UserError(f"text split check: confidence must be in (0, 1), got {confidence}; e.g. 0.95")
    if int(folds) != folds or folds < 2:
        raise UserError(f"text split check: folds must be an integer >= 2, got {folds}")
    if int(max_records) != max_records or max_records < 2 * MIN_PER_FOLD * folds:
        raise UserError(f"text split check: max_records must be an integer >= {2 * MIN_PER_FOLD * folds}, "
                        f"got {max_records}")
    texts = list(members) + list(nonmembers)
    if not all(isinstance(t, str) for t in texts):
        raise UserError("text split check: members and non-members must be strings (one text each)")
    need = MIN_PER_FOLD * folds
    if min(len(members), len(nonmembers)) < need:
        raise UserError(f"text split check: {len(members)} members and {len(nonmembers)} non-members; {folds} "
                        f"folds need at least {need} of each: give more texts or fewer folds")
    return texts, np.r_[np.ones(len(members), dtype=np.int64), np.zeros(len(nonmembers), dtype=np.int64)]


def _naive_bayes_log_odds(train_texts: list[str], y: np.ndarray, test_texts: list[str]) -> np.ndarray:
    """Log-odds of member for ``test_texts`` from a multinomial naive Bayes on lower-cased word-unigram
    presence fitted on ``train_texts`` [McCallum and Nigam 1998]."""
    vectorizer = CountVectorizer(lowercase=True, binary=True)
    model = MultinomialNB(alpha=1.0).fit(vectorizer.fit_transform(train_texts), y)
    log_proba = model.predict_log_proba(vectorizer.transform(test_texts))
    return log_proba[:, 1] - log_proba[:, 0]


def _stacked_naive_bayes(train_texts: list[str], y: np.ndarray, test_texts: list[str],
                         seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The naive Bayes feature of the training texts (cross-fitted over :data:`NB_INNER_FOLDS` seeded inner
    folds) and of the test texts (fitted on all training texts) [Wolpert 1992]."""
    inner = np.zeros(len(train_texts))
    splitter = StratifiedKFold(n_splits=NB_INNER_FOLDS, shuffle=True, random_state=seed)
    for fit, score in splitter.split(np.zeros(len(y)), y):
        inner[score] = _naive_bayes_log_odds([train_texts[i] for i in fit], y[fit], [train_texts[i] for i in score])
    return inner, _naive_bayes_log_odds(train_texts, y, test_texts)


def text_fold_scores(texts: list[str], member: np.ndarray, train: np.ndarray, test: np.ndarray,
                     seed: int) -> tuple[np.ndarray, int]:
    """Membership scores of ``texts[test]`` from the blind classifier (module docstring) fitted on ``texts[train]``
    with labels ``member[train]``, and its feature count; one fold of :func:`text_split_check`."""
    vectorizer = FeatureUnion([
        ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=NGRAM_RANGE, lowercase=False, sublinear_tf=True,
                                  min_df=2, dtype=np.float64)),
        ("words", TfidfVectorizer(analyzer="word", ngram_range=WORD_NGRAM_RANGE, lowercase=True, sublinear_tf=True,
                                  min_df=2, dtype=np.float64))])
    layout, stacked = StandardScaler(), StandardScaler()
    train_texts, test_texts = [texts[i] for i in train], [texts[i] for i in test]
    nb_train, nb_test = _stacked_naive_bayes(train_texts, member[train], test_texts, seed)
    x_train = sparse.hstack([vectorizer.fit_transform(train_texts), layout.fit_transform(layout_features(train_texts)),
                             stacked.fit_transform(nb_train[:, None])]).tocsr()
    x_test = sparse.hstack([vectorizer.transform(test_texts), layout.transform(layout_features(test_texts)),
                            stacked.transform(nb_test[:, None])]).tocsr()
    model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed).fit(x_train, member[train])
    return model.predict_proba(x_test)[:, 1], int(x_train.shape[1])


def text_split_check(members: Sequence[str], nonmembers: Sequence[str], *, confidence: float = 0.95,
                     folds: int = DEFAULT_FOLDS, seed: int = 0, max_records: int = MAX_RECORDS) -> SplitCheck:
    """Test whether a classifier on the texts alone tells ``members`` from ``nonmembers`` [Das, Zhang,
    Tramèr 2024; Meeus et al. SaTML 2025] (module docstring): cross-fitted over ``folds`` seeded stratified
    folds, per-fold Hanley–McNeil intervals at ``1 - (1 - confidence)/folds``, union bound. Bad input is a
    one-line UserError."""
    texts, member = _checked(members, nonmembers, confidence, folds, max_records)
    n_members, n_nonmembers = int(member.sum()), int(len(member) - member.sum())
    keep = proportional_subsample(member, max_records, MIN_PER_FOLD * folds, seed)
    texts, member = [texts[i] for i in keep], member[keep]
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = np.zeros(len(member))
    held_out, widths = [], []
    for train, test in splitter.split(np.zeros(len(member)), member):
        scores[test], width = text_fold_scores(texts, member, train, test, seed)
        held_out.append(test)
        widths.append(width)
    alpha = 1.0 - confidence
    used1 = int(member.sum())
    subsampled = len(keep) < n_members + n_nonmembers
    method = (f"{folds}-fold cross-fitting (StratifiedKFold, seed {seed}) of LogisticRegression on TF-IDF character "
              f"{NGRAM_RANGE[0]}-{NGRAM_RANGE[1]}-grams (char_wb) and {len(LAYOUT_FEATURES)} layout features "
              f"(length, lines, digits, case, punctuation, dates), word 1-2-grams and a stacked word naive Bayes "
              f"feature (inner {NB_INNER_FOLDS}-fold); per-fold held-out AUC with a Hanley-McNeil score "
              f"interval at {1 - alpha / folds:.4g}, pair-weighted mean, union bound over folds")
    if subsampled:
        method += f"; subsampled to {len(keep)} of {n_members + n_nonmembers} texts (seed {seed}, in proportion)"
    return SplitCheck(
        **fold_statistics(member, scores, held_out, confidence), confidence=float(confidence),
        n_members=n_members, n_nonmembers=n_nonmembers, n_members_used=used1, n_nonmembers_used=len(keep) - used1,
        subsampled=subsampled, folds=int(folds), n_features=max(widths), uses_labels=False, seed=int(seed),
        method=method)
