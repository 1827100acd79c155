"""Where the training chunks of an audit run: in this process, on a local process pool, or on Ray.

A runner's training call (the target, the shadow and reference models of ``run membership``, the
runs of ``run dp`` and of each audit of ``sweep dp``, the candidate runs of ``run reconstruction``) is
cut into chunks of models whose boundaries depend only on the call (:func:`chunk_slices`), never on the
executor or the number of workers. Each chunk is one entry of the content-addressed model cache
(:mod:`audit.cache`), keyed by everything that determines its models plus the trainer's code
fingerprint, and a picklable :class:`Job` (a module-level function and its arguments) that any
process importing the project can run. :func:`run_chunks` loads the chunks that exist, runs the
missing ones on the executor, stores them and returns them in order: a rerun, or a run interrupted
halfway, trains only what is missing. Every model keeps its own random streams and a chunk is
trained by the same code on every executor, so the same seed gives the same models — bit for bit,
since the training thread policy never changes results (:mod:`targets.threads`; tests/e2e/test_executors.py).

Executors (:func:`make_executor`):

* ``local`` with 1 worker (default): the chunks run one after the other in this process;
* ``local`` with ``--workers N``: a process pool (spawn start method: the workers import the
  project afresh, as on another machine), each worker with ``OMP_NUM_THREADS = usable CPUs // N``
  so that N workers never oversubscribe the CPUs (single-threaded torch per worker on a 2-core
  machine with 2 workers);
* ``ray`` (``--executor ray [--ray-address ADDR]``): Ray tasks of one CPU each, on the cluster at
  ``ADDR`` (the project and its dependencies installed on every node; results come back to this
  process, which writes the cache) or, without an address, on a local Ray started with
  ``--workers`` CPUs (default: the usable CPUs) and shut down afterwards.

``--max-memory`` bounds the memory of one chunk's training, so with N workers up to N times that.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

import audit
import targets
from audit.cache import cache_key, entry_path, load_entry, save_entry
from audit.errors import UserError
from targets.dpsgd_audit import AuditRuns, CanaryPlan, train_audit_runs
from targets.dpsgd_step import DPSGDStep, StepOptions
from targets.reconstruction_runs import CandidateDraw, CandidateRuns, train_candidate_runs
from targets.threads import usable_cpus
from targets.training import train_models

#: Executor kinds of ``--executor``.
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """One chunk of training: ``fn(**kwargs)``, ``fn`` a module-level function (picklable by reference)."""

    fn: Callable[..., Any]
    kwargs: dict = field(default_factory=dict)

    def __call__(self) -> Any:
        return self.fn(**self.kwargs)


def _call(job: Job) -> Any:
    return job()


def chunk_slices(n: int, max_size: int) -> list[slice]:
    """``n`` models cut into ``ceil(n / max_size)`` consecutive chunks of near-equal size (the first
    ones one larger): boundaries that depend on ``n`` and ``max_size`` only."""
    count = max(1, -(-n // max_size))
    base, extra = divmod(n, count)
    bounds = [0]
    for i in range(count):
        bounds.append(bounds[-1] + base + (i < extra))
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


class Executor:
    """Runs jobs and returns their results in order; a context manager that releases its workers."""

    #: What the logs call it.
    description = "in-process"
    #: Jobs run in this process (progress bars can be shown).
    in_process = True

    def map(self, jobs: Sequence[Job], on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Results of ``jobs`` in order; ``on_done(i, result)`` as soon as job ``i`` finished."""
        results = []
        for i, job in enumerate(jobs):
            results.append(job())
            if on_done is not None:
                on_done(i, results[-1])
        return results

    def close(self) -> None:
        """Release workers (nothing to do in-process)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _worker_init(threads: int) -> None:
    # the training thread policy respects OMP_NUM_THREADS (targets.threads.usable_cpus)
    os.environ["OMP_NUM_THREADS"] = str(threads)


class ProcessPool(Executor):
    """A local pool of ``workers`` processes (spawn), started at the first job, each limited to
    ``usable CPUs // workers`` threads."""

    def __init__(self, workers: int) -> None:

        self.in_process = False
        self.workers = workers
        self.threads = max(1, usable_cpus() // workers)
        self.description = f"process pool of {workers} workers, {self.threads} torch thread(s) each"
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def map(self, jobs: Sequence[Job], on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        if not jobs:
            return []
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                initargs=(self.threads,))
        futures = {self._pool.submit(_call, job): i for i, job in enumerate(jobs)}
        results: list[Any] = [None] * len(jobs)
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_done is not None:
                on_done(i, results[i])
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _project_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


class RayExecutor(Executor):
    """Ray tasks of one CPU each on the cluster at ``address``, or on a local Ray of ``cpus`` CPUs
    started here (and shut down by :meth:`close`)."""

    def __init__(self, address: str | None, cpus: int) -> None:
        try:
            # optional dependency (the ray extra)
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'privacy-audit[ray]' (or pip install ray)") from None
        self.in_process = False
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            if address is None:  # a local cluster: its workers import the project from this checkout
                ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False,
                         runtime_env={"env_vars": {"PYTHONPATH": _project_root()}})
            else:

                ray.init(address=address, log_to_driver=False, configure_logging=False,
                         runtime_env={"py_modules": [audit, targets]})
        where = address or f"a local Ray of {cpus} CPUs"
        self.description = f"Ray ({where}), one CPU per task"
        self._remote = ray.remote(num_cpus=1)(_call)

    def map(self, jobs: Sequence[Job], on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        ray = self._ray
        refs = [self._remote.remote(job) for job in jobs]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(jobs)
        pending = list(refs)
        while pending:
            (ref,), pending = ray.wait(pending, num_returns=1)
            i = index[ref]
            results[i] = ray.get(ref)
            if on_done is not None:
                on_done(i, results[i])
        return results

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False


def make_executor(kind: str = "local", workers: int = 1, address: str | None = None) -> Executor:
    """The executor of ``--executor KIND --workers N [--ray-address ADDR]`` (see the module docstring)."""
    if kind not in EXECUTORS:
        raise UserError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}")
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    if address is not None and kind != "ray":
        raise UserError("--ray-address needs --executor ray")
    if kind == "ray":

        return RayExecutor(address, workers if workers > 1 else usable_cpus())
    return ProcessPool(workers) if workers > 1 else Executor()


