"""simulate: gradients vs finite differences and forward == reverse mode, vmap vs loop, no recompilation, adaptive vs converged
reference, load semantics."""

import _seed
import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
import jaxhinge._simulation._simulate as _sim
from jaxhinge._simulation import _memory, _trajectory

SHORT = jh.SimulationConfig(t_end=0.5, save_dt=0.05, integrator="rk4", dt=0.01)


def _base():
    # 3D, damped, with thetaRef, motor torque and loads so every parameter matters
    sc = _seed.damping(sim=SHORT, loads=jh.Loads(extForce_B=[0.3, -0.2, 0.5], extTorquePntB_B=[0.1, 0.2, -0.1]))
    sc = eqx.tree_at(lambda s: s.spacecraft.panels.thetaRef, sc, jnp.array([0.02, -0.03]))
    return eqx.tree_at(lambda s: s.spacecraft.panels.motorTorque, sc, jnp.array([0.5, -0.2]))


PARAMS = {
    "k": lambda s: s.spacecraft.panels.k,
    "c": lambda s: s.spacecraft.panels.c,
    "mass": lambda s: s.spacecraft.panels.mass,
    "IPntS_S": lambda s: s.spacecraft.panels.IPntS_S,
    "mHub": lambda s: s.spacecraft.hub.mHub,
    "IHubPntBc_B": lambda s: s.spacecraft.hub.IHubPntBc_B,
    "omega_BN_BInit": lambda s: s.initial.omega_BN_BInit,
    "thetaInit": lambda s: s.initial.thetaInit,
    "thetaDotInit": lambda s: s.initial.thetaDotInit,
    "r_CN_NInit": lambda s: s.initial.r_CN_NInit,
}


def _loss(traj):
    # touches translation, attitude, rates and hinge states over the whole trajectory
    return (
        jnp.sum(traj.theta**2)
        + jnp.sum(traj.omega_BN_B * jnp.array([1.0, -2.0, 3.0]))
        + jnp.sum(traj.sigma_BN[-1])
        + 0.1 * jnp.sum(traj.r_BN_N[-1])
    )


def test_gradient_matches_central_differences():
    """Reverse-mode gradient of a trajectory loss w.r.t. every parameter group at once vs central FD, and the
    forward-mode Jacobian equal to it."""
    base = _base()
    names = sorted(PARAMS)
    p0 = {n: jnp.asarray(PARAMS[n](base)) for n in names}

    def build(p):
        return eqx.tree_at(lambda s: [PARAMS[n](s) for n in names], base, [p[n] for n in names])

    @jax.jit
    def f(p):
        return _loss(jh.simulate(build(p)))

    g = jax.jit(jax.grad(f))(p0)
    # forward mode (what the least-squares fits use) equals reverse mode to round-off
    jf = jax.jit(jax.jacfwd(lambda p: _loss(jh.simulate(build(p), adjoint=diffrax.ForwardMode()))))(p0)
    for n in names:
        np.testing.assert_allclose(jf[n], g[n], rtol=1e-10, atol=1e-13 * np.abs(g[n]).max(), err_msg=n)
    for n in names:
        flat = np.asarray(p0[n]).ravel()
        # one step per parameter group, relative to its magnitude: truncation O(h^2) ~ 1e-8 relative,
        # round-off O(eps |f| / h) ~ 1e-12
        h = 1e-4 * max(np.abs(flat).max(), 1.0)
        fd = np.zeros_like(flat)
        for i in range(flat.size):
            e = np.zeros_like(flat)
            e[i] = h
            plus = dict(p0, **{n: jnp.asarray((flat + e).reshape(p0[n].shape))})
            minus = dict(p0, **{n: jnp.asarray((flat - e).reshape(p0[n].shape))})
            fd[i] = (f(plus) - f(minus)) / (2 * h)
        gn = np.asarray(g[n]).ravel()
        assert np.abs(gn).max() > 0, n
        np.testing.assert_allclose(gn, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max(), err_msg=n)


