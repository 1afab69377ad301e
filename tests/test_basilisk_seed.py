"""Basilisk's hingedRigidBodyStateEffector test suite (reference/basilisk.md §3.1-3.7): its truth values, and whole
trajectories against Basilisk CSVs (bsk 2.12.1, tests/data/basilisk_csv/, made by its make_csv_references.py).

Tolerances are those of what is compared, not Basilisk's own test tolerance (1e-10 relative): jaxhinge runs the
same RK4 at the same step as Basilisk, so it reproduces Basilisk's printed values to round-off (measured below;
each tolerance about 10x that). Conservation is RK4's (truncation ~dt^5 per step at dt = 1e-3 s) plus round-off."""

import os

import _basilisk
import _seed
import jax
import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh

# Basilisk's printed values (16-17 digits) vs jaxhinge: relative error measured <= 6.6e-15 (bsk 2.12.1 itself
# reproduces its test's truePos/trueSigma, written by an older version, to 4.9e-15, basilisk.md §3.9)
REL = 1e-13
# Conservation over the 2.5 s runs (2500 RK4 steps): drift measured <= 2.7e-14 relative (per component)
CONSERVED = 3e-13
TRUE_SIGMA = np.array([0.06170318243240492, -0.07089090074412899, 0.06409500412692531])
TRUE_POS = np.array([-0.15832794740648992, 1.122481716747217, -0.37975995949382907])


def rel_err(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b) / np.abs(b))


def conserved(traj, key):
    v = np.asarray(getattr(traj, key))
    return rel_err(v[-1], v[0])


@pytest.fixture(scope="module")
def no_gravity():
    return jh.simulate(_seed.no_gravity())


def test_no_gravity_truth(no_gravity):
    tr = no_gravity
    assert bool(tr.success)
    assert rel_err(tr.r_BN_N[-1], TRUE_POS) < REL
    assert rel_err(tr.sigma_BN[-1], TRUE_SIGMA) < REL
    for key in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy", "totRotEnergy"):
        assert conserved(tr, key) < CONSERVED, key


def test_no_gravity_initial_values(no_gravity):
    """CoM-to-B initial conversion and the energy/momentum definitions (basilisk.md §3.9): a few operations from
    the inputs, so round-off only (measured <= 1.4e-16 relative; 1e-14 allows their ~10 roundings)."""
    tr = no_gravity
    assert rel_err(tr.r_BN_N[0], [0.1006008371434086, -0.4, -0.71376143306541961]) < 1e-14
    assert rel_err(tr.v_BN_N[0], [-0.098623856693458037, 0.60143622702088284, 0.10006008371434086]) < 1e-14
    assert rel_err(tr.totRotEnergy[0], 21.655873798310218) < 1e-14
    assert rel_err(tr.totOrbEnergy[0], 142.50000000000003) < 1e-14
    assert rel_err(tr.totRotAngMomPntC_N[0], [107.94106622103622, -169.92489535707392, 147.63607889342643]) < 1e-14
    assert rel_err(tr.totOrbAngMomPntN_N[0], [-180.5, -66.5, -28.5]) < 1e-14
    # the CoM moves in a straight line: r_C(0) + v_C t exactly, up to round-off (measured 1.6e-15 m)
    assert np.max(np.abs(tr.r_CN_N[-1] - np.array([-0.4, 0.85, 0.55]))) < 1e-14


def test_gravity_truth():
    tr = jh.simulate(_seed.gravity())
    assert bool(tr.success)
    assert rel_err(tr.sigma_BN[-1], TRUE_SIGMA) < REL
    for key in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy", "totRotEnergy"):
        assert conserved(tr, key) < CONSERVED, key


def test_damping_conservation():
    tr = jh.simulate(_seed.damping())
    for key in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy"):
        assert conserved(tr, key) < CONSERVED, key
    # rotational energy is dissipated, monotonically (c > 0): it falls at every sample (the smallest fall measured,
    # 1.0e-8 J per 0.01 s, is 1e6 times the round-off of the 21.7 J energy)
    e = np.asarray(tr.totRotEnergy)
    assert np.all(np.diff(e) < 0)


def _theta_ss(F=1.0, k=100.0, m_sc=950.0, m_sp=100.0, d=1.5, tol=1e-10):
    """Basilisk test's back-of-envelope steady-state angle: k theta + m_sp (F/m_sc) d cos(theta) = 0."""
    th = -0.01
    for _ in range(100):
        f = k * th + m_sp * F / m_sc * d * np.cos(th)
        fp = k - m_sp * F / m_sc * d * np.sin(th)
        step = f / fp
        th -= step
        if abs(step) < tol:
            break
    return th


