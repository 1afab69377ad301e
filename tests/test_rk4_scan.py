"""The fixed-step rk4 integrator (the `lax.scan` path, the only one) against a plain step-by-step loop: same
step grid, zero-order-held pulses and time functions, MRP shadow switch after each step. (It is also checked
against Basilisk's data in test_basilisk_*.py.) `SimulationConfig` refuses save times off the step grid."""

import os

import _seed
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
import jaxhinge._simulation._simulate as _sim
from jaxhinge._dynamics._backsub import state_derivative_held
from jaxhinge._math import mrp_shadow
from jaxhinge._errors import ConfigError


def _scenario():
    loads = jh.Loads(
        extTorquePntB_B=[0.5, -0.2, 0.1],
        pulses=jh.Pulses([0.03, 0.1], [0.07, 0.135], [[2.0, 0, 0], [0, 1.0, 0]], [[0, 0, 3.0], [0, 0, 0]],
                         [[0, 5.0, 0], [1.0, 0, 0]]),
        motorTorque_fn=lambda t: jnp.array([jnp.sin(20 * t), 0.3]),
    )
    sim = jh.SimulationConfig(t_end=0.25, save_dt=0.05, integrator="rk4", dt=0.01)
    return _seed.damping(omega=(0.3, -0.2, 15.0), loads=loads, sim=sim)


def test_scan_path_equals_a_plain_step_loop():
    """Each step: k1..k4 with the loads of the step's start time, y + h(k1 + 2k2 + 2k3 + k4)/6, then the shadow
    switch; written as a Python loop over steps (NumPy state), sharing only the vector field."""
    sc = _scenario()
    assert _sim._save_blocks(sc.simulation) == (5, 5, 25)
    scan = jax.jit(lambda s: _sim._solve(s, None))(sc)
    f = eqx.filter_jit(lambda y, t: state_derivative_held(sc.spacecraft, y, *sc.loads.at(t)))
    y = jh.initial_state(sc.spacecraft, sc.initial)
    h, want = 0.01, [y]
    add = lambda a, b, c: jax.tree.map(lambda x, z: x + c * z, a, b)
    for j in range(25):
        t0 = jnp.asarray(j * h)  # an array: one compiled vector field for every step
        k1 = f(y, t0)
        k2 = f(add(y, k1, h / 2), t0)
        k3 = f(add(y, k2, h / 2), t0)
        k4 = f(add(y, k3, h), t0)
        y = jax.tree.map(lambda x, a, b, c, d: x + h * (a / 6 + b / 3 + c / 3 + d / 6), y, k1, k2, k3, k4)
        y = eqx.tree_at(lambda s: s.sigma_BN, y, mrp_shadow(y.sigma_BN))
        if (j + 1) % 5 == 0:
            want.append(y)
    assert int(scan.num_steps) == 25
    np.testing.assert_allclose(np.asarray(scan.ts), np.arange(6) * 0.05, rtol=0, atol=1e-15)
    sig = np.stack([np.asarray(w.sigma_BN) for w in want])
    assert np.any(np.abs(np.diff(np.sign(sig[:, 2]))) > 0)  # the run went through shadow switches
    for name in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B", "theta", "thetaDot"):
        a, b = np.asarray(getattr(scan.ys, name)), np.stack([np.asarray(getattr(w, name)) for w in want])
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)), err_msg=name)


@pytest.mark.parametrize("kw, field", [(dict(save_dt=0.015), "simulation.save_dt"),
                                       (dict(save_dt=0.005), "simulation.save_dt"),
                                       (dict(t_end=0.255), "simulation.t_end")])
def test_save_times_off_the_step_grid_are_refused(kw, field):
    cfg = dict(t_end=0.1, save_dt=0.02, integrator="rk4", dt=0.01) | kw
    with pytest.raises(ConfigError, match=rf"^{field} = .*must be a whole multiple of dt = 0.01") as e:
        jh.SimulationConfig(**cfg)
    assert e.value.field == field
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
    # linear interpolation between the step-grid states would miss the tolerance by orders of magnitude (the
    # states at the steps before and after each sample time: output times on the step grid are the steps'
    # own states, from the same compiled program)
    lo_t = np.floor(ts / sim.dt) * sim.dt
    lo, hi = (np.asarray(jh.simulate(sc, ts=x).theta)[:, 0] for x in (lo_t, lo_t + sim.dt))
    lin = lo + (hi - lo) * (ts - lo_t) / sim.dt
    assert np.max(np.abs(lin - np.asarray(ref.theta)[:, 0])) > 1e-8


def test_settings_beyond_t_end_name_the_setting_with_plain_numbers():
    """dt > t_end names dt (not save_dt, issue 14 item 14); save_dt > t_end is refused (item 5: it used to save
    only t = 0); NumPy scalars print as numbers, not `np.float64(...)`."""
    with pytest.raises(ConfigError) as e:
        jh.SimulationConfig(t_end=np.float64(0.5), save_dt=np.float64(0.05), integrator="rk4", dt=np.float64(1.0))
    assert str(e.value).startswith("simulation.dt = 1.0: must be <= t_end = 0.5 s") and e.value.field == "simulation.dt"
    with pytest.raises(ConfigError) as e:
        jh.SimulationConfig(t_end=0.5, save_dt=np.float64(0.75), integrator="tsit5")
    assert str(e.value).startswith("simulation.save_dt = 0.75: must be <= t_end = 0.5 s")
    assert "np.float64" not in str(e.value)


def test_integration_loop_compiles_into_one_function():
    """With `jaxhinge.configure_cpu`'s options (set by the suite's conftest, as by the CLI) XLA:CPU compiles the rk4
    loop of one trajectory, singles and chains (no LAPACK call in the chain solve), into one function (its
    `xla_cpu_small_call` marker in the compiled program); a batch of 64 members keeps XLA's kernels. With XLA's
    defaults (JAXHINGE_TEST_XLA_DEFAULTS=1) no loop is compiled that way. The results do not depend on it: every
    Basilisk comparison of the suite runs under the same options."""
    hoisted = not os.environ.get("JAXHINGE_TEST_XLA_DEFAULTS")

    def one_function(fn, *args):
        return "xla_cpu_small_call" in jax.jit(fn).lower(*args).compile().as_text()

    for name in ("two_panel", "folding_wing"):
        sc = jh.load_scenario(jh.example_path(name)).with_simulation(t_end=0.1, dt=1e-3, save_dt=0.01,
                                                                      integrator="rk4")
        assert one_function(jh.simulate_unjitted, sc) == hoisted, name
    batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (64,) + jnp.shape(x)), sc)
    assert not one_function(jax.vmap(jh.simulate_unjitted), batch)
