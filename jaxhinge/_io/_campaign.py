"""Monte Carlo campaigns (`jaxhinge sweep`, `jaxhinge.run_campaign`): a SWEEP file's members run chunk by chunk
into `<out-dir>/campaign.zarr` (`_campaign_store`), resumable after Ctrl-C or a kill, then `summary.json`,
`envelopes.png` and `histograms.png` (docs/campaigns.md).

Member `i`'s parameters depend only on `(seed, i)` (`sample_dispersions`' counter-based draws) and every chunk
runs through the same compiled program (a short last chunk is padded to the chunk size), so a chunk computed
in any order, in a resumed run or again, is equal bit for bit.
"""

import dataclasses
import os
import time
from collections.abc import Callable

import numpy as np

from .._analysis._studies._batch import sample_dispersions, simulate_batch, summarize
from .._errors import SweepError
from .._model._params import FIELDS, resolve
from .._report._sweep import sweep_summary
from . import _interrupt
from ._campaign_store import CampaignStore, StoredRun, file_digest
from ._sweep_file import Sweep, load_sweep, write_outputs

__all__ = ["STORE", "CampaignResult", "check_resume", "open_campaign", "run_campaign"]

STORE = "campaign.zarr"


@dataclasses.dataclass(frozen=True)
class CampaignResult:
    """What `run_campaign` did: `store` (the path of `campaign.zarr`), `members`, `chunks`, `chunks_run` (this
    call; fewer than `chunks` on a resume), `params` and `run` (read back from the store), `summary` (the
    `summary.json` contents), `files` (the report files written), `wall_s` (this call's compute)."""

    store: str
    members: int
    chunks: int
    chunks_run: int
    params: dict
    run: StoredRun
    summary: dict
    files: list
    wall_s: float


def _sources(sweep: Sweep) -> dict[str, str]:
    """SHA-256 of the SWEEP file and of its scenario file (what a resume must find unchanged)."""
    return {os.path.basename(sweep.source): file_digest(sweep.source),
            os.path.basename(sweep.scenario_path): file_digest(sweep.scenario_path)}


def run_campaign(
    sweep: Sweep | str | os.PathLike,
    *,
    out_dir: str | None = None,
    resume: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> CampaignResult:
    """Run a SWEEP file's campaign into `<out-dir>/campaign.zarr`, chunk by chunk, then write its reports.

    **Arguments:**

    - `sweep`: a SWEEP file path or a loaded `Sweep` (`load_sweep`).
    - `out_dir`: the output folder (default the file's `[output] dir`).
    - `resume`: complete the store an interrupted run left (only its missing chunks run); refused when there is
      no store, or when the SWEEP or scenario file changed since it began. Without `resume` an existing store
      is replaced (once the new one is created).
    - `progress`: called as `progress(members done, members failed)` after each chunk (the counts include
      the chunks a resumed store held already).

    **Returns:** a `CampaignResult`.

    **Raises:** `SweepError` for bad input or a refused resume, before any compute.
    """
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep, out_dir=out_dir)
    folder = os.path.abspath(out_dir or sweep.out_dir)
    path = os.path.join(folder, STORE)
    sources = _sources(sweep)
    size = max(1, min(sweep.chunk_size, sweep.members))
    sc = sweep.scenario
    # every member's draws, checked before any compute (cheap: parameters only)
    names = list(sample_dispersions(sc, sweep.dispersions, sweep.members, sweep.seed))
    if resume:
        store = check_resume(sweep, path, sources)
    else:
        os.makedirs(folder, exist_ok=True)
        with open(sweep.source, encoding="utf-8") as fh:
            text = fh.read()
        store = CampaignStore.create(
            path, members=sweep.members, chunk_size=size,
            times=_times(sc), panels=sc.spacecraft.panels.labels,
            params={n: (FIELDS[resolve(sc, n).field.name].param_shape, resolve(sc, n).unit) for n in names},
            attrs={"sweep": os.path.basename(sweep.source), "sweep_text": text, "sources": sources,
                   "seed": sweep.seed, "parameters": names,
                   "scenario": os.path.basename(sweep.scenario_path)})
    done = store.done()
    todo = [c for c in range(store.chunks) if not done[c]]
    t0 = time.perf_counter()
    finished = int(sum(len(store.chunk_members(c)) for c in range(store.chunks) if done[c]))
    failed = store.failed_so_far(done)
    resume_note = "{}/{} members are stored in {}; `--resume` completes it"
    _interrupt.set_note(resume_note.format(finished, store.members, path))
    for c in todo:
        members = store.chunk_members(c)
        params = sample_dispersions(sc, sweep.dispersions, sweep.members, sweep.seed,
                                    indices=_padded(members, size))
        traj = simulate_batch(sc, params, chunk_size=size)
        n = len(members)
        store.write_chunk(c, {k: v[:n] for k, v in params.items()}, _head(traj, n))
        finished += n
        failed += int(np.sum(~np.asarray(traj.success)[:n]))
        _interrupt.set_note(resume_note.format(finished, store.members, path))
        if progress is not None:
            progress(finished, failed)
    wall = time.perf_counter() - t0
    _interrupt.set_note(None)  # (an exception before this leaves the note: the CLI says it on Ctrl-C)
    params, run = store.params(), store.run()
    summary = sweep_summary(sweep, params, run, wall)
    summary["store"] = path
    files = write_outputs(sweep, params, run, summary, summarize(run, ("omega_BN_B", "theta")), folder)
    return CampaignResult(path, store.members, store.chunks, len(todo), params, run, summary, files, wall)