def test_theta_steady_state():
    sc = _seed.planar(100.0, 75.0, jh.Loads(extForce_B=[0.0, 1.0, 0.0]), 60.0)
    tr = jh.simulate(sc)
    th_ss = _theta_ss()
    # Newton's iterate of the test's equation (converged: the last step was < 1e-10), as Basilisk's test prints it
    assert abs(th_ss - -0.0015789454002094272) < 1e-18
    # the BOE is an approximation (a static balance, the whole spacecraft accelerating at F / m_sc): the
    # simulation, like Basilisk's, ends 7.0e-8 rad from it (Basilisk's test allows 1e-6)
    assert abs(tr.theta[-1, 0] - th_ss) < 2e-7
    assert abs(tr.theta[-1, 1] - th_ss) < 2e-7
    # Basilisk's measured final angle (bsk 2.12.1): step-for-step agreement
    assert rel_err(tr.theta[-1], [-0.0015788754525566013] * 2) < REL


def test_frequency_amplitude_extremes():
    """§3.5: force on 0-29 s then off to 58 s; Basilisk's theta1 extremes (equal to the test's Lagrangian model)."""
    pulses = jh.Pulses(t_start=[0.0], t_end=[29.0], extForce_B=[[0.0, 1.0, 0.0]], extForce_N=[[0.0] * 3],
                       extTorquePntB_B=[[0.0] * 3])
    tr = jh.simulate(_seed.planar(300.0, 0.0, jh.Loads(pulses=pulses), 58.0))
    t, th = np.asarray(tr.t), np.asarray(tr.theta[:, 0])
    on, off = t < 29.0 - 1e-9, t > 29.0 + 1e-9
    assert rel_err(th[on].min(), -0.0010525980610644574) < REL
    assert rel_err(th[off].max(), 0.0008488531651652971) < REL


def test_lagrangian_pulses():
    """§3.6: two force+torque pulses; Basilisk's samples at t = 2.5, 7.5, 12.5, 17.5 s (its test: 1e-10 absolute)."""
    f1, f2 = np.array([0.2, 0.7, 0.0]), np.array([0.0, 1.0, 0.0])
    pulses = jh.Pulses(
        t_start=[0.0, 11.0],
        t_end=[5.0, 18.0],
        extForce_B=[f1, f2],
        extForce_N=np.zeros((2, 3)),
        extTorquePntB_B=[np.cross([0.05, 0, 0], f1), np.cross([-0.03, 0, 0], f2)],
    )
    tr = jh.simulate(_seed.planar(5000.0, 75.0, jh.Loads(pulses=pulses), 20.0))
    truth = np.array([
        [0.0006888584855395377, 0.0023067457482981724, 0.00014736019341166984, -1.7762527752980762e-05, -8.172893984318662e-06],
        [0.005505118092999389, 0.01842660612903574, 0.0011621740258028566, -1.3491726846102737e-05, -1.5892525232410393e-05],
        [0.011002593796766475, 0.03803127377800064, 0.0023040153652601207, -5.904231723522748e-06, -1.0585168906325686e-05],
        [0.01637954469713273, 0.07751125662190625, 0.0031051486492489474, -2.2192233137403585e-05, -2.5198987504568248e-05],
    ])  # fmt: skip
    idx = [25, 75, 125, 175]
    r = np.asarray(tr.r_BN_N)
    got = np.column_stack([
        r[idx, 0] - r[0, 0], r[idx, 1] - r[0, 1], 4 * np.arctan(np.asarray(tr.sigma_BN)[idx, 2]),
        np.asarray(tr.theta)[idx, 0], np.asarray(tr.theta)[idx, 1],
    ])  # fmt: skip
    # every value relative to itself (they span 6e-6 to 8e-2 m or rad): measured 1.7e-14
    np.testing.assert_allclose(got, truth, rtol=1e-13, atol=0)