def run_chunks(executor: Executor, cache_dir: Path, chunks: Sequence[tuple[dict, Job]],
               log: Callable[[str], None] | None = None, desc: str = "training") -> tuple[list[dict], list[bool]]:
    """The results (dicts of tensors) of every ``(payload, job)`` chunk, in order: loaded from the
    model cache where an intact entry for the payload exists, else computed by ``executor`` and
    stored. Returns ``(results, reused)``, ``reused[i]`` whether chunk ``i`` came from the cache."""

    keys = [cache_key(payload) for payload, _ in chunks]
    results: list[dict | None] = [load_entry(entry_path(cache_dir, key), key) for key in keys]
    reused = [r is not None for r in results]
    missing = [i for i, r in enumerate(results) if r is None]
    if log is not None and any(reused):
        log(f"{desc}: reused cached models for {sum(reused)} of {len(chunks)} chunk(s)")

    def done(j: int, params: dict) -> None:  # stored at once: an interrupted run keeps every finished chunk
        i = missing[j]
        save_entry(entry_path(cache_dir, keys[i]), keys[i], params)
        results[i] = params
        if log is not None and len(chunks) > 1:
            log(f"{desc}: chunk {i + 1} of {len(chunks)} trained")

    executor.map([chunks[i][1] for i in missing], done)
    return results, reused


#: Models per chunk of a model-training call (target, shadow and reference models): small enough that
#: a LiRA audit with hundreds of reference models spreads over many workers, large enough to vectorise.
MODEL_CHUNK = 8


@dataclass(frozen=True)
class TrainingCall:
    """Models to train on one dataset with one configuration: model ``r`` on rows ``masks[r]`` with ``seeds[r]``."""

    desc: str
    masks: Any  # np.ndarray (models, rows) of bool
    seeds: list[int]