def check_resume(sweep: Sweep, path: str, sources: dict[str, str] | None = None) -> CampaignStore:
    """The store at `path` that `--resume` completes, or a `SweepError`: there is none, or the SWEEP or scenario
    file changed since it began (SHA-256)."""
    if not os.path.exists(path):
        raise SweepError(f"{sweep.source}: --resume: {path} does not exist: nothing to resume (run without "
                         "--resume to start the campaign)", source=sweep.source, field="resume")
    store = CampaignStore.open(path)
    sources = _sources(sweep) if sources is None else sources
    before = store.group.attrs.get("sources", {})
    changed = [n for n in sources if before.get(n) != sources[n]] + [n for n in before if n not in sources]
    if changed:
        raise SweepError(f"{sweep.source}: --resume: {', '.join(changed)} changed since the campaign in {path} "
                         "began (SHA-256 differs): its members would not be the same; run without --resume to "
                         "start again, or restore the file", source=sweep.source, field="resume")
    return store


def open_campaign(path: str | os.PathLike):
    """A campaign store as an `xarray.Dataset` (`xarray.open_zarr`: lazy, labelled by member, time, panel and
    component, units and Basilisk names as attributes). `path`: the store or the folder holding it."""
    import xarray

    path = os.fspath(path)
    if os.path.isdir(path) and not path.rstrip("/").endswith(".zarr"):
        path = os.path.join(path, STORE)
    CampaignStore.open(path)  # a clear error for a path that is not a campaign's store
    return xarray.open_zarr(path, consolidated=False)


def _times(scenario) -> np.ndarray:
    """The save times of one run (`simulate`'s `t`)."""
    from .._simulation._memory import save_times

    return np.asarray(save_times(scenario.simulation))


def _padded(members: range, size: int) -> np.ndarray:
    """The chunk's member indices, padded to `size` with its first member (one compiled program for all)."""
    idx = np.arange(members.start, members.stop)
    return np.concatenate([idx, np.full(size - idx.size, idx[0])]) if idx.size < size else idx


def _head(traj, n: int):
    """The first `n` members of a batched trajectory (the chunk without its padding)."""
    import jax

    return jax.tree.map(lambda x: np.asarray(x)[:n], traj)
