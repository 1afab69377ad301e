"""Long-record telemetry identification study (issue 12): 20 s Basilisk records, defaults only.

    python benchmarks/bench_telemetry.py [--configs 0 1 ...] [--integrator rk4|dopri8] [--off 0.3]

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
from jaxhinge._io._telemetry import output_names
from jaxhinge._model._params import current_value

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "telemetry")
FREE = ["p0.k", "p1.k", "p2.k", "p0.c", "p1.c"]
SIGMA = {"omega": 1e-5, "theta": 1e-4}


def case(i, off, integrator, seed=0):
    sc = jh.load_scenario(os.path.join(HERE, f"long_{i:02d}.toml"))
    names = [p for p in output_names(sc) if p.startswith("theta_")]
    cols = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3"] + names
    sigma = np.array([SIGMA["omega"]] * 3 + [SIGMA["theta"]] * len(names))
    t, v = jh.telemetry_columns(os.path.join(HERE, f"long_{i:02d}.npz"), sc, cols)
    rng = np.random.default_rng(1000 * i + seed)
    tel = jh.telemetry_from_arrays(t, v + rng.normal(size=v.shape) * sigma, cols, sigma, sc)
    truth = {n: float(current_value(sc, n)) for n in FREE}
    signs = [1, -1, 1, -1, 1]
    guess = jh.apply_parameters(sc, {n: truth[n] * (1 + s * off) for n, s in zip(FREE, signs)})
    if integrator != "rk4":
        guess = guess.with_simulation(integrator=integrator)
    return guess, tel, truth


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", type=int, nargs="*", default=[0])
    ap.add_argument("--integrator", default="rk4")
    ap.add_argument("--off", type=float, default=0.3)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for i in a.configs:
        guess, tel, truth = case(i, a.off, a.integrator)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = jh.identify(guess, tel, FREE, progress=None if a.quiet else (lambda s: print("  ", s, flush=True)))
        wall = time.perf_counter() - t0
        err = {n: (res.parameter(n)[0] - truth[n]) / truth[n] for n in FREE}
        zs = {n: (res.parameter(n)[0] - truth[n]) / res.parameter(n)[1] for n in FREE}
        ok = (res.converged and all(abs(err[n]) <= (0.01 if n.endswith(".k") else 0.10) for n in FREE)
              and all(abs(z) <= 3 for z in zs.values()))
        row = {"config": i, "integrator": a.integrator, "off": a.off, "converged": bool(res.converged),
               "steps": int(res.iterations), "chi2_per_dof": float(res.chi2_per_dof), "wall_s": wall,
               "load1": load, "error_pct": {n: 100 * e for n, e in err.items()},
               "error_sigma": zs, "pass": bool(ok), "message": res.message}
        rows.append(row)
        print(f"config {i:2d} {a.integrator}: {'PASS' if ok else 'FAIL'} converged={res.converged} steps={res.iterations} "
              f"chi2/dof={res.chi2_per_dof:.3g} wall={wall:.1f}s load={load:.2f} | err% "
              + " ".join(f"{n}={100 * err[n]:+.3f}" for n in FREE) + " | z " + " ".join(f"{zs[n]:+.2f}" for n in FREE),
              flush=True)
    out = os.path.join(HERE, f"results_{a.integrator}.json")
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{sum(r['pass'] for r in rows)}/{len(rows)} pass; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
