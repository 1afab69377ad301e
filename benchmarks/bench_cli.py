"""(h) Compiled code reused across runs: wall time of CLI commands, first run against later runs.

Each command runs as its own process (`python -m jaxhinge ...`, what a user types), three times in a row on a
fresh, empty cache folder (`JAXHINGE_CACHE_DIR`), and once with `--no-cache` for reference:

- `jaxhinge fit fits/FIT.toml` (the main job: modal fit, simulation check, plot), the issue's target (h);
- `jaxhinge simulate` (the bundled example).

The first run traces, compiles and stores; later runs load the traced programs (`jaxhinge/_runtime/_programs.py`) and
the compiled ones (JAX's compilation cache). Outputs go to a temporary folder. Python start-up and the imports
(~2.4 s here) are in every number.

    python benchmarks/bench_cli.py [--quick]
"""

import os
import subprocess
import sys
import tempfile
import time

from _common import print_table, quick_flag, row

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args, env, cwd) -> float:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "jaxhinge", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"jaxhinge {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall


def run(quick=False):
    rows = []
    commands = {
        "fit fits/FIT.toml": lambda out: ["fit", os.path.join(REPO, "fits", "FIT.toml"), "--out", out],
        "simulate (bundled example)": lambda out: ["simulate", "--out", os.path.join(out, "traj.npz")],
    }
    for name, args in commands.items():
        with tempfile.TemporaryDirectory(prefix="jaxhinge-bench-cli-") as tmp:
            env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
            env["JAXHINGE_CACHE_DIR"] = os.path.join(tmp, "cache")
            out = os.path.join(tmp, "out")
            os.makedirs(out)
            plain = _run([*args(out), "--no-cache"], env, tmp)
            times = [_run(args(out), env, tmp) for _ in range(2 if quick else 3)]
        first, later = times[0], min(times[1:])
        rows.append(row(f"(h) {name}: first run, empty cache", first, plain, "s",
                        "reference: --no-cache; ratio > 1: storing costs nothing"))
        rows.append(row(f"(h) {name}: second run / first", later / first, None, "-",
                        f"later runs {', '.join(f'{t:.2f}' for t in times[1:])} s; target <= 0.35 (fit)"))
    return rows


if __name__ == "__main__":
    print_table(run(quick_flag()), "(h) CLI runs: first vs later (fresh cache folder)")
