"""Chains of hinged panels (panels hinged to panels in the one `Panels` tree): non-identical panels, mixed with
single panels.

References:
- Basilisk `nHingedRigidBodyStateEffector` (4 + 3 identical panels, its own test configuration) and
  `dualHingedRigidBodyStateEffector` (non-identical pairs) trajectories: `tests/data/bsk/chain_*.{toml,npz}`,
  compared to round-off (tolerances in `tests/_basilisk.py`) by `tests/test_basilisk_reference.py` (which runs
  every case in that folder; not repeated here to avoid compiling the same programs twice). Here: that the set is there and what it covers.
- The independent Kane / autodiff mass-matrix model (`tests/_kane.py`, walks the parents, no shared code).
- Conservation of energy and momentum (long undamped non-identical chain).
- Known parameters recovered by a modal fit; scenario-file validation and exact round trip.
"""

import os
import re

import _kane as kane
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _helpers import _rotation, mixed, random_state
from conftest import DATA

import jaxhinge as jh
from jaxhinge._analysis._linear._linearize import linearize
from jaxhinge._dynamics._backsub import accelerations
from jaxhinge._dynamics._tree_solve import hinge_solve
from jaxhinge._model._params import apply_parameters, parameter_names
from jaxhinge._model._spacecraft import Spacecraft, State

BSK = os.path.join(DATA, "bsk")


def _chains(panels):
    """Lengths of the chains (runs of panels with a chain label), in order."""
    out = []
    for i, ch in enumerate(panels.chain):
        if ch and panels.parent[i] < 0:
            out.append(0)
        if ch:
            out[-1] += 1
    return out


_acc = eqx.filter_jit(accelerations)
_kacc = eqx.filter_jit(kane.accelerations)
_kM = eqx.filter_jit(kane.mass_matrix)  # the Kane model runs slowly op by op: compile it


@eqx.filter_jit
def _kane_diagnostics(sc, st):
    return (kane.kinetic_energy(sc, st), kane.angular_momentum_pntC_N(sc, st), kane.center_of_mass_N(sc, st),
            kane.body_velocities_N(sc, st))  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# Basilisk reference set (compared in test_basilisk_reference.py)
# ------------------------------------------------------------------------------------------------------------


def test_basilisk_chain_references_present():
    """The nHinged test configuration (4 + 3 identical panels, with and without gravity) and non-identical
    dualHinged pairs are in the reference set that test_basilisk_reference.py compares (to round-off)."""
    s = jh.load_scenario(os.path.join(BSK, "chain_nhinged_noGravity.toml"))
    p = s.spacecraft.panels
    assert _chains(p) == [4, 3] and p.parent == (-1, 0, 1, 2, -1, 4, 5)
    assert s.simulation.dt == 1e-4 and s.simulation.integrator.name == "rk4"
    # Basilisk's nHinged test: identical panels, hinge-to-hinge 2d
    assert np.all(np.asarray(p.mass) == 50.0) and np.all(np.asarray(p.l)[[0, 1, 2, 4, 5]] == 1.5)
    s = jh.load_scenario(os.path.join(BSK, "chain_dual_mixed.toml"))
    p = s.spacecraft.panels
    assert _chains(p) == [2, 2] and p.parent == (-1, -1, 1, -1, 3)  # a single panel, then two pairs
    for i in (1, 3):  # non-identical pairs
        assert p.mass[i] != p.mass[i + 1] and p.d[i] != p.d[i + 1] and np.all(p.c[i:i + 2] > 0)
    ref = np.load(os.path.join(BSK, "chain_dual_mixed.npz"))
    assert ref["theta"].shape[1] == 5 and ref["panel_r_SN_N"].shape[1] == 5
    assert os.path.exists(os.path.join(BSK, "chain_dual_gravity.npz"))


