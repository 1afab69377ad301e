"""Basilisk's hingedRigidBodyStateEffector test suite (reference/basilisk.md §3.1-3.7): its truth values and
tolerances, and whole trajectories against Basilisk CSVs (bsk 2.12.1, tests/data/basilisk_csv/)."""

import os

import _seed
import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh

REL = 1e-10  # Basilisk's own test tolerance (isArrayEqualRelative)
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
        assert conserved(tr, key) < REL, key


def test_no_gravity_initial_values(no_gravity):
    """CoM-to-B initial conversion and the energy/momentum definitions (basilisk.md §3.9)."""
    tr = no_gravity
    assert rel_err(tr.r_BN_N[0], [0.1006008371434086, -0.4, -0.71376143306541961]) < 1e-14
    assert rel_err(tr.v_BN_N[0], [-0.098623856693458037, 0.60143622702088284, 0.10006008371434086]) < 1e-14
    assert rel_err(tr.totRotEnergy[0], 21.655873798310218) < 1e-14
    assert rel_err(tr.totOrbEnergy[0], 142.50000000000003) < 1e-14
    assert rel_err(tr.totRotAngMomPntC_N[0], [107.94106622103622, -169.92489535707392, 147.63607889342643]) < 1e-14
    assert rel_err(tr.totOrbAngMomPntN_N[0], [-180.5, -66.5, -28.5]) < 1e-14
    # the CoM moves in a straight line
    assert np.max(np.abs(tr.r_CN_N[-1] - np.array([-0.4, 0.85, 0.55]))) < 1e-12


def test_gravity_truth():
    tr = jh.simulate(_seed.gravity())
    assert bool(tr.success)
    assert rel_err(tr.sigma_BN[-1], TRUE_SIGMA) < REL
    for key in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy", "totRotEnergy"):
        assert conserved(tr, key) < REL, key


def test_damping_conservation():
    tr = jh.simulate(_seed.damping())
    for key in ("totOrbAngMomPntN_N", "totRotAngMomPntC_N", "totOrbEnergy"):
        assert conserved(tr, key) < REL, key
    # rotational energy is dissipated, monotonically (c > 0)
    e = np.asarray(tr.totRotEnergy)
    assert e[-1] < e[0] and np.all(np.diff(e) < 1e-12)


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
    assert abs(th_ss - -0.0015789454002094272) < 1e-15
    assert abs(tr.theta[-1, 0] - th_ss) < 1e-6
    assert abs(tr.theta[-1, 1] - th_ss) < 1e-6
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
    """§3.6: two force+torque pulses; Basilisk samples at t = 2.5, 7.5, 12.5, 17.5 s to 1e-10 absolute."""
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
    np.testing.assert_allclose(got, truth, rtol=0, atol=1e-10)


def test_motor_torque():
    tr = jh.simulate(_seed.motor_torque())
    assert np.max(np.abs(tr.r_CN_N[-1])) < 1e-10
    assert np.max(np.abs(tr.totRotAngMomPntC_N[-1] - tr.totRotAngMomPntC_N[0])) < 1e-10
    # first config-log samples (absolute 1e-10, as Basilisk's test)
    np.testing.assert_allclose(tr.panel_r_SN_N[0], [[2.0, 0, 0], [-2.0, 0, 0]], atol=1e-10)
    np.testing.assert_allclose(tr.panel_v_SN_N[0], np.zeros((2, 3)), atol=1e-10)
    np.testing.assert_allclose(tr.panel_sigma_SN[0], [[0, 0, 1.0], [0, 0, 0]], atol=1e-10)
    np.testing.assert_allclose(tr.panel_omega_SN_S[0], np.zeros((2, 3)), atol=1e-10)
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
    tr = jh.simulate(CSV_CASES[name]())
    got = np.column_stack([
        tr.t, tr.r_BN_N, tr.v_BN_N, tr.sigma_BN, tr.omega_BN_B, tr.theta[:, 0], tr.thetaDot[:, 0],
        tr.theta[:, 1], tr.thetaDot[:, 1], tr.totOrbEnergy, tr.totRotEnergy, tr.totOrbAngMomPntN_N,
        tr.totRotAngMomPntC_N,
    ])  # fmt: skip
    assert got.shape == ref.shape
    # every column relative to its own scale over the run; columns that are physically zero (Basilisk
    # prints round-off ~1e-16 there, e.g. angular momentum in the motor-torque case) get a floor of 1e-2,
    # i.e. an absolute 1e-12
    scale = np.maximum(np.abs(ref).max(0), 1e-2)
    err = np.abs(got - ref).max(0) / scale
    assert err.max() < 1e-10, dict(zip(range(25), err))