def test_gradient_keeping_every_step_equals_default(monkeypatch):
    """`RecursiveCheckpointAdjoint(checkpoints >= steps)`: reverse mode through rk4 keeps every step's stage inputs
    instead of recomputing each save interval. Same gradient (round-off) on the save grid and at given times; the
    program keeps more memory; fewer checkpoints than steps is the default program; the memory check counts it."""
    base = _base()
    n = round(SHORT.t_end / SHORT.dt)
    keep = diffrax.RecursiveCheckpointAdjoint(checkpoints=n)
    assert _sim.stores_steps(keep, SHORT) and not _sim.stores_steps(diffrax.RecursiveCheckpointAdjoint(n - 1), SHORT)
    assert not _sim.stores_steps(None, SHORT) and not _sim.stores_steps(diffrax.ForwardMode(), SHORT)
    p0 = {n_: jnp.asarray(PARAMS[n_](base)) for n_ in ("k", "c", "IHubPntBc_B", "thetaInit")}

    def loss(p, adjoint, ts):
        sc = eqx.tree_at(lambda s: [PARAMS[n_](s) for n_ in p0], base, [p[n_] for n_ in p0])
        traj = jh.simulate(sc, adjoint=adjoint, ts=ts)
        return jnp.sum(traj.theta**2) + jnp.sum(traj.omega_BN_B * jnp.array([1.0, -2.0, 3.0]))

    grads = {}
    for name, adjoint in (("default", None), ("keep", keep)):
        g = jax.jit(jax.grad(lambda p, a=adjoint: loss(p, a, None))).lower(p0).compile()
        grads[name], grads[name + "_temp"] = g(p0), g.memory_analysis().temp_size_in_bytes
    for k in p0:
        assert np.abs(grads["default"][k]).max() > 0, k
        np.testing.assert_allclose(grads["keep"][k], grads["default"][k], rtol=1e-12,
                                   atol=1e-14 * np.abs(grads["default"][k]).max(), err_msg=k)
    assert grads["keep_temp"] > grads["default_temp"], (grads["keep_temp"], grads["default_temp"])
    # outputs at given times take the same choice: one checkpoint fewer (the per-interval one) in the program
    ts = np.linspace(0.0, SHORT.t_end, 7)
    remats = [str(jax.make_jaxpr(lambda a=a: _sim.simulate_unjitted(base, a, ts))()).count("remat") for a in (None, keep)]
    assert remats[0] == remats[1] + 1 >= 2, remats
    # the default run fits in ~7 kB, keeping 50 steps needs ~32 kB more
    monkeypatch.setenv(_memory.MEMORY_ENV, "2e-5")
    jh.simulate(base)
    with pytest.raises(jh.ConfigError, match=r"adjoint\.checkpoints.*kept for reverse mode"):
        jh.simulate(base, adjoint=keep)


def _batch(base, ks, cs):
    return jax.vmap(lambda k, c: eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), base, (k, c)))(
        ks, cs
    )


@pytest.fixture
def traces(monkeypatch):
    """A list that grows by one each time `simulate` traces its program (a new compile)."""
    calls = []
    orig = _sim.simulate_unjitted

    def counting(*a, **kw):
        calls.append(1)
        return orig(*a, **kw)

    monkeypatch.setattr(_sim, "simulate_unjitted", counting)
    return calls


def test_vmap_equals_loop_and_no_recompile(traces):
    calls = traces
    base = _base()
    rng = np.random.default_rng(0)
    ks = jnp.asarray(rng.uniform(50, 500, (5, 2)))
    cs = jnp.asarray(rng.uniform(0, 20, (5, 2)))
    batched = jax.vmap(jh.simulate)(_batch(base, ks, cs))
    for i in range(5):
        one = jh.simulate(eqx.tree_at(lambda s: (s.spacecraft.panels.k, s.spacecraft.panels.c), base, (ks[i], cs[i])))
        for name in ("r_BN_N", "sigma_BN", "omega_BN_B", "theta", "thetaDot", "totRotEnergy"):
            a, b = np.asarray(getattr(batched, name)[i]), np.asarray(getattr(one, name))
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14 * np.abs(b).max(), err_msg=name)
    traced = len(calls)
    # new parameter values, same structure: no new trace
    jh.simulate(eqx.tree_at(lambda s: s.spacecraft.panels.k, base, ks[0] * 1.1))
    jax.vmap(jh.simulate)(_batch(base, ks * 0.9, cs))
    assert len(calls) == traced
    assert traced <= 2  # one trace for the single-run signature, one for the batched one


