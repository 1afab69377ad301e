"""Long-record telemetry identification study (issue 12): 20 s Basilisk records, defaults only.

    python benchmarks/bench_telemetry.py [--configs 0 1 ...] [--integrator rk4|dopri8] [--off 0.3] [--seeds N]

Rows (t) of run_all.py run every configuration once with rk4 (`run`).

Per configuration (benchmarks/telemetry/long_XX.{toml,npz}, made by make_long_records.py): the Basilisk
record of omega_BN_B_1..3 and theta_p0..p2 (201 samples over 20 s) plus seeded Gaussian noise (gyro 1e-5 rad/s,
hinge angles 1e-4 rad); free = three k and two c, starting `--off` away from the truth (alternating signs);
`jh.identify` with its defaults. Prints one line per fit (steps, chi2/dof, errors in %, errors in sigma, wall)
and writes benchmarks/telemetry/results_<integrator>.json. `uptime` load is recorded (the machine is shared).
"""

import argparse
import json
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np

import jaxhinge as jh
from jaxhinge._model._params import current_value
from jaxhinge._model._telemetry import output_names

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "telemetry")
FREE = ["p0.k", "p1.k", "p2.k", "p0.c", "p1.c"]  # 3 single panels; with a chain: every k and two c
SIGMA = {"omega": 1e-5, "theta": 1e-4}
CONFIGS = sorted(int(f[5:7]) for f in os.listdir(HERE) if f.startswith("long_") and f.endswith(".toml"))


def case(i, off, integrator, seed=0):
    sc = jh.load_scenario(os.path.join(HERE, f"long_{i:02d}.toml"))
    names = [p for p in output_names(sc) if p.startswith("theta_")]
    cols = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3"] + names
    sigma = np.array([SIGMA["omega"]] * 3 + [SIGMA["theta"]] * len(names))
    t, v = jh.telemetry_columns(os.path.join(HERE, f"long_{i:02d}.npz"), sc, cols)
    rng = np.random.default_rng(1000 * i + seed)
    tel = jh.telemetry_from_arrays(t, v + rng.normal(size=v.shape) * sigma, cols, sigma, sc)
    labels = sc.spacecraft.panels.labels
    free = FREE if len(labels) == 3 else [f"{p}.k" for p in labels] + [f"{p}.c" for p in labels[:2]]
    truth = {n: float(current_value(sc, n)) for n in free}
    guess = jh.apply_parameters(sc, {n: truth[n] * (1 + (-1) ** j * off) for j, n in enumerate(free)})
    if integrator != "rk4":
        guess = guess.with_simulation(integrator=integrator)
    return guess, tel, truth, free


def study(configs, integrator="rk4", off=0.3, seeds=1, quiet=False):
    """One fit per (configuration, noise seed); **returns** one dict per fit and prints one line each."""
    rows = []
    for i, seed in [(i, k) for i in configs for k in range(seeds)]:
        guess, tel, truth, free = case(i, off, integrator, seed)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = jh.identify(guess, tel, free, progress=None if quiet else (lambda s: print("  ", s, flush=True)))
        wall = time.perf_counter() - t0
        err = {n: (res.parameter(n)[0] - truth[n]) / truth[n] for n in free}
        zs = {n: (res.parameter(n)[0] - truth[n]) / res.parameter(n)[1] for n in free}
        ok = (res.converged and all(abs(err[n]) <= (0.01 if n.endswith(".k") else 0.10) for n in free)
              and all(abs(z) <= 3 for z in zs.values()))
        row = {"config": i, "seed": seed, "integrator": integrator, "off": off, "converged": bool(res.converged),
               "steps": int(res.iterations), "chi2_per_dof": float(res.chi2_per_dof), "wall_s": wall,
               "load1": load, "error_pct": {n: 100 * e for n, e in err.items()},
               "error_sigma": zs, "pass": bool(ok), "message": res.message}
        rows.append(row)
        print(f"config {i:2d} {integrator}: {'PASS' if ok else 'FAIL'} converged={res.converged} steps={res.iterations} "
              f"chi2/dof={res.chi2_per_dof:.3g} wall={wall:.1f}s load={load:.2f} | err% "
              + " ".join(f"{n}={100 * err[n]:+.3f}" for n in free) + " | z " + " ".join(f"{zs[n]:+.2f}" for n in free),
              flush=True)
    return rows


def coverage(rows):
    """Fractions of the truths inside 1 and 2 sigma over every fitted parameter of `rows`."""
    z = np.array([v for r in rows for v in r["error_sigma"].values()])
    return float(np.mean(np.abs(z) <= 1)), float(np.mean(np.abs(z) <= 2)), int(z.size)


def run(quick=False):
    """(t) rows for run_all.py: every configuration once with rk4 and the defaults (`--quick`: configuration 0);
    **returns** (rows, the per-fit results)."""
    from _common import row

    fits = study([0] if quick else CONFIGS, quiet=True)
    walls = [r["wall_s"] for r in fits]
    steps = [r["steps"] for r in fits]
    one, two, n = coverage(fits)
    return [
        row(f"(t) telemetry fits passed, rk4, starts 30 % off ({len(fits)} records of 20 s)",
            sum(r["pass"] for r in fits), None, "fit", "converged, k within 1 %, c within 10 %, truth within 3 sigma"),
        row("(t) wall per telemetry fit, median", float(np.median(walls)), None, "s",
            f"max {max(walls):.1f} s (first fit of a structure: compilation included); steps {min(steps)}-{max(steps)}"),
        row("(t) truths inside 1 sigma", one, None, "-", f"{n} fitted parameters; 0.683 expected; inside 2 sigma {two:.3f}"),
    ], fits


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", type=int, nargs="*", default=[0])
    ap.add_argument("--integrator", default="rk4")
    ap.add_argument("--off", type=float, default=0.3)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--seeds", type=int, default=1, help="noise realisations per configuration (coverage study)")
    a = ap.parse_args(argv)
    rows = study(a.configs, a.integrator, a.off, a.seeds, a.quiet)
    one, two, _ = coverage(rows)
    print(f"coverage: {one:.3f} of {sum(len(r['error_sigma']) for r in rows)} truths inside 1 sigma (0.683 expected), "
          f"{two:.3f} inside 2 sigma (0.954); wall per fit median "
          f"{np.median([r['wall_s'] for r in rows]):.1f} s, max {max(r['wall_s'] for r in rows):.1f} s")
    out = os.path.join(HERE, f"results_{a.integrator}{'_coverage' if a.seeds > 1 else ''}.json")
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{sum(r['pass'] for r in rows)}/{len(rows)} pass; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
