"""The independent Kane / mass-matrix model (`jaxhinge/_kane.py`), checked against references that do not
use the back-substitution: conservation laws, power and momentum balances, analytic limits, hand-written
kinematics and Basilisk truth values; then used as the reference for the back-substitution solver.

Tolerances: the checks are identities, so they hold to float64 round-off. "1e-12 relative" is a few hundred
ulps of the largest term in each balance (the sums have O(10-100) terms of mixed sign).
"""

import os

import jax

jax.config.update("jax_enable_x64", True)

import _basilisk
import _kane as kane
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from _helpers import (  # noqa: F401
    MU_EARTH,
    ZERO3,
    _inertia,
    _rotation,
    random_loads,
    random_spacecraft,
    random_state,
    zero_loads,
)

import jaxhinge as jh
import jaxhinge._dynamics._backsub as dynamics
from jaxhinge._model._spacecraft import Hub, Panels, PointMassGravity, Spacecraft, State


def _B_mrp(s):
    s2 = s @ s
    st = jnp.array([[0.0, -s[2], s[1]], [s[2], 0.0, -s[0]], [-s[1], s[0], 0.0]])
    return (1.0 - s2) * jnp.eye(3) + 2.0 * st + 2.0 * jnp.outer(s, s)


def _dcm_NB(s):
    """[NB] by the Rodrigues route (independent of the MRP formula in _kane): angle 4 atan|s|."""
    nrm = jnp.linalg.norm(s)
    e = s / nrm
    phi = 4.0 * jnp.arctan(nrm)
    et = jnp.array([[0.0, -e[2], e[1]], [e[2], 0.0, -e[0]], [-e[1], e[0], 0.0]])
    return jnp.eye(3) + jnp.sin(phi) * et + (1.0 - jnp.cos(phi)) * et @ et


def state_dot(sc, st, loads, acc=kane.accelerations):
    rdd, wd, tdd = acc(sc, st, *loads)
    return State(st.v_BN_N, rdd, 0.25 * _B_mrp(st.sigma_BN) @ st.omega_BN_B, wd, st.thetaDot, tdd)


def time_derivative(fn, sc, st, loads):
    """d/dt fn(sc, state) along the model's own motion."""
    return jax.jvp(lambda s: fn(sc, s), (st,), (state_dot(sc, st, loads),))[1]


def _u(st):
    return jnp.concatenate([st.v_BN_N, st.omega_BN_B, st.thetaDot])


def _spring_energy(sc, st):
    return 0.5 * jnp.sum(sc.panels.k * (st.theta - sc.panels.thetaRef) ** 2)


def _total_energy(sc, st):
    return kane.kinetic_energy(sc, st) + _spring_energy(sc, st)


def _body_v(sc, st):
    return kane.body_velocities_N(sc, st)[0]


def _com_v(sc, st):
    return kane.center_of_mass_N(sc, st)[1]


def _with_gravity(sc):
    """`sc` with a point mass always present: mu = 0 where the test has none (the field is then exactly zero), so
    one compiled program of this reference model serves the cases with and without gravity (compiling it is
    most of this file's time)."""
    return sc if sc.gravity is not None else Spacecraft(sc.hub, sc.panels, PointMassGravity(0.0))


def balances(sc, st, loads):
    """Everything the balance tests need, in one compiled function per N."""
    return _balances(_with_gravity(sc), st, loads)


@jax.jit
def _balances(sc, st, loads):
    M = kane.mass_matrix(sc, st)
    sd = state_dot(sc, st, loads)
    udot = jnp.concatenate([sd.v_BN_N, sd.omega_BN_B, sd.thetaDot])
    td = lambda fn: jax.jvp(lambda s: fn(sc, s), (st,), (sd,))[1]
    r_C, v_C = kane.center_of_mass_N(sc, st)
    return {
        "M": M,
        "udot": udot,
        # sum_i |u_i (M udot)_i|: the size of the power flows, the scale of the energy balances
        "power_scale": jnp.sum(jnp.abs(_u(st) * (M @ udot))),
        "T": kane.kinetic_energy(sc, st),
        "dT": td(kane.kinetic_energy),
        "dE": td(_total_energy),
        "dP": td(kane.linear_momentum_N),
        "H": kane.angular_momentum_pntC_N(sc, st),
        "dH": td(kane.angular_momentum_pntC_N),
        "a_bodies": td(_body_v),
        "a_C": td(_com_v),
        "r_C": r_C,
        "v_C": v_C,
    }


