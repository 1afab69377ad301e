"""Linear modes of a spacecraft with spinning reaction wheels (gyroscopic coupling): against the eigenvalues of a
finite-difference Jacobian of the simulator's vector field, `linearize`'s state matrix against its M, C, G, K,
derivatives against central differences, the modal fit, and the refusals."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_wheels import _with_wheels

import jaxhinge as jh


def _strong_gyro(Js=2.0, friction=0.0):
    """The bundled wheel example with wheels of 2 kg m^2 (|h| ~ 300 N m s: nutation at 0.29 rad/s, below the
    flexible modes at 1.3-2.6 rad/s), so that the gyroscopic coupling moves the modes by 1e-4 to 1e-3."""
    d = jh.scenario_to_dict(jh.load_scenario(jh.example_path("wheels_slew")))
    d.pop("inputs")
    for w in d["wheels"]:
        w.update(Js=Js, cViscous=friction)
    return jh.scenario_from_dict(d)


def _fd_jacobian_eigenvalues(scenario, h=1e-6):
    """Eigenvalues of the central-difference Jacobian of the simulator's vector field (`state_derivative_held`,
    the function diffrax integrates) at rest, hinges at thetaRef, wheels at OmegaInit held there by their motors
    (motor torque = cViscous * Omega, no torque limit: an equilibrium), no loads: an independent check of the linearisation (no
    M, C, G, K, no condensation, no pole selection)."""
    from jaxhinge._dynamics._backsub import state_derivative_held
    from jaxhinge._model._spacecraft import State

    sc = scenario.spacecraft
    n, nw = sc.panels.count, sc.wheels.count
    th0, Om0, z3 = np.asarray(sc.panels.thetaRef), np.asarray(scenario.initial.OmegaInit), jnp.zeros(3)
    sc = dataclasses.replace(sc, wheels=dataclasses.replace(sc.wheels, u=np.asarray(sc.wheels.cViscous) * Om0,
                                                            u_max=np.zeros(nw)))

    @jax.jit
    def f(y):
        st = State(y[0:3], y[3:6], y[6:9], y[9:12], th0 + y[12:12 + n], y[12 + n:12 + 2 * n], Om0 + y[12 + 2 * n:])
        return jnp.concatenate(jax.tree.leaves(state_derivative_held(sc, st, z3, z3, z3, 0.0, 0.0)))

    eye = h * np.eye(12 + 2 * n + nw)
    J = np.stack([(np.asarray(f(e)) - np.asarray(f(-e))) / (2 * h) for e in eye], 1)
    return np.linalg.eigvals(J)


@pytest.mark.parametrize("friction", [0.0, 0.05])
def test_free_modes_with_spinning_wheels_are_eigenvalues_of_the_fd_jacobian(friction):
    """Every free-free pole `modes` reports with spinning wheels (gyroscopic coupling, viscous wheel friction)
    is an eigenvalue of a finite-difference Jacobian of the vector field, to 1e-10 relative (central differences
    of a smooth field at h = 1e-6: truncation ~1e-12, round-off ~1e-10 of the largest entry); the wheels move the
    poles by more than 1e-3 relative (so the check is not passed by the non-spinning modes), and a mode's
    frequency with the wheels stopped and frictionless equals the structure's (hub inertia less the wheels' spin
    inertia, no wheels), the gyroscopic solve reducing to the symmetric one to 1e-12."""
    scn = _strong_gyro(friction=friction)
    m = jh.modes(scn)
    ev = _fd_jacobian_eigenvalues(scn)
    lam = np.asarray(m.eigenvalue)
    err = np.array([np.min(np.abs(ev - x)) / abs(x) for x in lam])
    assert np.all(err < 1e-10), err
    stopped = jh.modes(scn, Omega=np.zeros(4))
    assert np.max(np.abs(np.asarray(m.frequency_hz) / np.asarray(stopped.frequency_hz) - 1)) > 1e-3
    if friction == 0.0:
        sc = scn.spacecraft
        spin = sum(float(js) * np.outer(g, g) for js, g in zip(sc.wheels.Js, np.asarray(sc.wheels.gsHat_B)))
        hub = jh.Hub(sc.hub.mHub, np.asarray(sc.hub.IHubPntBc_B) - spin, sc.hub.r_BcB_B)
        bare = jh.modes(jh.Spacecraft(hub, sc.panels))
        np.testing.assert_allclose(np.asarray(stopped.frequency_hz), np.asarray(bare.frequency_hz), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(stopped.damping_ratio), np.asarray(bare.damping_ratio), rtol=1e-10)


def test_linearization_with_wheels_is_the_simulators_jacobian():
    """`linearize` with wheels: the state matrix from autodiff of the simulator equals the one built from the
    hand-derived $M, C, G, K$ (wheel rows $J_s \\hat g_s$, $-\\tilde h$, friction slope) to 1e-13 relative;
    $M$ symmetric positive definite, $G$ skew."""
    scn = _strong_gyro(friction=0.05)
    lin = jh.linearize(scn)
    M, C, G, K = (np.asarray(x) for x in (lin.M, lin.C, lin.G, lin.K))
    n = M.shape[0]
    assert lin.dof_names[-4:] == ("psi[rw1]", "psi[rw2]", "psi[rw3]", "psi[rw4]") and n == 6 + 3 + 4
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-np.linalg.solve(M, K), -np.linalg.solve(M, C + G)]])
    assert np.max(np.abs(np.asarray(lin.A) - A)) < 1e-13 * np.max(np.abs(A))
    np.testing.assert_array_equal(G, -G.T)
    assert np.all(np.linalg.eigvalsh(M) > 0) and np.abs(G).max() > 100.0


def test_gradients_of_spinning_modes_match_finite_differences():
    """d(frequency, damping ratio)/d(k, wheel speed) through the custom JVP of the gyroscopic poles equals central
    differences to 1e-6 relative (h = 1e-4 relative: truncation ~1e-8). (Repeated poles of identical panels
    with wheels give finite gradients through the cluster means: checked when written, not in the suite.)"""
    scn = _strong_gyro()
    om = "rw1.Omega"
    k_name = next(p for p in jh.parameter_names(scn) if p.endswith(".k"))

    def out(x):
        s = jh.apply_parameters(scn, {k_name: x[0], om: x[1]})
        m = jh.modes(s)
        return jnp.concatenate([m.frequency_hz, m.damping_ratio])

    x0 = jnp.array([float(scn.spacecraft.panels.k[0]), float(scn.initial.OmegaInit[0])])
    J = np.asarray(jax.jacfwd(out)(x0))
    h = 1e-4 * np.abs(np.asarray(x0))
    fd = np.stack([(np.asarray(out(x0.at[i].add(h[i]))) - np.asarray(out(x0.at[i].add(-h[i])))) / (2 * h[i])
                   for i in range(2)], 1)
    for j in range(2):  # each column to 1e-6 of its largest entry
        np.testing.assert_allclose(J[:, j], fd[:, j], rtol=1e-6, atol=1e-6 * np.abs(fd[:, j]).max())
    assert np.abs(fd[:, 1]).max() > 0  # the wheel speed moves the poles


def test_modes_with_wheels_need_wheel_speeds_and_measure_refuses_them():
    """A bare `Spacecraft` with wheels has no wheel speeds: refused in one line naming `Omega`; `measure_modes`
    (which starts modes without wheels) refuses wheels rather than dropping them, and so does the modal fit's
    simulation check when asked for (it is off by default with wheels); both before any compute. (The modal fit
    itself calls the same `modes`: a wheel speed is a parameter it can fit, `rw1.Omega` above.)"""
    scn = jh.scenario_from_dict(_with_wheels())
    with pytest.raises(jh.ScenarioError, match=r"^Omega: a Spacecraft with reaction wheels"):
        jh.modes(scn.spacecraft)
    with pytest.raises(jh.ScenarioError, match=r"^Omega = .*one speed per wheel \(4\)"):
        jh.modes(scn, Omega=[1.0, 2.0])
    with pytest.raises(jh.ScenarioError, match=r"^wheels: measure_modes"):
        jh.measure_modes(scn)
    with pytest.raises(jh.FitError, match=r"^check = True: the independent check"):
        jh.fit(scn, [0.1, 0.2], free=["p0.k"], check=True)


def test_modes_table_says_which_frequencies_hold_the_wheels_spin(tmp_path, capsys):
    """Issue 37: `jaxhinge modes` with spinning wheels labels its columns for what they are. On `_strong_gyro`
    without damping (c = 0): the freq column is the C = 0 frequency with the wheels spinning (`jh.modes`), the
    column once labelled "undamped" is that of the wheels stopped (`jh.modes(..., Omega=0)`), now "C=0,G=0", and
    the two differ by the gyroscopic shift (> 1e-4 relative; the table prints 1e-6 Hz); the damping ratios,
    zero to round-off (1e-16), print without a sign ("0.000000", never "-0.000000"); `--json` names the model
    of `natural_frequency_hz`."""
    import json
    import re

    from jaxhinge._cli import main

    d = jh.scenario_to_dict(_strong_gyro())
    for p in d["panels"]:
        p["c"] = 0.0
    scn = jh.scenario_from_dict(d)
    jh.dump_scenario(scn, tmp_path / "gyro.toml")
    spinning, stopped = jh.modes(scn), jh.modes(scn, Omega=np.zeros(4))
    assert main(["modes", str(tmp_path / "gyro.toml")]) == 0
    out = capsys.readouterr().out
    head = next(ln for ln in out.splitlines() if ln.startswith("mode"))
    assert "C=0,G=0 [Hz]" in head and "undamped" not in head
    rows = np.array([[float(x) for x in ln.split()[:5]] for ln in out.splitlines() if re.match(r"^ +\d+ ", ln)])
    np.testing.assert_allclose(rows[:, 1], np.asarray(spinning.frequency_hz), atol=1e-6)
    np.testing.assert_allclose(rows[:, 4], np.asarray(stopped.frequency_hz), atol=1e-6)
    assert np.all(np.abs(rows[:, 1] / rows[:, 4] - 1) > 1e-4)
    assert np.abs(np.asarray(spinning.damping_ratio)).max() < 1e-15 and "-0.000000" not in out
    assert "C=0,G=0: the undamped frequency with the wheels stopped" in out
    assert main(["modes", str(tmp_path / "gyro.toml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["natural_frequency_model"] == "C = 0, wheels stopped (G = 0)"
