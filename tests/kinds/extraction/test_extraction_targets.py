"""``run extraction`` refuses, in one line and before any training, what it cannot extract: a model that is
not a logistic regression, and an unknown target (its runs: tests/e2e/extraction/)."""

import pytest

from audit.errors import UserError


def test_run_extraction_rejects_non_linear_and_unknown_targets(tmp_path):
    from audit.extraction.runner import ExtractionOptions, run_extraction

    with pytest.raises(UserError, match="logistic-regression"):
        run_extraction(ExtractionOptions(target="nonprivate_mnist", out=str(tmp_path), quiet=True))
    with pytest.raises(UserError, match="unknown target"):
        run_extraction(ExtractionOptions(target="no_such_target", out=str(tmp_path), quiet=True))
