"""Shared helpers of the benchmark scripts: the seed scenario, timing, Basilisk runs, the results table.

Timing rules: every number is the minimum over repeats (the machine may be shared); jaxhinge times are taken
after compilation (`jax.jit(...).lower(...).compile()`, timed separately) with `block_until_ready`;
Basilisk times are the wall time of `ExecuteSimulation` only (setup reported separately).
"""

import json
import os
import platform
import subprocess
import sys
import time

# The XLA:CPU options the CLI and the test suite use (`jaxhinge.configure_cpu`: the elemental emitters and small
# loops compiled into one function; importing jaxhinge does not start JAX's backend), A/B in bench_codegen.py.
# JAXHINGE_BENCH_XLA_DEFAULTS=1 measures with XLA's defaults. The flags in use are printed with the machine.
if not os.environ.get("JAXHINGE_BENCH_XLA_DEFAULTS"):
    from jaxhinge import configure_cpu

    configure_cpu()

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxhinge as jh  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "data", "bsk"))  # bsk_run.py, the Basilisk runner
sys.path.insert(0, os.path.join(ROOT, "tests"))  # _kane.py, the full mass-matrix reference model
SEED_TOML = os.path.join(ROOT, "jaxhinge", "examples", "two_panel.toml")


def seed_scenario(t_end=10.0, dt=0.001, save_dt=0.01, **kw):
    """Basilisk's seed scenario (two panels, no gravity, undamped; examples/two_panel.toml), rk4 at `dt`."""
    sc = jh.load_scenario(SEED_TOML)
    return sc.with_simulation(t_end=t_end, dt=dt, save_dt=save_dt, integrator="rk4", **kw)


def timeit(fn, repeats=5, min_time=0.0):
    """Minimum wall time of `fn()` over `repeats` calls (each result blocked on)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def compile_time(fn, *args):
    """(seconds to trace+lower, seconds to compile, compiled) of `jax.jit(fn)` at `args` (no cache)."""
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    return t1 - t0, time.perf_counter() - t1, compiled


def have_basilisk():
    try:
        import Basilisk  # noqa: F401

        return True
    except Exception:
        return False


def basilisk_time(scenario, repeats=3):
    """(min ExecuteSimulation wall time, min setup+init time) of `scenario` in Basilisk, or (None, None)."""
    if not have_basilisk():
        return None, None
    import bsk_run

    d = jh.scenario_to_dict(scenario)
    best, setup = float("inf"), float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = bsk_run.run(d, record=False)
        total = time.perf_counter() - t0
        best = min(best, float(out["wall_s"]))
        setup = min(setup, total - float(out["wall_s"]))
    return best, setup


def machine():
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    versions = {"python": platform.python_version(), "jax": jax.__version__}
    for mod in ("jaxlib", "diffrax", "equinox"):
        versions[mod] = __import__(mod).__version__
    try:
        import importlib.metadata

        versions["bsk"] = importlib.metadata.version("bsk")
    except Exception:
        versions["bsk"] = None
    return {
        "cpu": model,
        "cores_visible": os.cpu_count(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_devices": [str(d) for d in jax.devices()],
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "versions": versions,
        "loadavg_1min": os.getloadavg()[0],
    }


def row(name, ours, bsk=None, unit="s", note=""):
    """One results row: our value, the reference's (Basilisk; the mass-matrix model in (e); MuJoCo in (m); None when not
    measured) and their ratio reference/ours (> 1: jaxhinge is faster)."""
    ratio = None if (bsk is None or ours is None or ours == 0) else bsk / ours
    return {"name": name, "jaxhinge": ours, "basilisk": bsk, "ratio": ratio, "unit": unit, "note": note}


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    a = abs(v)
    if a == 0 or 1e-3 <= a < 1e5:
        return f"{v:.4g}"
    return f"{v:.3e}"


def print_table(rows, title=None):
    if title:
        print(f"\n## {title}")
    w = max(len(r["name"]) for r in rows)
    print(f"{'benchmark':<{w}}  {'jaxhinge':>11}  {'reference':>11}  {'ratio':>8}  unit  note")
    for r in rows:
        print(
            f"{r['name']:<{w}}  {fmt(r['jaxhinge']):>11}  {fmt(r['basilisk']):>11}  {fmt(r['ratio']):>8}  "
            f"{r['unit']:<4}  {r['note']}"
        )


def write_json(path, payload):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1, default=lambda o: float(o) if np.isscalar(o) else str(o))
    os.replace(tmp, path)


def quick_flag(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return "--quick" in argv


BEGIN, END = "<!-- results:begin (written by run_all.py) -->", "<!-- results:end -->"


def markdown(payload):
    """The measured table of `payload` (results.json) as Markdown."""
    m = payload["machine"]
    v = ", ".join(f"{k} {x}" for k, x in m["versions"].items())
    lines = [
        f"Machine: {m['cpu']}, {m['cores_visible']} cores visible, 1-min load average {m['loadavg_1min']:.1f} at "
        f"start; {m['date_utc']}; {v}; devices {', '.join(m['jax_devices'])}; "
        f"XLA_FLAGS={m.get('xla_flags') or '(none)'}."
        f"{' Quick mode (shorter runs).' if m.get('quick') else ''} Total benchmark wall time "
        f"{m.get('total_wall_s', float('nan')):.0f} s.",
        "",
        "| benchmark | jaxhinge | reference | ratio (reference / jaxhinge) | unit | note |",
        "|---|---|---|---|---|---|",
    ]
    def cell(text):  # a "|" in a note (max |dtheta|) would end the table cell
        return str(text).replace("|", "\\|")

    for r in payload["rows"]:
        lines.append(f"| {cell(r['name'])} | {fmt(r['jaxhinge'])} | {fmt(r['basilisk'])} | {fmt(r['ratio'])} | "
                     f"{cell(r['unit'])} | {cell(r['note'])} |")
    return "\n".join(lines)


def update_results_md(payload, path):
    """Replace the table between the markers of RESULTS.md (the discussion around it is kept)."""
    text = open(path).read() if os.path.exists(path) else f"# Benchmark results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(head + BEGIN + "\n" + markdown(payload) + "\n" + END + tail)
    os.replace(tmp, path)
