"""The lean `lax.scan` rk4 path equals the diffrax rk4 path (RK4 tableau + StepTo + MRPSwitch), step for step:
shortened last step, steps after the last save time, MRP shadow switches, zero-order-held pulses and time
functions. (Both paths are also checked against Basilisk's data in test_basilisk_*.py.)"""

import _seed
import jax
import jax.numpy as jnp
import numpy as np

import jaxhinge as jh
import jaxhinge._simulate as _sim
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
