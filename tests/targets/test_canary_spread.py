"""Dirac canaries of the one-run audits go into every parameter tensor
(targets.gradient_canaries.spread_coordinates)."""

import numpy as np
import pytest

from targets.gradient_canaries import spread_coordinates


def test_every_tensor_gets_canaries_on_its_least_touched_coordinates():
    touched = np.concatenate([np.arange(640, dtype=float), 1000.0 + np.arange(10)])  # the bias is touched most
    coords = spread_coordinates(touched, (640, 10), 100)
    assert coords.size == np.unique(coords).size == 100
    assert np.sum(coords >= 640) == 10  # the bias's share is capped by its size, the rest in the weights
    np.testing.assert_array_equal(np.sort(coords[coords < 640]), np.arange(90))  # the weights' least touched
    assert np.all(np.diff(touched[coords]) >= 0)  # in the order of touched


def test_equal_shares_and_the_remainder_to_the_first_tensors():
    coords = spread_coordinates(np.zeros(30), (10, 10, 10), 8)
    assert [int(np.sum((coords >= a) & (coords < a + 10))) for a in (0, 10, 20)] == [3, 3, 2]


@pytest.mark.parametrize(("sizes", "count"), [((50,), 20), ((30, 20), 50)])
def test_one_tensor_or_every_coordinate_is_the_old_choice(sizes, count):
    touched = np.random.default_rng(0).random(sum(sizes)).round(1)  # ties broken by index
    np.testing.assert_array_equal(spread_coordinates(touched, sizes, count), np.argsort(touched, kind="stable")[:count])
