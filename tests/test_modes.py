"""Modal analysis: analytic frequencies, the linearisation is the simulator's, nonlinear simulations, gradients,
repeated frequencies, the `jaxhinge modes` CLI."""

import json
import os
import subprocess
import sys

import _kane
import _seed
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._analysis._linear._linearize import (
    body_jacobians,
    linearize,
    mass_matrix,
    reduced_matrices,
    rest_spacecraft,
)
from jaxhinge._analysis._linear._measure import measure_modes
from jaxhinge._analysis._linear._modes import complex_mode_state, modes, modes_unjitted
from jaxhinge._dynamics._energy import diagnostics

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "jaxhinge", "examples", "spacecraft_three_panels.toml")
BSK_DATA = os.path.join(REPO, "tests", "data", "bsk")
TWO_PI = 2.0 * np.pi


# ------------------------------------------------------------------------------------------------------------
# Random 3D configurations (also used by test_fit.py)
# ------------------------------------------------------------------------------------------------------------


def _rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)],
            [2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)],
            [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _rigid(moments: np.ndarray) -> np.ndarray:
    """Principal moments made a rigid body's (the largest at most the sum of the other two, as a scenario file
    requires): the largest is lowered to that sum where it exceeds it; the other draws are kept."""
    m = np.array(moments, dtype=float)
    j = int(np.argmax(m))
    m[j] = min(m[j], np.sum(m) - m[j])
    return m


def random_spacecraft(seed: int, n: int, spread: float = 1.5, f0: float = 0.15) -> jh.Spacecraft:
    """A random 3D spacecraft: hub mass, inertia (random principal axes) and CoM offset; per panel random mass,
    diagonal inertia, d, hinge point, hinge orientation, thetaRef. k gives fixed-base frequencies
    f0 * spread^i (+-5 %, shuffled: well-separated modes, so the frequency-order matching of a fit is unique
    near the truth); c gives 0.5-5 % damping."""
    rng = np.random.default_rng(seed)
    R = _rotation(rng)
    Ih = R @ np.diag(_rigid(rng.uniform(300, 1500, 3))) @ R.T
    hub = jh.Hub(rng.uniform(300, 1500), 0.5 * (Ih + Ih.T), rng.uniform(-0.2, 0.2, 3))
    mass = rng.uniform(10, 80, n)
    d = rng.uniform(0.8, 3.0, n)
    Is = np.stack([np.diag(_rigid(rng.uniform(1, 100, 3))) for _ in range(n)])
    Itheta = Is[:, 1, 1] + mass * d**2
    f = rng.permutation(f0 * spread ** np.arange(n) * rng.uniform(0.95, 1.05, n))
    k = Itheta * (TWO_PI * f) ** 2
    c = 2 * rng.uniform(0.005, 0.05, n) * np.sqrt(k * Itheta)
    panels = jh.Panels(
        mass=mass,
        IPntS_S=Is,
        d=d,
        k=k,
        c=c,
        r_HB_B=rng.uniform(-1.2, 1.2, (n, 3)),
        dcm_HB=np.stack([_rotation(rng) for _ in range(n)]),
        thetaRef=rng.uniform(-0.5, 0.5, n),
        thetaDotRef=np.zeros(n),
        motorTorque=np.zeros(n),
        names=tuple(f"p{i}" for i in range(n)),
    )
    return jh.Spacecraft(hub, panels)


def scenario_of(sc: jh.Spacecraft) -> jh.Scenario:
    n = sc.panels.count
    z3 = np.zeros(3)
    return jh.Scenario(sc, jh.InitialState(z3, z3, z3, z3, np.zeros(n), np.zeros(n)))


def _state(sc, q, u):
    """The simulator state at hub displacement x, small rotation phi (sigma = phi/4) and hinge offsets."""
    return jh.State(
        r_BN_N=q[:3],
        v_BN_N=u[:3],
        sigma_BN=q[3:6] / 4.0,
        omega_BN_B=u[3:6],
        theta=sc.panels.thetaRef + q[6:],
        thetaDot=u[6:],
    )


def _symmetric_cross(k=400.0, c=3.0, n=4) -> jh.Spacecraft:
    """n identical panels in a C_n-symmetric cross around a hub with a rotationally symmetric inertia."""
    ang = TWO_PI * np.arange(n) / n
    dcm, r = [], []
    for a in ang:
        e = np.array([np.cos(a), np.sin(a), 0.0])
        h1 = -e  # panel CoM at r_HB - d h1: outboard
        h2 = np.array([-np.sin(a), np.cos(a), 0.0])  # hinge axis tangential (out-of-plane flapping)
        dcm.append(np.stack([h1, h2, np.cross(h1, h2)]))
        r.append(0.8 * e)
    hub = jh.Hub(800.0, np.diag([700.0, 700.0, 1000.0]), np.zeros(3))
    panels = jh.Panels(
        mass=np.full(n, 30.0),
        IPntS_S=np.stack([np.diag([5.0, 40.0, 45.0])] * n),
        d=np.full(n, 1.8),
        k=np.full(n, k),
        c=np.full(n, c),
        r_HB_B=np.array(r),
        dcm_HB=np.array(dcm),
        thetaRef=np.zeros(n),
        thetaDotRef=np.zeros(n),
        motorTorque=np.zeros(n),
        names=tuple(f"a{i}" for i in range(n)),
    )
    return jh.Spacecraft(hub, panels)


# ------------------------------------------------------------------------------------------------------------
# Analytic values
# ------------------------------------------------------------------------------------------------------------


def test_planar_basilisk_coupled_frequency():
    """basilisk.md 3.5: the planar two-panel geometry with k = 300 has the analytic coupled (free-free)
    frequency 0.18271091965072628 Hz (Basilisk's own simulation reaches 4e-3)."""
    m = modes(_seed.planar(300.0, 0.0, jh.Loads(), 10.0))
    f = float(m.frequency_hz[0])
    assert abs(f - 0.18271091965072628) / 0.18271091965072628 < 1e-10, f
    assert float(m.natural_frequency_hz[0]) == pytest.approx(f, rel=1e-13)
    assert np.all(np.abs(np.asarray(m.damping_ratio)) < 1e-14)  # c = 0


@pytest.mark.parametrize("seed", range(4))
def test_clamped_single_panel_closed_form(seed):
    """One panel on a fixed hub is a 1-DOF oscillator: f = sqrt(k / (I_s2 + m d^2)) / 2 pi and
    zeta = c / (2 sqrt(k I)), in any 3D geometry."""
    sc = random_spacecraft(100 + seed, 1)
    p = sc.panels
    Itheta = float(p.IPntS_S[0, 1, 1] + p.mass[0] * p.d[0] ** 2)
    k, c = float(p.k[0]), float(p.c[0])
    m = modes(sc, "clamped")
    f_exact = np.sqrt(k / Itheta) / TWO_PI
    assert abs(float(m.frequency_hz[0]) - f_exact) / f_exact < 1e-12
    assert abs(float(m.natural_frequency_hz[0]) - f_exact) / f_exact < 1e-12
    zeta = c / (2 * np.sqrt(k * Itheta))
    assert abs(float(m.damping_ratio[0]) - zeta) / zeta < 1e-12
    assert float(m.damped_frequency_hz[0]) == pytest.approx(f_exact * np.sqrt(1 - zeta**2), rel=1e-12)
    np.testing.assert_allclose(np.asarray(m.energy_fraction[0]), [0.0, 0.0, 1.0], atol=1e-15)


def test_clamped_is_heavy_hub_limit():
    """The free modes tend to the clamped ones as the hub mass and inertia grow."""
    sc = random_spacecraft(7, 3)
    f_clamped = np.asarray(modes(sc, "clamped").frequency_hz)
    heavy = eqx.tree_at(lambda s: (s.hub.mHub, s.hub.IHubPntBc_B), sc, (sc.hub.mHub * 1e8, sc.hub.IHubPntBc_B * 1e8))
    f_free = np.asarray(modes(heavy, "free").frequency_hz)
    np.testing.assert_allclose(f_free, f_clamped, rtol=1e-6)
    assert np.all(np.asarray(modes(sc, "free").frequency_hz) > f_clamped * (1 - 1e-12))  # the hub adds stiffness


def test_overdamped_and_mechanism_modes():
    """A clamped panel with zeta > 1 reports the equivalent second-order values; k = 0 gives a 0 Hz mode."""
    sc = random_spacecraft(3, 1)
    p = sc.panels
    Itheta = float(p.IPntS_S[0, 1, 1] + p.mass[0] * p.d[0] ** 2)
    c = 3.0 * 2 * np.sqrt(float(p.k[0]) * Itheta)
    m = modes(eqx.tree_at(lambda s: s.panels.c, sc, jnp.array([c])), "clamped")
    assert bool(m.overdamped[0])
    assert float(m.damping_ratio[0]) == pytest.approx(3.0, rel=1e-12)
    assert float(m.frequency_hz[0]) == pytest.approx(np.sqrt(float(p.k[0]) / Itheta) / TWO_PI, rel=1e-12)
    assert float(m.damped_frequency_hz[0]) == 0.0
    sc2 = random_spacecraft(4, 3)
    m2 = modes(eqx.tree_at(lambda s: s.panels.k, sc2, sc2.panels.k.at[1].set(0.0)))
    assert float(m2.frequency_hz[0]) < 1e-6 and np.all(np.isfinite(np.asarray(m2.frequency_hz)))


def _poles_reference(Kt, Ct, cluster_rtol=1e-8, imag_rtol=1e-12):
    """The damped poles as mode pairs, written independently in NumPy/SciPy with Python loops (the host
    implementation the package used before its poles moved into the compiled program): greedy clusters of
    repeated poles, null spaces and projectors per cluster, conjugate partners found by distance, real poles
    paired by overlap, modes matched to undamped modes by `scipy.optimize.linear_sum_assignment`."""
    from scipy.optimize import linear_sum_assignment

    n = Kt.shape[0]
    eye = np.eye(n)
    lam = np.linalg.eigvals(np.block([[np.zeros((n, n)), eye], [-Kt, -Ct]]))
    w2, phi = np.linalg.eigh(Kt)
    scale = max(np.max(np.abs(lam)), 1e-300)
    proj, overlap, done = np.zeros((2 * n, n, n), complex), np.zeros((2 * n, n)), np.zeros(2 * n, bool)
    for i in range(2 * n):
        if done[i]:
            continue
        members = [j for j in np.nonzero(~done)[0] if abs(lam[j] - lam[i]) <= cluster_rtol * scale]
        done[members] = True
        lc = np.mean(lam[members])
        V = np.linalg.svd(lc * lc * eye + lc * Ct + Kt)[2][-min(len(members), n):].conj().T
        proj[members] = V @ np.linalg.pinv(V.T @ (2 * lc * eye + Ct) @ V, rcond=1e-12) @ V.T / len(members)
        overlap[members] = np.sum(np.abs(phi.T @ V) ** 2, axis=1) / np.sum(np.abs(V) ** 2)
    tol = imag_rtol * scale
    upper = [i for i in range(2 * n) if lam[i].imag > tol]
    lower = [i for i in range(2 * n) if lam[i].imag < -tol]
    real = [i for i in range(2 * n) if abs(lam[i].imag) <= tol]
    units = []
    for i in upper:
        j = min(lower, key=lambda j: abs(lam[j] - np.conj(lam[i])))
        lower.remove(j)
        units.append((i, j))
    groups = {}
    for i in real:
        groups.setdefault(int(np.argmax(overlap[i])), []).append(i)
    if all(len(g) == 2 for g in groups.values()):
        units += [tuple(g) for g in groups.values()]
    else:
        srt = sorted(real, key=lambda i: lam[i].real)
        units += [(srt[2 * k], srt[2 * k + 1]) for k in range(len(srt) // 2)]
    undamped = linear_sum_assignment(-np.array([0.5 * (overlap[a] + overlap[b]) for a, b in units]))[1]
    wn = np.array([np.sqrt(max((lam[a] * lam[b]).real, 0.0)) for a, b in units])
    order = np.lexsort((w2[undamped], wn))
    return [units[u] for u in order], lam, proj, undamped[order], order >= len(upper)


def test_damped_poles_equal_an_independent_host_computation():
    """`damped_poles` (eigen-solve, clusters, pairing and matching inside the compiled program, static
    shapes) against `_poles_reference` on random systems: underdamped, overdamped (coupled damping), both, and
    repeated frequencies. Same mode pairs, derivative projectors, matched undamped modes and overdamped flags;
    the derivative (custom JVP) also against central differences of the poles."""
    from jaxhinge._analysis._linear._modes import _poles_in_program, damped_poles

    rng = np.random.default_rng(5)
    poles = jax.jit(_poles_in_program)
    lam_jvp = jax.jit(lambda K, C, dK: jax.jvp(lambda k: damped_poles(k, C)[0], (K,), (dK,)))
    for kind, n in [("light", 1), ("light", 4), ("heavy", 3), ("mixed", 4), ("repeated", 4), ("repeated", 3)]:
        Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
        w = rng.uniform(0.5, 10.0, n)
        if kind == "repeated":
            w = np.repeat(w[: (n + 1) // 2], 2)[:n]
            K, C = np.diag(w), np.diag(0.02 * np.sqrt(w))
        else:
            z = {"light": np.full(n, 0.01), "heavy": np.full(n, 3.0), "mixed": rng.choice([0.01, 3.0], n)}[kind]
            K, C = Q @ np.diag(w) @ Q.T, Q @ np.diag(2 * z * np.sqrt(w)) @ Q.T
            if kind == "heavy":
                A = rng.normal(size=(n, n))
                C = C + 0.3 * A @ A.T
            K, C = 0.5 * (K + K.T), 0.5 * (C + C.T)
        units, lam, proj, undamped, over = _poles_reference(K, C)
        l1, p1, u1, o1 = (np.asarray(x) for x in poles(jnp.asarray(K), jnp.asarray(C)))
        np.testing.assert_array_equal(u1, undamped)
        np.testing.assert_array_equal(o1, over)
        if kind == "mixed":
            assert o1.any() and not o1.all()
        for j, (a, b) in enumerate(units):
            mine = sorted(range(2), key=lambda k, j=j: (l1[2 * j + k].real, l1[2 * j + k].imag))
            ref = sorted((a, b), key=lambda i: (lam[i].real, lam[i].imag))
            for k, i in zip(mine, ref):
                assert abs(l1[2 * j + k] - lam[i]) <= 1e-10 * np.max(np.abs(lam))
                np.testing.assert_allclose(p1[2 * j + k], proj[i], atol=1e-9 * np.max(np.abs(proj)))
        if kind != "repeated":  # simple poles: the projector gives the derivative
            dK = rng.normal(size=(n, n))
            Kj, Cj, dKj, h = jnp.asarray(K), jnp.asarray(C), jnp.asarray(0.5 * (dK + dK.T)), 1e-6
            fd = (np.asarray(poles(Kj + h * dKj, Cj)[0]) - np.asarray(poles(Kj - h * dKj, Cj)[0])) / (2 * h)
            np.testing.assert_allclose(np.asarray(lam_jvp(Kj, Cj, dKj)[1]), fd, rtol=1e-6,
                                       atol=1e-7 * np.max(np.abs(lam)))


def test_eigvals_in_the_program_on_cpu_and_on_the_host_elsewhere():
    """On CPU the modal program holds LAPACK's eigen-solve and no host callback (so JAX can store it); the
    host branch used on other backends gives the same eigenvalues, batched too."""
    from jaxhinge._analysis._linear._modes import _eigvals_host, _modes, eigenvalues

    A = jnp.asarray(np.random.default_rng(3).normal(size=(2, 6, 6)))
    np.testing.assert_allclose(np.sort_complex(np.asarray(jax.jit(eigenvalues)(A))),
                               np.sort_complex(np.asarray(jax.jit(_eigvals_host)(A))), rtol=1e-12)
    text = jax.jit(_modes, static_argnums=1).lower(random_spacecraft(8, 3), jh.FreeFree()).as_text()
    assert "geev" in text and "callback" not in text


def test_assignment_is_optimal():
    """`_math.assignment` (Hungarian algorithm in JAX) reaches the optimum of SciPy's
    `linear_sum_assignment` on random square and rectangular problems, under `vmap` too."""
    from scipy.optimize import linear_sum_assignment

    from jaxhinge._math import assignment

    rng = np.random.default_rng(7)
    for n, m in [(4, 4), (2, 5), (5, 2)]:
        S = rng.random((20, n, m))
        cols = np.asarray(jax.vmap(assignment)(jnp.asarray(S)))
        for s, c in zip(S, cols):
            rows = np.nonzero(c >= 0)[0]
            r, k = linear_sum_assignment(-s)
            assert len(rows) == min(n, m) and len(set(c[rows])) == len(rows)
            assert s[rows, c[rows]].sum() == pytest.approx(s[r, k].sum(), rel=1e-14)


# ------------------------------------------------------------------------------------------------------------
# The linearisation is the simulator's
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["example", "random3d_01"])  # chains: test_chains.py (vs the Kane model)
def test_linearisation_is_the_simulators(case):
    """M = Hessian of the simulator's kinetic energy (`diagnostics`) = inverse of the Jacobian of its
    `accelerations` w.r.t. the generalized forces = the independent Kane mass matrix; A (autodiff of
    `accelerations`) = [[0, I], [-M^-1 K, -M^-1 C]]."""
    # (random3d_01 is the random configuration: non-diagonal hub inertia, rotated hinges, offset hub CoM)
    path = EXAMPLE if case == "example" else os.path.join(BSK_DATA, f"{case}.toml")
    sc = jh.load_scenario(path).spacecraft
    n = sc.panels.count
    dof = 6 + n
    lin = linearize(sc)
    M, K, C, A = (np.asarray(x) for x in (lin.M, lin.K, lin.C, lin.A))
    scale = np.abs(M).max()
    rest = rest_spacecraft(sc)
    q0 = jnp.zeros(dof)

    def kinetic(u):
        d = diagnostics(rest, _state(rest, q0, u))
        return d.totOrbEnergy + d.totRotEnergy  # spring energy is constant at theta = thetaRef

    M_energy = np.asarray(jax.jit(jax.hessian(kinetic))(jnp.zeros(dof)))
    np.testing.assert_allclose(M_energy, M, atol=1e-12 * scale)
    M_kane = jax.jit(_kane.mass_matrix)(rest, _state(rest, q0, q0))
    np.testing.assert_allclose(np.asarray(M_kane), M, atol=1e-12 * scale)

    def udot(Q):  # generalized forces: force at B (N frame), torque about B (B frame), hinge torques
        out = jh.accelerations(rest, _state(rest, q0, q0), jnp.zeros(3), Q[:3], Q[3:6], Q[6:])
        return jnp.concatenate(out)

    Minv = np.asarray(jax.jit(jax.jacfwd(udot))(jnp.zeros(dof)))
    np.testing.assert_allclose(Minv @ M, np.eye(dof), atol=1e-11)
    A_expected = np.block(
        [[np.zeros((dof, dof)), np.eye(dof)], [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]]
    )
    np.testing.assert_allclose(A, A_expected, atol=1e-11 * max(1.0, np.abs(A_expected).max()))
    assert lin.dof_names[:6] == ("x_B[1]", "x_B[2]", "x_B[3]", "phi_B[1]", "phi_B[2]", "phi_B[3]")
    np.testing.assert_array_equal(np.diag(K)[6:], sc.panels.k)
    np.testing.assert_array_equal(np.diag(C)[6:], sc.panels.c)


def test_state_matrix_eigenvalues_are_the_modes():
    """The flexible poles of the full 2(6+N) state matrix (12 rigid-body zeros removed) are the modes'."""
    sc = random_spacecraft(21, 3)
    lam = np.linalg.eigvals(np.asarray(linearize(sc).A))
    flexible = lam[np.abs(lam) > 1e-6]
    assert len(flexible) == 6
    m = modes(sc)
    expected = np.concatenate([np.asarray(m.eigenvalue), np.conj(np.asarray(m.eigenvalue))])
    for e in expected:
        assert np.min(np.abs(flexible - e)) < 1e-9 * abs(e)


def test_mode_shapes_normalised_momentum_free_and_energy_shares():
    sc = random_spacecraft(5, 4)
    M = np.asarray(jax.jit(mass_matrix)(sc))
    for boundary in ("free", "clamped"):
        m = modes(sc, boundary)
        X = np.asarray(m.shape)
        if boundary == "free":
            np.testing.assert_allclose(X @ M @ X.T, np.eye(4), atol=1e-10)
            # zero total linear and angular momentum: the hub rows of M x vanish
            np.testing.assert_allclose(X @ M[:, :6], 0.0, atol=1e-12)
        else:
            np.testing.assert_allclose(X[:, :6], 0.0)
            np.testing.assert_allclose(X[:, 6:] @ M[6:, 6:] @ X[:, 6:].T, np.eye(4), atol=1e-10)
        ef = np.asarray(m.energy_fraction)
        assert np.all(ef >= -1e-15)
        np.testing.assert_allclose(ef.sum(1), 1.0, rtol=1e-12)
        big = np.argmax(np.abs(X[:, 6:]), 1)
        assert np.all(X[np.arange(4), 6 + big] > 0)
    assert m.participants == ("hub_translation", "hub_rotation", "p0", "p1", "p2", "p3")


def test_modes_ascending_and_undamped_consistent():
    for seed in range(3):
        sc = random_spacecraft(30 + seed, 4, spread=1.1)  # close modes
        m = modes(sc)
        f = np.asarray(m.frequency_hz)
        assert np.all(np.diff(f) >= 0)
        # light damping: |lambda| and the undamped frequency agree to O(zeta^2)
        z = np.asarray(m.damping_ratio)
        np.testing.assert_allclose(np.asarray(m.natural_frequency_hz), f, rtol=5 * z.max() ** 2 + 1e-12)
        # without damping they are the same numbers
        m0 = modes(eqx.tree_at(lambda s: s.panels.c, sc, jnp.zeros(4)))
        np.testing.assert_allclose(np.asarray(m0.frequency_hz), np.asarray(m0.natural_frequency_hz), rtol=1e-12)


def test_gravity_loads_motor_torque_do_not_enter():
    s = jh.load_scenario(EXAMPLE)  # has gravity and load pulses
    sc = s.spacecraft
    plain = jh.Spacecraft(sc.hub, eqx.tree_at(lambda p: p.motorTorque, sc.panels, jnp.array([1.0, -2.0, 0.5])), None)
    np.testing.assert_array_equal(np.asarray(modes(s).frequency_hz), np.asarray(modes(plain).frequency_hz))


def test_bad_boundary():
    with pytest.raises(ValueError, match=r"boundary = 'fixed': allowed values are \"free\", \"clamped\""):
        modes(random_spacecraft(0, 1), "fixed")


def test_no_panels():
    sc = random_spacecraft(0, 1)
    hub_only = jh.Spacecraft(sc.hub, jh.Panels.concat())
    m = modes(hub_only)
    assert m.frequency_hz.shape == (0,)


# ------------------------------------------------------------------------------------------------------------
# Nonlinear simulation
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case", ["example_clamped", "random3d_00"])
def test_linear_frequencies_equal_nonlinear_simulation(case):
    """Each mode started alone (amplitude 1e-4 rad) in the nonlinear simulator oscillates at the linear
    model's frequency and decays at its damping ratio. Measured by zero crossings over 30 periods; the
    agreement is limited by the amplitude (nonlinear shift ~a^2 = 1e-8) and the cubic interpolation, far finer than
    an FFT's 1/30-period resolution. Measured (2026-11-28): frequencies 2.9e-9 (example, clamped) and 6.4e-8
    (random3d_00) relative, damping ratios 1.6e-6 and 3.0e-6 (a decay over 30 periods of a ratio ~0.01); bounds
    ~10x: 6e-7 (frequency) and 3e-5 (damping)."""
    if case.startswith("example"):
        s, boundary = jh.load_scenario(EXAMPLE), case.split("_")[1]
    else:
        s, boundary = jh.load_scenario(os.path.join(BSK_DATA, f"{case}.toml")), "free"
    r = measure_modes(s, boundary)
    assert r.success
    assert np.all(r.crossings >= 59)
    np.testing.assert_allclose(r.frequency_hz, r.model_frequency_hz, rtol=6e-7)
    np.testing.assert_allclose(r.damping_ratio, r.model_damping_ratio, rtol=3e-5)
    m = modes(s, boundary)
    np.testing.assert_allclose(r.damped_frequency_hz, np.asarray(m.damped_frequency_hz), rtol=6e-7)


def test_complex_mode_state_is_an_eigenvector():
    sc = random_spacecraft(8, 3)
    M = np.asarray(jax.jit(mass_matrix)(sc))
    lin = linearize(sc)
    for j in range(3):
        lam, x, u = complex_mode_state(sc, j)
        q = np.concatenate([np.linalg.solve(M[:6, :6], -M[:6, 6:] @ x), x])
        z = np.concatenate([q, u])
        np.testing.assert_allclose(np.asarray(lin.A) @ z, lam * z, atol=1e-10 * np.abs(lam * z).max())


# ------------------------------------------------------------------------------------------------------------
# Gradients
# ------------------------------------------------------------------------------------------------------------


def _outputs(sc, boundary):
    m = modes_unjitted(sc, boundary)
    return jnp.concatenate([m.frequency_hz, m.damping_ratio, m.natural_frequency_hz])


@pytest.mark.parametrize("boundary", ["free", "clamped"])
def test_frequency_gradients_match_finite_differences(boundary):
    """d(frequency, damping ratio, natural frequency)/d(every array leaf of the spacecraft): forward mode,
    reverse mode and central differences (relative step 1e-4 per leaf element) agree."""
    sc = random_spacecraft(42, 3)
    leaves, treedef = jax.tree.flatten(sc)
    flat0 = jnp.concatenate([jnp.ravel(x) for x in leaves])
    sizes = [x.size for x in leaves]
    shapes = [x.shape for x in leaves]

    def unflatten(flat):
        parts, i = [], 0
        for size, shape in zip(sizes, shapes):
            parts.append(flat[i : i + size].reshape(shape))
            i += size
        return jax.tree.unflatten(treedef, parts)

    def f(flat):
        return _outputs(unflatten(flat), boundary)

    Jf = np.asarray(jax.jit(jax.jacfwd(f))(flat0))
    Jr = np.asarray(jax.jit(jax.jacrev(f))(flat0))
    np.testing.assert_allclose(Jr, Jf, atol=1e-12 * np.abs(Jf).max())
    fj = jax.jit(f)
    x0 = np.asarray(flat0)
    h = 1e-4 * np.maximum(np.abs(x0), 1e-2)  # truncation O(h^2) ~1e-8; smaller h is roundoff-bound
    Jd = np.stack([(np.asarray(fj(x0 + h[i] * e)) - np.asarray(fj(x0 - h[i] * e))) / (2 * h[i])
                   for i, e in enumerate(np.eye(len(x0)))], 1)
    # elementwise, relative to each output's largest sensitivity (measured: 7e-9 free, 4e-10 clamped)
    tol = 1e-7 * np.abs(Jd).max(1, keepdims=True)
    assert np.all(np.abs(Jf - Jd) <= tol), np.abs(Jf - Jd).max()
    assert np.count_nonzero(np.abs(Jf) > 1e-12) > 50  # the check is not vacuous


@pytest.mark.parametrize("boundary", ["free", "clamped"])
def test_symmetric_panels_repeated_frequencies(boundary):
    """Four identical panels in a symmetric cross: repeated frequencies. No NaN anywhere; with tied k and c
    (a symmetry-preserving change) every gradient equals finite differences; with untied parameters the
    gradients are finite and the sum over each cluster is exact."""
    sc = _symmetric_cross()
    m = modes(sc, boundary)
    f = np.asarray(m.frequency_hz)
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(np.asarray(m.shape)))
    assert np.min(np.abs(np.diff(f))) < 1e-12 * f.max()  # a genuinely repeated frequency

    @jax.jit
    def tied(kc):
        s = eqx.tree_at(lambda q: (q.panels.k, q.panels.c), sc, (jnp.full(4, kc[0]), jnp.full(4, kc[1])))
        return _outputs(s, boundary)

    x0 = jnp.array([400.0, 3.0])
    Jt = np.asarray(jax.jit(jax.jacfwd(tied))(x0))
    Jt_rev = np.asarray(jax.jit(jax.jacrev(tied))(x0))
    h = np.array([1e-3, 1e-5])
    Jd = np.stack([(np.asarray(tied(x0 + h[i] * e)) - np.asarray(tied(x0 - h[i] * e))) / (2 * h[i])
                   for i, e in enumerate(np.eye(2))], 1)
    assert np.all(np.isfinite(Jt)) and np.all(np.isfinite(Jt_rev))
    np.testing.assert_allclose(Jt, Jd, atol=1e-7 * np.abs(Jd).max())
    np.testing.assert_allclose(Jt_rev, Jt, atol=1e-12 * np.abs(Jt).max())

    @jax.jit
    def untied(k):
        s = eqx.tree_at(lambda q: q.panels.k, sc, k)
        return modes_unjitted(s, boundary).frequency_hz

    k0 = jnp.full(4, 400.0)
    Ju = np.asarray(jax.jit(jax.jacfwd(untied))(k0))
    assert np.all(np.isfinite(Ju)) and np.all(np.isfinite(np.asarray(jax.jit(jax.jacrev(untied))(k0))))
    total = jax.jit(lambda k: jnp.sum(untied(k)))  # symmetric in the cluster members
    g = np.asarray(jax.jit(jax.grad(total))(k0))
    gd = np.array([(float(total(k0 + 1e-3 * e)) - float(total(k0 - 1e-3 * e))) / 2e-3 for e in np.eye(4)])
    np.testing.assert_allclose(g, gd, rtol=1e-6)
    np.testing.assert_allclose(Ju.sum(0), g, rtol=1e-12)


def test_vmap_equals_loop():
    sc = random_spacecraft(9, 3)
    ks = jnp.stack([sc.panels.k * s for s in (0.8, 1.0, 1.3)])

    @jax.jit
    def f(k):
        return modes_unjitted(eqx.tree_at(lambda q: q.panels.k, sc, k)).frequency_hz

    batched = np.asarray(jax.jit(jax.vmap(f))(ks))
    for i in range(3):
        np.testing.assert_allclose(batched[i], np.asarray(f(ks[i])), rtol=1e-14)


def _linalg_shapes(jaxpr) -> list[tuple[str, tuple[int, ...]]]:
    """(primitive, operand shape) of every LAPACK-backed primitive in `jaxpr` and its inner jaxprs."""
    found = []
    for e in jaxpr.eqns:
        if e.primitive.name in ("eig", "eigh", "svd", "cholesky", "lu", "triangular_solve"):
            found.append((e.primitive.name, tuple(e.invars[0].aval.shape)))
        for p in e.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += _linalg_shapes(inner)
    return found


def test_vmapped_modes_solve_one_member_at_a_time():
    """`jax.vmap(jh.modes)` (as notebook 07's map) runs its eigen-solves and factorisations one member at a time
    (`one_member_at_a_time`: jaxlib 0.10's batched CPU LAPACK kernels can deadlock XLA's thread pool,
    docs/speed.md), and gives the loop's numbers: the same per-member program, so equal to round-off."""
    sc = random_spacecraft(9, 3)
    members = 5
    ks = jnp.stack([sc.panels.k * s for s in np.linspace(0.7, 1.4, members)])
    f = lambda k: jh.modes(eqx.tree_at(lambda q: q.panels.k, sc, k), "free")
    shapes = _linalg_shapes(jax.make_jaxpr(jax.vmap(f))(ks).jaxpr)
    assert {name for name, _ in shapes} >= {"eig", "eigh", "cholesky"}
    assert all(members not in shape for _, shape in shapes), shapes
    batched = jax.vmap(f)(ks)
    for i in range(members):
        one = f(ks[i])
        for field in ("frequency_hz", "damping_ratio", "natural_frequency_hz", "shape", "energy_fraction"):
            np.testing.assert_allclose(np.asarray(getattr(batched, field))[i], np.asarray(getattr(one, field)),
                                       rtol=1e-12, atol=1e-14, err_msg=field)
    # derivatives through the per-member rule: jacfwd under vmap equals the loop's
    g = jax.jit(jax.vmap(jax.jacfwd(lambda k: f(k).frequency_hz)))(ks)
    np.testing.assert_allclose(np.asarray(g)[1], np.asarray(jax.jacfwd(lambda k: f(k).frequency_hz)(ks[1])),
                               rtol=1e-10)


def test_reduced_matrices_symmetric_positive_definite():
    sc = random_spacecraft(12, 5)
    for b in (jh.FreeFree(), jh.HubClamped()):
        Mr = np.asarray(eqx.filter_jit(reduced_matrices)(sc, b)[0])
        np.testing.assert_array_equal(Mr, Mr.T)
        assert np.linalg.eigvalsh(Mr).min() > 0
    # the hub removes mass from the hinge coordinates' point of view: M_free <= M_clamped
    Mf = np.asarray(eqx.filter_jit(reduced_matrices)(sc, jh.FreeFree())[0])
    Mc = np.asarray(eqx.filter_jit(reduced_matrices)(sc, jh.HubClamped())[0])
    assert np.linalg.eigvalsh(Mc - Mf).min() > -1e-12


def test_body_jacobians_velocities():
    """Panel CoM velocity from the Jacobian equals the simulator's inertial panel velocity (diagnostics)."""
    sc = random_spacecraft(13, 3)
    rest = rest_spacecraft(sc)
    u = jnp.asarray(np.random.default_rng(0).normal(size=9))
    d = jax.jit(diagnostics)(rest, _state(rest, jnp.zeros(9), u))
    bj = jax.jit(body_jacobians)(sc)
    np.testing.assert_allclose(np.einsum("bia,a->bi", np.asarray(bj.J_v), u)[1:], np.asarray(d.panel_v_SN_N),
                               atol=1e-13)


# ------------------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "jaxhinge", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, check=False)


def _kane_poles(sc: jh.Spacecraft, clamped: bool = False) -> np.ndarray:
    """The flexible poles (Im > 0, by |lambda|) of the spacecraft at rest about thetaRef, from the independent Kane
    model's mass matrix (tests/_kane.py) and the hinge springs and dampers written here, K = diag(0_6, k),
    C = diag(0_6, c): SciPy's eigen-solve of the state matrix [[0, I], [-M^-1 K, -M^-1 C]], its 12 rigid-body zeros
    removed (clamped: the hinge block of M alone)."""
    import scipy.linalg

    n = len(sc.panels.names)
    rest = jh.State(r_BN_N=jnp.zeros(3), v_BN_N=jnp.zeros(3), sigma_BN=jnp.zeros(3), omega_BN_B=jnp.zeros(3),
                    theta=sc.panels.thetaRef, thetaDot=jnp.zeros(n))
    M = np.asarray(_kane.mass_matrix(sc, rest))
    K, C = np.zeros_like(M), np.zeros_like(M)
    K[6:, 6:], C[6:, 6:] = np.diag(np.asarray(sc.panels.k)), np.diag(np.asarray(sc.panels.c))
    if clamped:
        M, K, C = M[6:, 6:], K[6:, 6:], C[6:, 6:]
    Z, eye = np.zeros_like(M), np.eye(len(M))
    lam = scipy.linalg.eigvals(np.block([[Z, eye], [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]]))
    lam = lam[(np.abs(lam) > 1e-6) & (lam.imag > 0)]
    return lam[np.argsort(np.abs(lam))]


def test_cli_modes_json(capsys):
    """`jaxhinge modes --json` prints the free-free modes of the example: their frequencies |lambda| / 2 pi and
    damping ratios -Re lambda / |lambda| are the poles of the independent Kane model (`_kane_poles`: its own mass
    matrix, SciPy's eigen-solve); measured 6.7e-16 relative (frequencies) and 1.6e-14 (damping ratios, ~0.005-0.01,
    set by the small real parts), about 10x that allowed (float round-off of two formulations)."""
    from jaxhinge._cli import main

    assert main(["modes", EXAMPLE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # exactly one JSON object
    f = [mm["frequency_hz"] for mm in data["modes"]]
    assert f == sorted(f) and len(f) == 3
    lam = _kane_poles(jh.load_scenario(EXAMPLE).spacecraft)
    zeta = [mm["damping_ratio"] for mm in data["modes"]]
    np.testing.assert_allclose(f, np.abs(lam) / TWO_PI, rtol=1e-14)
    np.testing.assert_allclose(zeta, -lam.real / np.abs(lam), rtol=2e-13)
    assert data["boundary"] == "free" and data["rigid_body_modes_excluded"] == 6
    assert set(data["modes"][0]["energy_fraction"]) == {"hub_translation", "hub_rotation", "wing_pY", "wing_mY",
                                                        "antenna"}


def test_cli_modes_table_clamped(capsys):
    from jaxhinge._cli import main

    assert main(["modes", EXAMPLE, "--clamped"]) == 0
    out = capsys.readouterr().out
    assert "boundary            clamped" in out
    assert f"{np.abs(_kane_poles(jh.load_scenario(EXAMPLE).spacecraft, clamped=True)[2]) / TWO_PI:.6f}" in out
    assert "hub transl." in out and "antenna" in out


def test_cli_modes_bad_scenario(tmp_path):
    """The one subprocess test of `jaxhinge modes`: exit status 2, one line on stderr, nothing on stdout."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[hub]\nmHub = -1.0\nIHubPntBc_B = [[1.0,0,0],[0,1.0,0],[0,0,1.0]]\n")
    proc = _cli("modes", str(bad), "--json")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"jaxhinge: error: {bad}: hub.mHub = -1.0: must be > 0 (kg)"]
    assert proc.stdout == ""


def test_no_recompilation_for_new_values():
    """One compiled program per model structure and boundary: new parameter values reuse it."""
    from jaxhinge._analysis._linear._modes import _modes_jit

    modes(random_spacecraft(50, 2))
    before = _modes_jit.plain._cached._cache_size()
    for seed in (51, 52):
        modes(random_spacecraft(seed, 2))
    assert _modes_jit.plain._cached._cache_size() == before
