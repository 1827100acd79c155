"""JAX loops of the mechanisms jax_privacy 2.0 trains and accounts, written as its user writes them, and the
mistakes those mechanisms invite (issue 49; docs/references.md, "Configuration checks", "Correlated noise" and
"Bug zoo").

Every loop trains the JAX zoo's model (:mod:`examples.zoo.jax_loops`: softmax regression on the first 300
rows of scikit-learn's digits, its per-example clipped sum :func:`examples.zoo.jax_loops._clipped_sum` at
``C = 1``) through the two JAX hooks (:mod:`targets.jax_hooks`). One step::

    for indices in sampler.batch_iterator(n, rng=seed):            # jax_privacy's batch selection
        grads = clipped sum over the rows of ``indices``
        grads = jax_hooks.add_canary(grads, clip_norm=C, sample_rate=rate, batch=padded indices)
        noisy, noise_state = privatizer.update(grads, noise_state)  # jax_privacy's privatizer
        jax_hooks.report_update(noisy)
        params -= LR * noisy / expected batch size

The sampler and the privatizer are jax_privacy's own objects: ``BandMFExecutionPlanConfig(...).plan``'s
``batch_selection_strategy`` and ``noise_addition_transform`` (``matrix_factorization_privatizer`` with the
strategy's Toeplitz inverse, ``toeplitz.inverse_as_streaming_matrix``), or a ``CyclicPoissonSampling`` /
``BallsInBinsSampling`` with ``gaussian_privatizer`` (the identity case). The rows, the mask and the indices are
padded to a fixed capacity (:data:`CAPACITY`; indices with ``-1``, ``batch_selection``'s padding convention), so
every training of a loop — on its records, and with one record more or less — reuses one compiled step. The noise key
is the training's seed (``noise_seed=seed``, ``prng_key=seed``), so a run repeats bit for bit.

Each plugin gives ``"mechanism"`` (the config or the strategy the gate reads,
:mod:`targets.plugins.declared`) and claims jax_privacy's epsilon for the mechanism it declares: the DpEvent
of :mod:`jax_privacy.experimental.accounting` (or ``plan.dp_event``) through dp_accounting's
``PLDAccountant`` with ``REPLACE_SPECIAL`` neighbours (the accountant a ``BandMFExecutionPlanConfig`` uses by
default), at delta 1e-5, computed once per process (:func:`epsilon`). The noise multipliers of :data:`SIGMA`
were calibrated offline (``dp_accounting.calibrate_dp_mechanism`` on the same events) so that each correct
loop's epsilon is just under 2, and are fixed here so that loading a plugin never calibrates.

Sizes: n = 300, C = 1, learning rate 2 (:mod:`examples.zoo.hooked`); cyclic loops use 4 groups of 75 at
``sampling_prob`` 0.4 (30 records a step, marginal rate 0.1), plain Poisson loops rate 0.1, truncation cap 30.
Every loop exists at T = 40 and T = 200 steps (``NAME(steps)``; plugins ``NAME_40``, ``NAME_200``).

Correct loops (:data:`CORRECT`) and what they claim at T = 40 / T = 200:

* :func:`bandmf` — Band-MF with cyclic Poisson (4 bands, cycle 4): ``BandMFExecutionPlanConfig(strategy=A)``,
  its plan's sampler and privatizer; claim ``plan.dp_event`` (``amplified_bandmf_event``): 1.9998 / 1.9999.
* :func:`truncated_poisson` — truncated Poisson DP-SGD: ``CyclicPoissonSampling(0.1, T,
  truncated_batch_size=30)``, ``gaussian_privatizer``; claim ``truncated_dpsgd_event``: 1.9996 / 1.9996.
* :func:`cyclic_poisson` — cyclic Poisson (cycle 4) with independent noise: ``CyclicPoissonSampling(0.4, T,
  cycle_length=4)``, ``gaussian_privatizer``; claim ``amplified_bandmf_event(num_bands=4)`` (the identity is
  4-banded): 1.9998 / 1.9999.
* :func:`balls_in_bins` — ``BallsInBinsSampling(T, cycle_length=4)``, ``gaussian_privatizer``. jax_privacy has
  no DpEvent for balls-in-bins: its only accountant for it is the Monte Carlo one of
  ``jax_privacy.experimental.monte_carlo`` (Chua et al., arXiv 2410.06266, 2412.16802: privacy-loss samples of
  the dominating pair and a delta verified from them, statistical, no DpEvent a PLD accountant can compose).
  The claim is therefore dp_accounting's composition of the T / 4 Gaussian steps each record takes
  (``SelfComposedDpEvent(GaussianDpEvent(sigma), T // 4)``), which holds whichever bin a record draws (no
  amplification by the random bin credited, so it is above the epsilon balls-in-bins really has): 1.9996 / 1.9999.
  A gate without a balls-in-bins accountant must say could-not-read, never "as claimed".

BLT strategies are left out: jax_privacy builds a BLT by optimisation (``buffered_toeplitz.optimize``, seconds
per call) and accounts it with cyclic Poisson by no DpEvent (``BandMFExecutionPlanConfig`` takes banded
strategies only).

Mistakes (:data:`MISTAKES`), each with jax_privacy's epsilon of what really runs where it has one:

* :func:`cyclic_as_poisson` — samples cyclic Poisson (cycle 4, 0.4), declares ``CyclicPoissonSampling(0.1, T)``
  (plain Poisson at the marginal rate) and claims its ``dpsgd_event``: true epsilon (``amplified_bandmf_event``
  at the same sigma) 4.23 against the claim 2.00 at T = 40; 4.39 against 2.00 at T = 200.
* :func:`truncation_not_accounted` — samples truncated Poisson (cap 30 at rate 0.1: about half the batches
  cut), declares ``CyclicPoissonSampling(0.1, T)`` without the cap and claims ``dpsgd_event``: true epsilon
  (``truncated_dpsgd_event``) 6.08 against 2.00 at T = 40; 5.63 against 2.00 at T = 200.
* :func:`bandmf_without_cycle` — declares the Band-MF config (cycle 4) and noises with its plan's banded
  privatizer, but samples every record at every step (``CyclicPoissonSampling(0.1, T)``: cycle 1, the same
  expected batch): a record can join steps less than 4 apart, where banded noise gives no amplified
  guarantee. jax_privacy has no accountant for it (its Band-MF events need the cycle, its Monte Carlo one
  b-min-separation); the claim is the config's 2.00.
* :func:`wrong_noising_matrix` — declares the Band-MF config with strategy A and its ``dp_event``, noises with
  ``matrix_factorization_privatizer(toeplitz.inverse_as_streaming_matrix(B))`` for B = (1, 1, 1, 1) at the
  config's stddev (sigma C |A|): the noise's multiplier for B's sensitivity |B| = 2 is sigma / 2. True
  epsilon (``amplified_bandmf_event`` at sigma |A| / |B|) 5.10 against 2.00 at T = 40; 4.58 against 2.00
  at T = 200.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.zoo.hooked import DELTA, LR, C, N
from examples.zoo.jax_loops import _clipped_sum, softmax_predictor
from targets import jax_hooks
from targets.datasets import load_digits

#: The two training lengths of every loop.
LENGTHS = (40, 200)
#: Cyclic loops: groups, ``sampling_prob`` within a group; plain Poisson loops: the rate; truncation: the cap.
CYCLE, GROUP_RATE, RATE, CAP = 4, 0.4, 0.1, 30
#: Band-MF strategies A (4 bands, unit column norm): ``toeplitz.optimize_banded_toeplitz(n=T, bands=4)``,
#: rounded; the mistaken noising strategy B of :func:`wrong_noising_matrix`.
STRATEGY = {40: (0.7363, 0.4641, 0.3775, 0.3163), 200: (0.6480, 0.4925, 0.4359, 0.3841)}
OTHER_STRATEGY = (1.0, 1.0, 1.0, 1.0)
#: Noise multipliers by accounting and length, calibrated offline to just under epsilon 2 at DELTA (module
#: docstring): "cyclic" ``amplified_bandmf_event(num_bands=4, sampling_prob=0.4)``, "poisson" ``dpsgd_event(0.1)``,
#: "truncated" ``truncated_dpsgd_event(0.1, cap 30)``, "composed" T // 4 Gaussian steps.
SIGMA = {"cyclic": {40: 2.864, 200: 5.809}, "poisson": {40: 1.633, 200: 3.005},
         "truncated": {40: 3.455, 200: 7.366}, "composed": {40: 6.306, 200: 14.099}}


@functools.lru_cache(maxsize=64)
def epsilon(event: Any, delta: float = DELTA) -> float:
    """jax_privacy's epsilon of a DpEvent: dp_accounting's PLD accountant with ``REPLACE_SPECIAL`` neighbours
    (``BandMFExecutionPlanConfig``'s default accountant), once per event and process."""
    import dp_accounting

    accountant = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_SPECIAL)
    return float(accountant.compose(event).get_epsilon(delta))


