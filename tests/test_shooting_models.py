"""Multiple shooting on the models single shooting covers (`identify(shooting=jh.MultipleShooting(...))`): a
controller in the loop (Basilisk's closed loop with an integral term), an adaptive integrator (tsit5), the hub's
position and velocity measured. Each against single shooting at its solution (`_helpers.single_shooting_agrees`:
`simulate` through the whole record, sharing no residual code with the segments) and the truth.

Apart from tests/test_shooting.py so that the two modules run on different workers (each builds its own records
and programs)."""

import dataclasses
import os

import jax.numpy as jnp
import numpy as np
import pytest
from _helpers import single_shooting_agrees
from conftest import DATA

import jaxhinge as jh
from jaxhinge._model._params import current_value

FREE = ["p0.k", "p1.k", "p0.c", "p1.c"]
COLS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_p0", "theta_p1"]
SIGMA = np.array([1e-5, 1e-5, 1e-5, 1e-4, 1e-4])


@pytest.mark.slow
def test_multiple_shooting_with_an_adaptive_integrator():
    """tsit5 (rtol 1e-9, atol 1e-11) steps each segment between the samples by itself (`propagate_adaptive`): an
    8 s record of the random 3-D two-panel configuration, 4 segments of 2 s, from 25-30 % off: converged, the
    truth within 3 sigma, and single shooting at the solution agrees (its residuals within 3e-5 sigma: the two take
    different steps through the record, so the integrator's tolerance sets it, motions ~1e-2 against sigmas of
    1e-5; measured 8.4e-6 here, 6.3e-7 at rtol 1e-10)."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=8.0, save_dt=0.05))
    sc = sc.with_simulation(integrator=jh.Tsit5(rtol=1e-9, atol=1e-11))
    traj = jh.simulate(sc)
    v = np.concatenate([np.asarray(traj.omega_BN_B), np.asarray(traj.theta)], axis=1)
    tel = jh.telemetry_from_arrays(np.asarray(traj.t), v + np.random.default_rng(7).normal(size=v.shape) * SIGMA,
                                   COLS, SIGMA, sc)
    truth = np.array([float(jnp.asarray(current_value(sc, n))) for n in FREE])
    guess = jh.apply_parameters(sc, dict(zip(FREE, truth * np.array([1.25, 0.72, 0.7, 1.3]))))
    res = jh.identify(guess, tel, FREE, shooting=jh.MultipleShooting(segment=2.0))
    info = res.shooting
    assert res.converged and info["method"] == "multiple" and info["segments"] == 4, (res.message, info)
    assert info["max_defect"] < 1e-8, info
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    single_shooting_agrees(guess, tel, FREE, res, atol=3e-5)


@pytest.mark.slow
def test_multiple_shooting_fits_a_basilisk_closed_loop_record_with_the_controller_in_the_model():
    """Basilisk 2.12.1's closed loop with an integral term (tests/data/bsk/control_integral: mrpFeedback with
    Ki = 0.02 onto four wheels every 0.1 s, two single panels and a two-panel chain), its first 6 s, gyro and
    hinge encoders every 0.1 s with seeded noise: the two single panels' k and c from 25-30 % off by multiple
    shooting with the controller in the model (its integral state a segment unknown; 3 segments of 2 s, each
    starting on a control sample; rk4 at 10 ms: rk4's error there, ~1e-9 of the motion, is far below the
    noise). Converged with the continuity defects at round-off, the truth within 3 sigma, and single shooting at
    the solution agrees."""
    sc = jh.load_scenario(os.path.join(DATA, "bsk", "control_integral.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=6.0, dt=0.01))
    d = np.load(os.path.join(DATA, "bsk", "control_integral.npz"))
    keep = d["t"] <= 6.0 + 1e-9
    names = sc.spacecraft.panels.labels
    cols = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3"] + [f"theta_{p}" for p in names]
    sig = np.array([1e-5] * 3 + [1e-4] * len(names))
    v = np.concatenate([d["omega_BN_B"][keep], d["theta"][keep]], axis=1)
    tel = jh.telemetry_from_arrays(d["t"][keep], v + np.random.default_rng(3).normal(size=v.shape) * sig, cols,
                                   sig, sc)
    free = ["boom.k", "wing.k", "boom.c", "wing.c"]
    truth = np.array([float(jnp.asarray(current_value(sc, f))) for f in free])
    guess = jh.apply_parameters(sc, dict(zip(free, truth * np.array([1.25, 0.72, 0.7, 1.3]))))
    res = jh.identify(guess, tel, free, shooting=jh.MultipleShooting(segment=2.0))
    info = res.shooting
    assert res.converged and info["method"] == "multiple" and info["segments"] == 3, (res.message, info)
    assert info["max_defect"] < 1e-8 and len(info["max_defect_abs"]) == 6 + 2 * 4 + 4 + 3, info
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    single_shooting_agrees(guess, tel, free, res)


@pytest.mark.slow
def test_multiple_shooting_with_hub_position_and_velocity_measured():
    """Where the hub's position and velocity are measured (`r_BN_N`, `v_BN_N` columns: the panels' swing moves
    B about the fixed system CoM), they join each segment's unknowns (16 state components for two panels, not
    10): an 8 s record of the random 3-D two-panel configuration, 4 segments of 2 s, from 25-30 % off, converged
    with the defects at round-off, the truth within 3 sigma, and single shooting at the solution agrees."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=8.0, save_dt=0.05, dt=0.01))
    traj = jh.simulate(sc)
    cols = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "r_BN_N_1", "r_BN_N_2", "r_BN_N_3", "v_BN_N_1",
            "v_BN_N_2", "v_BN_N_3"]
    sig = np.array([1e-5] * 3 + [1e-5] * 3 + [1e-5] * 3)
    v = np.concatenate([np.asarray(traj.omega_BN_B), np.asarray(traj.r_BN_N), np.asarray(traj.v_BN_N)], axis=1)
    tel = jh.telemetry_from_arrays(np.asarray(traj.t), v + np.random.default_rng(5).normal(size=v.shape) * sig,
                                   cols, sig, sc)
    truth = np.array([float(jnp.asarray(current_value(sc, n))) for n in FREE])
    guess = jh.apply_parameters(sc, dict(zip(FREE, truth * np.array([1.25, 0.72, 0.7, 1.3]))))
    res = jh.identify(guess, tel, FREE, shooting=jh.MultipleShooting(segment=2.0))
    info = res.shooting
    assert res.converged and info["method"] == "multiple" and info["segments"] == 4, (res.message, info)
    assert info["max_defect"] < 1e-8 and len(info["max_defect_abs"]) == 16, info
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    single_shooting_agrees(guess, tel, FREE, res)