def test_adaptive_default_within_tolerance_of_converged_reference():
    """tsit5 at rtol 1e-10 vs dopri8 at rtol 1e-13 on the three-panel example (pulses, gravity, 3D)."""
    from jaxhinge import example_path

    sc = jh.load_scenario(example_path("spacecraft_three_panels.toml"))
    ref = jh.simulate(sc.with_simulation(integrator="dopri8", rtol=1e-13, atol=1e-15))
    run = jh.simulate(sc.with_simulation(integrator="tsit5", rtol=1e-10, atol=1e-12))
    assert bool(ref.success) and bool(run.success)
    # max |tsit5 - dopri8| / max |dopri8|: the global error of a 1e-10 local tolerance over a few hundred steps,
    # measured (2026-11-28, x86-64) theta 7.4e-10, omega_BN_B 1.0e-11, sigma_BN 2.5e-13; bounds ~10x
    for name, bound in (("theta", 1e-8), ("omega_BN_B", 1e-10), ("sigma_BN", 3e-12)):
        a, b = np.asarray(getattr(run, name)), np.asarray(getattr(ref, name))
        err = np.abs(a - b).max() / np.abs(b).max()
        assert err < bound, (name, err)


def test_time_function_loads_equal_constant_and_pulse_loads():
    base = _seed.damping(sim=SHORT)
    f_b, f_n, tq = jnp.array([0.3, -0.2, 0.5]), jnp.array([-1.0, 0.4, 0.2]), jnp.array([0.1, 0.2, -0.1])
    const = jh.simulate(eqx.tree_at(lambda s: s.loads, base, jh.Loads(extForce_B=f_b, extForce_N=f_n, extTorquePntB_B=tq)))
    fn = jh.simulate(eqx.tree_at(lambda s: s.loads, base, jh.Loads(
        extForce_B_fn=lambda t: f_b, extForce_N_fn=lambda t: f_n, extTorquePntB_B_fn=lambda t: tq)))
    pulse = jh.simulate(eqx.tree_at(lambda s: s.loads, base, jh.Loads(pulses=jh.Pulses(
        t_start=[0.0], t_end=[10.0], extForce_B=[f_b], extForce_N=[f_n], extTorquePntB_B=[tq]))))
    for other in (fn, pulse):
        np.testing.assert_allclose(other.r_BN_N, const.r_BN_N, rtol=0, atol=1e-14)
        np.testing.assert_allclose(other.theta, const.theta, rtol=0, atol=1e-15)
    # and the loads do something
    free = jh.simulate(base)
    assert np.abs(np.asarray(free.theta) - np.asarray(const.theta)).max() > 1e-6


def test_motor_torque_function_equals_constant():
    sc = _seed.motor_torque()
    fn = eqx.tree_at(lambda s: (s.spacecraft.panels.motorTorque, s.loads), sc,
                     (jnp.zeros(2), jh.Loads(motorTorque_fn=lambda t: jnp.array([2.0, 0.0]))))
    a, b = jh.simulate(sc), jh.simulate(fn)
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-15)


def test_inertial_force_through_com_accelerates_com_exactly():
    """A constant inertial force: the system CoM follows m a_C = F (Newton), whatever the internal motion."""
    F = np.array([3.0, -1.0, 2.0])
    sc = _seed.damping(sim=SHORT, loads=jh.Loads(extForce_N=F))
    tr = jh.simulate(sc)
    t = np.asarray(tr.t)[:, None]
    m = 950.0
    r_C0, v_C0 = np.array([0.1, -0.4, 0.3]), np.array([-0.2, 0.5, 0.1])
    # the CoM momentum is not a linear invariant of the integrated state (it involves [NB](sigma)), so RK4
    # keeps it only to its truncation error: 1e-10 absolute, Basilisk's own r_CN_N tolerance (§3.7)
    np.testing.assert_allclose(tr.r_CN_N, r_C0 + v_C0 * t + 0.5 * F / m * t**2, rtol=0, atol=1e-10)
    np.testing.assert_allclose(tr.v_CN_N, v_C0 + F / m * t, rtol=0, atol=1e-10)


