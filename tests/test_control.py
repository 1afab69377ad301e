"""The attitude controller in the loop ([control]: Basilisk's inertial3D, attTrackingError, mrpFeedback,
rwMotorTorque / extForceTorque): its file table and refusals, its parameters in the registry and in batches, the
wheel-momentum bookkeeping of its commands. Against Basilisk: tests/test_basilisk_reference.py (control_*.npz,
made by tests/data/bsk/make_control_references.py: every output to round-off)."""

import os

import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh

REF = os.path.join(DATA, "bsk", "control_wheels.toml")


def _small(**control):
    """One panel, three orthogonal wheels, 10 degrees off, 2 s at 10 ms: cheap programs."""
    d = {"hub": {"mHub": 500.0, "IHubPntBc_B": [[400.0, 0, 0], [0, 300.0, 0], [0, 0, 200.0]],
                 "sigma_BNInit": [0.0436609, 0.0, 0.0]},
         "panels": [{"name": "p0", "mass": 20.0, "IPntS_S": [[5.0, 0, 0], [0, 4.0, 0], [0, 0, 3.0]], "d": 1.0,
                     "k": 50.0, "c": 1.0, "r_HB_B": [0.0, 0.5, 0.0], "dcm_HB": [[0, -1, 0], [1, 0, 0], [0, 0, 1]]}],
         "wheels": [{"name": f"rw{i + 1}", "gsHat_B": g, "Js": 0.1, "Omega": 100.0 * (i + 1)}
                    for i, g in enumerate(np.eye(3).tolist())],
         "control": {"K": 10.0, "P": 60.0, "control_dt": 0.1, **control},
         "simulation": {"t_end": 2.0, "save_dt": 0.1, "integrator": "rk4", "dt": 0.01}}
    return d


@pytest.mark.parametrize("change, match", [
    ({"control": {"control_dt": 0.015}}, r"control\.control_dt = 0\.015: must be a whole multiple of simulation\.dt"),
    ({"control": {"K": -1.0}}, r"control\.K = -1\.0: must be >= 0"),
    ({"control": {"P": -2.0}}, r"control\.P = -2\.0: must be >= 0"),
    ({"control": {"actuator": "thrusters"}}, r"control\.actuator = \"thrusters\": allowed values are \"wheels\", \"torque\""),
    ({"wheels": None}, r"control\.actuator = \"wheels\": the spacecraft has no \[\[wheels\]\]"),
    ({"wheels": "one"}, r"control\.controlAxes_B = .*the wheels' spin axes do not span these 3 control axes"),
    ({"simulation": {"integrator": "tsit5"}, "control": {"control_dt": 2.5}},
     r"control\.control_dt = 2\.5: must be <= simulation\.t_end = 2\.0 s"),
    ({"control": {"controlAxes_B": [[0.0, 0.0, 0.0]]}}, r"control\.controlAxes_B\[1\] = \[0\.0, 0\.0, 0\.0\]: must not be zero"),
])
def test_bad_control_tables_are_refused(change, match):
    """One line each, naming the field, the value and the rule, before anything is built."""
    d = _small()
    for key, value in change.items():
        if value is None:
            d.pop(key)
        elif value == "one":
            d[key] = d[key][:1]
        else:
            d[key].update(value)
    with pytest.raises(jh.ScenarioError, match=r"^c\.toml: " + match):
        jh.scenario_from_dict(d, "c.toml")