@dataclass(frozen=True)
class Loop:
    """One loop: ``name`` (its plugin's name), ``sampler`` (a jax_privacy batch-selection strategy),
    ``privatizer(seed)`` (a jax_privacy privatizer keyed by the training's seed), ``rate`` (told to
    ``add_canary``), ``batch_size`` (the expected batch the update divides by), ``mechanism`` (declared to the
    gate) and ``event`` (the DpEvent claimed)."""

    name: str
    sampler: Any
    privatizer: Callable[[int], Any]
    rate: float
    batch_size: float
    mechanism: Any
    event: Any


#: The rows every step is compiled for (module docstring): the dataset's and a few more.
CAPACITY = N + 8


def _padded(indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch's indices padded with -1 to :data:`CAPACITY` entries, and its mask over those rows (``n`` real)."""
    if n > CAPACITY:
        raise ValueError(f"this loop is compiled for at most {CAPACITY} records (got {n})")
    padded = np.full(CAPACITY, -1, dtype=np.int32)
    padded[: len(indices)] = indices
    mask = np.zeros(CAPACITY, dtype=np.float32)
    mask[indices] = 1.0
    return padded, mask


#: The compiled step of each loop, by its name and length (:func:`_step_for`).
_STEPS: dict[str, Callable] = {}


def _step_for(loop: Loop) -> Callable:
    """The jitted step of ``loop`` (module docstring), compiled once per loop (and shape) for every seed:
    jax_privacy's streaming privatizers keep their PRNG key in the noise state their ``init`` returns, so the
    ``update`` of the privatizer built for one seed serves the noise state of any seed."""
    if loop.name in _STEPS:
        return _STEPS[loop.name]
    privatizer = loop.privatizer(0)
    rate, batch_size = loop.rate, loop.batch_size

    @jax_hooks.jit
    def step(params, noise_state, X, y, mask, batch):
        grads = _clipped_sum(params, X, y, mask, C)
        grads = jax_hooks.add_canary(grads, clip_norm=C, sample_rate=rate, batch=batch, params=params)
        noisy, noise_state = privatizer.update(grads, noise_state)
        new = jax.tree.map(lambda p, g: p - LR * g / batch_size, params, noisy)
        jax_hooks.report_update(noisy, params=new)
        return new, noise_state

    _STEPS[loop.name] = step
    return step


def train(X: np.ndarray, y: np.ndarray, seed: int, loop: Loop):
    """Train as ``loop`` says (module docstring); returns ``predict_proba``."""
    n = len(X)
    rows = np.zeros((CAPACITY, *np.shape(X)[1:]), dtype=np.float32)
    rows[:n] = X
    labels = np.zeros(CAPACITY, dtype=np.asarray(y).dtype)
    labels[:n] = y
    X, y = jnp.asarray(rows), jnp.asarray(labels)
    params = {"weight": jnp.zeros((10, X.shape[1])), "bias": jnp.zeros(10)}
    noise_state = loop.privatizer(seed).init(params)
    step = _step_for(loop)
    for indices in loop.sampler.batch_iterator(n, rng=seed):
        batch, mask = _padded(np.asarray(indices), n)
        params, noise_state = step(params, noise_state, X, y, mask, batch)
    return softmax_predictor(params)


def plugin(loop: Loop, description: str) -> dict:
    """The trainer plugin of ``loop``: the first N digits, claiming jax_privacy's epsilon of ``loop.event``."""
    digits = load_digits()
    steps = loop.sampler.iterations
    return {"kind": "trainer", "name": f"jax_mechanism_{loop.name}", "dataset": (digits.X[:N], digits.y[:N]),
            "train": lambda X, y, seed: train(X, y, seed, loop), "description": f"{description}, {steps} steps",
            "claim": {"epsilon": epsilon(loop.event), "delta": DELTA}, "mechanism": loop.mechanism}


# --- the jax_privacy objects ------------------------------------------------------------------------------------

def bandmf_config(steps: int, strategy: tuple[float, ...] | None = None):
    """jax_privacy's Band-MF config: cyclic Poisson over 4 groups at 0.4, the 4-band strategy A, sigma fixed."""
    from jax_privacy.experimental.execution_plan import BandMFExecutionPlanConfig

    return BandMFExecutionPlanConfig(iterations=steps, strategy=np.asarray(strategy or STRATEGY[steps]),
                                     epsilon=None, delta=None, noise_multiplier=SIGMA["cyclic"][steps],
                                     l2_clip_norm=C, sampling_prob=GROUP_RATE)


def _plan_privatizer(config) -> Callable[[int], Any]:
    """The privatizer of ``config``'s plan keyed by the training's seed (``noise_seed=seed``)."""
    return lambda seed: dataclasses.replace(config, noise_seed=int(seed)).plan.noise_addition_transform


def _gaussian(sigma: float) -> Callable[[int], Any]:
    """``gaussian_privatizer`` at standard deviation ``sigma C`` keyed by the training's seed."""
    from jax_privacy import noise_addition

    return lambda seed: noise_addition.gaussian_privatizer(stddev=sigma * C, prng_key=int(seed))


def _cyclic(rate: float, steps: int, cycle: int = 1, cap: int | None = None):
    from jax_privacy.batch_selection import CyclicPoissonSampling

    return CyclicPoissonSampling(sampling_prob=rate, iterations=steps, cycle_length=cycle, truncated_batch_size=cap)


def _events():
    from jax_privacy.experimental import accounting

    return accounting


# --- correct loops ----------------------------------------------------------------------------------------------

CYCLIC_BATCH = GROUP_RATE * N / CYCLE  # the expected batch of the cyclic loops: 0.4 x 75 = 30


def bandmf(steps: int) -> dict:
    """Band-MF with cyclic Poisson (4 bands, cycle 4): the config's plan, its sampler and privatizer."""
    config = bandmf_config(steps)
    plan = config.plan
    loop = Loop(f"bandmf_{steps}", plan.batch_selection_strategy, _plan_privatizer(config), GROUP_RATE,
                CYCLIC_BATCH, mechanism=config, event=plan.dp_event)
    return plugin(loop, "Band-MF (4 bands) with cyclic Poisson sampling, jax_privacy's plan")


def truncated_poisson(steps: int) -> dict:
    """Truncated Poisson DP-SGD (rate 0.1, cap 30), independent noise, claim ``truncated_dpsgd_event``."""
    sigma = SIGMA["truncated"][steps]
    sampler = _cyclic(RATE, steps, cap=CAP)
    event = _events().truncated_dpsgd_event(sigma, steps, sampling_prob=RATE, num_examples=N,
                                            truncated_batch_size=CAP)
    loop = Loop(f"truncated_poisson_{steps}", sampler, _gaussian(sigma), RATE, RATE * N, sampler, event)
    return plugin(loop, f"truncated Poisson DP-SGD (rate {RATE}, cap {CAP})")


def cyclic_poisson(steps: int) -> dict:
    """Cyclic Poisson (cycle 4, 0.4 in a group) with independent noise, claim ``amplified_bandmf_event``."""
    sigma = SIGMA["cyclic"][steps]
    sampler = _cyclic(GROUP_RATE, steps, cycle=CYCLE)
    event = _events().amplified_bandmf_event(sigma, steps, num_bands=CYCLE, sampling_prob=GROUP_RATE)
    loop = Loop(f"cyclic_poisson_{steps}", sampler, _gaussian(sigma), GROUP_RATE, CYCLIC_BATCH, sampler, event)
    return plugin(loop, "cyclic Poisson sampling (cycle 4) with independent noise")


def balls_in_bins(steps: int) -> dict:
    """Balls-in-bins (4 bins) with independent noise; claim: T // 4 composed Gaussian steps (module docstring)."""
    import dp_accounting
    from jax_privacy.batch_selection import BallsInBinsSampling

    sigma = SIGMA["composed"][steps]
    sampler = BallsInBinsSampling(iterations=steps, cycle_length=CYCLE)
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), steps // CYCLE)
    loop = Loop(f"balls_in_bins_{steps}", sampler, _gaussian(sigma), 1.0 / CYCLE, N / CYCLE, sampler, event)
    return plugin(loop, "balls-in-bins sampling (4 bins) with independent noise")


