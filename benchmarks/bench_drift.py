"""(f) Adaptive vs fixed step: steps needed for 1e-10 relative energy drift (undamped seed scenario, 10 s).

rk4: the largest dt (ladder 0.5 s down to 1 ms) whose max |E(t) - E(0)|/|E(0)| <= 1e-10 over the run, E =
totOrbEnergy + totRotEnergy; tsit5 / dopri8: the loosest rtol (atol = 1e-3 rtol) reaching it, and its accepted
steps. Each setting is its own compiled program (simulation settings are static)."""

import numpy as np

import jaxhinge as jh
from _common import print_table, quick_flag, row, seed_scenario

TARGET = 1e-10


def drift(sc):
    tr = jh.simulate(sc)
    e = np.asarray(tr.totOrbEnergy) + np.asarray(tr.totRotEnergy)
    return float(np.max(np.abs(e - e[0])) / abs(e[0])), int(tr.num_steps), bool(tr.success)


def run(quick=False):
    t_end = 2.0 if quick else 10.0
    out, rows = {}, []
    ladder = [0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001]
    for dt in ladder:
        d, n, ok = drift(seed_scenario(t_end=t_end, dt=dt, save_dt=0.02 if dt <= 0.02 else dt))
        out.setdefault("rk4", []).append({"dt": dt, "drift": d, "steps": n})
        if d <= TARGET:
            break
    for integ in ("tsit5", "dopri8"):
        for rtol in [1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12]:
            sc = seed_scenario(t_end=t_end, save_dt=0.02).with_simulation(
                integrator=integ, rtol=rtol, atol=1e-3 * rtol, dt=1e-3)
            d, n, ok = drift(sc)
            out.setdefault(integ, []).append({"rtol": rtol, "drift": d, "steps": n, "success": ok})
            if d <= TARGET:
                break
    for name, runs in out.items():
        best = runs[-1]
        setting = f"dt={best['dt']:g}" if name == "rk4" else f"rtol={best['rtol']:g}"
        met = best["drift"] <= TARGET
        rows.append(row(f"(f) {name}: steps for drift <= 1e-10 over {t_end:g} s", best["steps"], None, "step",
                        f"{setting}, drift {best['drift']:.1e}{'' if met else ' (target not reached)'}"))
    return rows, out


if __name__ == "__main__":
    print_table(run(quick_flag())[0], "energy drift")
