"""Run every benchmark (a)-(f), (h), (i), (m) in one process, print one table, write benchmarks/results.json.

    python benchmarks/run_all.py [--quick] [--only a,b,c,d,e,f,h,i,m] [--write-md]

`--write-md` also replaces the measured table in benchmarks/RESULTS.md (the discussion there is hand-written).

Basilisk (`pip install bsk`, the optional `bsk` extra) is timed in the same process when importable, else its
columns say n/a; so is MuJoCo (`pip install mujoco`; rows (m)). XLA compiles with its elemental CPU emitters,
as the CLI does (`_common.py`; JAXHINGE_BENCH_XLA_DEFAULTS=1 for XLA's defaults); the library sets no global
flags.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_batch
import bench_cli
import bench_compile_grad
import bench_drift
import bench_kernels
import bench_mujoco
import bench_panels
import bench_single
from _common import (
    basilisk_time,
    have_basilisk,
    machine,
    print_table,
    quick_flag,
    seed_scenario,
    update_results_md,
    write_json,
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = quick_flag(argv)
    only = set("abcdefhim")
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].replace(",", ""))
    t0 = time.perf_counter()
    info = machine()
    rows, extra = [], {}
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")

    def section(title, new):
        print_table(new, title)
        sys.stdout.flush()
        rows.extend(new)
        write_json(out, {"machine": info, "rows": rows, **extra})  # partial results survive an interruption

    ours = {}
    if "a" in only:
        section("(a) single trajectory", r := bench_single.run(quick))
        ours["one"] = r[0]["jaxhinge"]
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
    if "f" in only:
        r, extra["drift"] = bench_drift.run(quick)
        section("(f) energy drift", r)
    info["total_wall_s"] = time.perf_counter() - t0
    info["quick"] = quick
    if not have_basilisk():
        print("note: Basilisk (bsk) is not importable: its columns are n/a", file=sys.stderr)
    print(f"\nmachine: {info['cpu']}, {info['cores_visible']} cores visible, load {info['loadavg_1min']:.1f}, "
          f"{info['date_utc']}; {info['versions']}")
    print_table(rows, "jaxhinge benchmarks (ratio = reference / jaxhinge)")
    print(f"\ntotal {info['total_wall_s']:.0f} s")
    write_json(out, {"machine": info, "rows": rows, **extra})
    print(f"wrote {out}")
    if "--write-md" in argv:
        md = os.path.join(os.path.dirname(out), "RESULTS.md")
        update_results_md({"machine": info, "rows": rows}, md)
        print(f"updated {md}")


if __name__ == "__main__":
    main()