# --- mistakes ---------------------------------------------------------------------------------------------------

def cyclic_as_poisson(steps: int) -> dict:
    """Samples cyclic Poisson (cycle 4, 0.4), declares plain Poisson at the marginal 0.1 and claims its
    ``dpsgd_event``: true epsilon 4.23 against 2.00 (T 40), 4.39 against 2.00 (T 200)."""
    sigma = SIGMA["poisson"][steps]
    loop = Loop(f"cyclic_as_poisson_{steps}", _cyclic(GROUP_RATE, steps, cycle=CYCLE), _gaussian(sigma), RATE,
                RATE * N, mechanism=_cyclic(RATE, steps),
                event=_events().dpsgd_event(sigma, steps, sampling_prob=RATE))
    return plugin(loop, "cyclic Poisson sampling (cycle 4) declared and accounted as Poisson at the marginal "
                  "rate 0.1")


def truncation_not_accounted(steps: int) -> dict:
    """Samples truncated Poisson (rate 0.1, cap 30), declares and accounts untruncated Poisson
    (``dpsgd_event``): true epsilon 6.08 against 2.00 (T 40), 5.63 against 2.00 (T 200)."""
    sigma = SIGMA["poisson"][steps]
    loop = Loop(f"truncation_not_accounted_{steps}", _cyclic(RATE, steps, cap=CAP), _gaussian(sigma), RATE,
                RATE * N, mechanism=_cyclic(RATE, steps),
                event=_events().dpsgd_event(sigma, steps, sampling_prob=RATE))
    return plugin(loop, f"Poisson batches truncated to {CAP}, declared and accounted as untruncated Poisson")


