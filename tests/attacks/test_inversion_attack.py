"""Model inversion (attacks.inversion): SSIM against its closed form, MI-FACE's stopping rules, best iterate,
black-box gradients and query counts (``run inversion``: tests/e2e/inversion/test_inversion.py)."""


import numpy as np
import pytest
import torch

from attacks.inversion import InputSpace, MIFaceConfig, mi_face, ssim
from audit.errors import UserError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ssim_identical_and_constant_images_closed_form():
    rng = np.random.default_rng(0)
    img = rng.random((8, 8))
    assert ssim(img, img, 1.0) == pytest.approx(1.0, abs=1e-12)
    # Constant images: sigma terms vanish and eq. 13 reduces to (2ab + C1) / (a^2 + b^2 + C1).
    a, b, c1 = 0.2, 0.7, (0.01 * 1.0) ** 2
    assert ssim(np.full((8, 8), a), np.full((8, 8), b), 1.0) == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1))
    other = rng.random((8, 8))
    s = ssim(img, other, 1.0)
    assert -1.0 <= s < 0.5 and s == pytest.approx(ssim(other, img, 1.0))
    assert ssim(img.ravel(), img.ravel(), 1.0) == pytest.approx(1.0)  # flat square vectors are images


def _space(d):
    return InputSpace(shape=(d,), low=0.0, high=1.0)


def _linear_model(d=16, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(k, d, generator=g)
    return lambda x: torch.softmax(x.reshape(x.shape[0], -1) @ W.T, dim=-1)


def test_mi_face_raises_confidence_and_keeps_best_iterate():
    model = _linear_model()
    res = mi_face(model, np.arange(3), _space(16), 0.5, MIFaceConfig(alpha=200, beta=20, gamma=0.999, lr=0.5))
    start_p = model(torch.full((1, 16), 0.5))[0].numpy()
    final_p = model(torch.as_tensor(res.images)).numpy()[np.arange(3), np.arange(3)]
    assert np.all(res.confidence > start_p) and np.allclose(final_p, res.confidence, atol=1e-6)
    assert np.all(res.images >= 0) and np.all(res.images <= 1)  # PROCESS clips to the data range
    assert np.allclose(res.cost, 1 - res.confidence, atol=1e-6)
    assert np.all(res.queries == res.iterations + 1)  # white-box: one evaluation per step plus the start


def test_mi_face_image_start_is_shared_by_all_classes():
    model = _linear_model()
    start = np.linspace(0.2, 0.8, 16)
    res = mi_face(model, np.arange(3), _space(16), start, MIFaceConfig(alpha=1, beta=1, gamma=1.0, lr=1e-9))
    assert np.allclose(res.images, start[None], atol=1e-6)


def test_mi_face_stopping_rules():
    flat = lambda x: torch.full((x.shape[0], 2), 0.5) + 0 * x.reshape(x.shape[0], -1).sum(1, keepdim=True)  # noqa: E731
    res = mi_face(flat, np.array([0]), _space(4), 0.5, MIFaceConfig(alpha=1000, beta=7, gamma=0.99, lr=0.1))
    assert res.iterations[0] == 7 and res.stop_reason[0].startswith("no progress")
    res = mi_face(_linear_model(), np.array([1]), _space(16), 0.5,
                  MIFaceConfig(alpha=5000, beta=100, gamma=0.6, lr=0.5))
    assert res.stop_reason[0] == "confidence target" and res.confidence[0] >= 0.6 and res.iterations[0] < 5000


def test_black_box_matches_white_box_and_counts_queries():
    model = _linear_model(d=9)
    white = mi_face(model, np.arange(3), _space(9), 0.5, MIFaceConfig(alpha=5, beta=5, gamma=1.0, lr=0.5))
    black = mi_face(model, np.arange(3), _space(9), 0.5,
                    MIFaceConfig(alpha=5, beta=5, gamma=1.0, lr=0.5, black_box=True, fd_step=1e-3))
    assert np.allclose(white.images, black.images, atol=1e-3)
    # start evaluation + per step (2 d finite-difference queries + 1 evaluation of the new iterate)
    assert np.all(black.queries == 1 + black.iterations * (2 * 9 + 1))


def test_bad_mi_face_settings_are_user_errors():
    with pytest.raises(UserError):
        MIFaceConfig(gamma=0.0)
    with pytest.raises(UserError):
        MIFaceConfig(alpha=0)
