"""GPU batch throughput: the seed scenario's k,c-dispersed batch (bench_batch.py's) at 1k to 64k members on the
first GPU JAX sees, float64, rk4 at 1 ms, with the same batch on that machine's CPU cores as the same-run baseline.

Run on a machine with a GPU (`python benchmarks/bench_gpu.py [--out FILE.json] [--t-end S]`); without one it says
so and measures nothing. Basilisk is not installed on the GPU machine, so the Basilisk column uses the per-step
time of one Basilisk run measured on the development machine (benchmarks/results.json, row "(a) per step") and says
so; the ratio measured in the same run is GPU against the same machine's CPU. Each GPU result is checked against
the CPU result of its first 16 members (largest difference in theta over the largest |theta|): float64 on both, so it
should sit near the rk4 rounding level, not at float32's 1e-7.
"""

import argparse
import json
import os
import platform
import sys
import time

import jax
import numpy as np
from _common import ROOT, seed_scenario, timeit
from bench_batch import dispersed, sharded_time

import jaxhinge as jh


def basilisk_us_per_step():
    """Basilisk's per-step time from the development machine's last full benchmark run (None if absent)."""
    try:
        with open(os.path.join(ROOT, "benchmarks", "results.json")) as fh:
            rows = json.load(fh)["rows"]
    except OSError:
        return None
    return next((r["basilisk"] for r in rows if r["name"] == "(a) per step"), None)


def batch_time(batch, repeats=3):
    """(compile s, run s, trajectory) of the vmapped simulation of `batch` on the device its leaves live on."""
    t0 = time.perf_counter()
    f = jax.jit(jax.vmap(jh.simulate_unjitted)).lower(batch).compile()
    tc = time.perf_counter() - t0
    t = timeit(lambda: f(batch).theta, repeats=repeats)
    return tc, t, f(batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--t-end", type=float, default=2.0)
    ap.add_argument("--members", default="1024,4096,16384,65536")
    ap.add_argument("--cpu-members", type=int, default=1024)
    ap.add_argument("--dry-run-on-cpu", action="store_true", help="the CPU plays the GPU (checks the script)")
    a = ap.parse_args()
    gpus = [d for d in jax.devices() if d.platform == "gpu" or a.dry_run_on_cpu]
    if not gpus:
        print("bench_gpu: no GPU visible to JAX; nothing measured")
        return 0
    gpu, cpu = gpus[0], jax.devices("cpu")[0]
    steps = round(a.t_end / 1e-3)
    bsk = basilisk_us_per_step()
    info = {"gpu": gpu.device_kind, "jax": jax.__version__, "python": platform.python_version(),
            "cpu_cores": os.cpu_count(), "t_end": a.t_end, "steps": steps, "basilisk_us_per_step_devmachine": bsk}
    print(json.dumps(info))
    sc = seed_scenario(t_end=a.t_end, dt=1e-3)
    rows = []

    # the same-run baseline: the batch on this machine's CPU
    cpu_batch = jax.device_put(dispersed(sc, a.cpu_members), cpu)
    tc, t, cpu_traj = batch_time(cpu_batch, repeats=2)
    cpu_per_step = t / a.cpu_members / steps
    rows.append({"name": f"cpu {a.cpu_members} members", "members": a.cpu_members, "compile_s": tc, "batch_s": t,
                 "us_per_member_step": cpu_per_step * 1e6,
                 "success": bool(np.all(np.asarray(cpu_traj.success)))})
    print(json.dumps(rows[-1]), flush=True)
    os.environ["JAX_PLATFORMS"] = "cpu"  # the child process below: the batch sharded over every CPU core
    sh = sharded_time(a.t_end, a.cpu_members, os.cpu_count() or 1)
    del os.environ["JAX_PLATFORMS"]
    rows.append({"name": f"cpu {a.cpu_members} members sharded over {sh['devices']} cores", "members": a.cpu_members,
                 "us_per_member_step": sh["per_member"] / steps * 1e6, "success": sh["success"]})
    print(json.dumps(rows[-1]), flush=True)
    cpu_per_step = min(cpu_per_step, sh["per_member"] / steps)  # the faster CPU layout is the baseline
    check = 16  # members of each GPU batch rerun on the CPU to compare
    on_cpu = jax.jit(jax.vmap(jh.simulate_unjitted))

    # one trajectory on the GPU (launch-bound: a loop of small kernels)
    one = jax.device_put(sc, gpu)
    t0 = time.perf_counter()
    f1 = jax.jit(jh.simulate_unjitted).lower(one).compile()
    tc1 = time.perf_counter() - t0
    t1 = timeit(lambda: f1(one).theta, repeats=3)
    rows.append({"name": "gpu one trajectory", "members": 1, "compile_s": tc1, "batch_s": t1,
                 "us_per_member_step": t1 / steps * 1e6})
    print(json.dumps(rows[-1]), flush=True)

    for m in [int(x) for x in a.members.split(",")]:
        batch = jax.device_put(dispersed(sc, m), gpu)
        tc, t, traj = batch_time(batch)
        head = jax.device_put(jax.tree.map(lambda x: x[:check], batch), cpu)
        ref = np.asarray(on_cpu(head).theta)
        diff = float(np.max(np.abs(np.asarray(traj.theta[:check]) - ref)) / np.max(np.abs(ref)))
        per_step = t / m / steps
        rows.append({"name": f"gpu {m} members", "members": m, "compile_s": tc, "batch_s": t,
                     "us_per_member_step": per_step * 1e6, "vs_cpu_same_machine": cpu_per_step / per_step,
                     "vs_basilisk_devmachine": None if bsk is None else bsk * 1e-6 / per_step,
                     "theta_vs_cpu_rel": diff, "success": bool(np.all(np.asarray(traj.success)))})
        print(json.dumps(rows[-1]), flush=True)
        del batch, traj
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"machine": info, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
