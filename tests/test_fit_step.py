"""`identify(dt="auto")` on a real record (`_analysis/_fitting/_fit_step.py`): the coarsest rk4 step whose
Richardson pair moves no fitted value by 0.1 sigma, chosen by whole fits.

Reference: a fit of the same record at the scenario's own 1 ms step (rk4's error there is ~1e-10 of the motion:
far below the noise), which the accepted coarse fit must equal within the stated 0.1 sigma. (The candidate steps
and the pair arithmetic are tested against an exact h^4 error in tests/test_shooting.py.)"""

import dataclasses
import itertools
import os

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh
from jaxhinge._model._params import current_value

FREE = ["p0.k", "p1.k"]
COLS = ["omega_BN_B_1", "omega_BN_B_2", "omega_BN_B_3", "theta_p0", "theta_p1"]
SIGMA = np.array([1e-5, 1e-5, 1e-5, 1e-4, 1e-4])


@pytest.mark.slow
def test_dt_auto_fit_equals_the_fine_step_fit_within_a_tenth_of_sigma():
    """A 6 s record of the random 3-D two-panel configuration (samples every 50 ms, seeded noise; truth simulated
    at 1 ms), both k 10 % off. `dt = "auto"` tries 50, 25, 12.5 ms against their halves (measured: 16.7, 1.01 and
    0.062 sigma) and accepts 12.5 ms; its fitted values equal the 1 ms fit's within 0.1 sigma (measured 0.062),
    the truth within 3 sigma, and `integration` reports every pair tried."""
    sc = jh.load_scenario(os.path.join(DATA, "telemetry", "random3d_2p.toml"))
    sc = dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, t_end=6.0, save_dt=0.05, dt=0.001))
    traj = jh.simulate(sc)
    v = np.concatenate([np.asarray(traj.omega_BN_B), np.asarray(traj.theta)], axis=1)
    tel = jh.telemetry_from_arrays(np.asarray(traj.t), v + np.random.default_rng(7).normal(size=v.shape) * SIGMA,
                                   COLS, SIGMA, sc)
    truth = np.array([float(jnp.asarray(current_value(sc, n))) for n in FREE])
    guess = jh.apply_parameters(sc, dict(zip(FREE, truth * np.array([1.1, 0.9]))))
    res = jh.identify(guess, tel, FREE, dt="auto")
    info = res.integration
    assert res.converged and info["tolerance_sigma"] == 0.1, (res.message, info)
    pairs = info["pairs"]
    assert [p["accepted"] for p in pairs] == [False] * (len(pairs) - 1) + [True], pairs
    assert all(np.isclose(p["checked_with"], p["dt"] / 2) for p in pairs), pairs
    assert all(np.isclose(b["dt"], a["dt"] / 2) for a, b in itertools.pairwise(pairs)), pairs
    assert info["dt"] == pairs[-1]["dt"] and pairs[-1]["max_error_sigma"] < 0.1, info
    fine = jh.identify(guess, tel, FREE)  # the scenario's own 1 ms
    assert np.all(np.abs(res.values - fine.values) < 0.1 * fine.sigma), (res.values - fine.values) / fine.sigma
    assert np.all(np.abs(res.values - truth) < 3 * res.sigma), (res.values - truth) / res.sigma