_kane_accelerations = jax.jit(kane.accelerations)


def accelerations(sc, st, *loads):
    return _kane_accelerations(_with_gravity(sc), st, *loads)


@jax.jit
def _mass_matrix_pieces(sc, st, loads):
    """Mass matrix, generalized forces and accelerations of one configuration (one compiled program)."""
    return kane.mass_matrix(sc, st), kane.generalized_forces(sc, st, *loads), kane.accelerations(sc, st, *loads)


# ------------------------------------------------------------------------------------------------------------
# (1) Mass matrix.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_mass_matrix_symmetric_positive_definite(seed):
    rng = np.random.default_rng(seed)
    n = (3, 5)[seed % 2]
    sc = random_spacecraft(rng, n)
    st = random_state(rng, n)
    loads = random_loads(rng, n)
    M, f, acc = _mass_matrix_pieces(sc, st, loads)
    M = np.asarray(M)
    assert M.shape == (6 + n, 6 + n)
    # Not symmetrised in the library: symmetric by construction (J^T m J), to round-off.
    assert np.max(np.abs(M - M.T)) <= 1e-14 * np.max(np.abs(M))
    ev = np.linalg.eigvalsh(M)
    assert ev.min() > 1e-6 * ev.max()
    # Total mass block: M[0:3, 0:3] = m_total I.
    m_tot = float(sc.hub.mHub + np.sum(sc.panels.mass))
    np.testing.assert_allclose(M[0:3, 0:3], m_tot * np.eye(3), rtol=1e-14, atol=1e-12)
    # Panel self-inertia about the hinge: M[6+i, 6+i] = I_s2 + m d^2 (the hinge axis is fixed in the hub).
    Is2 = np.asarray(sc.panels.IPntS_S)[:, 1, 1]
    md2 = np.asarray(sc.panels.mass * sc.panels.d**2)
    np.testing.assert_allclose(np.diag(M)[6:], Is2 + md2, rtol=1e-13)
    # Panels do not couple directly to each other (only through the hub).
    np.testing.assert_allclose(M[6:, 6:], np.diag(np.diag(M)[6:]), rtol=0, atol=1e-13 * np.max(np.abs(M)))
    # The public pieces compose: accelerations == solve(M, generalized_forces).
    np.testing.assert_allclose(np.concatenate(acc), np.linalg.solve(M, np.asarray(f)), rtol=1e-12)
    # T = 1/2 u^T M u equals the body-by-body kinetic energy.
    u = np.asarray(_u(st))
    np.testing.assert_allclose(0.5 * u @ M @ u, kane.kinetic_energy(sc, st), rtol=1e-13)


def _panel_fields(p):
    names = ["mass", "IPntS_S", "d", "k", "c", "r_HB_B", "dcm_HB", "thetaRef", "thetaDotRef", "motorTorque"]
    return {k: getattr(p, k) for k in names}


def test_only_panel_inertia_diagonal_is_used():
    rng = np.random.default_rng(11)
    sc = random_spacecraft(rng, 5)
    st = random_state(rng, 5)
    loads = random_loads(rng, 5)
    off = rng.normal(scale=5.0, size=(5, 3, 3))
    off = off + np.swapaxes(off, -1, -2)
    off[:, [0, 1, 2], [0, 1, 2]] = 0.0
    # `Panels` refuses off-diagonal entries, as a scenario file does; set them behind its back to see that the
    # dynamics ignore them (Basilisk uses only the diagonal)
    with pytest.raises(jh.ScenarioError, match=r"IPntS_S must be diagonal"):
        Panels(**{**_panel_fields(sc.panels), "IPntS_S": sc.panels.IPntS_S + off})
    sc2 = eqx.tree_at(lambda s: s.panels.IPntS_S, sc, sc.panels.IPntS_S + off)
    for a, b in zip(accelerations(sc, st, *loads), accelerations(sc2, st, *loads)):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------------------
# Kinematics: the autodiff velocities against Basilisk's hand-written panel formulas (§1.6 config log).
# ------------------------------------------------------------------------------------------------------------


