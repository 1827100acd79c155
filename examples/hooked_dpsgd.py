"""A hand-written DP-SGD loop (Abadi et al. 2016, Alg. 1) with the two audit hooks of
:mod:`targets.audit_hooks`, as a trainer plugin: ``PYTHONPATH=examples python -m audit run dp
--target hooked_dpsgd:trainer --threat updates --canary dirac``. The loop in :func:`train` is the
one the Opacus tutorial (docs/tutorials/opacus.md) shows; ``tests/e2e/dp/test_opacus_hooks.py`` audits it.
"""

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from targets.audit_hooks import add_canary, report_update

SIGMA, CLIP, RATE, EPOCHS, LR = 2.39, 1.0, 0.5, 2, 5.0   # (2, 1e-5)-DP by the PLD accountant


def train(X, y, seed):
    gen = torch.manual_seed(seed)                                        # seeds the model and the loop
    X, y = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    model = torch.nn.Linear(X.shape[1], 10)
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = lambda p, x, t: torch.nn.functional.cross_entropy(functional_call(model, p, (x[None],)), t[None])  # noqa: E731
    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    for _ in range(int(EPOCHS / RATE)):
        batch = torch.rand(len(X), generator=gen) < RATE                   # Poisson sampling
        grads = per_example(params, X[batch], y[batch])
        norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
        factor = (CLIP / (norms + 1e-12)).clamp(max=1.0)                    # clip each example to CLIP
        grad_sum = [torch.einsum("b,b...->...", factor, g) for g in grads.values()]
        add_canary(grad_sum, clip_norm=CLIP, sample_rate=RATE)              # audit hook 1: before the noise
        noisy = [s + SIGMA * CLIP * torch.randn(s.shape, generator=gen) for s in grad_sum]
        report_update(noisy)                                                # audit hook 2: the noisy sum
        params = {k: p - LR * n / (RATE * len(X)) for (k, p), n in zip(params.items(), noisy, strict=True)}
    return lambda Z: torch.softmax(functional_call(model, params, (torch.as_tensor(Z, dtype=torch.float32),)),
                                   dim=1).detach().numpy()


def trainer():
    return {"kind": "trainer", "dataset": "digits", "train": train, "name": "hooked_dpsgd",
            "claim": {"epsilon": 2.0, "delta": 1e-5,
                      "dpsgd": {"noise_multiplier": SIGMA, "sample_rate": RATE, "steps": int(EPOCHS / RATE)}}}


if __name__ == "__main__":
    from sklearn.datasets import load_digits

    digits = load_digits()
    predict_proba = train(digits.data / 16.0, digits.target, seed=0)
    print("training accuracy:", float(np.mean(predict_proba(digits.data / 16.0).argmax(1) == digits.target)))