@dataclass(frozen=True, kw_only=True)
class CachedExecutor:
    """Where chunks of training run and where their results are kept (:func:`run_chunks`).

    Attributes:
        executor: the executor the chunks not in the cache run on.
        cache_dir: the model cache.
        log: gets one line per call (trained or reused), or None.
    """

    executor: Executor
    cache_dir: Path
    log: Callable[[str], None] | None = None

    def _seed_chunks(self, what: str, seeds: Sequence[int], size: int,
                     chunk: Callable[[slice, list[int]], tuple[dict, Job]]) -> list:
        """The results of ``chunk(part, seeds)``'s (cache key, job) for each run of at most ``size`` seeds, each
        reused from or stored in the model cache (:func:`run_chunks`); ``log`` gets one line (``what``)."""
        chunks = [chunk(part, [int(s) for s in seeds[part]]) for part in chunk_slices(len(seeds), size)]
        results, reused = run_chunks(self.executor, self.cache_dir, chunks, self.log, what)
        if self.log is not None:
            self.log(f"{what}: {len(seeds)} runs in {len(chunks)} chunk(s): {sum(reused)} from the cache, "
                     f"{len(chunks) - sum(reused)} trained on {self.executor.description}")
        return results

    def audit_runs(self, data, train_index, config, seeds: Sequence[int], plan: CanaryPlan, *, device="cpu",
                   progress: bool = False, init=None) -> AuditRuns:
        """:func:`targets.dpsgd_audit.train_audit_runs` in chunks of at most :data:`RUN_CHUNK` runs on
        ``self.executor``, each reused from or stored in the model cache (:func:`run_chunks`); the same
        arguments (``init``: :class:`targets.dpsgd_step.StepOptions`'s), the same
        :class:`targets.dpsgd_audit.AuditRuns`."""
        included = np.asarray(plan.included, dtype=bool)
        grad_canary, input_canary, observe = plan.grad_canary, plan.input_canary, plan.observe
        canary = (_digest(np.asarray(grad_canary, dtype=np.float32)) if grad_canary is not None else
                  _digest(np.asarray(input_canary[0], dtype=np.float32), np.int64(input_canary[1])))
        common = {"kind": "dp audit runs", "dataset": data.name, "source": data.source, "config": config.to_dict(),
                  "data": _digest(data.X, data.y), "train_index": _digest(np.asarray(train_index, dtype=np.int64)),
                  "canary": canary, "canary_type": "gradient" if grad_canary is not None else "input",
                  "observe": observe, "replace_pair": plan.replace_pair, "device": torch.device(device).type,
                  "init": None if init is None else _digest(*(init[k].detach().cpu().numpy() for k in sorted(init)))}
        def chunk(part: slice, seeds_part: list[int]) -> tuple[dict, Job]:
            return (common | {"seeds": seeds_part, "included": _digest(included[part])}, Job(_audit_runs_chunk, dict(
                data=data, train_index=train_index, config=config, seeds=seeds_part,
                plan=replace(plan, included=included[part]), device=device,
                progress=progress and self.executor.in_process, options=StepOptions(init=init))))
        results = self._seed_chunks("audit runs", seeds, RUN_CHUNK, chunk)
        step_obs = (torch.cat([r["step_obs"] for r in results]).numpy() if "step_obs" in results[0] else None)
        return AuditRuns(torch.cat([r["initial"] for r in results]), torch.cat([r["final"] for r in results]), step_obs,
                         torch.cat([r["canary_steps"] for r in results]).numpy(),
                         subtracted_known=bool(results[0]["subtracted_known"][0]))

    def candidate_runs(self, data, train_index, config, seeds: Sequence[int], draw: CandidateDraw, *, device="cpu",
                       step_type: type[DPSGDStep] = DPSGDStep, progress: bool = False) -> CandidateRuns:
        """:func:`targets.reconstruction_runs.train_candidate_runs` in chunks of at most :data:`CANDIDATE_CHUNK` runs
        on ``self.executor``, each reused from or stored in the model cache (:func:`run_chunks`); the same
        arguments, the same :class:`targets.reconstruction_runs.CandidateRuns` (a run depends only on its seed and
        its candidate, so the chunking never changes a result)."""
        candidates, basis = draw.candidates, draw.basis
        chosen = np.asarray(draw.chosen, dtype=np.int64)
        cand = np.asarray(candidates, dtype=np.float32)
        common = {"kind": "reconstruction candidate runs", "dataset": data.name, "source": data.source,
                  "config": config.to_dict(), "data": _digest(data.X, data.y),
                  "train_index": _digest(np.asarray(train_index, dtype=np.int64)), "candidates": _digest(cand),
                  "basis": None if basis is None else _digest(np.asarray(basis, dtype=np.float32)),
                  "step": f"{step_type.__module__}.{step_type.__qualname__}", "device": torch.device(device).type}
        def chunk(part: slice, seeds_part: list[int]) -> tuple[dict, Job]:
            return (common | {"seeds": seeds_part, "chosen": _digest(chosen[part])}, Job(_candidate_runs_chunk, dict(
                data=data, train_index=train_index, config=config, seeds=seeds_part,
                draw=replace(draw, chosen=chosen[part]), device=device, step_type=step_type,
                progress=progress and self.executor.in_process)))
        results = self._seed_chunks("reconstruction runs", seeds, CANDIDATE_CHUNK, chunk)
        residuals = torch.cat([r["residuals"] for r in results]).numpy() if "residuals" in results[0] else None
        return CandidateRuns(torch.cat([r["initial"] for r in results]), torch.cat([r["final"] for r in results]),
                             residuals, torch.cat([r["joined"] for r in results]).numpy())


