"""Campaigns on Dask workers (`jaxhinge sweep --workers N | --scheduler ADDRESS`, `run_campaign(workers=,
scheduler=)`; docs/campaigns.md).

One Dask task per chunk not done: the task (`_campaign_chunks.chunk_task`, on a worker) loads the SWEEP file once per
worker process, opens the store and runs `run_chunk`, the same computation as in-process, so it writes the chunk's arrays
into the store itself (its flag last) and returns only `(members, failed, bucket indices)`. The client sees the
tasks finish (`distributed.as_completed`) for the progress line and merges the indices into the percentile
sketch (integer counts: the same in any order); the reports are written from the store afterwards, as
in-process. A worker that dies takes its task with it and Dask runs the task again on another worker; the chunk
it may have half written has no flag and is written again whole. The store and the input files must be on a
filesystem every worker sees at the same paths.

`distributed` is an optional dependency (`pip install "jaxhinge[cluster]"`), imported only here, only when a
campaign asks for workers.
"""

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence

from .._errors import SweepError

__all__ = ["INSTALL", "RETRIES", "check_cluster", "cluster_chunks", "cluster_client"]

INSTALL = 'pip install "jaxhinge[cluster]"'
RETRIES = 3  # a task that raises runs again up to this many times (a dead worker's task is rescheduled anyway)
# tcp://host:port, tls://[::1]:port, host:port
_ADDRESS = re.compile(r"^([a-z][a-z0-9+]*://)?(\[[0-9A-Fa-f:.]+\]|[\w.-]+):\d+/?$")


def check_cluster(workers, scheduler, *, names: tuple[str, str] = ("workers", "scheduler")) -> None:
    """Refuse, before any compute, a bad `workers` (a whole number >= 1) or `scheduler` (an existing scheduler
    file or an address), both at once, or either without Dask's `distributed` installed; `names`: how the
    message names the two (`--workers`, `--scheduler` on the command line)."""
    wname, sname = names
    if workers is not None and scheduler is not None:
        raise SweepError(f"{wname} = {_show(workers)} and {sname} = {_show(scheduler)}: give one or the other "
                         f"({wname} starts a local cluster, {sname} joins a running one)", field=wname, value=workers)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SweepError.bad(None, wname, workers, "must be a whole number of worker processes, 1 or more")
    if scheduler is not None:
        s = os.fspath(scheduler) if isinstance(scheduler, (str, os.PathLike)) else None
        if not s or not s.strip():
            raise SweepError.bad(None, sname, scheduler, "must be a scheduler address (tcp://HOST:PORT) or the "
                                 "path of a scheduler file")
        if not os.path.isfile(s) and not _ADDRESS.match(s):
            raise SweepError.bad(None, sname, s, "is neither an existing scheduler file nor a scheduler address "
                                 "(tcp://HOST:PORT or HOST:PORT)")
    if workers is not None or scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            name = wname if workers is not None else sname
            raise SweepError(f"{name}: Dask's distributed is not installed; install it with {INSTALL}",
                             field=name) from None


def _show(v) -> str:
    return repr(os.fspath(v)) if isinstance(v, (str, os.PathLike)) else repr(v)


@contextlib.contextmanager
def cluster_client(workers: int | None, scheduler: str | os.PathLike | None) -> Iterator:
    """A `distributed.Client`: of a new `LocalCluster` of `workers` processes (one thread each; closed on exit),
    or of the running cluster at `scheduler` (an address, or a scheduler file)."""
    import logging

    from distributed import Client, LocalCluster

    if workers is not None:
        main = sys.modules["__main__"]
        if not hasattr(main, "__spec__"):  # IPython/Jupyter's __main__ has none, and multiprocessing's spawn (the
            main.__spec__ = None  # nannies' worker processes) reads it: None is what a plain script has
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            yield client
        return
    s = os.fspath(scheduler)
    try:
        client = Client(scheduler_file=s) if os.path.isfile(s) else Client(s)
    except (OSError, TimeoutError) as e:
        raise SweepError.bad(None, "scheduler", s, f"cannot connect to the scheduler ({e})") from None
    with client:
        yield client


def cluster_chunks(client, task: Callable, args: tuple, jobs: Sequence[tuple]) -> Iterator:
    """Submit one task per job `(c, ...)` of `jobs` (a chunk and its options), `task(*args, *job)`
    (`_campaign_chunks.chunk_task`); **yields** `(job, result)` of each task as it finishes (in any order)."""
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]
    futures = {client.submit(task, *args, *job, key=f"jaxhinge-chunk-{job[0]}-{run}", retries=RETRIES,
                             pure=False): tuple(job) for job in jobs}
    try:
        for f in as_completed(list(futures)):
            yield futures[f], f.result()
    finally:
        client.cancel(list(futures))  # an interrupted campaign: the tasks not started yet are dropped
