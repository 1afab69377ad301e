"""Run every benchmark (a)-(f) in one process, print one table, write benchmarks/results.json.

    python benchmarks/run_all.py [--quick] [--only a,b,c,d,e,f] [--write-md]

`--write-md` also replaces the measured table in benchmarks/RESULTS.md (the discussion there is hand-written).

Basilisk (`pip install bsk`, the optional `bsk` extra) is timed in the same process when importable, else its
columns say n/a. XLA's CPU runtime is left at its defaults (the library sets no global flags).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_batch  # noqa: E402
import bench_compile_grad  # noqa: E402
import bench_drift  # noqa: E402
import bench_panels  # noqa: E402
import bench_single  # noqa: E402
from _common import basilisk_time, have_basilisk, machine, print_table, quick_flag, seed_scenario  # noqa: E402
from _common import update_results_md, write_json  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = quick_flag(argv)
    only = set("abcdef")
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

    if "a" in only:
        section("(a) single trajectory", bench_single.run(quick))
    if "b" in only:
        bsk10, _ = basilisk_time(seed_scenario(t_end=10.0), repeats=2) if have_basilisk() else (None, None)
        section("(b) batch", bench_batch.run(quick, members=256 if quick else 1024, bsk_single=bsk10))
    if "c" in only or "d" in only:
        section("(c, d) compile and gradient", bench_compile_grad.run(quick))
    if "e" in only:
        r, extra["panels"] = bench_panels.run(quick)
        section("(e) panels", r)
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