def train_cached_models(runner: CachedExecutor, data, config, calls: Sequence[TrainingCall], device, *,
                        max_memory: str | int | None = None, progress: bool = True, appended_rows: int = 0) -> list:
    """Train every call's models with :func:`targets.training.train_models` in chunks of at most
    :data:`MODEL_CHUNK` models (:func:`chunk_slices`), all chunks of all calls on ``runner.executor`` at once,
    each reused from or stored in the model cache (:func:`run_chunks`). Returns, per call, its
    stacked parameters. ``runner.log`` gets one line per call (trained or reused). The last ``appended_rows``
    rows of ``data`` are not the named dataset's (synthetic canaries): their inputs join the cache key."""
    executor, cache_dir, log = runner.executor, runner.cache_dir, runner.log



    labels = hashlib.sha256(np.asarray(data.y).tobytes()).hexdigest()
    appended_inputs = np.ascontiguousarray(data.X[len(data.X) - appended_rows:])
    appended = {"appended_inputs": hashlib.sha256(appended_inputs.tobytes()).hexdigest()} if appended_rows else {}
    chunks, owners = [], []
    for c, call in enumerate(calls):
        masks = np.asarray(call.masks, dtype=bool)
        parts = chunk_slices(len(call.seeds), MODEL_CHUNK)
        for k, part in enumerate(parts):
            seeds = [int(s) for s in call.seeds[part]]
            payload = {"dataset": data.name, "source": data.source, "config": config.to_dict(), "seeds": seeds,
                       "masks": hashlib.sha256(np.packbits(masks[part]).tobytes()).hexdigest(), "labels": labels,
                       "device": torch.device(device).type} | appended
            desc = call.desc if len(parts) == 1 else f"{call.desc} [chunk {k + 1} of {len(parts)}]"
            chunks.append((payload, Job(train_models, dict(data=data, masks=masks[part], config=config, seeds=seeds,
                                                            device=device, progress=progress and executor.in_process,
                                                            desc=desc, options=StepOptions(max_memory=max_memory)))))
            owners.append(c)
    results, reused = run_chunks(executor, cache_dir, chunks, log, "training")
    out = []
    for c, call in enumerate(calls):
        mine = [i for i, owner in enumerate(owners) if owner == c]
        out.append({k: torch.cat([results[i][k] for i in mine]) for k in results[mine[0]]})
        if log is not None:
            hits = sum(reused[i] for i in mine)
            log(f"{call.desc}: {len(call.seeds)} model(s), {config.steps} steps, {len(mine)} chunk(s): {hits} from "
                f"the cache, {len(mine) - hits} trained on {executor.description}")
    return out


#: Runs per chunk of a ``run dp`` audit (thousands of small runs: a few chunks per worker).
RUN_CHUNK = 500


def _digest(*arrays) -> str:
    """SHA-256 of the arrays' bytes, in order (a cache-key field)."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _audit_runs_chunk(**kwargs) -> dict:
    """:func:`targets.dpsgd_audit.train_audit_runs` as a dict of tensors (a cache entry)."""
    runs = train_audit_runs(**kwargs)
    out = {"initial": runs.initial, "final": runs.final, "canary_steps": torch.as_tensor(runs.canary_steps),
           "subtracted_known": torch.tensor([runs.subtracted_known])}
    if runs.step_obs is not None:
        out["step_obs"] = torch.as_tensor(runs.step_obs)
    return out


#: Runs per chunk of the reconstruction game (hundreds of runs per candidate count: a few chunks per worker).
CANDIDATE_CHUNK = 100


def _candidate_runs_chunk(**kwargs) -> dict:
    """:func:`targets.reconstruction_runs.train_candidate_runs` as a dict of tensors (a cache entry)."""
    runs = train_candidate_runs(**kwargs)
    out = {"initial": runs.initial, "final": runs.final, "joined": torch.as_tensor(runs.joined)}
    if runs.residuals is not None:
        out["residuals"] = torch.as_tensor(runs.residuals)
    return out


