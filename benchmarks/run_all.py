"""The one entry point of the benchmarks: run them in one process, print one table, write benchmarks/results.json.

    python benchmarks/run_all.py [--quick] [--only a,b,m,c,d,e,i,h,f,g,t,w,k] [--write-md]

Rows, by letter (every benchmark script is one or more of them; each script also runs alone):

- (a) one trajectory of the seed scenario, Basilisk in the same run (here: `single_trajectory`);
- (b) a 1024-member dispersed batch, also sharded over the cores; flops and arithmetic rate (`bench_batch.py`);
- (m) MuJoCo, one trajectory and its threaded rollout (`bench_mujoco.py`);
- (c), (d) compile times; reverse-mode gradient against one forward run (`bench_compile_grad.py`);
- (e) cost against the number of panels, back-substitution against the mass-matrix model (`bench_panels.py`);
- (i) kernels per rk4 step (`bench_kernels.py`);
- (h) CLI runs, first against later, fresh cache folder (`bench_cli.py`);
- (f) steps for a given energy drift, rk4 against the adaptive integrators (`bench_drift.py`);
- (g) XLA:CPU options A/B/C, each setting in its own processes (`bench_codegen.py`);
- (t) the long-record telemetry study (`bench_telemetry.py`);
- (w) four reaction wheels: one trajectory with and without them, Basilisk with them (here: `wheel_trajectory`);
- (k) attitude control in the loop: per step against open loop, one trajectory and a 1024-member batch against
  Basilisk with its flight-software modules (`bench_control.py`).

By default every row but (g) and (t), which take longest (`--only g,t` runs them; `--only abcdefghimt` all).
`--write-md` also replaces the measured table between the markers of benchmarks/RESULTS.md (the text around it
is hand-written). With `--only`, the rows measured replace their namesakes in benchmarks/results.json and the
table (the others are kept from their earlier run, and the table's heading says which rows are newer).

Basilisk (`pip install bsk`, the optional `bsk` extra) is timed in the same process when importable, else its
columns say n/a; so is MuJoCo (`pip install mujoco`; rows (m)). XLA compiles with `jaxhinge.configure_cpu()`'s
options, as the CLI does (`_common.py`; JAXHINGE_BENCH_XLA_DEFAULTS=1 for XLA's defaults); the library sets no
global flags.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_batch
import bench_cli
import bench_codegen
import bench_control
import bench_compile_grad
import bench_drift
import bench_kernels
import bench_mujoco
import bench_panels
import bench_telemetry
from _common import (
    basilisk_time,
    compile_time,
    have_basilisk,
    machine,
    print_table,
    quick_flag,
    row,
    seed_scenario,
    timeit,
    update_results_md,
    write_json,
)

DEFAULT = "abcdefhimwk"
ALL = DEFAULT + "gt"


def single_trajectory(quick=False):
    """(a) One trajectory of the seed scenario, 10 s, rk4 at 1 ms, after compilation; Basilisk in the same run."""
    import jax

    sc = seed_scenario(t_end=10.0, dt=0.001)
    n = 10000
    _, _, f = compile_time(jax.jit(jax.tree_util.Partial(_sim)), sc)
    t = timeit(lambda: f(sc), repeats=5 if quick else 10)
    tb, setup = basilisk_time(sc, repeats=2 if quick else 5)
    note = "" if tb is not None else "Basilisk not importable"
    if setup is not None:
        note = f"Basilisk setup+init {setup:.3f} s not included"
    return [
        row("(a) seed scenario 10 s rk4 dt=1 ms, one trajectory", t, tb, "s", note),
        row("(a) per step", t / n * 1e6, None if tb is None else tb / n * 1e6, "us"),
    ]


def wheel_trajectory(quick=False):
    """(w) The seed scenario with four balanced reaction wheels in a pyramid (constant motor torques), 10 s, rk4
    at 1 ms: per-step cost against the same run without wheels (both jaxhinge, same process), and Basilisk with
    the wheels in the same run."""
    import jax
    import numpy as np

    import jaxhinge as jh

    sc = seed_scenario(t_end=10.0, dt=0.001)
    d = jh.scenario_to_dict(sc)
    s3 = 1.0 / np.sqrt(3.0)
    axes = [[s3, s3, s3], [-s3, s3, s3], [-s3, -s3, s3], [s3, -s3, s3]]
    d["wheels"] = [{"name": f"rw{i + 1}", "gsHat_B": g, "Js": 0.159, "Omega": om, "u": u, "u_max": 0.2}
                   for i, (g, om, u) in enumerate(zip(axes, [400.0, -300.0, 500.0, -600.0], [0.01, -0.02, 0.03, 0.0]))]
    sw = jh.scenario_from_dict(d)
    n = 10000
    _, _, f = compile_time(jax.jit(jax.tree_util.Partial(_sim)), sc)
    _, _, fw = compile_time(jax.jit(jax.tree_util.Partial(_sim)), sw)
    reps = 5 if quick else 10
    t, tw = timeit(lambda: f(sc), repeats=reps), timeit(lambda: fw(sw), repeats=reps)
    tb, _ = basilisk_time(sw, repeats=2 if quick else 5)
    return [
        row("(w) per step, four wheels / none (ratio = with / without)", tw / n * 1e6, t / n * 1e6, "us",
            "reference column: the same run without wheels"),
        row("(w) four wheels, one trajectory 10 s rk4 dt=1 ms (Basilisk with the wheels)", tw, tb, "s",
            "" if tb is not None else "Basilisk not importable"),
    ]


def _merge(full, partial, letters):
    """The earlier run's results with this partial run's rows in place of their namesakes (new rows after the
    others); the machine line notes the partial run."""
    new = {r["name"]: r for r in partial["rows"]}
    rows = [new.pop(r["name"], r) for r in full["rows"]] + list(new.values())
    machine = dict(full["machine"])
    machine["date_utc"] = f"{machine['date_utc']} (rows {letters}: {partial['machine']['date_utc']}, same machine)"
    return {**full, **{k: v for k, v in partial.items() if k not in ("machine", "rows")}, "machine": machine,
            "rows": rows}


def _sim(sc):
    import jaxhinge as jh

    return jh.simulate_unjitted(sc)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = quick_flag(argv)
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return
    only = set(DEFAULT)
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].replace(",", ""))
        if only - set(ALL):
            sys.exit(f"run_all.py: --only {''.join(sorted(only - set(ALL)))}: unknown; the rows are {','.join(ALL)}")
    t0 = time.perf_counter()
    info = machine()
    rows, extra = [], {}
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
    previous = None
    if "--only" in argv and os.path.exists(out):  # read before this run's partial writes replace it
        import json

        with open(out) as f:
            previous = json.load(f)

    def section(title, new):
        print_table(new, title)
        sys.stdout.flush()
        rows.extend(new)
        now = {"machine": info, "rows": rows, **extra}  # partial results survive an interruption
        write_json(out, now if previous is None else _merge(previous, now, "".join(sorted(only))))

    ours = {}
    if "a" in only:
        section("(a) single trajectory", r := single_trajectory(quick))
        ours["one"] = r[0]["jaxhinge"]
    if "w" in only:
        section("(w) reaction wheels", wheel_trajectory(quick))
    if "b" in only:
        bsk10, _ = basilisk_time(seed_scenario(t_end=10.0), repeats=2) if have_basilisk() else (None, None)
        section("(b) batch", r := bench_batch.run(quick, members=256 if quick else 1024, bsk_single=bsk10))
        ours["member"] = r[0]["jaxhinge"]
    if "m" in only:  # MuJoCo (optional), with jaxhinge's (a) and (b) times of this run in the ratio column
        section("(m) MuJoCo", bench_mujoco.run(quick, members=256 if quick else 1024,
                                                reference=(ours.get("one"), ours.get("member"))))
    if "c" in only or "d" in only:
        section("(c, d) compile and gradient", bench_compile_grad.run(quick))
    if "e" in only:
        r, extra["panels"] = bench_panels.run(quick)
        section("(e) panels", r)
    if "i" in only:
        section("(i) kernels per step", bench_kernels.run(quick))
    if "h" in only:
        section("(h) CLI runs: first vs later (fresh cache folder)", bench_cli.run(quick))
    if "k" in only:
        section("(k) attitude control in the loop", bench_control.run(quick, members=256 if quick else 1024))
    if "f" in only:
        r, extra["drift"] = bench_drift.run(quick)
        section("(f) energy drift", r)
    if "g" in only:
        section("(g) XLA:CPU options (ratio = XLA defaults / configure_cpu)", bench_codegen.run(quick))
    if "t" in only:
        r, extra["telemetry"] = bench_telemetry.run(quick)
        section("(t) long-record telemetry study", r)
    info["total_wall_s"] = time.perf_counter() - t0
    info["quick"] = quick
    if not have_basilisk():
        print("note: Basilisk (bsk) is not importable: its columns are n/a", file=sys.stderr)
    print(f"\nmachine: {info['cpu']}, {info['cores_visible']} cores visible, load {info['loadavg_1min']:.1f}, "
          f"{info['date_utc']}; {info['versions']}")
    print_table(rows, "jaxhinge benchmarks (ratio = reference / jaxhinge)")
    print(f"\ntotal {info['total_wall_s']:.0f} s")
    payload = {"machine": info, "rows": rows, **extra}
    if previous is not None:  # a partial run: merged into the earlier results
        payload = _merge(previous, payload, "".join(sorted(only)))
    write_json(out, payload)
    print(f"wrote {out}")
    if "--write-md" in argv:
        md = os.path.join(os.path.dirname(out), "RESULTS.md")
        update_results_md(payload, md)
        print(f"updated {md}")


if __name__ == "__main__":
    main()
