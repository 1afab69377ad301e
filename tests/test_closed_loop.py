"""Closed-loop linear analysis (`jh.closed_loop_poles`, `jaxhinge modes --closed-loop`): which body moves in each
pole, flexible modes read at their own frequency above the flight software's Nyquist frequency, and a flexible
mode driven unstable by the sample-and-hold, predicted by the sampled poles and seen in simulation. The poles
against finite-difference linearisations: tests/test_control.py."""

import dataclasses
import json
import tomllib

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._cli import main


def _example() -> dict:
    with open(jh.example_path("closed_loop_slew.toml"), "rb") as f:
        return tomllib.load(f)


def _sampled_loop_by_differences(path, neutral: int) -> dict[str, np.ndarray]:
    """The sampled loop's linearisation from central differences (h = 1e-6) of one control period of
    `jh.simulate_batch` (the simulator's own nonlinear rk4 steps, the controller's call at t = 0, its command held):
    one member per perturbed coordinate of the state x = (sigma_BN, omega_BN_B, theta, thetaDot, Omega) about rest
    at the reference attitude, the wheels at their speeds. Returns `z`, the eigenvalues of the one-period map that
    are not neutral (z = 1: the `neutral` uncontrolled wheel-speed directions); `lam`, the poles ln z / control_dt
    with Im >= 0 (each pole once), by |lam| (the principal logarithm: right while every pole is below the Nyquist
    frequency, as in the example, 0.42 Hz against 1 Hz); and for each pole, from its eigenvector v and the flight
    software's Jacobian G (differences of the command it held over the period, `u_current` at t = 0),
    `command_per_rad` = max_i |(G v)_i| / max(4 |v_sigma|, max_j |v_theta_j|) (sigma_R0N = 0: the hub's rotation is
    4 sigma) and `saturation_angle` = min_i (u_max_i - |u_i at rest|) / (|(G v)_i| per radian). Shares no code with
    `closed_loop_poles`' period matrix or its command Jacobian."""
    s = jh.load_scenario(path)
    T = float(s.control.control_dt)
    one_period = dataclasses.replace(s, simulation=dataclasses.replace(s.simulation, t_end=T, save_dt=T))
    panels, wheels = s.spacecraft.panels.labels, s.spacecraft.wheels.labels
    x0 = np.concatenate([np.zeros(6 + 2 * len(panels)), np.asarray(s.initial.OmegaInit)])
    n, h, p = len(x0), 1e-6, len(panels)
    X = x0 + np.concatenate([h * np.eye(n), -h * np.eye(n)])
    params = {"hub.sigma_BNInit": X[:, 0:3], "hub.omega_BN_BInit": X[:, 3:6],
              **{f"{q}.thetaInit": X[:, 6 + i] for i, q in enumerate(panels)},
              **{f"{q}.thetaDotInit": X[:, 6 + p + i] for i, q in enumerate(panels)},
              **{f"{w}.Omega": X[:, 6 + 2 * p + i] for i, w in enumerate(wheels)}}
    b = jh.simulate_batch(one_period, params)
    assert np.all(np.asarray(b.t)[:, -1] == T)
    Y = np.concatenate([np.asarray(getattr(b, k))[:, -1].reshape(2 * n, -1)
                        for k in ("sigma_BN", "omega_BN_B", "theta", "thetaDot", "Omega")], 1)
    z, V = np.linalg.eig((Y[:n] - Y[n:]).T / (2 * h))
    near_one = np.abs(z - 1) < 1e-6  # measured 2.5e-9 (the rounding of Omega +- h), the next pole 2.7e-2 away
    assert int(near_one.sum()) == neutral, np.sort(np.abs(z - 1))
    z, V = z[~near_one], V[:, ~near_one]
    lam = np.log(z.astype(complex)) / T
    upper = np.flatnonzero(lam.imag >= 0)
    order = upper[np.argsort(np.abs(lam[upper]))]
    U = np.asarray(b.u_current)[:, 0]  # the command held over the period
    Gv = np.abs(((U[:n] - U[n:]).T / (2 * h)) @ V[:, order])
    angle = np.maximum(4 * np.linalg.norm(V[0:3, order], axis=0), np.abs(V[6:6 + p, order]).max(0))
    rest = np.abs(0.5 * (U[:n] + U[n:]).mean(0))
    headroom = np.asarray(s.spacecraft.wheels.u_max) - rest
    return {"z": z, "lam": lam[order], "command_per_rad": Gv.max(0) / angle,
            "saturation_angle": (headroom[:, None] / (Gv / angle)).min(0)}


