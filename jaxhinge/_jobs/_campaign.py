"""Monte Carlo campaigns (`jaxhinge sweep`, `jaxhinge.run_campaign`): a SWEEP file's members run chunk by chunk
into `<out-dir>/campaign.zarr` (`_io._campaign_store`), resumable after Ctrl-C or a kill, then `summary.json`,
`envelopes.png` and `histograms.png` (docs/campaigns.md).

A campaign is planned (`plan_campaign`: every check, and every member drawn and rule-checked once, before any
compute or write), then run (`run_plan`). Member `i`'s parameters depend only on `(seed, i)`
(`sample_dispersions`' counter-based draws) and every chunk runs through the same compiled program
(`_campaign_chunks`: a short last chunk is padded to the chunk size), so a chunk computed in any order, in a
resumed run or again, is equal bit for bit. The percentile bands come from a quantile sketch
(`_stats.bucket_index`) of each history's deviation from the nominal run's (`nominal_centre`: simulated once
when the store is created, stored in it, read from it by every chunk): each chunk returns its members' bucket
indices, and the process driving the campaign merges them as chunks complete (`SketchMerge`: integer counts,
the same in any order), checkpointed every `CHECKPOINT_S` seconds for a resume.
"""

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._analysis._studies._batch import refuse_invalid_members, sample_dispersions
from .._analysis._studies._sensitivity import output_blocks
from .._analysis._studies._stats import Moments, merge_all, sketch_quantiles
from .._errors import OutputError, SweepError
from .._io import _interrupt
from .._io._campaign_format import ALPHA, CEIL, FLOOR, band_stride
from .._io._campaign_store import (
    STORE,
    CampaignStore,
    StoreLayout,
    input_digests,
    remove_checkpoint,
    sweep_sources,
)
from .._io._sweep_file import Retain
from .._io._writers import write_json, write_output_files
from .._model._params import FIELDS, resolve
from .._report._sweep import plot_envelopes, plot_histograms, sweep_summary
from .._runtime import _programs
from .._simulation._memory import MEMORY_ENV, memory_limit
from ._campaign_chunks import chunk_task, compute_chunk, metric_layout, padded, pipelined
from ._campaign_sketch import SketchMerge
from ._sweep import Sweep, load_sweep

__all__ = ["STORE", "CampaignPlan", "CampaignResult", "check_members", "check_resume", "envelopes", "keep_worst",
           "nominal_centre", "open_campaign", "plan_campaign", "rerun_members", "retention", "run_campaign",
           "run_plan", "write_outputs"]

ENVELOPES = ("omega_BN_B", "theta")  # the histories envelopes.png shows (their percentile bands are sketched)
PERCENTILES = (1.0, 5.0, 50.0, 95.0, 99.0)  # the bands of envelopes.png and summary.json
CHECKPOINT_S = 30.0  # the sketch's checkpoint is written after a chunk when this long has passed since the last


@dataclasses.dataclass(frozen=True)
class CampaignResult:
    """What `run_campaign` did: `store` (the path of `campaign.zarr`), `members`, `chunks`, `chunks_run` (this
    call; fewer than `chunks` on a resume), `params` and `metrics` of every member (read back from the store),
    `success`, `summary` (the `summary.json` contents), `envelopes` (per-time statistics, `envelopes`' layout;
    None when nothing was simulated),
    `files` (the report files written), `wall_s` (this call's compute)."""

    store: str
    members: int
    chunks: int
    chunks_run: int
    params: dict
    metrics: dict
    success: np.ndarray
    summary: dict
    envelopes: dict | None
    files: list
    wall_s: float