def test_controller_parameters_and_file_round_trip(tmp_path):
    """`control.K`, `control.P`, ... are registry parameters (`apply_parameters` sets them); the scenario file
    round-trips, with the default controller inertia (the spacecraft's about B at the initial hinge angles). The
    controller drives the wheels through rwMotorTorque: each wheel's inertial spin momentum changes by exactly its
    held command over each control period (1e-12 N m s); the first command is -K sigma_BR (the spacecraft starts
    at rest), and the hub turns toward the reference. The trajectory plot adds the attitude error and the held
    torque request."""
    s = jh.scenario_from_dict(_small())
    assert {"control.K", "control.P", "control.Ki", "control.control_dt"} <= set(jh.parameter_names(s))
    assert float(jh.apply_parameters(s, {"control.P": 40.0}).control.P) == 40.0
    I = np.asarray(s.control.ISCPntB_B)
    assert I[0, 0] > 400.0 and np.allclose(I, I.T)  # hub + panel about B
    back = jh.scenario_from_dict(jh.scenario_to_dict(s))
    np.testing.assert_array_equal(np.asarray(back.control.ISCPntB_B), I)
    tr = jh.simulate(s)
    h = 0.1 * (np.asarray(tr.Omega) + np.asarray(tr.omega_BN_B))  # Js (Omega + gsHat . omega), gsHat = b_i
    u = np.asarray(tr.u_current)
    np.testing.assert_allclose(np.diff(h, axis=0), 0.1 * u[:-1], rtol=0, atol=1e-12)
    # the first command, from the initial state (at rest, sigma_BR = sigma_BNInit): Lr = -K sigma_BR exactly
    np.testing.assert_allclose(np.asarray(tr.Lr)[0], -10.0 * np.asarray(tr.sigma_BR)[0], rtol=1e-15)
    assert np.linalg.norm(np.asarray(tr.sigma_BR)[-1]) < np.linalg.norm(np.asarray(tr.sigma_BR)[0])
    jh.plot_trajectory(tr.as_dict(), s.spacecraft.panels.labels, tmp_path / "c.png", wheel_names=("rw1", "rw2", "rw3"))
    assert (tmp_path / "c.png").stat().st_size > 20_000
    with pytest.raises(jh.ParameterError, match=r"no attitude controller"):
        jh.apply_parameters(jh.scenario_from_dict({k: v for k, v in _small().items() if k != "control"}),
                            {"control.K": 1.0})


def test_gradient_of_slew_metrics_through_the_loop_equals_finite_differences():
    """`jh.sensitivity` of the slew metrics of a controlled run, `pointing_error` (the integrated squared attitude
    error) and `settling_time` of the attitude error (threshold 0.1733 rad, crossed at 1.6 s), with respect to
    control.K, control.P, p0.k, p0.c: the values equal a NumPy evaluation of the simulated sigma_BR (trapezoid;
    linear interpolation of the last crossing; 1e-12), reverse-mode derivatives through the sampled loop (held
    commands, the flight software's calls) equal central differences of that evaluation to 1e-6 relative (h =
    1e-3 relative: truncation ~1e-8, round-off of the differences ~1e-8 of the smallest derivative, d/dc, 1e-6
    of the metric; no wheel saturation here, so the metrics are smooth). (Batches over controller parameters:
    `test_adaptive_integrators_step_on_the_samples`, notebook 09.)"""
    s = jh.scenario_from_dict(_small())
    names = ["control.K", "control.P", "p0.k", "p0.c"]
    x0 = np.array([10.0, 60.0, 50.0, 1.0])
    thr = 0.1733
    outputs = ["pointing_error", {"name": "settling_time", "signal": "attitude_error", "threshold": thr}]
    r = jh.sensitivity(s, outputs, names, mode="reverse")
    assert r.success and not r.notes

    def metrics(x):
        tr = jh.simulate(jh.apply_parameters(s, dict(zip(names, x))))
        t, phi = np.asarray(tr.t), 4 * np.arctan(np.linalg.norm(np.asarray(tr.sigma_BR), axis=1))
        k = np.nonzero(phi > thr)[0][-1]
        return np.array([np.trapezoid(phi**2, t), t[k] + (phi[k] - thr) / (phi[k] - phi[k + 1]) * (t[k + 1] - t[k])])

    np.testing.assert_allclose(r.output_values, metrics(x0), rtol=1e-12)
    assert 1.5 < r.output_values[1] < 1.7
    h = 1e-3 * x0
    fd = np.stack([(metrics(x0 + e) - metrics(x0 - e)) / (2 * h[i]) for i, e in enumerate(np.diag(h))], 1)
    np.testing.assert_allclose(r.jacobian, fd, rtol=1e-6)
    assert np.all(np.abs(fd) > 0)


