"""The inversion kind's measures (audit.inversion.measures): a tabular target has no image shape and is refused
(``run inversion`` end to end: tests/e2e/inversion/test_inversion.py)."""

import pytest

from audit.errors import UserError


def test_run_inversion_rejects_tabular_target():
    from audit.inversion.measures import image_shape

    with pytest.raises(UserError):
        image_shape((30,))
    assert image_shape((1, 28, 28)) == (28, 28) and image_shape((64,)) == (8, 8)