def test_body_velocities_match_hand_formulas():
    rng = np.random.default_rng(5)
    n = 3
    sc = random_spacecraft(rng, n)
    st = random_state(rng, n)
    v, w = jax.jit(kane.body_velocities_N)(sc, st)
    NB = np.asarray(_dcm_NB(st.sigma_BN))
    om = np.asarray(st.omega_BN_B)
    p = sc.panels
    c, s = np.cos(np.asarray(st.theta)), np.sin(np.asarray(st.theta))
    h = np.asarray(p.dcm_HB)
    s1 = c[:, None] * h[:, 0] - s[:, None] * h[:, 2]
    s2 = h[:, 1]
    s3 = s[:, None] * h[:, 0] + c[:, None] * h[:, 2]
    td, d = np.asarray(st.thetaDot), np.asarray(p.d)
    # hub
    np.testing.assert_allclose(w[0], NB @ om, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(v[0], st.v_BN_N + NB @ np.cross(om, sc.hub.r_BcB_B), rtol=1e-13, atol=1e-15)
    # panels: v_S = v_B + [NB](d thetaDot s3 - d w x s1 + w x r_H/B), w_S = [NB](w + thetaDot s2)
    v_S = (
        np.asarray(st.v_BN_N)
        + ((d * td)[:, None] * s3 - d[:, None] * np.cross(om, s1) + np.cross(om, np.asarray(p.r_HB_B))) @ NB.T
    )
    np.testing.assert_allclose(v[1:], v_S, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w[1:], (om + td[:, None] * s2) @ NB.T, rtol=1e-13, atol=1e-14)


# ------------------------------------------------------------------------------------------------------------
# (2) Conservation with k = c = 0 and no loads.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 5])
def test_free_motion_conserves_energy_and_momenta(n):
    rng = np.random.default_rng(100 + n)
    sc = random_spacecraft(rng, n, springs=False, motors=False)
    st = random_state(rng, n)
    out = balances(sc, st, zero_loads(n))
    # Scale: the power flows sum_i |u_i (M udot)_i|; they are large, so the check is not vacuous.
    scale = float(out["power_scale"])
    assert scale > 1e-2 * float(out["T"])
    assert abs(float(out["dT"])) <= 1e-12 * scale

    m = np.concatenate([[sc.hub.mHub], sc.panels.mass])
    p_scale = float(np.sum(m * np.linalg.norm(out["a_bodies"], axis=-1)))
    assert p_scale > 0.0
    assert np.max(np.abs(out["dP"])) <= 1e-13 * p_scale
    lever = float(np.max(np.linalg.norm(np.asarray(sc.panels.r_HB_B), axis=-1)) + 2.0)
    assert np.max(np.abs(out["dH"])) <= 1e-12 * (float(jnp.linalg.norm(out["H"])) + lever * p_scale)


# ------------------------------------------------------------------------------------------------------------
# (3) Power balance with springs, dampers, motors, loads and gravity.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_loads", [False, True])
def test_power_balance(seed, with_loads):
    """d/dt (T + V_spring) = sum (u + u_extra - c (thetaDot - thetaDotRef)) thetaDot
    [+ F_N . v_B + tau_B . omega + m_tot g . v_C with external loads and point-mass gravity, in orbit]."""
    rng = np.random.default_rng(200 + seed)
    n = (3, 5)[seed % 2]
    sc = random_spacecraft(rng, n, gravity=with_loads)
    st = random_state(rng, n, orbit=with_loads)
    loads = random_loads(rng, n) if with_loads else zero_loads(n, u_extra=rng.normal(size=n))
    f_B, f_N, tq_B, u_extra = (np.asarray(x) for x in loads)
    p = sc.panels
    out = balances(sc, st, loads)

    td = np.asarray(st.thetaDot)
    power = list(np.asarray(p.motorTorque + u_extra - p.c * (st.thetaDot - p.thetaDotRef)) * td)
    if with_loads:
        NB = np.asarray(_dcm_NB(st.sigma_BN))
        F_N = NB @ f_B + f_N
        power += [F_N @ np.asarray(st.v_BN_N), tq_B @ np.asarray(st.omega_BN_B)]
        r_C, v_C = np.asarray(out["r_C"]), np.asarray(out["v_C"])
        m_tot = float(sc.hub.mHub + jnp.sum(p.mass))
        g = -MU_EARTH * r_C / np.linalg.norm(r_C) ** 3
        power += [m_tot * g @ v_C]
    scale = float(out["power_scale"]) + float(np.sum(np.abs(power)))
    assert abs(float(out["dE"]) - float(np.sum(power))) <= 1e-12 * scale


# ------------------------------------------------------------------------------------------------------------
# Newton's laws for the whole system: dP/dt = F + m g, dH_C/dt = tau_C.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_momentum_balance(seed):
    """Near the origin (no 7e6 m positions, whose differences would lose 9 digits) with a point mass of
    mu = 100 m^3/s^2, so g is a few m/s^2."""
    rng = np.random.default_rng(300 + seed)
    n = (3, 5)[seed % 2]
    gravity = seed < 2
    sc = random_spacecraft(rng, n, gravity=gravity, mu=100.0)
    st = random_state(rng, n)
    loads = random_loads(rng, n)
    f_B, f_N, tq_B, _ = (np.asarray(x) for x in loads)
    out = balances(sc, st, loads)
    NB = np.asarray(_dcm_NB(st.sigma_BN))
    F_N = NB @ f_B + f_N
    m = np.concatenate([[sc.hub.mHub], sc.panels.mass])
    r_C = np.asarray(out["r_C"])
    g = -100.0 * r_C / np.linalg.norm(r_C) ** 3 if gravity else np.zeros(3)

    p_scale = float(np.sum(m * np.linalg.norm(out["a_bodies"], axis=-1)))
    np.testing.assert_allclose(out["dP"], F_N + np.sum(m) * g, rtol=0, atol=1e-13 * p_scale)

    # Torque about C: external torque plus the moment of F (applied at B); uniform gravity gives none.
    tau_C = NB @ tq_B + np.cross(np.asarray(st.r_BN_N) - r_C, F_N)
    lever = float(np.max(np.linalg.norm(np.asarray(sc.panels.r_HB_B), axis=-1)) + 2.0)
    atol = 1e-12 * (float(jnp.linalg.norm(out["H"])) + lever * p_scale)
    np.testing.assert_allclose(out["dH"], tau_C, rtol=0, atol=atol)


# ------------------------------------------------------------------------------------------------------------
# (4) Clamped panel: a hub that does not move.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_clamped_panel_is_a_torsional_oscillator(seed):
    """Hub mass and inertia ~1e12, zero body rate, no gravity: the hinge is fixed in inertial space, so
    thetaDDot = (u - k (theta - thetaRef) - c (thetaDot - thetaDotRef)) / (I_s2 + m d^2); the hub's finite
    reaction changes it by O(m L^2 / 1e12) ~ 1e-9 relative (L: hub CoM to panel CoM)."""
    rng = np.random.default_rng(400 + seed)
    sc0 = random_spacecraft(rng, 1)
    big = 1e12
    sc = Spacecraft(Hub(big, big * np.eye(3) + sc0.hub.IHubPntBc_B, sc0.hub.r_BcB_B), sc0.panels)
    st = random_state(rng, 1)
    st = State(st.r_BN_N, st.v_BN_N, st.sigma_BN, jnp.zeros(3), st.theta, st.thetaDot)
    p = sc.panels
    rdd, wd, tdd = accelerations(sc, st, *zero_loads(1))
    expected = (p.motorTorque - p.k * (st.theta - p.thetaRef) - p.c * (st.thetaDot - p.thetaDotRef)) / (
        p.IPntS_S[:, 1, 1] + p.mass * p.d**2
    )
    # The hub's reaction: relative size ~ m L^2 / I_hub with L the lever arm from the hub CoM (~1e-9 here).
    lever = float(jnp.linalg.norm(p.r_HB_B[0] - sc.hub.r_BcB_B) + p.d[0])
    np.testing.assert_allclose(tdd, expected, rtol=10.0 * float(p.mass[0]) * lever**2 / big)
    assert float(jnp.max(jnp.abs(rdd))) < 1e-8 and float(jnp.max(jnp.abs(wd))) < 1e-8


# ------------------------------------------------------------------------------------------------------------
# (5) A force through the system CoM.
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_force_through_center_of_mass(seed):
    """Panels at rest at their reference angles, hub not rotating; force F applied at B plus the torque
    (r_C - r_B) x F about B, so the resultant passes through C: rDDot_C = F / m_total and dH_C/dt = 0.
    Without the torque the CoM still accelerates at F / m_total (Newton), and the system starts to spin."""
    rng = np.random.default_rng(500 + seed)
    n = (3, 5, 3)[seed]
    sc = random_spacecraft(rng, n, motors=False)
    sc = Spacecraft(sc.hub, Panels(**{**_panel_fields(sc.panels), "thetaDotRef": jnp.zeros(n)}))
    st = random_state(rng, n)
    st = State(st.r_BN_N, st.v_BN_N, st.sigma_BN, jnp.zeros(3), sc.panels.thetaRef, jnp.zeros(n))
    F_N = rng.normal(scale=10.0, size=3)
    r_C, _ = kane.center_of_mass_N(sc, st)
    BN = np.asarray(_dcm_NB(st.sigma_BN)).T
    tq_B = BN @ np.cross(np.asarray(r_C - st.r_BN_N), F_N)
    m_tot = float(sc.hub.mHub + jnp.sum(sc.panels.mass))

    out = balances(sc, st, zero_loads(n, f_N=F_N, tq=tq_B))
    np.testing.assert_allclose(out["a_C"], F_N / m_tot, rtol=1e-13, atol=1e-15 * np.linalg.norm(F_N))
    assert float(jnp.max(jnp.abs(out["dH"]))) < 1e-12 * np.linalg.norm(F_N)

    out = balances(sc, st, zero_loads(n, f_N=F_N))
    np.testing.assert_allclose(out["a_C"], F_N / m_tot, rtol=1e-13, atol=1e-15 * np.linalg.norm(F_N))
    assert float(jnp.linalg.norm(out["dH"])) > 1e-3 * np.linalg.norm(F_N)


# ------------------------------------------------------------------------------------------------------------
# Basilisk truth values (reference/basilisk.md §3), integrated with a hand-written RK4 at Basilisk's step.
# ------------------------------------------------------------------------------------------------------------


def _two_panel(k, c, motor, r_BcB_B=(0.0, 0.0, 1.0), mu=None):
    I_p = np.diag([100.0, 50.0, 50.0])
    panels = Panels(
        mass=[100.0, 100.0], IPntS_S=[I_p, I_p], d=[1.5, 1.5], k=k, c=c,
        r_HB_B=[[0.5, 0.0, 1.0], [-0.5, 0.0, 1.0]], dcm_HB=[np.diag([-1.0, -1.0, 1.0]), np.eye(3)],
        thetaRef=[0.0, 0.0], thetaDotRef=[0.0, 0.0], motorTorque=motor,
    )  # fmt: skip
    hub = Hub(750.0, np.diag([900.0, 800.0, 600.0]), r_BcB_B)
    return Spacecraft(hub, panels, None if mu is None else PointMassGravity(mu))


def _state_from_com(sc, r_CN, v_CN, omega, theta):
    """Basilisk's initial-condition conversion (r_CN, v_CN are the system CoM), done with this model's CoM."""
    st = State(jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), jnp.asarray(omega, float), jnp.asarray(theta, float),
               jnp.zeros(2))  # fmt: skip
    c_N, cdot_N = kane.center_of_mass_N(sc, st)
    return State(jnp.asarray(r_CN) - c_N, jnp.asarray(v_CN) - cdot_N, st.sigma_BN, st.omega_BN_B, st.theta,
                 st.thetaDot)  # fmt: skip