def test_adaptive_integrators_step_on_the_samples():
    """tsit5 with the controller in the loop (one solve per control period: every sample a step boundary, the
    command held between), run as a batch over control_dt (0.1 s and 0.2 s: enough periods for the shorter,
    save slots for the longer): each member is the same closed loop as rk4 at its control_dt (dt = 1 ms, its own
    error ~1e-12 here) to the adaptive tolerance: states within 1e-8 relative at rtol 1e-10 (measured 1.1e-9),
    the held torque request to 1e-8 (measured 1.1e-11) at every save time, t_end's sample call included.
    Outputs at given times are refused (the adaptive closed loop saves on its grid). (One program for both
    members; `simulate` of one member runs the same solves: the batch path is the one whose shapes need the
    care.)"""
    d = _small()
    d["simulation"].update(t_end=4.0, save_dt=0.05, dt=0.001)
    s_rk4 = jh.scenario_from_dict(d)
    d["simulation"].update(integrator="tsit5", rtol=1e-10, atol=1e-12)
    s = jh.scenario_from_dict(d)
    with pytest.raises(jh.ConfigError, match=r"^ts = .*saves on its save grid"):
        jh.simulate(s, ts=[0.0, 1.0])
    b = jh.simulate_batch(s, {"control.control_dt": np.array([0.2, 0.1])})
    assert np.all(np.asarray(b.success)) and np.all(np.asarray(b.num_steps) >= [20, 40])  # a step per period
    for m, cdt in enumerate((0.2, 0.1)):
        rk4 = jh.simulate(jh.apply_parameters(s_rk4, {"control.control_dt": cdt}))
        for k in ("sigma_BN", "omega_BN_B", "theta", "thetaDot", "Omega", "Lr", "u_current"):
            ref = np.asarray(getattr(rk4, k))
            assert np.abs(np.asarray(getattr(b, k)[m]) - ref).max() <= 1e-8 * np.abs(ref).max(), (cdt, k)


def test_basilisks_own_mrp_feedback_test():
    """Basilisk's `test_mrpFeedback.py` (its inputs: a rotating reference, four wheels or none, the integral term on
    or off, integralLimit 0 or 20; updates every 0.5 s, a `Reset` after 1 s) run in bsk 2.12.1
    (tests/data/bsk/make_control_unit_references.py, which also checks Basilisk against the test's own truth
    model): `control_update` gives the same five torque requests to 1e-14 relative (the test's tolerance is 1e-8).
    The reset is a fresh controller state whose next call counts as a second call (Basilisk's `priorTime` is 0
    after `Reset`, so that call sees dt = 0 once, not twice as at t = 0)."""
    import json

    import jax.numpy as jnp

    from jaxhinge._model._control import Control, ControlState, control_update

    data = json.load(open(os.path.join(DATA, "bsk", "control_unit_tests.json")))
    x = data["inputs"]
    gs = np.reshape(x["GsMatrix_B"], (4, 3))
    for case in data["cases"]:
        n = case["rwNum"]
        ctl = Control(np.zeros(3), x["K"], x["P"], case["Ki"], case["integralLimit"], np.reshape(x["ISCPntB_B"], (3, 3)),
                      x["knownTorquePntB_B"], np.eye(3), x["update_s"], "torque")
        wheels = jh.Wheels(gs[:n], x["JsList"][:n]) if n else None
        omega_RN = np.asarray(x["omega_RN_B"])
        cs = ControlState(jnp.zeros(3), jnp.asarray(0.0), jnp.zeros(3), jnp.zeros(0))
        got = []
        for k in range(5):
            if k == 3:  # Reset after 1 s
                cs = ControlState(jnp.zeros(3), jnp.asarray(1.0), cs.Lr, cs.u)
            cs = control_update(ctl, wheels, np.asarray(x["sigma_BR"]), np.asarray(x["omega_BR_B"]) + omega_RN,
                                np.asarray(x["wheelSpeeds"][:n]), cs, omega_RN, np.asarray(x["domega_RN_B"]))
            got.append(np.asarray(cs.Lr))
        np.testing.assert_allclose(got, case["torqueRequestBody"], rtol=1e-14, atol=1e-14, err_msg=str(case))