@dataclasses.dataclass(frozen=True)
class CampaignPlan:
    """A campaign checked and ready to run (`plan_campaign`; `run_plan` runs it): the `sweep`, its output
    `folder` and store `path`, the chunk `size`, the dispersed parameters' `names`, what a new store keeps
    (`retain`; None on a resume), the store a resume completes (`store`; None for a new one), the input files'
    SHA-256 (`sources`, `input_digests`), and where the chunks run (`workers`, `scheduler`)."""

    sweep: Sweep
    folder: str
    path: str
    size: int
    names: list
    retain: Retain | None
    store: CampaignStore | None
    sources: dict
    workers: int | None = None
    scheduler: str | os.PathLike | None = None

    @property
    def chunks(self) -> int:
        return -(-self.sweep.members // self.size)


def plan_campaign(sweep: Sweep | str | os.PathLike, *, out_dir: str | None = None, resume: bool = False,
                  workers: int | None = None, scheduler: str | os.PathLike | None = None) -> CampaignPlan:
    """Every check of a campaign, before any compute or write (`run_campaign`'s arguments): the cluster options
    (`check_cluster`), the SWEEP file (`load_sweep`), then for a new campaign what it keeps (`retention`) and every
    member's draws and model (`check_members`: drawn and rule-checked here, once), or for a resume the store
    (`check_resume`: the same input files and jaxhinge, whose members were checked when it began).
    **Returns:** a `CampaignPlan`. **Raises:** `SweepError` (`ScenarioError` for the scenario)."""
    if workers is not None or scheduler is not None:
        from ._campaign_cluster import check_cluster

        check_cluster(workers, scheduler)
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep, out_dir=out_dir)
    folder = os.path.abspath(out_dir or sweep.out_dir)
    path = os.path.join(folder, STORE)
    sources = input_digests(sweep)
    size = max(1, min(sweep.chunk_size, sweep.members))
    if resume:
        store = check_resume(sweep, path, sources)
        retain, names = None, list(store.group.attrs["parameters"])
    else:
        store, retain = None, retention(sweep)
        names = check_members(sweep)
    return CampaignPlan(sweep, folder, path, size, names, retain, store, sources, workers, scheduler)


def run_campaign(
    sweep: Sweep | str | os.PathLike,
    *,
    out_dir: str | None = None,
    resume: bool = False,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    scheduler: str | os.PathLike | None = None,
) -> CampaignResult:
    """Run a SWEEP file's campaign into `<out-dir>/campaign.zarr`, chunk by chunk, then write its reports.

    **Arguments:**

    - `sweep`: a SWEEP file path or a loaded `Sweep` (`load_sweep`).
    - `out_dir`: the output folder (default the file's `[output] dir`).
    - `resume`: complete the store an interrupted run left (only its missing chunks run); refused when there is
      no store, or when an input file or jaxhinge changed since it began (`check_resume`). Without `resume` an
      existing store is replaced (once the new one is created).
    - `progress`: called as `progress(members done, members failed)` after each chunk (the counts include
      the chunks a resumed store held already).
    - `workers`: run the chunks on a new Dask `LocalCluster` of this many worker processes (one thread each),
      closed at the end. Default (and `scheduler` None): in this process, no cluster.
    - `scheduler`: run the chunks on a running Dask cluster: its scheduler's address (`tcp://HOST:PORT`) or
      scheduler file (`dask scheduler --scheduler-file`). Not with `workers`. With either, each chunk is one
      task; the workers write their chunks into the store, so it and the input files must be on a filesystem
      they all see at the same paths; a dead worker's chunk runs again elsewhere. Needs Dask's `distributed`
      (`pip install "jaxhinge[cluster]"`).

    **Returns:** a `CampaignResult`.

    **Raises:** `SweepError` for bad input or a refused resume, before any compute.
    """
    plan = plan_campaign(sweep, out_dir=out_dir, resume=resume, workers=workers, scheduler=scheduler)
    return run_plan(plan, progress=progress)


