"""A campaign's chunk, wherever it runs (docs/campaigns.md): its compute (`compute_chunk`: the members' draws from
`(seed, i)`, padded to the chunk size so that every chunk runs one compiled program, their metrics and histories),
its reduction and writes (`finish_chunk`: the chunk's moments and the bucket indices of the percentile sketch,
then the store's arrays, its flag last), the two halves pipelined one deep in-process (`pipelined`), or one
Dask task on a worker (`chunk_task`, its set-up checked against the client's once per campaign: `_worker_sweep`).
"""

import dataclasses
import functools
import os
from collections.abc import Iterator

import numpy as np

from .._analysis._studies._batch import batch_outputs, sample_dispersions
from .._analysis._studies._sensitivity import output_blocks
from .._analysis._studies._stats import bucket_index, moments
from .._errors import SweepError
from .._io._campaign_store import HISTORIES, STORE, CampaignStore, input_digests
from .._runtime import _programs
from ._sweep import Sweep, load_sweep

__all__ = ["ChunkRun", "chunk_task", "compute_chunk", "finish_chunk", "metric_layout", "padded", "pipelined",
           "run_chunk"]


@dataclasses.dataclass(frozen=True)
class ChunkRun:
    """A chunk computed (`compute_chunk`), not yet reduced or written (`finish_chunk`): `members` (its member
    indices), `params` (their draws, `{name: (members, ...)}`), `traj` (their batched trajectory, NumPy, without
    the padding; None when nothing was simulated), `values` (`batch_outputs`' `(members, M)`) and `metrics`
    (`{store name: (members, ...)}`, views of `values`)."""

    members: range
    params: dict
    traj: object
    values: np.ndarray
    metrics: dict


def compute_chunk(sweep: Sweep, members: range, size: int, *, check: bool = False,
                  histories: bool | None = None) -> ChunkRun:
    """The compute of a chunk of `members`, wherever it runs (`run_chunk`, the in-process pipeline of
    `run_campaign`, `rerun_members`): the members' draws from `(seed, i)` (`sample_dispersions`), padded to
    `size` (one compiled program for every chunk: `_padded`), their metrics and histories (`batch_outputs`),
    on the host without the padding. `check`: check every member's model against the physical rules (a
    campaign checked them all before its first chunk, `check_members`); `histories`: simulate (default: when
    the campaign does, `Sweep.simulates`)."""
    sc = sweep.scenario
    blocks = output_blocks(sc, sweep.metrics)
    names = list(metric_layout(sc, blocks)[0])
    params = sample_dispersions(sc, sweep.dispersions, sweep.members, sweep.seed, indices=padded(members, size))
    histories = sweep.simulates if histories is None else histories
    traj, y, _ = batch_outputs(sc, params, sweep.metrics, histories=histories, check=check)
    n = len(members)
    y = y[:n]
    metrics = {name: y[:, b.start:b.stop].reshape(n, *b.shape) for name, b in zip(names, blocks)}
    return ChunkRun(members, {k: v[:n] for k, v in params.items()}, None if traj is None else _head(traj, n), y,
                    metrics)


def finish_chunk(store: CampaignStore, c: int, run: ChunkRun, write: bool = True) -> tuple[int, int, dict]:
    """Reduce chunk `c`'s `run` (`compute_chunk`) and write it into `store` (its flag last; not with `write`
    False): its moments, and the bucket indices (`bucket_index`) of its deviations from the store's centre.
    **Returns:** `(members, failed, {history: bucket indices})` (`run_chunk`)."""
    n = len(run.members)
    if run.traj is None:  # modes and closed-loop poles only: no simulation
        ok, result, stats, buckets = np.isfinite(run.values).all(axis=1), np.zeros(n, dtype=np.int32), {}, {}
    else:
        traj = run.traj
        ok, result = np.asarray(traj.success, dtype=bool), np.asarray(traj.result)
        stats = {h: moments(np.asarray(getattr(traj, h))[ok]).stack() for h in HISTORIES}
        stride = store.band_stride if store.bands else 1
        buckets = {h: bucket_index(np.asarray(getattr(traj, h))[ok, ::stride] - store.centre(h)) for h in store.bands}
    if write:
        store.write_chunk(c, run.params, ok, result, run.traj, run.metrics, stats)
    return n, int(np.sum(~ok)), buckets


def run_chunk(sweep: Sweep, store: CampaignStore, c: int, write: bool = True) -> tuple[int, int, dict]:
    """Compute chunk `c` of the campaign and write it into `store` (its flag last; not with `write` False: a
    resume that lacks the chunk's sketch); **returns** `(members, failed, {history: bucket indices})`, the
    indices (`bucket_index`, int16 `(successful members, band_time, ...)`) of the store's `bands` at its band
    times, of their deviation from the store's centre (`CampaignStore.centre`, read from the store: the same
    wherever the chunk runs). The one computation of a chunk, wherever it runs (a worker; in-process the same
    two halves, pipelined: `pipelined`): `compute_chunk` (the draws, padded to the chunk size, the members'
    metrics and histories), then `finish_chunk` (the chunk's moments and bucket indices, the writes)."""
    return finish_chunk(store, c, compute_chunk(sweep, store.chunk_members(c), store.chunk_size), write)