# ------------------------------------------------------------------------------------------------------------
# Independent Kane model
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gravity", [False, True])
def test_accelerations_match_kane(gravity):
    """Back-substitution (chains' E, F, G, v and their hub contributions) vs the dense (6+N) Kane solve, on
    random non-identical chains mixed with single panels, random states, loads and motor torques."""
    rng = np.random.default_rng(61 + gravity)
    lengths = (4,) if gravity else (3, 2)
    n_single = 1 if gravity else 2
    worst = 0.0
    for _ in range(3):
        sc = mixed(rng, n_single, lengths, gravity)
        n = n_single + sum(lengths)
        st = random_state(rng, n, orbit=gravity)
        loads = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3), rng.normal(size=n)
        got, want = _acc(sc, st, *loads), _kacc(sc, st, *loads)
        for g, w in zip(got, want):
            worst = max(worst, float(jnp.max(jnp.abs(g - w)) / jnp.max(jnp.abs(w))))
    assert worst < 1e-12, worst


def test_diagnostics_match_kane():
    """Energy, angular momentum about C, CoM and panel velocities (chain panels included) vs the Kane model's
    body-by-body sums; the initial state puts the system CoM (chain panels included) at r_CN_NInit."""
    rng = np.random.default_rng(7)
    sc = mixed(rng, 2, (3, 2))
    sc = eqx.tree_at(lambda q: q.panels.k, sc, jnp.zeros(7))  # kinetic energy only
    st = random_state(rng, 7)
    d = jh.diagnostics(sc, st)
    T, H, (r_C, v_C), (v_bodies, _) = _kane_diagnostics(sc, st)
    np.testing.assert_allclose(d.totOrbEnergy + d.totRotEnergy, T, rtol=1e-13)
    np.testing.assert_allclose(d.totRotAngMomPntC_N, H, rtol=1e-12)
    np.testing.assert_allclose(d.r_CN_N, r_C, rtol=1e-13)
    np.testing.assert_allclose(d.v_CN_N, v_C, rtol=1e-13)
    np.testing.assert_allclose(d.panel_v_SN_N, v_bodies[1:], atol=1e-12)
    ini = jh.InitialState(r_C, v_C, st.sigma_BN, st.omega_BN_B, st.theta, st.thetaDot)
    st0 = jh.initial_state(sc, ini)
    np.testing.assert_allclose(st0.r_BN_N, st.r_BN_N, atol=1e-12)
    np.testing.assert_allclose(st0.v_BN_N, st.v_BN_N, atol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Conservation: a long undamped non-identical chain
# ------------------------------------------------------------------------------------------------------------


def _long_chain(L=8, seed=8):
    rng = np.random.default_rng(seed)
    panels = []
    for j in range(L):
        p = {
            "mass": float(rng.uniform(10, 60)),
            # a rigid body's moments: the largest at most the sum of the other two (scenario files check it)
            "IPntS_S": np.diag(np.minimum(I := rng.uniform(5, 40, 3), I.sum() - I)).tolist(),
            "d": float(rng.uniform(0.3, 0.8)),
            "k": float(rng.uniform(50, 400)),
            "thetaInit": float(rng.uniform(-0.3, 0.3)),
            "thetaDotInit": float(rng.normal(scale=0.3)),
            "thetaRef": float(rng.uniform(-0.2, 0.2)),
        }
        if j < L - 1:
            p["l"] = 2.0 * p["d"] + float(rng.uniform(-0.1, 0.2))
        panels.append(p)
    return {
        "hub": {
            "mHub": 500.0,
            "IHubPntBc_B": [[600.0, 20.0, -10.0], [20.0, 500.0, 5.0], [-10.0, 5.0, 400.0]],
            "r_BcB_B": [0.1, -0.05, 0.2],
            "r_CN_NInit": [1.0, 2.0, 3.0],
            "v_CN_NInit": [0.1, -0.2, 0.3],
            "sigma_BNInit": [0.1, 0.2, -0.1],
            "omega_BN_BInit": [0.2, -0.15, 0.1],
        },
        "panels": [{"name": "boom", "mass": 15.0, "IPntS_S": [[4.0, 0, 0], [0, 3.0, 0], [0, 0, 2.0]], "d": 0.7,
                    "k": 60.0, "r_HB_B": [0.0, 0.7, 0.0], "dcm_HB": _rotation(rng).tolist(), "thetaInit": 0.1}],
        "chains": [{"name": "wing", "r_HB_B": [0.6, 0.0, 0.8], "dcm_HB": _rotation(rng).tolist(), "panels": panels}],
        "simulation": {"t_end": 3.0, "save_dt": 0.1, "integrator": "rk4", "dt": 1e-3},
    }  # fmt: skip


def test_long_undamped_chain_conserves_energy_and_momentum():
    tr = jh.simulate(jh.scenario_from_dict(_long_chain()))
    assert bool(tr.success)
    assert np.ptp(np.asarray(tr.theta)[:, 1:], axis=0).min() > 0.1  # every chain hinge really moves
    E = np.asarray(tr.totOrbEnergy + tr.totRotEnergy)
    H = np.asarray(tr.totRotAngMomPntC_N)
    P = np.asarray(tr.totOrbAngMomPntN_N)
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-10
    assert np.max(np.abs(H - H[0])) / np.max(np.abs(H[0])) < 1e-10
    assert np.max(np.abs(P - P[0])) / np.max(np.abs(P[0])) < 1e-10
    v = np.asarray(tr.v_CN_N)
    assert np.max(np.abs(v - v[0])) / np.linalg.norm(v[0]) < 1e-10  # no external force: uniform CoM motion


# ------------------------------------------------------------------------------------------------------------
# Modes and fits
# ------------------------------------------------------------------------------------------------------------


def _kane_rest_matrices(sc):
    z3 = jnp.zeros(3)
    st = State(z3, z3, z3, z3, sc.panels.thetaRef, jnp.zeros(sc.panels.count))
    return _kM(sc, st), np.diag(np.concatenate([np.zeros(6), sc.panels.k]))


def test_modes_match_kane_linearisation():
    """Clamped (accordion) and free modes of a mixed model vs generalized eigenvalues of the Kane model's
    mass matrix at rest (thetaRef != 0) and the hinge stiffness; the simulator's state matrix has -M^-1 K."""
    rng = np.random.default_rng(11)
    sc = mixed(rng, 1, (3, 2))
    M, K = _kane_rest_matrices(sc)
    lin = linearize(sc)
    np.testing.assert_allclose(lin.M, M, rtol=0, atol=1e-10 * np.abs(M).max())
    dof = M.shape[0]
    np.testing.assert_allclose(
        lin.A[dof:, :dof], -np.linalg.solve(M, K), atol=1e-10 * np.abs(np.linalg.solve(M, K)).max()
    )
    Mtt = M[6:, 6:]
    for boundary, Mr in (("clamped", Mtt), ("free", Mtt - M[6:, :6] @ np.linalg.solve(M[:6, :6], M[:6, 6:]))):
        w2 = np.sort(np.linalg.eigvals(np.linalg.solve(Mr, K[6:, 6:])).real)
        m = jh.modes(sc, boundary=boundary)
        np.testing.assert_allclose(np.asarray(m.natural_frequency_hz), np.sqrt(w2) / (2 * np.pi), rtol=1e-10)
        assert m.panel_names == ("p0", "c0_1", "c0_2", "c0_3", "c1_1", "c1_2")


def test_accordion_modes_of_identical_clamped_chain():
    """Accordion modes of a clamped, straight chain of identical panels vs the hand-written chain matrices:
    kinetic energy in absolute angle rates w, M_w = m a^T a + I_2 (CoM of panel i at lever a_ij = 2d (j < i),
    d (j = i) from hinge j, all s3 parallel), relative angles theta = T^-1 phi, M = T^T M_w T, K = k I."""
    L, m, I2, d, k = 4, 10.0, 2.0, 0.5, 100.0
    data = {
        "hub": {"mHub": 1.0, "IHubPntBc_B": np.eye(3).tolist()},
        "chains": [{"name": "w", "r_HB_B": [0.0, 0.0, 0.0], "dcm_HB": np.eye(3).tolist(),
                    "panels": [{"mass": m, "IPntS_S": np.diag([3.0, I2, 1.0]).tolist(), "d": d, "l": 2 * d, "k": k}
                               for _ in range(L - 1)]
                    + [{"mass": m, "IPntS_S": np.diag([3.0, I2, 1.0]).tolist(), "d": d, "k": k}]}],
    }  # fmt: skip
    sc = jh.scenario_from_dict(data).spacecraft
    a = np.tril(np.full((L, L), 2 * d), -1) + d * np.eye(L)
    Mw = m * a.T @ a + I2 * np.eye(L)
    T = np.tril(np.ones((L, L)))
    Mth = T.T @ Mw @ T
    w2 = np.sort(np.linalg.eigvals(np.linalg.solve(Mth, k * np.eye(L))).real)
    f = np.asarray(jh.modes(sc, boundary="clamped").natural_frequency_hz)
    np.testing.assert_allclose(f, np.sqrt(w2) / (2 * np.pi), rtol=1e-12)


def test_fit_recovers_chain_hinge_k_and_c():
    """Per-hinge k and c of two non-identical chains recovered from the clamped modes of the true model."""
    s = jh.load_scenario(os.path.join(BSK, "chain_dual_mixed.toml"))
    sc = s.spacecraft
    truth = jh.modes(sc, boundary="clamped")
    k, c = sc.panels.k, sc.panels.c
    start = eqx.tree_at(lambda q: (q.panels.k, q.panels.c), sc,
                        (k * jnp.array([1, 1.3, 0.8, 1.2, 0.9]), c * jnp.array([1, 1.5, 0.7, 1.3, 1.2])))  # fmt: skip
    free = [f"{p}.{q}" for q in ("k", "c") for p in ("wingA_1", "wingA_2", "wingB_1", "wingB_2")]
    r = jh.fit(eqx.tree_at(lambda q: q.spacecraft, s, start), jh.ModalTargets(np.asarray(truth.frequency_hz), damping_ratios=np.asarray(truth.damping_ratio)), free=free, boundary="clamped", check=False)  # fmt: skip
    want = dict(zip(free, [*np.asarray(k)[1:], *np.asarray(c)[1:]]))
    for name in free:
        np.testing.assert_allclose(r.parameter(name)[0], want[name], rtol=1e-6)
    fitted = r.scenario.spacecraft
    np.testing.assert_allclose(fitted.panels.k, k, rtol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# Scenario files, names, batch parameters
# ------------------------------------------------------------------------------------------------------------


def test_round_trip_and_order(tmp_path):
    from jaxhinge import example_path

    for path in (example_path("folding_wing"), os.path.join(BSK, "chain_nhinged_noGravity.toml"),
                 os.path.join(BSK, "chain_dual_mixed.toml")):  # fmt: skip
        s = jh.load_scenario(path)
        jh.dump_scenario(s, tmp_path / "x.toml")
        s2 = jh.load_scenario(tmp_path / "x.toml")
        for a, b in zip(jax.tree.leaves(s), jax.tree.leaves(s2)):
            assert np.array_equal(np.asarray(a), np.asarray(b))
        assert jax.tree.structure(s) == jax.tree.structure(s2)
    assert s.spacecraft.panels.names == ("boom", "wingA_1", "wingA_2", "wingB_1", "wingB_2")
    # theta: single panels first, then chain panels chain by chain, root first
    raw = jh.scenario_to_dict(s)
    want = [raw["panels"][0]["thetaInit"]] + [p["thetaInit"] for ch in raw["chains"] for p in ch["panels"]]
    assert list(np.asarray(s.initial.thetaInit)) == want
    assert "l" not in raw["chains"][0]["panels"][-1]  # unused on the last panel, not written


def test_batch_parameter_names_reach_chain_panels():
    s = jh.load_scenario(os.path.join(BSK, "chain_dual_mixed.toml"))
    assert {"wingB_2.k", "wingA_1.l", "wingA_1.thetaInit"} <= set(parameter_names(s))
    s2 = apply_parameters(
        s, {"wingB_2.k": 77.0, "wingA_2.thetaInit": 0.3, "wingA_1.IPntS_S": np.array([1.0, 4.0, 1.0])}
    )
    assert float(s2.spacecraft.panels.k[4]) == 77.0 and float(s2.initial.thetaInit[2]) == 0.3
    assert float(s2.spacecraft.panels.IPntS_S[1, 1, 1]) == 4.0 * float(s.spacecraft.panels.IPntS_S[1, 1, 1])
    # the hinge frame of a chain belongs to its root: set there, shared by the whole chain
    s3 = apply_parameters(s, {"wingA_1.r_HB_B": np.array([1.0, 2.0, 3.0])})
    np.testing.assert_array_equal(np.asarray(s3.spacecraft.panels.r_HB_B)[1:3], [[1.0, 2.0, 3.0]] * 2)
    with pytest.raises(jh.ParameterError, match='"wingA_1.dcm_HB"'):
        apply_parameters(s, {"wingA_2.dcm_HB": np.zeros(3)})


def _base():
    return {
        "hub": {"mHub": 100.0, "IHubPntBc_B": np.eye(3).tolist()},
        "panels": [{"name": "solo", "mass": 1.0, "IPntS_S": np.eye(3).tolist(), "d": 1.0, "k": 1.0,
                    "r_HB_B": [0.0, 0.0, 0.0], "dcm_HB": np.eye(3).tolist()}],
        "chains": [{"name": "wing", "r_HB_B": [1.0, 0.0, 0.0], "dcm_HB": np.eye(3).tolist(),
                    "panels": [{"mass": 2.0, "IPntS_S": np.eye(3).tolist(), "d": 0.5, "l": 1.0, "k": 3.0},
                               {"mass": 2.0, "IPntS_S": np.eye(3).tolist(), "d": 0.5, "k": 3.0}]}],
    }  # fmt: skip


def _set(path, value):
    def edit(data):
        t = data
        for p in path[:-1]:
            t = t[p]
        if value is _DEL:
            del t[path[-1]]
        else:
            t[path[-1]] = value

    return edit


_DEL = object()
BAD = [
    ("missing_l", _set(["chains", 0, "panels", 0, "l"], _DEL),
     ['chains[0] ("wing").panels[0] ("wing_1"): missing required key \'l\'', "only the last panel may omit it"]),
    ("negative_l", _set(["chains", 0, "panels", 0, "l"], -1.0), ['chains[0] ("wing").panels[0] ("wing_1").l = -1.0: must be > 0']),
    # issue 14 item 16: l places the next panel's hinge; on the last panel it would be silently unused
    ("l_on_last_panel", _set(["chains", 0, "panels", 1, "l"], 1.0),
     ['chains[0] ("wing").panels[1] ("wing_2").l = 1.0: not allowed on the last panel of a chain', "remove it"]),
    ("unknown_panel_key", _set(["chains", 0, "panels", 1, "mas"], 1.0),
     ['chains[0] ("wing").panels[1] ("wing_2"): unknown key \'mas\' (did you mean \'mass\'?)']),
    ("unknown_chain_key", _set(["chains", 0, "dcm_BH"], 1.0),
     ['chains[0] ("wing"): unknown key \'dcm_BH\' (did you mean \'dcm_HB\'?)']),
    ("no_panels", _set(["chains", 0, "panels"], []), ['chains[0] ("wing").panels = []: must be a non-empty array']),
    ("missing_dcm", _set(["chains", 0, "dcm_HB"], _DEL), ["chains[0] (\"wing\"): missing required key 'dcm_HB'"]),
    ("reflection", _set(["chains", 0, "dcm_HB"], np.diag([1.0, 1.0, -1.0]).tolist()),
     ['chains[0] ("wing").dcm_HB = ', "determinant is -1, not +1"]),
    ("duplicate_name", _set(["chains", 0, "panels", 1, "name"], "solo"),
     ['chains[0] ("wing").panels[1].name = "solo": duplicate panel name, already used by panels[0]']),
    ("duplicate_default_name", _set(["panels", 0, "name"], "wing_2"),
     ['chains[0] ("wing").panels[1].name = "wing_2": duplicate panel name (the default name)']),
    ("bad_chain_name", _set(["chains", 0, "name"], "my wing"), ['chains[0].name = "my wing": must be a non-empty']),
    ("non_diagonal", _set(["chains", 0, "panels", 1, "IPntS_S"], [[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0, 0, 1.0]]),
     ['chains[0] ("wing").panels[1] ("wing_2").IPntS_S[1][2] = 0.5: IPntS_S must be diagonal']),
    ("chains_not_array", _set(["chains"], {"name": "x"}), ["chains = ", "must be an array of tables ([[chains]]"]),
]  # fmt: skip


@pytest.mark.parametrize("edit, fragments", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_invalid_chain_input_refused(edit, fragments):
    data = _base()
    jh.scenario_from_dict(data, "my.toml")  # the base is valid
    edit(data)
    pattern = "^my.toml: " + ".*".join(re.escape(f) for f in fragments)
    with pytest.raises(jh.ScenarioError, match=pattern):
        jh.scenario_from_dict(data, "my.toml")


def test_chain_parameter_derivatives_match_finite_differences():
    """Forward-mode derivatives of the accelerations w.r.t. chain parameters (mass, d, l, k, c, hinge frame)
    vs central finite differences: the chain model is differentiable in every parameter leaf."""
    rng = np.random.default_rng(5)
    sc = mixed(rng, 1, (3,))
    st = random_state(rng, 4)
    fields = ("mass", "d", "l", "k", "c")
    p0 = jnp.concatenate([getattr(sc.panels, f)[1:] for f in fields])

    def f(p):
        new = eqx.tree_at(lambda c: tuple(getattr(c, x) for x in fields), sc.panels,
                          tuple(jnp.concatenate([getattr(sc.panels, x)[:1], v]) for x, v in zip(fields, jnp.split(p, len(fields)))))
        out = accelerations(Spacecraft(sc.hub, new, None), st, *(jnp.zeros(3),) * 3, 0.0)
        return jnp.concatenate([out[0], out[1], out[2]])

    value_and_jvp = jax.jit(lambda p, dp: jax.jvp(f, (p,), (dp,)))  # one compiled program for both
    eye = jnp.eye(p0.size)
    J = jnp.stack([value_and_jvp(p0, eye[i])[1] for i in range(p0.size)], 1)
    h = 1e-6 * jnp.maximum(jnp.abs(p0), 1.0)  # l of a chain's last panel is 0 (unused): a step of 1e-6 m there
    zero = jnp.zeros_like(p0)
    fd = jnp.stack(
        [(value_and_jvp(p0 + h[i] * eye[i], zero)[0] - value_and_jvp(p0 - h[i] * eye[i], zero)[0]) / (2 * h[i])
         for i in range(p0.size)], 1)  # fmt: skip
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-7 * float(jnp.abs(J).max()))


# ------------------------------------------------------------------------------------------------------------
# Chain hinges in every analysis: telemetry fit, sensitivities, sweeps
# ------------------------------------------------------------------------------------------------------------

CHAIN_FREE = ["wingA_1.k", "wingA_2.k", "wingB_1.k", "wingB_2.k", "wingA_2.c", "wingB_2.c"]
CHAIN_COLS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_wingA_1", "theta_wingA_2", "theta_wingB_1",
              "theta_wingB_2"]


def test_telemetry_fit_recovers_chain_k_and_c_from_basilisk_dual_hinged_data():
    """`theta_<chain panel>` columns of Basilisk's dualHingedRigidBodyStateEffector run (two non-identical pairs
    and a single panel, 2 s, 101 samples) with gyro noise 1e-5 rad/s and hinge-angle noise 1e-4 rad: the four
    chain hinge stiffnesses within 1 % and the two outer dampings within 10 %, from starts 20-30 % off, every
    truth within 4 sigma."""
    from jaxhinge._model._params import nominal

    s = jh.load_scenario(os.path.join(BSK, "chain_dual_mixed.toml"))
    t, v = jh.telemetry_columns(os.path.join(BSK, "chain_dual_mixed.npz"), s, CHAIN_COLS)
    sigma = np.array([1e-5] * 3 + [1e-4] * 4)
    tel = jh.telemetry_from_arrays(t, v + np.random.default_rng(4).normal(size=v.shape) * sigma, CHAIN_COLS,
                                   sigma, s)
    truth = {n: float(nominal(s, n)) for n in CHAIN_FREE}
    factors = [1.25, 0.8, 1.2, 0.75, 1.3, 0.7]
    guess = jh.apply_parameters(s, {n: f * truth[n] for n, f in zip(CHAIN_FREE, factors)})
    res = jh.identify(guess, tel, CHAIN_FREE)
    assert res.converged, res.message
    for n in CHAIN_FREE:
        val, sig = res.parameter(n)
        tol = 0.01 if n.endswith(".k") else 0.10
        assert abs(val - truth[n]) <= tol * truth[n], (n, val, truth[n])
        assert abs(val - truth[n]) < 4 * sig, (n, val, truth[n], sig)


def test_chain_sensitivities_equal_central_finite_differences():
    """d theta(t) (every hinge, chain hinges included, shape (T, panels, P)), d settling_time and d
    modal_frequencies w.r.t. chain and single-panel parameters, forward mode, vs central differences of the
    simulator / modes (rk4: the derivative of the discrete solution)."""
    s = jh.load_scenario(jh.example_path("folding_wing")).with_simulation(t_end=2.0, save_dt=0.05, dt=0.01)
    params = ["wing_2.k", "wing_3.c", "wing_1.mass", "antenna.k"]
    outputs = ["theta", {"name": "settling_time", "threshold": 0.05}, "modal_frequencies"]
    res = jh.sensitivity(s, outputs, params, mode="forward")
    assert res.success
    N, T = s.spacecraft.panels.count, 41
    _, J_theta, _ = res.output("theta")
    assert J_theta.shape == (T, N, len(params))
    assert res.output("modal_frequencies")[1].shape == (N, len(params))

    from jaxhinge._model._params import nominal

    def rows(scn):  # outputs of a full re-run at perturbed values (the same compiled program)
        return jh.sensitivity(scn, outputs, params, mode="forward").output_values

    fd = []
    for p in params:
        x = float(nominal(s, p))
        h = 1e-6 * abs(x)
        up = rows(jh.apply_parameters(s, {p: x + h}))
        dn = rows(jh.apply_parameters(s, {p: x - h}))
        fd.append((up - dn) / (2 * h))
    fd = np.stack(fd, 1)
    J = res.jacobian
    scale = np.maximum(np.abs(J).max(axis=1, keepdims=True), 1e-12)
    np.testing.assert_allclose(J / scale, fd / scale, atol=2e-6)
    assert np.abs(res.output("theta")[1][:, 2:, :]).max() > 0  # chain hinges do respond


def test_sweep_over_chain_parameters_equals_single_runs():
    """`simulate_batch` dispersing a chain hinge stiffness and a chain panel mass equals one `simulate` per
    member (one compiled batch), to 1e-12."""
    s = jh.load_scenario(jh.example_path("folding_wing")).with_simulation(t_end=1.0, save_dt=0.05, dt=0.01)
    params = {"wing_2.k": np.array([300.0, 450.0, 600.0]), "wing_4.mass": np.array([10.0, 14.0, 18.0])}
    batch = jh.simulate_batch(s, params, chunk_size=3)
    for m in range(3):
        one = jh.simulate(jh.apply_parameters(s, {k: v[m] for k, v in params.items()}))
        np.testing.assert_allclose(np.asarray(batch.theta)[m], np.asarray(one.theta), rtol=1e-12, atol=1e-13)
    assert np.ptp(np.asarray(batch.theta)[:, -1, 2]) > 1e-4  # the members differ


@pytest.mark.parametrize("n", [1, 3, 16, 17, 24])
def test_unrolled_panel_operators_equal_dense_products(n):
    """`lead_sum` / `lead_apply` (unrolled up to UNROLL = 16 entries, dense above) against `jnp.sum` and the
    dense product with NumPy, for 0/1 topology-like matrices (zero and all-one columns), a general matrix and a
    one-hot row selection (`Topology.of_root`), on a trailing shape like a panel's 3x3 matrix."""
    from jaxhinge._math import lead_apply, lead_sum

    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 3, 3))
    np.testing.assert_allclose(lead_sum(jnp.asarray(x)), x.sum(0), rtol=1e-14, atol=1e-14)
    tri = np.tril(np.ones((n, n)))  # ancestors of one chain
    tri[:, 0] = 1.0  # an all-one column
    if n > 1:
        tri[:, -1] = 0.0  # a zero column
    for A in (tri, tri.T, rng.normal(size=(n + 2, n)), np.eye(n)[rng.integers(0, n, n)]):
        np.testing.assert_allclose(lead_apply(A, jnp.asarray(x)), np.tensordot(A, x, 1), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("parent", [(-1, 0, 1, -1, -1, 4), (-1, 0, -1, 2, 3, 4), tuple(range(-1, 16)) + (-1,)])
def test_block_ldl_solve_equals_dense_solve(parent):
    """`hinge_solve` (an unrolled L D L^T per chain, blocks of up to UNROLL panels; a dense `jnp.linalg.solve`
    above) against NumPy's dense solve, for a random symmetric positive definite matrix with the block structure
    of the topology (chains, single panels, and a 17-panel chain that takes the dense path), and its gradient
    against central differences."""
    from jaxhinge._model._spacecraft import topology

    top = topology(parent)
    n = top.count
    assert sorted(j for b in top.blocks for j in b) == list(range(n))
    assert all(top.root[b[0]] == b[0] and all(top.root[j] == b[0] for j in b) for b in top.blocks)
    rng = np.random.default_rng(n)
    mask = np.zeros((n, n))
    for b in top.blocks:
        mask[np.ix_(b, b)] = 1.0
    A = rng.normal(size=(n, n))
    M = (A @ A.T + n * np.eye(n)) * mask
    rhs = rng.normal(size=(n, 7))
    np.testing.assert_allclose(hinge_solve(top, jnp.asarray(M), jnp.asarray(rhs)), np.linalg.solve(M, rhs), rtol=1e-12,
                               atol=1e-13)
    if n <= 16:  # the unrolled path is differentiable as written: d/dM_00 of sum(x) by central differences
        f = lambda m00: jnp.sum(hinge_solve(top, jnp.asarray(M).at[0, 0].set(m00), jnp.asarray(rhs)))
        h = 1e-6 * M[0, 0]
        fd = (f(M[0, 0] + h) - f(M[0, 0] - h)) / (2 * h)
        np.testing.assert_allclose(jax.grad(f)(M[0, 0]), fd, rtol=1e-6)
