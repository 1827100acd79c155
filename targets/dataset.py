"""The record every dataset loader returns (:class:`Dataset`) and where local data files are looked
for (:data:`DATA_DIR_ENV`); below both :mod:`targets.datasets` (named datasets) and
:mod:`targets.data_files` (CIFAR-10 and a user's files)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Environment variable naming a directory with MNIST IDX files or CIFAR-10 binary files (``--data-dir`` wins).
DATA_DIR_ENV = "AUDIT_DATA_DIR"


@dataclass(frozen=True, eq=False)
class Dataset:
    """Features ``X`` (n, *shape) float32, labels ``y`` (n,) int64.

    ``shape`` is the per-example input shape ((1, 28, 28) for images, (d,) for tabular data);
    ``source`` says where the data came from (for reports).

    Attributes:
        X: the features, (n, *shape) float32.
        y: the labels, (n,) int64.
        name: the dataset's name.
        n_classes: the number of classes.
        shape: the per-example input shape.
        source: where the data came from.
    """

    X: np.ndarray
    y: np.ndarray
    name: str
    n_classes: int
    shape: tuple[int, ...]
    source: str

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def subset(self, index: np.ndarray) -> Dataset:
        """The examples at ``index`` as a new Dataset.

        Args:
            index: integer indices or a boolean mask over the examples.

        Returns:
            The new Dataset (same name, classes, shape and source).
        """
        return Dataset(self.X[index], self.y[index], self.name, self.n_classes, self.shape, self.source)
