"""A user's ``.npz`` data file (:func:`targets.data_files.load_array_file`) is read without unpickling anything:
object arrays, a file that is no archive and a single array are each a one-line UserError naming the file; so is a
``.csv`` that is not text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.errors import UserError
from targets.data_files import load_array_file


def _object_arrays(path: Path) -> Path:
    np.savez(path, X=np.array([[1.0, "a"]] * 12, dtype=object), y=np.arange(12) % 2)
    return path


def _not_an_archive(path: Path) -> Path:
    path.write_text("not a zip archive")
    return path


def _single_array(path: Path) -> Path:
    with open(path, "wb") as handle:
        np.save(handle, np.zeros((12, 2)))
    return path


@pytest.mark.parametrize("write, message", [
    (_object_arrays, "holds object arrays, which need pickling to load, and loading pickles is refused"),
    (_not_an_archive, "is not an .npz archive of arrays"),
    (_single_array, "holds a single array, not an .npz archive"),
])
def test_an_npz_that_needs_pickling_is_refused_naming_the_file(write, message, tmp_path) -> None:
    path = write(tmp_path / "records.npz")
    with pytest.raises(UserError, match=message) as refused:
        load_array_file(path)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


def test_an_npz_of_numbers_loads(tmp_path) -> None:
    path = tmp_path / "records.npz"
    np.savez(path, X=np.zeros((12, 2)), y=np.arange(12) % 2)
    data = load_array_file(path)
    assert data.X.shape == (12, 2) and data.n_classes == 2


def test_a_csv_that_is_not_text_is_refused_naming_the_file(tmp_path) -> None:
    path = tmp_path / "records.csv"
    path.write_bytes(b"\xff\xfe1,2\n")
    with pytest.raises(UserError, match="records.csv"):  # not text (UTF-8), or not numbers (another locale)
        load_array_file(path)