def test_basilisks_own_rw_motor_torque_test():
    """Basilisk's `test_rwMotorTorque.py`: a torque request [1.0, -0.5, 0.7] N m on the hub, three orthogonal
    wheels and a fourth along (1, 1, 1)/sqrt(3), control axes b1, b2, b3: its truth value, the wheel torques
    [-0.8, 0.7, -0.5, -0.3464101615137755] N m, at its tolerance 1e-12 (the request is fed through
    `knownTorquePntB_B` with K = P = 0: Lr = knownTorquePntB_B, request = -Lr)."""
    import jax.numpy as jnp

    from jaxhinge._model._control import Control, ControlState, control_update

    gs = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5773502691896258] * 3]
    wheels = jh.Wheels(gs, [0.1] * 4)
    request = np.array([1.0, -0.5, 0.7])
    ctl = Control(np.zeros(3), 0.0, 0.0, -1.0, 0.0, np.eye(3), -request, np.eye(3), 0.5, "wheels")
    cs = control_update(ctl, wheels, np.zeros(3), np.zeros(3), np.zeros(4),
                        ControlState(jnp.zeros(3), jnp.asarray(0.0), jnp.zeros(3), jnp.zeros(4)))
    np.testing.assert_allclose(np.asarray(cs.Lr), request, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(cs.u), [-0.8, 0.7000000000000001, -0.5, -0.3464101615137755], rtol=0,
                               atol=1e-12)


def test_closed_loop_poles_equal_finite_difference_linearisations():
    """Closed-loop poles (`_analysis._linear._closed_loop`), with the integral term on (its state joins the loop's): the
    sampled loop's (from `period_matrix`, the one-period Jacobian in closed form: rk4 of the linearised plant with
    the command held, powers by repeated squaring) are the eigenvalues of a central-difference Jacobian of the
    one-control-period map (the simulator's own nonlinear rk4 steps with the command held, the controller's call
    at the start), the continuous law's those of a central-difference Jacobian of the closed-loop vector field,
    each to 1e-6 relative (h = 1e-6: differences of a smooth map); the two formulations differ by the zero-order
    hold's first-order effect, between 1e-4 and 5e-2 relative at control_dt = 0.1 s (4.6e-2 for the slow poles
    the integral term adds; they converge linearly in control_dt)."""
    import jax

    from jaxhinge._analysis._linear._closed_loop import closed_loop_field, closed_loop_poles, period_map

    s = jh.scenario_from_dict(_small(Ki=0.01, integralLimit=0.1))

    def fd_eigs(f, x0, h=1e-6):
        f = jax.jit(f)
        J = np.stack([(np.asarray(f(x0 + e)) - np.asarray(f(x0 - e))) / (2 * h) for e in h * np.eye(len(x0))], 1)
        return np.linalg.eigvals(J)

    f, x0, T = period_map(s)
    assert x0.shape == (14,)  # sigma, omega, theta, thetaDot, Omega (3 wheels), the integral
    z = fd_eigs(f, x0)
    p = closed_loop_poles(s)
    lam = np.asarray(p.eigenvalue)
    err = [np.min(np.abs(np.log(z) / T - x)) / max(abs(x), 1e-12) for x in lam[~np.asarray(p.neutral)]]
    assert max(err) < 1e-6, err
    fc, xc = closed_loop_field(s)
    ev = fd_eigs(fc, xc)
    c = closed_loop_poles(s, sampled=False)
    err = [np.min(np.abs(ev - x)) / max(abs(x), 1e-12) for x in np.asarray(c.eigenvalue)[~np.asarray(c.neutral)]]
    assert max(err) < 1e-6, err
    # the two formulations differ by the zero-order hold's effect, O(|lambda| control_dt): 4.6e-2 at most here
    live = ~np.asarray(c.neutral)
    lc, ls = np.asarray(c.eigenvalue)[live], lam[~np.asarray(p.neutral)]
    gap = np.array([np.min(np.abs(ls - x)) / abs(x) for x in lc])
    assert gap.max() < 5e-2 and gap.max() > 1e-4, gap
