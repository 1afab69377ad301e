"""(h) Compiled code reused across runs: wall time of CLI commands, first run against later runs; the main job warm.

Each command runs as its own process (`python -m jaxhinge ...`, what a user types), three times in a row on a
fresh, empty cache folder (`JAXHINGE_CACHE_DIR`), and once with `--no-cache` for reference:

- `jaxhinge fit fits/FIT.toml` (the main job: modal fit, simulation check, plot), the issue's target (h);
- `jaxhinge simulate` (the bundled example).

The first run traces, compiles and stores; later runs load the traced programs (`jaxhinge/_runtime/_programs.py`) and
the compiled ones (JAX's compilation cache). Outputs go to a temporary folder. Python start-up and the imports
are in every number.

The main job warm (issue 37, target <= 3 s on the 2-core machine when Basilisk's seed run takes 0.25 s): the fit
run `WARM_RUNS` more times on the filled cache, each run's wall time and CPU time (user + sys of the process, from
`os.wait4`) and its stages, from the moment each progress line arrives (unbuffered, `python -u`): start-up, imports
and reading the files; targets and coordinates; initial modes, reachability and sensitivity check; the solver; the
simulation check; results, figure and report; the process's exit. Each is the minimum over the runs (a shared
machine only adds time). The ratio is against Basilisk's seed scenario run (`basilisk_time`), measured in the same
run where Basilisk is installed.

    python benchmarks/bench_cli.py [--quick]
"""

import os
import subprocess
import sys
import tempfile
import threading
import time

from _common import basilisk_time, print_table, quick_flag, row, seed_scenario

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM_RUNS = 5
# the main job's stages, each ending with the first output line that starts with this text (stderr or stdout)
STAGES = (
    ("start-up, imports, reading the files", "jaxhinge: "),
    ("targets and coordinates", "fit: checking that the targets are reachable"),
    ("initial modes, reachability, sensitivity", "fit: 4 free parameter"),
    ("solver", "fit: independent check"),
    ("simulation check", "fit: check done"),
    ("results, figure, report", "wrote               "),  # the last "wrote" line (the figure)
    ("exit", None),  # the process ends
)


def _run(args, env, cwd) -> float:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "jaxhinge", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"jaxhinge {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall


def timed_run(args, env, cwd):
    """Run `python -u -m jaxhinge *args`; **returns** (wall s, CPU s (user + sys), [(seconds, line), ...]): each
    output line with the time it arrived, from the start."""
    lines, lock = [], threading.Lock()
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-u", "-m", "jaxhinge", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)

    def read(stream):
        for line in stream:
            with lock:
                lines.append((time.perf_counter() - t0, line.rstrip("\n")))

    readers = [threading.Thread(target=read, args=(s,)) for s in (p.stdout, p.stderr)]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for r in readers:
        r.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"jaxhinge {' '.join(args)} failed ({p.returncode}): "
                           + "\n".join(s for _, s in lines)[-2000:])
    return wall, usage.ru_utime + usage.ru_stime, sorted(lines)


def stages(wall, lines) -> list[float]:
    """The seconds of each of `STAGES` in one run, from its timed output lines."""
    ends = []
    for _, start in STAGES[:-1]:
        hits = [t for t, s in lines if s.startswith(start)]
        if not hits:
            raise RuntimeError(f"no line starting {start!r} in the output:\n" + "\n".join(s for _, s in lines))
        ends.append(hits[-1] if start.startswith("wrote") else hits[0])
    ends.append(wall)
    return [b - a for a, b in zip([0.0, *ends[:-1]], ends)]


def warm_fit(runs=WARM_RUNS):
    """The main job on a filled cache, `runs` times: **returns** (min wall, min CPU, per-stage minima, walls)."""
    with tempfile.TemporaryDirectory(prefix="jaxhinge-bench-warm-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
        env["JAXHINGE_CACHE_DIR"] = os.path.join(tmp, "cache")
        args = ["fit", os.path.join(REPO, "fits", "FIT.toml"), "--out", os.path.join(tmp, "out")]
        timed_run(args, env, tmp)  # fills the caches
        walls, cpus, parts = [], [], []
        for _ in range(runs):
            wall, cpu, lines = timed_run(args, env, tmp)
            walls.append(wall)
            cpus.append(cpu)
            parts.append(stages(wall, lines))
    return min(walls), min(cpus), [min(p[i] for p in parts) for i in range(len(STAGES))], walls


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
    wall, cpu, parts, walls = warm_fit(3 if quick else WARM_RUNS)
    bsk, _ = basilisk_time(seed_scenario(), repeats=3)
    rows.append(row("(h) fit fits/FIT.toml warm (filled cache): wall", wall, bsk, "s",
                    f"ratio = Basilisk seed run / this; target <= 3 s at a 0.25 s seed run, i.e. ratio >= 0.083; "
                    f"CPU (user + sys) {cpu:.2f} s; runs {', '.join(f'{t:.2f}' for t in walls)} s"))
    for (stage, _), t in zip(STAGES, parts):
        rows.append(row(f"(h) warm fit stage: {stage}", t, None, "s", "minimum over the runs"))
    return rows


if __name__ == "__main__":
    print_table(run(quick_flag()), "(h) CLI runs: first vs later (fresh cache folder); the main job warm")