def test_open_loop_poles_are_the_modes_with_their_energy_shares():
    """With zero gains the loop is open: the continuous law's flexible poles are the modes' $\\pm i\\omega_n$
    (undamped, c = 0) and their energy shares are the modes' (1e-9: two eigen-solves of the same model); sampled
    every 7 s, every mode above the Nyquist frequency (0.071 Hz against 0.23-0.42 Hz), the sampled poles read
    each mode at its own frequency (not the aliased one, which the principal logarithm gives), to the rk4
    truncation of 700 steps of 10 ms ((omega dt)^4 ~ 1e-7 relative, measured 4e-9), undamped to 1e-7. With zero
    gains no pole commands anything (`command_per_rad` 0, a hub torque: no `saturation_angle`)."""
    d = _example()
    d.pop("wheels")
    d["control"].update(K=0.0, P=0.0, actuator="torque", control_dt=7.0)
    for p in d["panels"]:
        p["c"] = 0.0
    s = jh.scenario_from_dict(d, "open.toml")
    m = jh.modes(s)
    n = len(d["panels"])
    for sampled, tol in ((False, 1e-9), (True, 1e-7)):
        p = jh.closed_loop_poles(s, sampled=sampled)
        assert p.participants == m.participants and int(np.sum(p.flexible)) == 2 * n
        f = np.asarray(p.frequency_hz)[np.asarray(p.flexible)][::2]
        np.testing.assert_allclose(f, m.frequency_hz, rtol=tol)
        assert (f > 0.5 / 7.0).all()  # every mode above Nyquist
        assert np.abs(np.asarray(p.damping_ratio)[np.asarray(p.flexible)]).max() < tol
        shares = np.asarray(p.energy_fraction)[np.asarray(p.flexible)][::2]
        np.testing.assert_allclose(shares, m.energy_fraction, atol=10 * tol)
        np.testing.assert_allclose(np.nansum(np.asarray(p.energy_fraction), 1)[~np.asarray(p.neutral)], 1.0, rtol=1e-12)
        live = ~np.asarray(p.neutral)
        assert np.all(np.asarray(p.command_per_rad)[live] == 0.0) and np.all(np.isinf(p.saturation_angle[live]))


