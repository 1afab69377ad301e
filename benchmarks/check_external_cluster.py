"""A campaign on a running Dask cluster joined by `--scheduler` (issue 38; docs/campaigns.md, the SLURM recipe),
checked end to end on this machine: a scheduler and two workers started by hand from the command line, as a
batch script starts them, the campaign run on them with `jaxhinge sweep SWEEP.toml --scheduler FILE`, and its
store compared with an in-process run's, every array, bit for bit.

    python benchmarks/check_external_cluster.py [--members 600] [--chunk 128] [--keep]

- `dask scheduler --scheduler-file F --port 0 --no-dashboard` (a free port: another cluster on 8786 is left alone);
- `dask worker --scheduler-file F --nthreads 1 --no-dashboard`, twice, each in its own working folder (not this
  repository): they find this jaxhinge through `PYTHONPATH` (a worker started without it would import another
  installation and is refused: the client's jaxhinge source SHA-256 travels with every task);
- the bundled sweep (`jaxhinge/examples/sweep.toml`: two panels, four dispersions) at `--members`, `chunk_size`
  `--chunk`, t_end = 0.5 s, every history kept; a fresh compilation cache for every process here
  (`JAXHINGE_CACHE_DIR`), so the workers compile the chunk program themselves and nothing stale is loaded;
- `jaxhinge sweep ... --scheduler F`, then `jaxhinge sweep ...` in-process into another folder; every array of
  the two stores compared (NaN where NaN), and the report files listed.

Prints the comparison and PASS or FAIL (exit status 0 or 1). The processes it started are ended at the end.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "jaxhinge", "examples")
T_END = 0.5


def _inputs(folder: str, members: int, chunk: int) -> str:
    """The bundled sweep at `members`, chunk `chunk`, t_end 0.5 s, in `folder`; **returns** the SWEEP file."""
    with open(os.path.join(EXAMPLES, "two_panel.toml")) as fh:
        text = fh.read().replace("t_end = 2.5 ", f"t_end = {T_END} ")
    assert f"t_end = {T_END} " in text
    with open(os.path.join(folder, "two_panel.toml"), "w") as fh:
        fh.write(text)
    with open(os.path.join(EXAMPLES, "sweep.toml")) as fh:
        sweep = fh.read()
    assert "members = 64" in sweep and "chunk_size = 256" in sweep
    sweep = sweep.replace("members = 64", f"members = {members}").replace("chunk_size = 256", f"chunk_size = {chunk}")
    path = os.path.join(folder, "SWEEP.toml")
    with open(path, "w") as fh:
        fh.write(sweep)
    return path


def _arrays(store: str) -> dict:
    import numpy as np
    import zarr

    g = zarr.open_group(store, mode="r")
    return {name: np.asarray(a[...]) for name, a in g.arrays()}


def _compare(a: dict, b: dict) -> list[str]:
    """The differences between two stores' arrays (none: equal bit for bit, NaN where NaN)."""
    import numpy as np

    bad = [f"only in one store: {sorted(set(a) ^ set(b))}"] if a.keys() != b.keys() else []
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            bad.append(f"{name}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
        elif x.dtype.kind == "f":
            if x.tobytes() != y.tobytes():  # bit for bit (NaN payloads included)
                n = int(np.sum(~((x == y) | (np.isnan(x) & np.isnan(y)))))
                bad.append(f"{name}: {n} of {x.size} values differ")
        elif not np.array_equal(x, y):
            bad.append(f"{name}: differs")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=600)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="jh-cluster-")
    env = dict(os.environ, JAXHINGE_CACHE_DIR=os.path.join(tmp, "cache"),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    for k in ("XLA_FLAGS", "EQX_ON_ERROR"):  # every process sets its own (configure_cpu, use_compile_cache)
        env.pop(k, None)
    os.makedirs(os.path.join(tmp, "inputs"))
    sweep = _inputs(os.path.join(tmp, "inputs"), a.members, a.chunk)
    sched = os.path.join(tmp, "scheduler.json")
    procs: list[subprocess.Popen] = []
    logs = []

    def start(name, args, cwd):
        os.makedirs(cwd, exist_ok=True)
        log = open(os.path.join(tmp, f"{name}.log"), "w")  # noqa: SIM115  (closed at the end)
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=cwd, env=env, stdout=log,
                                      stderr=subprocess.STDOUT))

    ok = False
    try:
        t0 = time.perf_counter()
        start("scheduler", ["scheduler", "--scheduler-file", sched, "--port", "0", "--no-dashboard"],
              os.path.join(tmp, "scheduler"))
        while not os.path.exists(sched):
            if procs[0].poll() is not None or time.perf_counter() - t0 > 60:
                with open(logs[0].name) as fh:
                    raise RuntimeError(f"the scheduler did not start: {fh.read()[-2000:]}")
            time.sleep(0.2)
        for w in range(2):
            start(f"worker{w}", ["worker", "--scheduler-file", sched, "--nthreads", "1", "--no-dashboard",
                                 "--local-directory", os.path.join(tmp, f"worker{w}", "dask")],
                  os.path.join(tmp, f"worker{w}"))
        from distributed import Client

        with Client(scheduler_file=sched, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            address = client.scheduler.address
        up = time.perf_counter() - t0
        print(f"scheduler {address} and 2 workers (--nthreads 1) up in {up:.1f} s; {a.members} members, "
              f"chunk {a.chunk}, t_end {T_END} s, in {tmp}", flush=True)
        runs = {}
        for name, extra in (("cluster", ["--scheduler", sched]), ("in-process", [])):
            out = os.path.join(tmp, name)
            t1 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "jaxhinge", "sweep", sweep, "--out-dir", out, *extra],
                               cwd=os.path.join(tmp, "inputs"), env=env, capture_output=True, text=True, check=False)
            runs[name] = time.perf_counter() - t1
            last = (p.stderr.strip().splitlines() or [""])[-1]
            print(f"jaxhinge sweep {' '.join(extra) or '(in-process)'}: exit {p.returncode} in {runs[name]:.1f} s: "
                  f"{last}", flush=True)
            if p.returncode:
                print(p.stderr[-3000:])
                raise RuntimeError(f"{name}: jaxhinge sweep failed")
        cluster, local = _arrays(os.path.join(tmp, "cluster", "campaign.zarr")), \
            _arrays(os.path.join(tmp, "in-process", "campaign.zarr"))
        bad = _compare(cluster, local)
        files = sorted(os.listdir(os.path.join(tmp, "cluster"))), sorted(os.listdir(os.path.join(tmp, "in-process")))
        if files[0] != files[1]:
            bad.append(f"report files differ: {files}")
        with open(os.path.join(tmp, "cluster", "summary.json")) as fh:
            members = json.load(fh).get("members")
        done = bool(cluster["chunk_done"].all()) and bool(cluster["sketch_done"])
        print(f"compared {len(cluster)} arrays ({sum(v.nbytes for v in cluster.values()) / 1e6:.1f} MB): "
              + ("every one equal bit for bit" if not bad else "; ".join(bad))
              + f"; every chunk done: {done}; summary members {members}; report files {files[0]}")
        ok = not bad and done
    except Exception as e:  # noqa: BLE001  (reported as FAIL)
        print(f"error: {type(e).__name__}: {e}")
    finally:
        for p in reversed(procs):  # the workers, then the scheduler
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
        if not a.keep and ok:
            shutil.rmtree(tmp, ignore_errors=True)
        elif not ok:
            print(f"(logs kept in {tmp})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