def bandmf_without_cycle(steps: int) -> dict:
    """Declares the Band-MF config and noises with its plan, samples Poisson at 0.1 over every record at every
    step (cycle 1): no accountant of jax_privacy's covers it; the claim is the config's 2.00."""
    config = bandmf_config(steps)
    loop = Loop(f"bandmf_without_cycle_{steps}", _cyclic(GROUP_RATE / CYCLE, steps), _plan_privatizer(config),
                GROUP_RATE, CYCLIC_BATCH, mechanism=config, event=config.plan.dp_event)
    return plugin(loop, "Band-MF (4 bands) declared, its banded noise, Poisson sampling without the cycle")


def wrong_noising_matrix(steps: int) -> dict:
    """Declares Band-MF with strategy A, noises with B = (1, 1, 1, 1)'s Toeplitz inverse at A's stddev: true
    epsilon 5.10 against 2.00 (T 40), 4.58 against 2.00 (T 200)."""
    from jax_privacy import noise_addition
    from jax_privacy.matrix_factorization import toeplitz

    config = bandmf_config(steps)
    plan = config.plan
    stddev = SIGMA["cyclic"][steps] * C * float(np.linalg.norm(STRATEGY[steps]))

    def privatizer(seed: int):
        noising = toeplitz.inverse_as_streaming_matrix(jnp.asarray(OTHER_STRATEGY))
        return noise_addition.matrix_factorization_privatizer(noising, stddev=stddev, prng_key=int(seed))

    loop = Loop(f"wrong_noising_matrix_{steps}", plan.batch_selection_strategy, privatizer, GROUP_RATE,
                CYCLIC_BATCH, mechanism=config, event=plan.dp_event)
    return plugin(loop, "Band-MF declared with strategy A, noise correlated by another strategy's inverse")