def test_sampling_drives_a_flexible_mode_unstable():
    """The example spacecraft with a stiff +Y wing (k = 16000 N m/rad: its mode at 1.31 Hz, above the 1 Hz
    Nyquist frequency of the 0.5 s flight software, lightly damped, c = 4 N m s/rad) and two rate gains: P = 300
    keeps the loop stable, P = 1000 drives the wing mode unstable through the zero-order hold (the hold's phase
    lag turns rate feedback into negative damping above Nyquist), while the continuous law stays stable at both
    gains (collocated PD only adds damping). Seen in simulation: the wing, started 2e-5 rad off (linear: the
    wheel torques stay below u_max), grows or decays at the rate the sampled pole predicts, Re(lambda), to 2 %
    (from the peak amplitude of 10 s windows over 100-300 s; measured 0.2 %)."""
    d = _example()
    d["hub"]["sigma_BNInit"] = [0.0, 0.0, 0.0]
    d["panels"][0].update(k=16000.0, c=4.0, thetaInit=2e-5)
    d["simulation"].update(t_end=300.0, save_dt=0.05)
    rates = {}
    for P in (300.0, 1000.0):
        d["control"]["P"] = P
        s = jh.scenario_from_dict(d, "unstable.toml")
        p, c = jh.closed_loop_poles(s), jh.closed_loop_poles(s, sampled=False)
        assert float(c.growth_rate) < 0 and float(c.flexible_margin) > 0.004
        j = int(np.argmin(np.where(np.asarray(p.flexible), np.asarray(p.damping_ratio), np.inf)))
        assert abs(float(p.frequency_hz[j]) - 1.31) < 0.01
        assert float(p.growth_rate) == pytest.approx(float(np.real(p.eigenvalue[j])), rel=1e-12)
        tr = jh.simulate(s)
        assert bool(tr.success) and np.abs(np.asarray(tr.u_current)).max() < 1.0  # never saturated
        t, th = np.asarray(tr.t), np.asarray(tr.theta[:, 0])
        w = 200
        peaks = np.abs(th[: len(th) // w * w].reshape(-1, w)).max(1)
        tc = t[: len(th) // w * w].reshape(-1, w).mean(1)
        slope = np.polyfit(tc[tc > 100], np.log(peaks[tc > 100]), 1)[0]
        rates[P] = (float(np.real(p.eigenvalue[j])), slope, float(p.flexible_margin))
        assert slope == pytest.approx(rates[P][0], rel=0.02), (P, rates[P])
    assert rates[300.0][0] < 0 < rates[1000.0][0]
    assert rates[300.0][2] > 0 > rates[1000.0][2]


def test_modes_closed_loop_command(capsys):
    """`jaxhinge modes SCEN --closed-loop [--continuous] [--json]`: the JSON lists each pole once (Im >= 0) with
    the values of an independent linearisation of the sampled loop (finite differences of the simulator), its kind, energy shares, wheel torque per radian and saturation angle; the
    table says stable, shows the torque per degree and the saturation angle of each pole in degrees, and says that
    the example's own slew starts saturated: its first wheel command, rwMotorTorque's minimum-norm torques for
    Lr = K sigma_BR (at rest) computed here from the file's values, is 5.6 times u_max (1e-12); a scenario
    without [control], --continuous alone and --clamped are refused in one line (exit 2)."""
    path = str(jh.example_path("closed_loop_slew.toml"))
    assert main(["modes", path, "--closed-loop", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # each pole printed against an independent linearisation of the sampled loop (`_sampled_loop_by_differences`,
    # central differences of the simulator's nonlinear one-period map and of the flight software's command, h = 1e-6):
    # measured 1.0e-13 relative in frequency_hz = |lam| / 2 pi, 1.0e-14 absolute in the damping ratios, 1.8e-12
    # relative in command_Nm_per_rad and saturation_angle_rad (the differences' round-off, ~1e-16 / h, over the
    # eigenvector); tolerances ~10x
    ref = _sampled_loop_by_differences(path, 4)
    lam = ref["lam"]
    np.testing.assert_allclose([q["frequency_hz"] for q in data["poles"]], np.abs(lam) / (2 * np.pi), rtol=1e-12)
    np.testing.assert_allclose([q["damping_ratio"] for q in data["poles"]], -lam.real / np.abs(lam), rtol=0,
                               atol=1e-13)
    np.testing.assert_allclose([q["command_Nm_per_rad"] for q in data["poles"]], ref["command_per_rad"],
                               rtol=2e-11)
    np.testing.assert_allclose([q["saturation_angle_rad"] for q in data["poles"]], ref["saturation_angle"],
                               rtol=2e-11)
    d = _example()
    gs = np.array([w["gsHat_B"] for w in d["wheels"]])
    s = np.asarray(d["hub"]["sigma_BNInit"])  # sigma_BR (sigma_R0N = 0), at rest: Lr = K sigma_BR
    u = gs @ np.linalg.solve(gs.T @ gs, d["control"]["K"] * s)  # C = I: u = G^T (G G^T)^-1 Lr, G = gs^T
    assert data["first_command_over_u_max"] == pytest.approx(np.abs(u).max() / 1.0, rel=1e-12)
    assert data["starts_saturated"] and 5.5 < data["first_command_over_u_max"] < 5.7
    assert main(["modes", path, "--closed-loop"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.strip()[:1].isdigit() and len(ln.split()) >= 11]
    deg = np.degrees(1.0)
    for r, q in zip(rows, data["poles"], strict=True):
        assert float(r[9]) == pytest.approx(q["command_Nm_per_rad"] / deg, rel=1e-3)  # printed to 4 digits
        assert float(r[10]) == pytest.approx(q["saturation_angle_rad"] * deg, rel=1e-3)
    assert "the scenario's own run starts saturated: its first wheel command is 5.62 x u_max" in out
    assert data["loop"] == "sampled" and data["control_dt_s"] == 0.5 and data["stable"]
    flex = [q for q in data["poles"] if q["kind"] == "flexible"]
    margin = min(-lam[i].real / abs(lam[i]) for i, q in enumerate(data["poles"]) if q["kind"] == "flexible")
    assert data["flexible_margin"] == pytest.approx(margin, rel=0, abs=1e-13) and data["neutral_poles"] == 4
    assert len(flex) == 3 and all(abs(sum(q["energy_fraction"].values()) - 1) < 1e-12 for q in flex)
    # the spectral radius against the same independent linearisation (measured 5.1e-15 relative, tolerance ~10x)
    assert data["spectral_radius"] == pytest.approx(float(np.abs(ref["z"]).max()), rel=5e-14)
    assert main(["modes", path, "--closed-loop", "--continuous"]) == 0
    out = capsys.readouterr().out
    assert "continuous law" in out and "stable" in out and "UNSTABLE" not in out
    for argv, msg in (([str(jh.example_path("two_panel"))], "has no [control] table"),
                      ([path, "--continuous"], "--continuous: only with --closed-loop"),
                      ([path, "--clamped"], "--clamped: the closed loop flies free")):
        assert main(["modes", *argv, *(["--closed-loop"] if "--continuous" not in argv else [])]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, err


def test_closed_loop_damping_derivatives_equal_finite_differences():
    """`jh.sensitivity` outputs `closed_loop_margin` (the least flexible damping ratio of the sampled loop) and
    `closed_loop_damping` (each flexible mode's) of the example, forward mode, with respect to the gains, a
    hinge's k and c, the hub inertia (a scale factor on I11) and control_dt: central differences of
    `closed_loop_poles` to 1e-6 relative (h = 1e-4 relative: truncation ~1e-8), or 1e-14/h absolute where a
    derivative is so small that the damping ratios' round-off (~1e-15: the one-period matrix is a power by
    repeated squaring) over 2h dominates (d(mode 3)/dc of the +Y wing, 6e-8: measured 2.4e-12 off)."""
    s = jh.load_scenario(jh.example_path("closed_loop_slew.toml"))
    names = ["control.K", "control.P", "wing_pY.k", "wing_pY.c", "control.control_dt"]
    r = jh.sensitivity(s, ["closed_loop_margin", "closed_loop_damping", {"name": "closed_loop_margin",
                                                                          "loop": "continuous"}],
                       [*names, "hub.IHubPntBc_B[1]"], mode="forward")
    assert r.success and r.output_names[:2] == ("closed_loop_margin", "closed_loop_damping[mode 1]")

    def values(sc, sampled=True):
        p = jh.closed_loop_poles(sc, sampled=sampled)
        flex = np.asarray(p.damping_ratio)[np.asarray(p.flexible)][::2]
        return flex, float(p.flexible_margin)

    flex, margin = values(s)
    np.testing.assert_allclose(r.output_values[:4], [margin, *flex], rtol=1e-12)
    assert r.output_values[4] == pytest.approx(values(s, False)[1], rel=1e-12)
    x0 = r.parameter_values
    for j in range(len(names) + 1):
        cols = []
        for sign in (1, -1):
            if j < len(names):
                h = 1e-4 * x0[j]
                sc = jh.apply_parameters(s, {names[j]: x0[j] + sign * h})
            else:  # I11 scaled by 1 + h
                h = 1e-4
                sc = jh.apply_parameters(s, {"hub.IHubPntBc_B": [1 + sign * h, 1.0, 1.0]})
            f, m = values(sc)
            cols.append(np.array([m, *f]))
        fd = (cols[0] - cols[1]) / (2 * h)
        np.testing.assert_allclose(r.jacobian[:4, j], fd, rtol=1e-6, atol=1e-14 / h, err_msg=str(j))


def test_fit_controller_gain_to_closed_loop_targets(tmp_path, capsys):
    """`jaxhinge fit` with `[modes] loop = "closed"` on a one-panel spacecraft whose controller torques the hub
    every 0.1 s: the rate gain and the hinge stiffness that put the panel's closed-loop mode at 0.25 Hz with 3 %
    damping (two targets, two free parameters: reached to 1e-10; the nominal is 0.2467 Hz, 2.06 %). The fitted
    scenario file, loaded back, has that closed-loop pole (`closed_loop_poles`, 1e-10); result.json says loop =
    "closed". Refused in one line: a controller gain free with the open loop, loop = "closed" on a scenario
    without [control] or with FEA modes."""
    import shutil

    from test_control import _small

    jh.dump_scenario(jh.scenario_from_dict(_small(actuator="torque")), tmp_path / "sc.toml")
    fit = tmp_path / "FIT.toml"
    body = ('scenario = "sc.toml"\n[modes]\nloop = "closed"\ntargets_hz = [0.25]\ndamping_ratios = [0.03]\n'
            '[fit]\nfree = ["control.P", "p0.k"]\n')
    fit.write_text(body)
    assert main(["fit", str(fit)]) == 0
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["loop"] == "closed" and res["converged"] and res["targets_reached"]
    p = jh.closed_loop_poles(jh.load_scenario(str(tmp_path / "out" / "fitted_scenario.toml")))
    flex = np.asarray(p.flexible)
    f, z = np.asarray(p.frequency_hz)[flex][0], np.asarray(p.damping_ratio)[flex][0]
    assert f == pytest.approx(0.25, rel=1e-10) and z == pytest.approx(0.03, rel=1e-10)
    assert res["parameters"]["control.P"]["value"] > 60.0  # more rate gain than nominal damps the panel more
    capsys.readouterr()
    shutil.copy(jh.example_path("two_panel.toml"), tmp_path / "two.toml")
    for text, msg in ((body.replace('loop = "closed"\n', ""), ('control.P is a controller parameter, which does not '
                       'enter the structure\'s modes; fit closed-loop targets with modes.loop = "closed"')),
                      (body.replace("sc.toml", "two.toml"), "has no [control] table"),
                      (body.replace("targets_hz = [0.25]\n", 'fea = "x.dat"\n'), "FEA modes are the open")):
        fit.write_text(text)
        assert main(["fit", str(fit)]) == 2
        errors = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
        assert len(errors) == 1 and msg in errors[0], errors


@pytest.mark.parametrize("name, actuator", [("torque", jh.HubTorque()), ("wheels", jh.WheelTorques())])
def test_actuator_by_name_or_object_is_one_program(name, actuator):
    """Issue 44: the controller's actuator is static data, an object (`HubTorque()`, `WheelTorques()`) that files
    name ("torque", "wheels"): the closed-loop poles of `_small` spelled either way are one compiled program and
    equal to the last bit (eigenvalues, the commands per radian, the saturation angles)."""
    from _helpers import with_actuator
    from test_control import _small

    from jaxhinge._analysis._linear._closed_loop import _closed_loop_jit

    by_name = jh.scenario_from_dict(_small(actuator=name))
    a = jh.closed_loop_poles(by_name)
    programs = _closed_loop_jit.plain._cached._cache_size()
    b = jh.closed_loop_poles(with_actuator(by_name, actuator))
    assert _closed_loop_jit.plain._cached._cache_size() == programs
    for k in ("eigenvalue", "command_per_rad", "saturation_angle", "margin"):
        np.testing.assert_array_equal(np.asarray(getattr(a, k)), np.asarray(getattr(b, k)), err_msg=k)