def _rk4(sc, st, dt, steps):
    """`steps` RK4 steps of size `dt` with Basilisk's MRP switch (dt, steps and the point mass traced: one
    compiled program serves every truth test below)."""
    return _rk4_jit(_with_gravity(sc), st, dt, steps)


@jax.jit
def _rk4_jit(sc, st, dt, steps):
    zero = zero_loads(st.theta.shape[0])
    a = jnp.array([0.5, 0.5, 1.0, 0.0])  # next stage input y + a_i dt k_i
    b = jnp.array([1.0, 2.0, 2.0, 1.0]) / 6.0

    def step(_, y):
        axpy = lambda c, k: jax.tree.map(lambda yy, kk: yy + c * kk, y, k)

        def stage(i, carry):  # the four stages in a loop: the model is compiled once, not four times
            yi, acc = carry
            k = state_dot(sc, yi, zero)
            return axpy(a[i] * dt, k), jax.tree.map(lambda s, kk: s + b[i] * kk, acc, k)

        _, acc = jax.lax.fori_loop(0, 4, stage, (y, jax.tree.map(jnp.zeros_like, y)))
        y = axpy(dt, acc)
        s = y.sigma_BN
        s2 = s @ s
        return State(y.r_BN_N, y.v_BN_N, jnp.where(s2 > 1.0, -s / s2, s), y.omega_BN_B, y.theta, y.thetaDot)

    return jax.lax.fori_loop(0, steps, step, st)


