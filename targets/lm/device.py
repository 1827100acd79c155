"""The torch device the language-model code trains and scores on: the run's ``--device``.

The built-in language-model targets and plugins (:mod:`targets.lm.training`, :mod:`targets.lm.model`,
:mod:`targets.lm.base`) take no device argument through the plugin contract (``train(texts, seed)``); the
runner sets the run's device for the whole run with :func:`using_lm_device` and the code reads it with
:func:`lm_device` (CPU outside a run). Models are built on it, batches moved to it, and what leaves the code
(log-probabilities, cached weights) is copied back to the host.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["lm_device", "using_lm_device"]

_DEVICE = torch.device("cpu")


def lm_device() -> torch.device:
    """The device of the run in progress (CPU outside :func:`using_lm_device`)."""
    return _DEVICE


@contextmanager
def using_lm_device(device: torch.device | str) -> Iterator[torch.device]:
    """Train and score the language models on ``device`` while the block runs."""
    global _DEVICE
    saved, _DEVICE = _DEVICE, torch.device(device)
    try:
        yield _DEVICE
    finally:
        _DEVICE = saved