def true_epsilon(name: str, steps: int) -> float | None:
    """jax_privacy's epsilon of what mistake ``name`` really runs at ``steps`` (None: no accountant of
    jax_privacy's covers it); the figures in the docstrings."""
    accounting = _events()
    if name == "cyclic_as_poisson":
        return epsilon(accounting.amplified_bandmf_event(SIGMA["poisson"][steps], steps, num_bands=CYCLE,
                                                         sampling_prob=GROUP_RATE))
    if name == "truncation_not_accounted":
        return epsilon(accounting.truncated_dpsgd_event(SIGMA["poisson"][steps], steps, sampling_prob=RATE,
                                                        num_examples=N, truncated_batch_size=CAP))
    if name == "wrong_noising_matrix":
        ratio = float(np.linalg.norm(STRATEGY[steps]) / np.linalg.norm(OTHER_STRATEGY))
        return epsilon(accounting.amplified_bandmf_event(SIGMA["cyclic"][steps] * ratio, steps, num_bands=CYCLE,
                                                         sampling_prob=GROUP_RATE))
    return None


#: The correct loops and the mistakes (each at every length of LENGTHS: ``NAME_40``, ``NAME_200``).
CORRECT = ("bandmf", "truncated_poisson", "cyclic_poisson", "balls_in_bins")
MISTAKES = ("cyclic_as_poisson", "truncation_not_accounted", "bandmf_without_cycle", "wrong_noising_matrix")