@pytest.mark.slow
@pytest.mark.parametrize("gravity", [False, True])
def test_basilisk_truth_no_damping(gravity):
    """§3.1/§3.2: final sigma_BN (and r_BN_N without gravity) after 2.5 s of RK4 at dt = 1 ms, to round-off:
    measured <= 5.5e-15 relative (bsk 2.12.1 reproduces its test's truths to 4.9e-15; Basilisk's own test allows
    1e-10)."""
    if gravity:
        sc = _two_panel([100.0, 100.0], [0.0, 0.0], [0.0, 0.0], mu=MU_EARTH)
        r_CN = [-4020338.690396649, 7490566.741852513, 5248299.211589362]
        v_CN = [-5199.77710904224, -3436.681645356935, 1041.576797498721]
    else:
        sc = _two_panel([100.0, 100.0], [0.0, 0.0], [0.0, 0.0])
        r_CN, v_CN = [0.1, -0.4, 0.3], [-0.2, 0.5, 0.1]
    st = _state_from_com(sc, r_CN, v_CN, [0.1, -0.1, 0.1], [5.0 * np.pi / 180.0, 0.0])
    if not gravity:
        np.testing.assert_allclose(
            st.r_BN_N, [0.1006008371434086, -0.4, -0.71376143306541961], rtol=1e-14, atol=1e-15
        )
        np.testing.assert_allclose(
            st.v_BN_N, [-0.098623856693458037, 0.60143622702088284, 0.10006008371434086], rtol=1e-14
        )
    yf = _rk4(sc, st, 1e-3, 2500)
    trueSigma = [0.06170318243240492, -0.07089090074412899, 0.06409500412692531]
    np.testing.assert_allclose(yf.sigma_BN, trueSigma, rtol=1e-13)
    if not gravity:
        truePos = [-0.15832794740648992, 1.122481716747217, -0.37975995949382907]
        np.testing.assert_allclose(yf.r_BN_N, truePos, rtol=1e-13)
        np.testing.assert_allclose(yf.theta, [-0.0566775747670447, 0.047491713319648236], rtol=1e-13)