def run_plan(plan: CampaignPlan, progress: Callable[[int, int], None] | None = None) -> CampaignResult:
    """Run a planned campaign (`plan_campaign`): the cluster reached, the store made (or the resumed one opened),
    its missing chunks run and written, the sketch merged, `[retain] worst` kept, the reports written.
    `progress`: as `run_campaign`'s."""
    sweep, folder, path, sources, size = plan.sweep, plan.folder, plan.path, plan.sources, plan.size
    sc = sweep.scenario
    blocks = output_blocks(sc, sweep.metrics)
    metric_meta, coords = metric_layout(sc, blocks)
    store = plan.store
    with contextlib.ExitStack() as stack:
        client = None
        # the cluster first, before the store is made or replaced (a scheduler out of reach changes nothing);
        # none for a resumed store that is complete already
        if (plan.workers is not None or plan.scheduler is not None) and (store is None or not store.done().all()):
            from ._campaign_cluster import cluster_chunks, cluster_client

            client = stack.enter_context(cluster_client(plan.workers, plan.scheduler))
        if store is None:
            # the sketch's centre before anything is written (an error leaves an existing store as it was)
            centre, centre_note = nominal_centre(sweep) if sweep.simulates else ({}, "")
            os.makedirs(folder, exist_ok=True)
            remove_checkpoint(path)  # (before the store it belongs to is replaced)
            with open(sweep.source, encoding="utf-8") as fh:
                text = fh.read()
            retain, names = plan.retain, plan.names
            layout = StoreLayout(
                members=sweep.members, chunk_size=size, times=_times(sc), panels=sc.spacecraft.panels.labels,
                params={n: (FIELDS[resolve(sc, n).field.name].param_shape, resolve(sc, n).unit) for n in names},
                metrics=metric_meta, coords=coords, kept=retain.kept(sweep.members),
                outputs=retain.outputs if sweep.simulates else (), bands=ENVELOPES if sweep.simulates else (),
                centre=centre, centre_note=centre_note)
            store = CampaignStore.create(
                path, layout,
                attrs={"sweep": os.path.basename(sweep.source), "sweep_text": text, "sources": sweep_sources(sweep),
                       "input_files": sources, "jaxhinge_source": _programs.source_digest(),
                       "seed": sweep.seed, "parameters": names, "every": retain.every,
                       "scenario": os.path.basename(sweep.scenario_path)})
        done = store.done()
        todo = [c for c in range(store.chunks) if not done[c]]
        sketch = SketchMerge.open(store, plan.store is not None)
        # (chunk, write): the chunks not done, and those done whose sketch a resume lacks (their sketch only)
        jobs = [(c, False) for c in sketch.missing(done)] + [(c, True) for c in todo]
        t0 = time.perf_counter()
        finished = int(sum(len(store.chunk_members(c)) for c in range(store.chunks) if done[c]))
        failed = store.failed_so_far(done)
        resume_note = "{}/{} members are stored in {}; `--resume` completes it"
        _interrupt.set_note(resume_note.format(finished, store.members, path))
        # each chunk's (members, failed, bucket indices) as it is written: here, in chunk order, or by the workers,
        # as they finish
        if client is None:
            chunks = stack.enter_context(contextlib.closing(pipelined(sweep, store, jobs)))
        else:
            from .._runtime._policy import cache_off

            args = (os.path.abspath(sweep.source), folder, tuple(sorted(sources.items())),
                    (_programs.source_digest(), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    not cache_off(), _programs.enabled())
            chunks = cluster_chunks(client, chunk_task, args, jobs)
        saved = time.monotonic()
        try:
            for (c, wrote), (n, bad, buckets) in chunks:
                sketch.add(c, buckets)
                if time.monotonic() - saved >= CHECKPOINT_S:
                    sketch.save()
                    saved = time.monotonic()
                if wrote:
                    finished += n
                    failed += bad
                    _interrupt.set_note(resume_note.format(finished, store.members, path))
                    if progress is not None:
                        progress(finished, failed)
        except BaseException:
            with contextlib.suppress(OutputError):  # (the error that stopped the campaign is the one to say)
                sketch.save()  # an error or KeyboardInterrupt in Python: what was merged is kept for the resume
            raise
        sketch.finish()
        worst = keep_worst(sweep, store)
    wall = time.perf_counter() - t0
    _interrupt.set_note(None)  # (an exception before this leaves the note: the CLI says it on Ctrl-C)
    params, metrics = store.params(), store.metrics()
    success, result = np.asarray(store.group["success"][:]), np.asarray(store.group["result"][:])
    labels = {name: (b.labels, b.unit) for name, b in zip(metric_meta, blocks)}
    summary = sweep_summary(sweep, params, metrics, success, result, wall, labels)
    summary["store"] = path
    if worst:
        summary["worst members (histories kept)"] = worst
    env = None
    if sweep.simulates:
        env = envelopes(store, ENVELOPES)
        summary["percentile bands"] = {
            "method": "quantile sketch over every successful member of the deviation from a centre per time "
                      "(the nominal run's history): log buckets of relative width alpha; |band - "
                      "np.percentile(method='lower')| <= alpha |value - centre| + floor for |value - centre| <= ceil",
            "centre": store.centre_note,
            "percentiles": list(env["percentiles"]), "alpha": ALPHA, "floor": FLOOR, "ceil": CEIL,
            "band times": f"{env['t_bands'].size} of {env['t'].size} sample times (stride {env['band_stride']})",
            "members counted": env["succeeded"]}
    files = write_outputs(sweep, params, metrics, summary, env, folder, success=success, labels=labels)
    return CampaignResult(path, store.members, store.chunks, len(todo), params, metrics, success, summary, env, files,
                          wall)


def rerun_members(sweep: Sweep, members, chunk_size: int | None = None):
    """The histories and metrics of chosen members, computed again exactly as in the campaign: each member's whole
    chunk is run again (the same program on the same inputs, `compute_chunk`: equal bit for bit to the
    campaign's own run). **Returns:** `(trajectory (K, ...), metrics {name: (K, ...)})` in the order of
    `members`."""
    import jax

    members = [int(m) for m in members]
    bad = [m for m in members if not 0 <= m < sweep.members]
    if bad:
        raise SweepError(f"{sweep.source}: members = {bad[0]}: must be in [0, {sweep.members}) (indices count from 0)",
                         source=sweep.source, field="members", value=bad[0])
    size = max(1, min(chunk_size or sweep.chunk_size, sweep.members))
    runs, values = {}, {}
    for c in sorted({m // size for m in members}):
        chunk = range(c * size, min((c + 1) * size, sweep.members))
        run = compute_chunk(sweep, chunk, size, check=True, histories=True)
        for m in members:
            if m in chunk:
                runs[m] = jax.tree.map(lambda x, i=m - chunk.start: x[i], run.traj)
                values[m] = {n: v[m - chunk.start] for n, v in run.metrics.items()}
    traj = jax.tree.map(lambda *xs: np.stack(xs), *[runs[m] for m in members])
    return traj, {n: np.stack([values[m][n] for m in members]) for n in values[members[0]]}


def keep_worst(sweep: Sweep, store: CampaignStore) -> dict:
    """`[retain] worst`: the members with the worst values of each metric (the largest, or the smallest with
    `largest = false`; a metric with several values per member by its largest or smallest), their histories
    computed again (`rerun_members`) and written into the store. **Returns:** `{metric: [members]}`."""
    if sweep.retain is None or not sweep.retain.worst:
        return {}
    metrics, ok = store.metrics(), np.asarray(store.group["success"][:])
    chosen = {}
    for name, count, largest in sweep.retain.worst:
        v = np.asarray(metrics[name]).reshape(store.members, -1)
        v = v.max(axis=1) if largest else v.min(axis=1)
        v = np.where(ok & np.isfinite(v), v if largest else -v, -np.inf)
        order = np.argsort(-v, kind="stable")[: min(count, int(np.isfinite(v).sum()))]
        chosen[name] = [int(m) for m in order]
    kept = np.asarray(store.group["retained"][:])
    new = sorted({m for ms in chosen.values() for m in ms if not kept[m]})
    if new:
        traj, _ = rerun_members(sweep, new, store.chunk_size)
        store.write_histories(new, traj)
    return chosen


def retention(sweep: Sweep) -> Retain:
    """The sweep's `[retain]`; without one, every history when they fit in memory (`memory_limit`), else a
    `SweepError` naming the size, the limit and the `[retain]` line that fits."""
    if sweep.retain is not None:
        return sweep.retain
    sc = sweep.scenario
    T, P = len(_times(sc)), sc.spacecraft.panels.count
    per_member = 8.0 * T * (2 * P + 6)  # theta, thetaDot, omega_BN_B, sigma_BN
    need, limit = per_member * sweep.members, memory_limit()
    if need <= limit:
        return Retain(1)
    every = max(2, math.ceil(need / (0.25 * limit)))
    raise SweepError(f"{sweep.source}: members = {sweep.members}: every member's history ({T} samples of theta, "
                     f"thetaDot, omega_BN_B and sigma_BN with {P} panel(s)) needs about {need / 1e9:.3g} GB, above "
                     f"the limit of {limit / 1e9:.3g} GB; keep some of them: [retain] every = {every} (keeps "
                     f"{-(-sweep.members // every)}, {need / every / 1e9:.2g} GB), or raise {MEMORY_ENV}",
                     source=sweep.source, field="members", value=sweep.members)


def envelopes(store: CampaignStore, outputs, percentiles=PERCENTILES) -> dict:
    """Per-time statistics of histories over every successful member (`summarize`'s layout, plus `std`,
    `t_bands` and `band_stride`): min, max, mean and std merged from every chunk's moments, at every sample
    time `t`; the percentile bands from the merged quantile sketch of the deviations from the store's centre
    `c`, plus `c` (`sketch_quantiles`: within `ALPHA |q - c| + FLOOR` of NumPy's `method="lower"` percentile
    `q`), at the band times `t_bands` (every `band_stride`-th sample time). `outputs`: histories of the store's
    `bands`."""
    success = np.asarray(store.group["success"][:])
    stride = store.band_stride
    res = {"members": store.members, "succeeded": int(success.sum()), "failed": int((~success).sum()),
           "percentiles": tuple(float(p) for p in percentiles), "t": np.asarray(store.group["time"][:]),
           "t_bands": np.asarray(store.group["band_time"][:]), "band_stride": stride}
    for name in outputs:
        mom = merge_all(Moments.unstack(m) for m in store.chunk_moments(name))
        bands = sketch_quantiles(store.sketch(name), percentiles, centre=store.centre(name))
        if mom.count == 0:
            nan = np.full(mom.mean.shape, np.nan)
            res[name] = {"min": nan, "max": nan, "mean": nan, "std": nan, "percentiles": bands}
        else:
            res[name] = {"min": mom.min, "max": mom.max, "mean": mom.mean, "std": mom.std, "percentiles": bands}
    return res


def check_resume(sweep: Sweep, path: str, sources: dict[str, str] | None = None) -> CampaignStore:
    """The store at `path` that `--resume` completes, or a `SweepError` (nothing written): there is none, an input
    file changed since it began (`input_digests`: the SWEEP file, its scenario, the `[inputs]` CSV; SHA-256),
    jaxhinge's source changed (`source_digest`: another version or an edit), or an older jaxhinge made it
    (without the input files' digests, the percentile sketch or its centre)."""
    if not os.path.exists(path):
        raise SweepError(f"{sweep.source}: --resume: {path} does not exist: nothing to resume (run without "
                         "--resume to start the campaign)", source=sweep.source, field="resume")
    store = CampaignStore.open(path)
    sources = input_digests(sweep) if sources is None else sources
    attrs = store.group.attrs
    if "input_files" not in attrs or "jaxhinge_source" not in attrs:
        raise SweepError(f"{sweep.source}: --resume: {path} was made by a jaxhinge that did not record its input "
                         f"files and source (version {attrs.get('jaxhinge')}): its members may not be the same; run "
                         "without --resume to start again", source=sweep.source, field="resume")
    before = attrs["input_files"]
    changed = [n for n in sources if before.get(n) != sources[n]] + [n for n in before if n not in sources]
    if changed:
        raise SweepError(f"{sweep.source}: --resume: {', '.join(changed)} changed since the campaign in {path} "
                         "began (SHA-256 differs): its members would not be the same; run without --resume to "
                         "start again, or restore the file", source=sweep.source, field="resume")
    if attrs["jaxhinge_source"] != _programs.source_digest():
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        raise SweepError(f"{sweep.source}: --resume: jaxhinge's source ({here}) changed since the campaign in {path} "
                         f"began (SHA-256 differs; it began with version {attrs.get('jaxhinge')}): its members "
                         "might not be the same; run without --resume to start again, or with the jaxhinge that "
                         "began it", source=sweep.source, field="resume")
    if sweep.simulates and "bands" not in store.group.attrs:
        raise SweepError(f"{sweep.source}: --resume: {path} was made by a jaxhinge without the percentile sketch "
                         f"(version {store.group.attrs.get('jaxhinge')}): its finished chunks have no sketch; run "
                         "without --resume to start again", source=sweep.source, field="resume")
    if sweep.simulates and not store.has_centre():
        raise SweepError(f"{sweep.source}: --resume: {path} was made by a jaxhinge whose percentile sketch has no "
                         f"centre (version {store.group.attrs.get('jaxhinge')}): its finished chunks' counts are not "
                         "of deviations from the nominal run; run without --resume to start again",
                         source=sweep.source, field="resume")
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


def nominal_centre(sweep: Sweep) -> tuple[dict[str, np.ndarray], str]:
    """The centre of the percentile sketch (`ENVELOPES`): the nominal run's history (the SWEEP file's scenario as
    loaded, without dispersions: one `simulate`, the members' integrator and save times) at the band times
    (every `band_stride`-th save time). **Returns:** `({history: (band_time, ...)}, what it is)`; zero, saying
    why, when the nominal run fails or is not finite (the bands are then within `ALPHA |q| + FLOOR`)."""
    from .._simulation._simulate import simulate
    from .._simulation._trajectory import failure_reason

    sc = sweep.scenario
    stride = band_stride(len(_times(sc)))
    traj = simulate(sc)
    centre = {h: np.asarray(getattr(traj, h), dtype=float)[::stride] for h in ENVELOPES}
    if not bool(np.asarray(traj.success)):
        why = failure_reason(int(np.asarray(traj.result)), sc)
    elif not all(np.isfinite(c).all() for c in centre.values()):
        why = "a non-finite history"
    else:
        return centre, "the nominal run (the scenario without dispersions)"
    return {h: np.zeros_like(c) for h, c in centre.items()}, f"zero: the nominal run failed ({why})"


def check_members(sweep: Sweep, block: int = 1 << 16) -> list[str]:
    """Draw every member's parameters, a block at a time, so a draw the rules refuse (a normal tail below zero, a
    member's model that breaks a physical rule) is refused before any compute; **returns** the parameter names.
    The rules build every member's model of the block at once (about 1.7 kB a member with two panels): a block
    of 65 536 members holds about 0.1 GB, whatever the member count (a million at once held 1.9 GB). A short
    last block is padded to the block size (`padded`), so the rules' operations are compiled for one shape."""
    names: list[str] = []
    size = max(1, min(block, sweep.members))
    for start in range(0, sweep.members, size):
        idx = padded(range(start, min(start + size, sweep.members)), size)
        params = sample_dispersions(sweep.scenario, sweep.dispersions, sweep.members, sweep.seed, indices=idx)
        refuse_invalid_members(sweep.scenario, params, sweep.source, start, sweep.members)
        names = list(params)
    return names


def _times(scenario) -> np.ndarray:
    """The save times of one run (`simulate`'s `t`)."""
    from .._simulation._memory import save_times

    return np.asarray(save_times(scenario.simulation))


def write_outputs(
    sweep: Sweep,
    params: Mapping[str, np.ndarray],
    outcomes,
    summary: Mapping[str, Any],
    envelopes: Mapping[str, Any] | None,
    out_dir: str | None = None,
    success: np.ndarray | None = None,
    labels: Mapping[str, tuple] | None = None,
) -> list[str]:
    """Write `summary.json`, `envelopes.png` (not when `envelopes` is None: nothing simulated) and
    `histograms.png` into `out_dir` (default `sweep.out_dir`), all or nothing. `outcomes`: a batched `Trajectory`,
    or the members' metrics with their `success` and `labels` (`plot_histograms`); `summary` is `sweep_summary`'s,
    `envelopes` `summarize`'s (or a campaign's `envelopes`). **Returns:** the paths written."""
    names = sweep.scenario.spacecraft.panels.labels
    units = {k: resolve(sweep.scenario, k).unit for k in params}
    files = {"summary.json": lambda f: write_json(summary, f)}
    if envelopes is not None:
        files["envelopes.png"] = lambda f: plot_envelopes(envelopes, names, f)
    files["histograms.png"] = lambda f: plot_histograms(params, outcomes, names, f, units=units, success=success,
                                                        labels=labels)
    return write_output_files(sweep.out_dir if out_dir is None else out_dir, files)
