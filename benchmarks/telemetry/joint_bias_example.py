"""Two 20 s maneuvers with gyro biases fitted jointly (issue 12's notebook case, as a script: too long for the suite).

    python benchmarks/telemetry/joint_bias_example.py

Record 1: the Basilisk record long_00 (3 panels, constant force and torque); record 2: jaxhinge's simulation of
the same spacecraft from another initial state. Both get the same gyro biases (3e-4, -2e-4, 1e-4 rad/s) and
noise (1e-5 rad/s, 1e-4 rad). Free: three k and two c shared, starting 30 % off, and each record's own three gyro
biases. Prints the fit, the truth and the errors in sigma.
"""

import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np

import jaxhinge as jh
from jaxhinge._model._params import current_value

HERE = os.path.dirname(os.path.abspath(__file__))
COLS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_p0", "theta_p1", "theta_p2"]
SIGMA = np.array([1e-5] * 3 + [1e-4] * 3)
BIAS = np.array([3e-4, -2e-4, 1e-4, 0.0, 0.0, 0.0])
FREE = ["p0.k", "p1.k", "p2.k", "p0.c", "p1.c"]


def main():
    truth_sc = jh.load_scenario(os.path.join(HERE, "long_00.toml"))
    rng = np.random.default_rng(0)
    t, y1 = jh.telemetry_columns(os.path.join(HERE, "long_00.npz"), truth_sc, COLS)
    sc2 = jh.apply_parameters(truth_sc, {"hub.omega_BN_BInit": [0.05, 0.02, -0.08], "p0.thetaInit": -0.2,
                                         "p2.thetaInit": 0.15})
    y2 = jh.telemetry_columns(jh.simulate(sc2), sc2, COLS)[1]
    ys = [y + BIAS + rng.normal(size=y.shape) * SIGMA for y in (y1, y2)]
    truth = {n: float(current_value(truth_sc, n)) for n in FREE}
    off = {n: truth[n] * (1.3 if j % 2 == 0 else 0.7) for j, n in enumerate(FREE)}
    guesses = [jh.apply_parameters(x, off) for x in (truth_sc, sc2)]
    tels = [jh.telemetry_from_arrays(t, y, COLS, SIGMA, g) for y, g in zip(ys, guesses)]
    t0 = time.perf_counter()
    res = jh.identify(guesses, tels, FREE + [f"{c}.bias" for c in COLS[:3]])
    print(f"{res.message}; {res.iterations} steps, chi2/dof {res.chi2_per_dof:.3f}, "
          f"{time.perf_counter() - t0:.1f} s (compilation included), load {os.getloadavg()[0]:.2f}")
    for n in res.names:
        val, sig = res.parameter(n)
        x = truth[n] if n in truth else float(BIAS[COLS.index(n.split(".")[1])])
        print(f"{n:28s} {val:14.8g} +- {sig:.3g}   truth {x:14.8g}   ({(val - x) / sig:+.2f} sigma)")
    return 0 if res.converged else 1


if __name__ == "__main__":
    sys.exit(main())