@pytest.mark.slow
def test_basilisk_truth_motor_torque():
    """§3.7: 2 N m on panel 1, k = c = 0, everything at rest; dt = 0.01 s for 10 s (bsk 2.12.1 values, printed to
    17 digits): to round-off (measured: equal; 1e-13 as the truths above)."""
    sc = _two_panel([0.0, 0.0], [0.0, 0.0], [2.0, 0.0])
    # Basilisk starts the CoM at the origin; any other point gives the same motion (no gravity) and keeps the
    # zero point mass of `_with_gravity` away from r_C = 0
    r_C0 = np.array([1.0, -2.0, 0.5])
    st = _state_from_com(sc, r_C0, ZERO3, ZERO3, [0.0, 0.0])
    yf = _rk4(sc, st, 1e-2, 1000)
    np.testing.assert_allclose(yf.theta[0], 0.59804999135872017, rtol=1e-13)
    np.testing.assert_allclose(yf.thetaDot[0], 0.11821798179675616, rtol=1e-13)
    np.testing.assert_allclose(yf.theta[1], -0.16119701350395460, rtol=1e-13)
    r_C, _ = kane.center_of_mass_N(sc, yf)
    np.testing.assert_allclose(r_C, r_C0, rtol=0, atol=1e-14)  # the motor torque is internal (measured 7.8e-16 m)


