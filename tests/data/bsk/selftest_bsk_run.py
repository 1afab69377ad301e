"""Self-tests of tests/data/bsk/bsk_run.py (needs `pip install bsk`): load handling and pulse edges.

    python tests/data/bsk/selftest_bsk_run.py

1. Splitting the run at the edges of an all-zero pulse changes nothing (bit for bit).
2. A constant `extForce_N` moves the system CoM as r_C(t) = r0 + v0 t + F t^2 / (2 m) (no gravity), whatever
   the panels and the attitude do: `extForce_N` really is applied, in the N frame.
3. An `extForce_N` pulse on [t_a, t_b) changes v_C by F (t_b - t_a) / m, starting exactly at t_a:
   pulse edges fall where the file says and loads are held over whole RK4 steps.
4. A pulse that repeats a constant load (constant F + pulse F over the whole run) equals a constant 2F.
"""

import copy
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ next to the data
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bsk_run
import make_references


def main():
    _, base = make_references.seed_cases()["seed_noGravity"]
    base = copy.deepcopy(base)
    base["simulation"].update(t_end=2.0, save_dt=0.01, dt=0.001)
    m = base["hub"]["mHub"] + sum(p["mass"] for p in base["panels"])
    fails = 0

    def report(name, ok, detail):
        nonlocal fails
        fails += not ok
        print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")

    # 1
    a = copy.deepcopy(base)
    a["loads"] = {"extForce_B": [0.3, -0.2, 0.5], "extTorquePntB_B": [0.1, 0.2, -0.3]}
    b = copy.deepcopy(a)
    b["loads"]["pulses"] = [{"t_start": 0.5, "t_end": 1.234, "extForce_B": [0.0, 0.0, 0.0]}]
    ra, rb = bsk_run.run(a), bsk_run.run(b)
    same = all(np.array_equal(ra[k], rb[k]) for k in bsk_run.OUTPUT_KEYS if k != "wall_s")
    report("zero pulse splits the run without effect", same, "bitwise equal" if same else "differs")

    # 2
    F = np.array([1.0, -2.0, 3.0])
    c = copy.deepcopy(base)
    c["loads"] = {"extForce_N": F.tolist()}
    rc = bsk_run.run(c)
    t = rc["t"][:, None]
    r0, v0 = np.array(c["hub"]["r_CN_NInit"]), np.array(c["hub"]["v_CN_NInit"])
    err = np.abs(rc["r_CN_N"] - (r0 + v0 * t + 0.5 * F / m * t**2)).max()
    report("constant extForce_N: CoM parabola", err < 1e-12, f"max |r_C - exact| = {err:.1e} m")

    # 3
    ta, tb = 0.503, 1.207
    e = copy.deepcopy(base)
    e["loads"] = {"pulses": [{"t_start": ta, "t_end": tb, "extForce_N": F.tolist()}]}
    re_ = bsk_run.run(e)
    t = re_["t"]
    tau = np.clip(t, ta, tb) - ta  # time under force up to t
    v_exact = v0 + np.outer(tau, F / m)
    r_exact = (
        r0
        + np.outer(t, v0)
        + np.outer(
            np.where(
                t < ta, 0.0, np.where(t < tb, 0.5 * tau**2, 0.5 * (tb - ta) ** 2 + (tb - ta) * (t - tb))
            ),
            F / m,
        )
    )
    ev, er = np.abs(re_["v_CN_N"] - v_exact).max(), np.abs(re_["r_CN_N"] - r_exact).max()
    report(
        "extForce_N pulse on [0.503, 1.207)",
        ev < 1e-13 and er < 1e-12,
        f"max |v_C - exact| {ev:.1e}, |r_C - exact| {er:.1e}",
    )

    # 4
    g = copy.deepcopy(base)
    g["loads"] = {
        "extForce_B": [0.3, -0.2, 0.5],
        "pulses": [{"t_start": 0.0, "t_end": 2.0, "extForce_B": [0.3, -0.2, 0.5]}],
    }
    h = copy.deepcopy(base)
    h["loads"] = {"extForce_B": [0.6, -0.4, 1.0]}
    rg, rh = bsk_run.run(g), bsk_run.run(h)
    same = all(np.array_equal(rg[k], rh[k]) for k in bsk_run.OUTPUT_KEYS if k != "wall_s")
    report("constant + whole-run pulse == doubled constant", same, "bitwise equal" if same else "differs")

    print("all self-tests passed" if not fails else f"{fails} self-test(s) FAILED")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