def pipelined(sweep: Sweep, store: CampaignStore, jobs) -> Iterator[tuple]:
    """`run_chunk` of every job `(c, write)`, in order, one chunk deep: chunk k+1 is computed (`compute_chunk`,
    on one helper thread: equinox's `filter_jit` waits for the program it runs, so the thread is what lets it run
    on) while this thread reduces and writes chunk k (`finish_chunk`). **Yields** `(job, run_chunk's result)`.
    Only this thread writes the store, chunk after chunk, each flag last; an exception or Ctrl-C here leaves the
    chunk being written without its flag and drops the chunk in compute (the thread finishes it, unused). At
    most two chunks are held: the one being written and the next."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = list(jobs)
    pool = ThreadPoolExecutor(1, thread_name_prefix="jaxhinge-chunk")

    def submit(k):
        return pool.submit(compute_chunk, sweep, store.chunk_members(jobs[k][0]), store.chunk_size)

    try:
        nxt = submit(0) if jobs else None
        for k, job in enumerate(jobs):
            run = nxt.result()
            nxt = submit(k + 1) if k + 1 < len(jobs) else None
            yield job, finish_chunk(store, job[0], run, job[1])
            del run
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def chunk_task(source: str, out_dir: str, digests: tuple, code: tuple, cache: bool, programs: bool, c: int,
               write: bool = True) -> tuple[int, int, dict]:
    """`run_chunk` as a Dask task, on a worker (`run_campaign(workers=, scheduler=)`): chunk `c` of the
    campaign in `<out_dir>/campaign.zarr`, computed and written there (not with `write` False); **returns**
    `(members, failed, {history: bucket indices})`, merged by the client.
    `digests`: the SHA-256 of every input file the client read (`input_digests`; a worker that reads other
    files refuses); `code`: the SHA-256 of the client's jaxhinge source (`source_digest`) and its folder (a worker that
    imported another jaxhinge refuses); `cache`, `programs`: whether the client keeps compiled and traced programs
    (`use_compile_cache`)."""
    sweep = _worker_sweep(source, out_dir, digests, code, cache, programs)
    return run_chunk(sweep, CampaignStore.open(os.path.join(out_dir, STORE)), c, write)


@functools.lru_cache(maxsize=8)
def _worker_sweep(source: str, out_dir: str, digests: tuple, code: tuple, cache: bool, programs: bool) -> Sweep:
    """A worker process's set-up, once per campaign: its jaxhinge checked against the client's (the source's
    SHA-256: a worker started by hand may import another install, whose chunks would differ), jaxhinge's XLA:CPU
    options if JAX has not started its backend yet (`configure_cpu`), float64, the persistent compilation cache
    (a program one worker compiled is loaded by the others and by later campaigns), and the SWEEP file, checked
    against the client's."""
    import socket

    from .._runtime._policy import backend_started, configure_cpu, enable_x64, use_compile_cache

    if _programs.source_digest() != code[0]:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        raise SweepError(f"{source}: worker {socket.gethostname()} (pid {os.getpid()}) runs the jaxhinge in {here}, "
                         f"whose source differs from the client's ({code[1]}; SHA-256): start the workers with the "
                         "client's jaxhinge (the same installation, or the same PYTHONPATH)", source=source)

    if not backend_started():
        configure_cpu()
    enable_x64()
    use_compile_cache(cache, programs)
    sweep = load_sweep(source, out_dir=out_dir)
    if tuple(sorted(input_digests(sweep).items())) != digests:
        raise SweepError(f"{source}: an input file (SWEEP, scenario or [inputs] CSV) on worker {socket.gethostname()} (pid "
                         f"{os.getpid()}) differs from the client's (SHA-256): the workers must see the same files "
                         "at the same paths (a shared filesystem)", source=source)
    return sweep


def metric_layout(scenario, blocks) -> tuple[dict, dict]:
    """`({store name: (dims, unit, description)}, {dim: labels})` of a campaign's metrics (`output_blocks`): one
    value per member, per panel, per wheel or per mode; a name given twice (other options) gets `_2`, `_3`."""
    meta: dict = {}
    coords = {"panel": scenario.spacecraft.panels.labels}
    for b in blocks:
        name, k = b.name, 2
        while name in meta:
            name, k = f"{b.name}_{k}", k + 1
        dims = () if b.axis is None else (b.axis,)
        if b.axis is not None:
            coords[b.axis] = b.labels
        opts = ", ".join(f"{k} = {v}" for k, v in b.options.items() if k != "shape")
        meta[name] = (dims, b.unit, f"metric {b.name}" + (f" ({opts})" if opts else ""))
    return meta, coords


def padded(members: range, size: int) -> np.ndarray:
    """The chunk's member indices, padded to `size` with its first member (one compiled program for all)."""
    idx = np.arange(members.start, members.stop)
    return np.concatenate([idx, np.full(size - idx.size, idx[0])]) if idx.size < size else idx


def _head(traj, n: int):
    """The first `n` members of a batched trajectory (the chunk without its padding)."""
    import jax

    return jax.tree.map(lambda x: np.asarray(x)[:n], traj)