@pytest.mark.slow
def test_basilisk_trajectory_damping_csv():
    """§3.3 (c = 6, 7): the whole Basilisk trajectory, sampled every 0.01 s, to round-off: the tolerances of the
    back-substitution's Basilisk comparisons (tests/_basilisk.py; measured here <= 4.4e-16 m, 1.4e-17 rad/s)."""
    path = os.path.join(os.path.dirname(__file__), "data", "basilisk_csv", "bsk_ref_noGravity_damping.csv")
    assert os.path.exists(path), f"the Basilisk reference {path} is missing (tests/data/basilisk_csv/README.md)"
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    sc = _two_panel([100.0, 100.0], [6.0, 7.0], [0.0, 0.0])
    row = data[0]
    st = State(*(jnp.asarray(row[a:b]) for a, b in [(1, 4), (4, 7), (7, 10), (10, 13)]),
               jnp.asarray(row[[13, 15]]), jnp.asarray(row[[14, 16]]))  # fmt: skip

    traj = []
    for _ in range(len(data) - 1):  # the truth tests' compiled program, 10 steps per sample
        st = _rk4(sc, st, 1e-3, 10)
        traj.append(np.concatenate([st.r_BN_N, st.v_BN_N, st.sigma_BN, st.omega_BN_B,
                                    [st.theta[0], st.thetaDot[0], st.theta[1], st.thetaDot[1]]]))  # fmt: skip
    ref, traj = data[1:, 1:17], np.asarray(traj)
    cols = {"r_BN_N": [0, 1, 2], "v_BN_N": [3, 4, 5], "sigma_BN": [6, 7, 8], "omega_BN_B": [9, 10, 11],
            "theta": [12, 14], "thetaDot": [13, 15]}  # fmt: skip
    worst = _basilisk.worst({k: traj[:, c] for k, c in cols.items()}, {k: ref[:, c] for k, c in cols.items()})
    assert max(worst.values()) <= 1.0, worst


@pytest.mark.slow
def test_default_integrator_tsit5_through_an_mrp_switch():
    """jaxhinge's default integrator (adaptive tsit5, MRP shadow switch after accepted steps: `_solver.MRPSwitch`)
    against this model integrated by the hand-written RK4 above (no diffrax, no back-substitution) at dt = 0.25 ms,
    through a shadow switch: a random 3-panel spacecraft (full hub inertia, springs, dampers, reference angles,
    motor torques) spinning at ~3 rad/s, whose attitude passes the principal angle pi (|sigma| = 1) at t ~ 0.4 s."""
    import jaxhinge as jh

    rng = np.random.default_rng(800)
    n = 3
    sc = random_spacecraft(rng, n)
    # r_C off the origin: the zero point mass of `_with_gravity` (in `_rk4`) stays away from r_C = 0
    ini = jh.InitialState([1.0, -2.0, 0.5], [0.1, -0.2, 0.3], [0.3, -0.2, 0.4], [0.9, -1.6, 2.2],
                          rng.uniform(-0.5, 0.5, n), rng.normal(scale=0.5, size=n))  # fmt: skip
    rtol, save_dt, t_end = 1e-12, 0.05, 3.0
    cfg = jh.SimulationConfig(t_end=t_end, save_dt=save_dt, rtol=rtol, atol=1e-14)
    assert cfg.integrator.name == "tsit5"  # the default
    tr = jh.simulate(jh.Scenario(sc, ini, jh.Loads(), cfg))
    assert bool(tr.success)

    st, ref = jh.initial_state(sc, ini), []
    for _ in range(round(t_end / save_dt) + 1):
        ref.append(st)
        st = _rk4(sc, st, 2.5e-4, round(save_dt / 2.5e-4))
    ref = jax.tree.map(lambda *x: np.stack(x), *ref)

    # the switch: one jump of sigma to its shadow set (sign flip at |sigma| ~ 1), at the same sample in both
    flips = lambda s: np.flatnonzero(np.sum(s[1:] * s[:-1], axis=1) < 0)
    s_jh = np.asarray(tr.sigma_BN)
    assert list(flips(s_jh)) == list(flips(ref.sigma_BN)) == [8]  # between t = 0.40 and 0.45 s
    assert np.linalg.norm(s_jh[8]) > 0.9 and np.linalg.norm(s_jh[9]) > 0.9
    assert np.all(np.linalg.norm(s_jh, axis=1) <= 1.0)

    # tsit5's global error follows its rtol: measured <= 1.1e-12 x each quantity's largest value with rtol = 1e-12
    # (and 1.0e-10 x with rtol = 1e-10); the reference's own error (dt against dt/2) is <= 3e-14 x. Allowed: 10 rtol.
    for key in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B", "theta", "thetaDot"):
        got, want = np.asarray(getattr(tr, key)), getattr(ref, key)
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < 10 * rtol, (key, err)


