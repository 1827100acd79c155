"""Datasets read from files: CIFAR-10 in its binary distribution format, and a user's arrays as
``.npz`` or ``.csv`` (a plugin's ``"dataset"``).

CIFAR-10 (Krizhevsky 2009; the dataset membership-inference papers report on, e.g. Carlini et al.
2022) is read from ``data_batch_1.bin`` .. ``data_batch_5.bin`` and ``test_batch.bin`` — each
record one label byte then 3,072 pixel bytes (1,024 red, 1,024 green, 1,024 blue, rows of 32) — in
``--data-dir`` (or ``$AUDIT_DATA_DIR``), or in its ``cifar-10-batches-bin`` subfolder, as the
``cifar-10-binary.tar.gz`` archive extracts. No pickles are read. Images are scaled to [0, 1],
shape (3, 32, 32); the 50,000 training images come first, then the 10,000 test images.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from audit.errors import UserError
from targets.dataset import DATA_DIR_ENV, Dataset

CIFAR10_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",)
CIFAR10_RECORD = 1 + 3 * 32 * 32
CIFAR10_HOWTO = ("download cifar-10-binary.tar.gz (the binary version) from "
                 "https://www.cs.toronto.edu/~kriz/cifar.html and extract it into that folder")


def load_cifar10(data_dir: str | os.PathLike | None = None) -> Dataset:
    """CIFAR-10 from the binary files in ``data_dir`` (or ``$AUDIT_DATA_DIR``); a one-line error says
    how to get them when they are missing."""
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV) or None
    if not data_dir:
        raise UserError(f"CIFAR-10 is read from local files: pass --data-dir DIR (or set {DATA_DIR_ENV}); "
                        f"{CIFAR10_HOWTO}")
    directory = Path(data_dir).expanduser()
    if (directory / "cifar-10-batches-bin").is_dir():
        directory = directory / "cifar-10-batches-bin"
    missing = [name for name in CIFAR10_FILES if not (directory / name).is_file()]
    if missing:
        raise UserError(f"CIFAR-10 file {missing[0]} not found in {directory}; {CIFAR10_HOWTO}")
    parts = []
    for name in CIFAR10_FILES:
        raw = np.fromfile(directory / name, dtype=np.uint8)
        if raw.size == 0 or raw.size % CIFAR10_RECORD:
            raise UserError(f"{directory / name} is not a CIFAR-10 binary batch (its size is not a multiple of "
                            f"{CIFAR10_RECORD} bytes); {CIFAR10_HOWTO}")
        parts.append(raw.reshape(-1, CIFAR10_RECORD))
    records = np.concatenate(parts)
    if records[:, 0].max() > 9:
        raise UserError(f"CIFAR-10 files in {directory} hold labels above 9; {CIFAR10_HOWTO}")
    X = (records[:, 1:].astype(np.float32) / 255.0).reshape(-1, 3, 32, 32)
    return Dataset(X, records[:, 0].astype(np.int64), "cifar10", 10, (3, 32, 32),
                   f"CIFAR-10 binary files in {directory}")


def read_csv_numbers(file: Path, what: str = "") -> np.ndarray:
    """A .csv of numbers as a 2-D array, its first line skipped when it is not numbers (a header);
    ``what`` prefixes the one-line error."""
    try:
        with open(file) as handle:
            first = handle.readline()
    except UnicodeDecodeError:
        raise UserError(f"{what + ': ' if what else ''}{file} is not text: give a .csv of numbers separated by "
                        f"commas") from None
    try:
        [float(v) for v in first.split(",")]
        skip = 0
    except ValueError:
        skip = 1
    try:
        return np.loadtxt(file, delimiter=",", skiprows=skip, ndmin=2)
    except ValueError as exc:
        raise UserError(f"{what + ': ' if what else ''}cannot read {file} as numbers separated by commas "
                        f"({exc})") from None


def read_npz(file: Path) -> tuple[np.ndarray, np.ndarray]:
    """The arrays ``X`` and ``y`` of a user's ``.npz``, read without unpickling anything (a pickle runs code when
    it is loaded): object arrays, which only a pickle can store, and files that are no ``.npz`` are a one-line
    error naming the file."""
    arrays = _open_npz(file)
    with arrays:
        if "X" not in arrays or "y" not in arrays:
            raise UserError(f"{file} must hold arrays named X and y (np.savez(path, X=X, y=y)); it has "
                            f"{', '.join(arrays.files)}")
        try:
            return arrays["X"], arrays["y"]
        except ValueError:  # numpy refuses an object array when allow_pickle is False
            raise UserError(f"{file} holds object arrays, which need pickling to load, and loading pickles is "
                            f"refused (they can run code): save numbers, np.savez(path, X=X.astype(float), "
                            f"y=y.astype(int))") from None


def _open_npz(file: Path) -> np.lib.npyio.NpzFile:
    """``np.load`` of a file named ``.npz``; a file it cannot read as an archive of arrays is a one-line error."""
    try:
        arrays = np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # numpy takes what is no archive for a pickle
        raise UserError(f"{file} is not an .npz archive of arrays (numpy: {exc.__class__.__name__}); loading it would "
                        f"need pickling, which is refused: save it with np.savez(path, X=X, y=y)") from None
    if not isinstance(arrays, np.lib.npyio.NpzFile):
        raise UserError(f"{file} holds a single array, not an .npz archive: save it with np.savez(path, X=X, y=y)")
    return arrays


def load_array_file(path: str | os.PathLike) -> Dataset:
    """A user's data: ``.npz`` with arrays ``X`` (n, ...) and ``y`` (n,), or ``.csv`` of numbers whose
    last column is the integer label (a header line is skipped). Features are used as given."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"data file {file} not found; give an existing .npz (arrays X and y) or .csv (label last)")
    if file.suffix == ".npz":
        X, y = read_npz(file)
    elif file.suffix == ".csv":
        table = read_csv_numbers(file)
        X, y = table[:, :-1], table[:, -1]
    else:
        raise UserError(f"data file {file} must end in .npz or .csv")
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim < 2 or y.ndim != 1 or len(X) != len(y) or len(y) < 10 or X.shape[1] == 0:
        raise UserError(f"{file}: need X (n, d...) and y (n,) with n >= 10, got shapes {X.shape} and {y.shape}")
    if not np.all(np.isfinite(X)) or not np.all(np.isfinite(y)):
        raise UserError(f"{file}: features and labels must be finite numbers")
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise UserError(f"{file}: labels must be non-negative integers")
    return Dataset(X.astype(np.float32), y.astype(np.int64), file.name, int(y.max()) + 1, tuple(X.shape[1:]),
                   f"user file {file}")