def _at(name: str, steps: int) -> Callable[[], dict]:
    """The plugin factory of loop ``name`` at ``steps`` steps (``NAME_40``, ``NAME_200``)."""
    factory = globals()[name]

    def make() -> dict:
        return factory(steps)

    make.__name__ = make.__qualname__ = f"{name}_{steps}"
    make.__doc__ = f"{factory.__doc__.splitlines()[0]} ({steps} steps)"
    return make


bandmf_40, bandmf_200 = _at("bandmf", 40), _at("bandmf", 200)
truncated_poisson_40, truncated_poisson_200 = _at("truncated_poisson", 40), _at("truncated_poisson", 200)
cyclic_poisson_40, cyclic_poisson_200 = _at("cyclic_poisson", 40), _at("cyclic_poisson", 200)
balls_in_bins_40, balls_in_bins_200 = _at("balls_in_bins", 40), _at("balls_in_bins", 200)
cyclic_as_poisson_40, cyclic_as_poisson_200 = _at("cyclic_as_poisson", 40), _at("cyclic_as_poisson", 200)
truncation_not_accounted_40 = _at("truncation_not_accounted", 40)
truncation_not_accounted_200 = _at("truncation_not_accounted", 200)
bandmf_without_cycle_40, bandmf_without_cycle_200 = _at("bandmf_without_cycle", 40), _at("bandmf_without_cycle", 200)
wrong_noising_matrix_40, wrong_noising_matrix_200 = _at("wrong_noising_matrix", 40), _at("wrong_noising_matrix", 200)

__all__ = ["Loop", "train", "plugin", "epsilon", "true_epsilon", "bandmf_config", "CORRECT", "MISTAKES", "LENGTHS",
           *CORRECT, *MISTAKES,
           *(f"{name}_{steps}" for name in CORRECT + MISTAKES for steps in LENGTHS)]