# ------------------------------------------------------------------------------------------------------------
# Transformations: jit, vmap, grad, any N.
# ------------------------------------------------------------------------------------------------------------


def test_jit_vmap_grad():
    rng = np.random.default_rng(600)
    n = 5
    # Near the origin with a weak point mass: in orbit the hinge rows carry ~1e3 gravity terms that cancel,
    # and their round-off would dominate the finite differences below.
    sc = random_spacecraft(rng, n, gravity=True, mu=100.0)
    states = [random_state(rng, n) for _ in range(8)]
    loads = random_loads(rng, n)
    stack = lambda xs: jax.tree.map(lambda *x: jnp.stack(x), *xs)
    out_v = _kane_batch(stack([sc] * len(states)), stack(states), stack([loads] * len(states)))
    for i, s in enumerate(states):
        for a, b in zip(accelerations(sc, s, *loads), out_v):
            np.testing.assert_allclose(b[i], a, rtol=1e-13, atol=1e-15)

    # Gradient of the hinge accelerations w.r.t. k, c and hub mass against central differences.
    def obj(k, c, mHub):
        p = Panels(**{**_panel_fields(sc.panels), "k": k, "c": c})
        sc2 = Spacecraft(Hub(mHub, sc.hub.IHubPntBc_B, sc.hub.r_BcB_B), p, sc.gravity)
        _rdd, wd, tdd = kane.accelerations(sc2, states[0], *loads)
        return jnp.sum(tdd**2) + jnp.sum(wd**2)

    args = (sc.panels.k, sc.panels.c, sc.hub.mHub)
    grads = jax.jit(jax.grad(obj, argnums=(0, 1, 2)))(*args)
    obj = jax.jit(obj)
    for j in range(3):
        for idx in [0, 2] if j < 2 else [None]:
            h = 1e-6 * (1.0 + abs(float(args[j] if idx is None else args[j][idx])))
            e = 1.0 if idx is None else jnp.zeros(n).at[idx].set(1.0)
            ap = list(args)
            am = list(args)
            ap[j] = args[j] + h * e
            am[j] = args[j] - h * e
            fd = (obj(*ap) - obj(*am)) / (2 * h)
            g = grads[j] if idx is None else grads[j][idx]
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-10)


# ------------------------------------------------------------------------------------------------------------
# The back-substitution solver against this independent model.
# ------------------------------------------------------------------------------------------------------------


# the reference model batched over configurations (one program per N, with or without gravity), the solver
_kane_batch = jax.jit(jax.vmap(lambda a, b, c: kane.accelerations(a, b, *c)))
_backsub_batch = jax.jit(jax.vmap(lambda a, b, c: dynamics.accelerations(a, b, *c)))


@pytest.mark.parametrize("gravity", [False, True], ids=["no_gravity", "gravity"])
@pytest.mark.parametrize("n", [1, 5])
def test_back_substitution_matches_kane(n, gravity):
    """`_dynamics.accelerations` (Basilisk back-substitution) == the dense Kane solve on 8 random 3D
    configurations per case (32 in all; 3 panels and mixes with chains in test_chains.py): full hub inertia,
    offset hub CoM, random hinge frames, 1/5 panels,
    springs, dampers, thetaRef/thetaDotRef, motor torques + u_extra, external force (B and N) and torque,
    and (in orbit at 7000 km) point-mass gravity. Agreement to 1e-12 of each block's largest component."""
    rng = np.random.default_rng(700 + 10 * n + gravity)
    batch = 8
    scs = [random_spacecraft(rng, n, gravity=gravity) for _ in range(batch)]
    sts = [random_state(rng, n, orbit=gravity) for _ in range(batch)]
    lds = [random_loads(rng, n) for _ in range(batch)]
    stack = lambda xs: jax.tree.map(lambda *x: jnp.stack(x), *xs)
    sc, st, loads = stack(scs), stack(sts), stack(lds)

    ref = _kane_batch(stack([_with_gravity(s) for s in scs]), st, loads)
    got = _backsub_batch(sc, st, loads)
    for name, b, a in zip(["rDDot_BN_N", "omegaDot_BN_B", "thetaDDot"], ref, got):
        scale = jnp.max(jnp.abs(b), axis=-1)
        err = jnp.max(jnp.abs(a - b), axis=-1)
        rel = np.asarray(err / scale)
        assert np.all(rel <= 1e-12), f"{name}: relative errors {rel}"
