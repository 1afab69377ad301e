"""(k) Attitude control in the loop: the wheeled spacecraft of `tests/data/bsk/control_wheels.toml` (hub, four
panels in two singles and a dualHinged chain, four wheels) with Basilisk's inertial3D / attTrackingError /
mrpFeedback / rwMotorTorque every 0.1 s from 30 degrees off, rk4 at 1 ms.

- per rk4 step, closed loop against the same run open loop (both jaxhinge, same process: what the flight
  software's calls, the held command and the sample test cost);
- one 10 s closed-loop trajectory against Basilisk running the same modules (its flight-software task in the
  same process);
- a 1024-member closed-loop batch with the gains K, P and every hinge's k and c dispersed (one compiled program,
  `jh.simulate_batch`): per member against one Basilisk run.
"""

import dataclasses
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _common import basilisk_time, compile_time, print_table, quick_flag, row, timeit

import jaxhinge as jh

SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "bsk", "control_wheels.toml")


def scenario(t_end):
    sc = jh.load_scenario(SCENARIO)
    return sc.with_simulation(t_end=t_end)


def dispersions(sc, members, seed=0):
    """K, P within +-30 %, every hinge's k within +-20 % and c within [0.5, 1.5] x nominal."""
    rng = np.random.default_rng(seed)
    out = {"control.K": float(sc.control.K) * rng.uniform(0.7, 1.3, members),
           "control.P": float(sc.control.P) * rng.uniform(0.7, 1.3, members)}
    for i, p in enumerate(sc.spacecraft.panels.labels):
        out[f"{p}.k"] = float(sc.spacecraft.panels.k[i]) * rng.uniform(0.8, 1.2, members)
        out[f"{p}.c"] = float(sc.spacecraft.panels.c[i]) * rng.uniform(0.5, 1.5, members)
    return out


def _sim(sc):
    return jh.simulate_unjitted(sc)


def run(quick=False, members=1024):
    t_end = 2.0 if quick else 10.0
    members = min(members, 256) if quick else members
    n = round(t_end / 1e-3)
    closed = scenario(t_end)
    opened = dataclasses.replace(closed, control=None)
    reps = 3 if quick else 10
    _, tc_closed, f = compile_time(jax.tree_util.Partial(_sim), closed)
    _, tc_open, g = compile_time(jax.tree_util.Partial(_sim), opened)
    t_closed, t_open = timeit(lambda: f(closed), repeats=reps), timeit(lambda: g(opened), repeats=reps)
    tb, setup = basilisk_time(closed, repeats=2 if quick else 5)
    params = dispersions(closed, members)
    batch = {k: jnp.asarray(v) for k, v in params.items()}
    jh.simulate_batch(closed, batch, chunk_size=members)  # compile
    tr = None

    def once():
        nonlocal tr
        tr = jh.simulate_batch(closed, batch, chunk_size=members)
        return tr.theta

    t_batch = timeit(once, repeats=2 if quick else 3)
    ok = int(np.sum(np.asarray(tr.success)))
    note = "Basilisk not importable" if tb is None else f"Basilisk setup+init {setup:.3f} s not included"
    return [
        row("(k) closed loop per rk4 step, wheels driven by mrpFeedback every 0.1 s (reference: open loop)",
            t_closed / n * 1e6, t_open / n * 1e6, "us", f"compile {tc_closed:.2f} s closed, {tc_open:.2f} s open; "
            "ratio = open / closed"),
        row(f"(k) closed-loop trajectory {t_end:g} s rk4 dt=1 ms (Basilisk: the same FSW modules)", t_closed, tb, "s",
            note),
        row(f"(k) {members} closed-loop members, K, P, k, c dispersed, {t_end:g} s: per member", t_batch / members,
            tb, "s", f"batch total {t_batch:.2f} s, {ok}/{members} success; "
            f"{t_batch / members / n * 1e6:.3f} us per member-step"),
    ]


if __name__ == "__main__":
    print_table(run(quick_flag(sys.argv[1:])), "closed loop")
