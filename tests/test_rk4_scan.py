"""The lean `lax.scan` rk4 path equals the diffrax rk4 path (RK4 tableau + StepTo + MRPSwitch), step for step:
shortened last step, steps after the last save time, MRP shadow switches, zero-order-held pulses and time
functions. (Both paths are also checked against Basilisk's data in test_basilisk_*.py.)"""

import _seed
import jax
import jax.numpy as jnp
import numpy as np

import jaxhinge as jh
import jaxhinge._simulation._simulate as _sim
from jaxhinge._math import mrp_shadow


def _scenario():
    loads = jh.Loads(
        extTorquePntB_B=[0.5, -0.2, 0.1],
        pulses=jh.Pulses([0.03, 0.1], [0.07, 0.135], [[2.0, 0, 0], [0, 1.0, 0]], [[0, 0, 3.0], [0, 0, 0]],
                         [[0, 5.0, 0], [1.0, 0, 0]]),
        motorTorque_fn=lambda t: jnp.array([jnp.sin(20 * t), 0.3]),
    )
    # t_end off the dt grid (last step shortened) and off the save grid (one step after the last save)
    sim = jh.SimulationConfig(t_end=0.255, save_dt=0.05, integrator="rk4", dt=0.01)
    return _seed.damping(omega=(0.3, -0.2, 15.0), loads=loads, sim=sim)


def test_scan_path_equals_diffrax_path():
    sc = _scenario()
    assert _sim._save_blocks(sc.simulation) == (5, 5, 26)
    scan = jax.jit(lambda s: _sim._solve(s, None))(sc)
    ref = jax.jit(lambda s: _sim._solve_diffrax(s, None))(sc)
    assert int(scan.num_steps) == int(ref.stats["num_accepted_steps"]) == 26
    np.testing.assert_array_equal(np.asarray(scan.ts), np.asarray(ref.ts))
    sig = np.asarray(mrp_shadow(ref.ys.sigma_BN))
    assert np.any(np.abs(np.diff(np.sign(sig[:, 2]))) > 0)  # the run went through shadow switches
    for name in ("r_BN_N", "v_BN_N", "omega_BN_B", "theta", "thetaDot"):
        a, b = np.asarray(getattr(scan.ys, name)), np.asarray(getattr(ref.ys, name))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)), err_msg=name)
    np.testing.assert_allclose(np.asarray(scan.ys.sigma_BN), sig, rtol=0, atol=1e-12)


def test_off_grid_save_times_fall_back_to_diffrax():
    cfg = jh.SimulationConfig(t_end=0.1, save_dt=0.015, integrator="rk4", dt=0.01)
    assert _sim._save_blocks(cfg) is None
    assert _sim._save_blocks(jh.SimulationConfig(t_end=0.1, save_dt=0.005, integrator="rk4", dt=0.01)) is None
    assert _sim._save_blocks(jh.SimulationConfig(t_end=10.0, save_dt=0.01, integrator="rk4", dt=0.001)) == (
        1000, 10, 10000)


def test_output_times_between_steps_are_hermite_interpolated():
    """`simulate(ts=...)` with rk4 off the step grid: cubic Hermite inside a step (error O(h^4)) on top of rk4's
    own global error, against dopri8 at rtol 1e-13. Measured: at most 5e-11 (thetaDot; the stiff panel modes are
    the fastest motion), so the tolerance is 2e-10; linear interpolation between the same step states misses by
    1.4e-7 (O(h^2)), which the last check shows exceeds 1e-8. The spin (3 rad/s) takes the MRP through a shadow
    switch inside the span, so a step that switches is interpolated."""
    sim = jh.SimulationConfig(t_end=1.5, save_dt=0.01, integrator="rk4", dt=0.001)
    sc = _seed.damping(omega=(0.05, -0.02, 3.0), sim=sim)
    ts = np.sort(np.random.default_rng(3).uniform(0.0, 1.5, 40))
    a = jh.simulate(sc, ts=ts)
    ref = jh.simulate(sc.with_simulation(integrator="dopri8", rtol=1e-13, atol=1e-13), ts=ts)
    assert bool(a.success) and bool(ref.success)
    sig = np.asarray(ref.sigma_BN)
    assert np.any(np.abs(np.diff(np.sign(sig[:, 2]))) > 0)  # a shadow switch inside the sampled span
    for name in ("omega_BN_B", "sigma_BN", "theta", "thetaDot", "r_BN_N"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(ref, name))
        np.testing.assert_allclose(x, y, rtol=0, atol=2e-10 * max(1.0, np.max(np.abs(y))), err_msg=name)
    # linear interpolation between the step-grid states would miss the tolerance by orders of magnitude
    grid = jh.simulate(sc.with_simulation(save_dt=0.001))
    lin = np.interp(ts, np.asarray(grid.t), np.asarray(grid.theta)[:, 0])
    assert np.max(np.abs(lin - np.asarray(ref.theta)[:, 0])) > 1e-8