def test_motor_torque():
    tr = jh.simulate(_seed.motor_torque())
    # the motor torque is internal: the CoM stays at the origin (measured 1.1e-15 m) and the total angular momentum
    # at 0 (measured 9.2e-14 N m s: the cancellation of the hub's and the driven panel's ~30 N m s)
    assert np.max(np.abs(tr.r_CN_N[-1])) < 1e-14
    assert np.max(np.abs(tr.totRotAngMomPntC_N[-1] - tr.totRotAngMomPntC_N[0])) < 1e-12
    # first config-log samples: exact geometry at rest (measured: exact; 1e-15 is ~2 roundings of 2 m)
    np.testing.assert_allclose(tr.panel_r_SN_N[0], [[2.0, 0, 0], [-2.0, 0, 0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(tr.panel_v_SN_N[0], np.zeros((2, 3)), rtol=0, atol=1e-15)
    np.testing.assert_allclose(tr.panel_sigma_SN[0], [[0, 0, 1.0], [0, 0, 0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(tr.panel_omega_SN_S[0], np.zeros((2, 3)), rtol=0, atol=1e-15)
    # Basilisk's measured values at t = 10 s (bsk 2.12.1)
    assert rel_err(tr.theta[-1, 0], 0.59804999135872017) < REL
    assert rel_err(tr.thetaDot[-1, 0], 0.11821798179675616) < REL
    assert rel_err(tr.theta[-1, 1], -0.16119701350395460) < REL


CSV_CASES = {
    "bsk_ref_noGravity_noDamping.csv": _seed.no_gravity,
    "bsk_ref_noGravity_damping.csv": _seed.damping,
    "bsk_ref_motorTorque.csv": _seed.motor_torque,
}


@pytest.mark.parametrize("name", sorted(CSV_CASES))
def test_whole_trajectory_vs_basilisk_csv(name):
    ref = np.loadtxt(os.path.join(DATA, "basilisk_csv", name), delimiter=",", skiprows=1)
    assert ref.shape[1] == 25
    want = {
        "t": ref[:, 0], "r_BN_N": ref[:, 1:4], "v_BN_N": ref[:, 4:7], "sigma_BN": ref[:, 7:10],
        "omega_BN_B": ref[:, 10:13], "theta": ref[:, [13, 15]], "thetaDot": ref[:, [14, 16]],
        "totOrbEnergy": ref[:, 17], "totRotEnergy": ref[:, 18], "totOrbAngMomPntN_N": ref[:, 19:22],
        "totRotAngMomPntC_N": ref[:, 22:25],
    }  # fmt: skip
    tr = jh.simulate(CSV_CASES[name]())
    # |error| / allowed error per quantity: the tolerances of the .npz comparisons (tests/_basilisk.py; the CSVs
    # hold 17 significant digits, an exact float64 round trip)
    worst = _basilisk.worst({key: getattr(tr, key) for key in want}, want)
    assert max(worst.values()) <= 1.0, {k: f"{v:.2g}" for k, v in worst.items()}


@pytest.mark.parametrize("name", sorted(CSV_CASES))
def test_csv_scenarios_are_the_generators(name):
    """The CSVs are Basilisk's runs of tests/data/bsk/seed_*.toml (make_csv_references.py); the scenarios built here
    by tests/_seed.py are the same numbers (names and save_dt aside)."""
    toml = {"bsk_ref_noGravity_noDamping.csv": "seed_noGravity", "bsk_ref_noGravity_damping.csv": "seed_damping",
            "bsk_ref_motorTorque.csv": "seed_motorTorque"}[name]  # fmt: skip
    a, b = CSV_CASES[name](), jh.load_scenario(os.path.join(DATA, "bsk", toml + ".toml"))
    pa, pb = a.spacecraft.panels, b.spacecraft.panels
    for x, y in [(a.spacecraft.hub, b.spacecraft.hub), (a.initial, b.initial), (a.loads, b.loads)] + [
        (getattr(pa, f), getattr(pb, f)) for f in ("mass", "IPntS_S", "d", "k", "c", "r_HB_B", "dcm_HB", "thetaRef",
                                                    "thetaDotRef", "motorTorque")]:  # fmt: skip
        leaves_a, leaves_b = jax.tree.leaves(x), jax.tree.leaves(y)
        assert len(leaves_a) == len(leaves_b)
        for u, v in zip(leaves_a, leaves_b):
            np.testing.assert_array_equal(np.asarray(u, dtype=float), np.asarray(v, dtype=float))
    assert (a.spacecraft.gravity is None) == (b.spacecraft.gravity is None)
    assert (a.simulation.dt, a.simulation.t_end, a.simulation.integrator) == (
        b.simulation.dt, b.simulation.t_end, b.simulation.integrator)
    assert a.simulation.save_dt == 0.01  # the CSVs' sampling