def test_mrp_switch_long_spin_conserves():
    """A fast spin (several revolutions) forces shadow-set switches; |sigma| <= 1 and invariants hold."""
    sc = _seed.no_gravity(omega=(0.3, -1.2, 2.5), sim=jh.SimulationConfig(t_end=10.0, save_dt=0.1, integrator="rk4", dt=0.001))
    tr = jh.simulate(sc)
    s = np.linalg.norm(np.asarray(tr.sigma_BN), axis=1)
    assert s.max() <= 1.0 + 1e-15
    assert np.any(np.diff(np.sign(np.asarray(tr.sigma_BN)[:, 2])) != 0)  # sigma jumped sign: switched
    for key in ("totRotAngMomPntC_N", "totRotEnergy", "totOrbAngMomPntN_N"):
        v = np.asarray(getattr(tr, key))
        assert np.abs(v - v[0]).max() / np.abs(v[0]).max() < 1e-10, key


def test_names_and_tolerances_do_not_recompile(traces):
    """Models that differ only in panel names, `rtol`, `atol` or the first step share one compiled program
    (`compile_key`), and the traced tolerances still act: a looser rtol takes fewer steps."""
    calls = traces
    tight = _base().with_simulation(integrator="tsit5", t_end=0.5, save_dt=0.05, rtol=1e-11, atol=1e-12)
    p = tight.spacecraft.panels
    renamed = eqx.tree_at(lambda s: s.spacecraft.panels, tight, jh.Panels(
        p.mass, p.IPntS_S, p.d, p.k, p.c, p.r_HB_B, p.dcm_HB, p.thetaRef, p.thetaDotRef, p.motorTorque,
        names=("left", "right")))
    loose = renamed.with_simulation(rtol=1e-6, atol=1e-8, dt=0.01)
    a, b = jh.simulate(tight), jh.simulate(loose)
    assert len(calls) == 1
    assert int(b.num_steps) < int(a.num_steps)
    np.testing.assert_allclose(np.asarray(b.theta), np.asarray(a.theta), atol=1e-5)


def test_conserved_outputs_follow_loads_damping_and_motors():
    """Issue 14 item 6, the rule `Trajectory.drift_warning` checks (Basilisk's own tests: all four conserved without
    loads or damping, with or without gravity; momenta and orbital energy with damping or a motor, which act inside
    the spacecraft): no compilation, only the scenario's values."""
    every = ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totRotEnergy")
    sc = _seed.no_gravity(sim=SHORT)
    p = sc.spacecraft.panels
    assert _trajectory.conserved(sc) == every
    assert _trajectory.conserved(_seed.gravity(sim=SHORT)) == every
    assert _trajectory.conserved(eqx.tree_at(lambda s: s.spacecraft.panels.c, sc, p.c.at[1].set(0.5))) == every[:3]
    assert _trajectory.conserved(eqx.tree_at(lambda s: s.spacecraft.panels.motorTorque, sc, p.k * 0 + 2.0)) == every[:3]
    assert _trajectory.conserved(eqx.tree_at(lambda s: s.loads, sc, jh.Loads(motorTorque_fn=lambda t: t))) == every[:3]
    for loads in (jh.Loads(extTorquePntB_B=[0.0, 0.0, 1e-3]), jh.Loads(extForce_N_fn=lambda t: jnp.zeros(3)),
                  jh.Loads(pulses=jh.Pulses([0.1], [0.2], [[1.0, 0, 0]], [[0.0] * 3], [[0.0] * 3]))):
        assert _trajectory.conserved(eqx.tree_at(lambda s: s.loads, sc, loads)) == ()
    zero_pulse = jh.Loads(pulses=jh.Pulses([0.1], [0.2], [[0.0] * 3], [[0.0] * 3], [[0.0] * 3]))
    assert _trajectory.conserved(eqx.tree_at(lambda s: s.loads, sc, zero_pulse)) == every
