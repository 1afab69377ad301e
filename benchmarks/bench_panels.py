"""(e) Cost vs number of panels N = 1..64: the back-substitution vector field (`jaxhinge.accelerations`)
against the full (6+N) mass-matrix model (`_kane.accelerations`: M and the right-hand side by
autodiff, then `jnp.linalg.solve`), per vector-field evaluation and per rk4 step (same RK4 harness)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxhinge as jh
from _common import print_table, quick_flag, row, timeit

import _kane  # noqa: E402  (tests/_kane.py, on sys.path through _common)

EVALS = 200  # evaluations / steps per timed call (amortises the call overhead)


def spacecraft(n, seed=0):
    rng = np.random.default_rng(seed)
    ang = 2 * np.pi * np.arange(n) / n
    r_HB = np.stack([np.cos(ang), np.sin(ang), rng.uniform(-0.5, 0.5, n)], 1)
    dcm = []
    for a in ang:  # hinge axis tangential, panel pointing outwards
        c, s = np.cos(a), np.sin(a)
        dcm.append(np.array([[-c, -s, 0.0], [0.0, 0.0, 1.0], [-s, c, 0.0]]))
        dcm[-1][2] = np.cross(dcm[-1][0], dcm[-1][1])
    panels = jh.Panels(
        mass=rng.uniform(5, 20, n),
        IPntS_S=[np.diag(rng.uniform([5, 2, 2], [10, 4, 4])) for _ in range(n)],
        d=rng.uniform(0.5, 1.5, n),
        k=rng.uniform(50, 150, n),
        c=rng.uniform(0, 2, n),
        thetaRef=np.zeros(n),
        thetaDotRef=np.zeros(n),
        motorTorque=np.zeros(n),
        names=tuple(f"p{i}" for i in range(n)),
        r_HB_B=r_HB,
        dcm_HB=np.array(dcm),
    )
    hub = jh.Hub(750.0, np.diag([900.0, 800.0, 600.0]), [0.0, 0.0, 0.1])
    sc = jh.Spacecraft(hub, panels, None)
    init = jh.InitialState([0.0, 0, 0], [0.0, 0, 0], [0.1, 0.2, -0.1], [0.05, -0.02, 0.03],
                           rng.uniform(-0.1, 0.1, n), np.zeros(n))
    return sc, jh.initial_state(sc, init)


def _deriv(acc, sc, y):
    z3 = jnp.zeros(3)
    rdd, wd, thdd = acc(sc, y, z3, z3, z3, 0.0)
    s = y.sigma_BN
    B = (1 - s @ s) * jnp.eye(3) + 2 * jh._math.tilde(s) + 2 * jnp.outer(s, s)
    return jh.State(y.v_BN_N, rdd, 0.25 * B @ y.omega_BN_B, wd, y.thetaDot, thdd)


def _evals(acc):
    def f(sc, y):
        def body(i, y):
            d = _deriv(acc, sc, y)
            return jax.tree.map(lambda a, b: a + 1e-9 * b, y, d)

        return jax.lax.fori_loop(0, EVALS, body, y)

    return jax.jit(f)


def _steps(acc, h=1e-3):
    def f(sc, y):
        def step(y, _):
            k1 = _deriv(acc, sc, y)
            k2 = _deriv(acc, sc, jax.tree.map(lambda a, b: a + 0.5 * h * b, y, k1))
            k3 = _deriv(acc, sc, jax.tree.map(lambda a, b: a + 0.5 * h * b, y, k2))
            k4 = _deriv(acc, sc, jax.tree.map(lambda a, b: a + h * b, y, k3))
            return jax.tree.map(lambda a, b, c, d, e: a + h / 6 * (b + 2 * c + 2 * d + e), y, k1, k2, k3, k4), None

        return jax.lax.scan(step, y, None, length=EVALS)[0]

    return jax.jit(f)


def run(quick=False):
    ns = [1, 4, 16, 64] if quick else [1, 2, 4, 8, 16, 32, 64]
    rows, table = [], []
    for n in ns:
        sc, y = spacecraft(n)
        a1 = jh.accelerations(sc, y, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), 0.0)
        a2 = _kane.accelerations(sc, y, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), 0.0)
        err = max(float(jnp.max(jnp.abs(u - v))) for u, v in zip(a1, a2))
        res = {"N": n, "max_abs_diff": err}
        for name, acc in (("backsub", jh.accelerations), ("massmatrix", _kane.accelerations)):
            fe, fs = _evals(acc), _steps(acc)
            jax.block_until_ready(fe(sc, y))
            jax.block_until_ready(fs(sc, y))
            res[name + "_eval_us"] = timeit(lambda: fe(sc, y), repeats=5) / EVALS * 1e6
            res[name + "_step_us"] = timeit(lambda: fs(sc, y), repeats=5) / EVALS * 1e6
        table.append(res)
        rows.append(row(f"(e) N={n:2d} per rk4 step (mass-matrix / back-sub = ratio)", res["backsub_step_us"],
                        res["massmatrix_step_us"], "us",
                        f"per eval {res['backsub_eval_us']:.2f} vs {res['massmatrix_eval_us']:.2f} us; "
                        f"max abs diff {err:.1e}"))
    b = np.array([t["backsub_step_us"] for t in table])
    nn = np.array(ns, float)
    slope, icpt = np.polyfit(nn, b, 1)
    rows.append(row("(e) back-sub step cost fit a + b N: b [us/panel]", slope, None, "us", f"a = {icpt:.2f} us"))
    return rows, table


if __name__ == "__main__":
    print_table(run(quick_flag())[0], "panels")