@pytest.mark.slow
def test_multiple_shooting_fits_several_records_together():
    """Two 8 s records of the random 3-D two-panel configuration (the second from another initial state and
    with other noise) share k and c: shot together (their segments side by side in one vmapped program, each
    record's first segment continuous with its own initial state), 4 segments of 2 s each, from 25-30 % off:
    converged with the defects at round-off, the truth within 3 sigma, and single shooting of both records at the
    solution agrees."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=8.0, save_dt=0.05, dt=0.01))
    sc2 = jh.apply_parameters(sc, {"hub.omega_BN_BInit": [0.02, -0.03, 0.01], "p0.thetaInit": 0.05,
                                   "p1.thetaInit": -0.04})
    tels = []
    for k, s in enumerate((sc, sc2)):
        traj = jh.simulate(s)
        v = np.concatenate([np.asarray(traj.omega_BN_B), np.asarray(traj.theta)], axis=1)
        tels.append(jh.telemetry_from_arrays(np.asarray(traj.t), v + np.random.default_rng(20 + k).normal(
            size=v.shape) * SIGMA, COLS, SIGMA, s))
    truth = np.array([float(jnp.asarray(current_value(sc, n))) for n in FREE])
    off = dict(zip(FREE, truth * np.array([1.25, 0.72, 0.7, 1.3])))
    guesses = [jh.apply_parameters(s, off) for s in (sc, sc2)]
    res = jh.identify(guesses, tels, FREE, shooting=jh.MultipleShooting(segment=2.0))
    info = res.shooting
    assert res.converged and info["method"] == "multiple" and info["records"] == 2, (res.message, info)
    assert info["segments"] == 4 and info["max_defect"] < 1e-8, info
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
    single_shooting_agrees(guesses, tels, FREE, res)
