"""A run's outputs: the `Trajectory` (Basilisk-named arrays, their units), why a run failed (`failure_reason`),
and its health (the drift of the quantities its physics conserves)."""


import diffrax
import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._model._scenario import Scenario, SimulationConfig

OUTPUT_UNITS = {  # every trajectory output, in order, and its SI unit
    "t": "s", "r_BN_N": "m", "v_BN_N": "m/s", "r_CN_N": "m", "v_CN_N": "m/s", "sigma_BN": "1 (MRP)",
    "omega_BN_B": "rad/s", "theta": "rad", "thetaDot": "rad/s", "totOrbEnergy": "J", "totRotEnergy": "J",
    "totOrbAngMomPntN_N": "kg m^2/s", "totRotAngMomPntC_N": "kg m^2/s", "Omega": "rad/s", "u_current": "N m",
    "sigma_BR": "1 (MRP)", "omega_BR_B": "rad/s", "Lr": "N m",
}
OUTPUT_NAMES = tuple(OUTPUT_UNITS)
DRIFT_RTOL = 1e-4  # largest relative drift of a conserved output in a valid run (`Trajectory.drift_warning`)
INVALID_MODEL = -1  # `Trajectory.result` of a run whose model breaks a physical rule (`_model._rules.model_ok`)


class Trajectory(eqx.Module):
    """Sampled outputs of one run (Basilisk names and frames; T samples, N panels in file order).

    `t` (T,) [s]; `r_BN_N`, `v_BN_N`: hub point B in N; `r_CN_N`, `v_CN_N`: system CoM in N;
    `sigma_BN` (shadow set, $|\\sigma| \\le 1$); `omega_BN_B` [rad/s]; `theta`, `thetaDot` (T, N);
    `totOrbEnergy`, `totRotEnergy` (T,) [J]; `totOrbAngMomPntN_N`, `totRotAngMomPntC_N` (T, 3);
    `panel_r_SN_N`, `panel_v_SN_N`, `panel_sigma_SN`, `panel_omega_SN_S` (T, N, 3): panel inertial states;
    `panel_r_HN_N` (T, N, 3): hinge points in N; `Omega` (T, W) [rad/s]: wheel speeds relative to the hub,
    `u_current` (T, W) [N m]: the motor torque applied to each wheel (after the `u_max` limit); W = 0 without
    wheels. With a controller (`Scenario.control`): `sigma_BR` (T, 3) the attitude error (MRP of B relative to
    the reference), `omega_BR_B` (T, 3) [rad/s] the rate error, `Lr` (T, 3) [N m, B] the torque requested on the
    hub, held from each sample on (`mrpFeedback`'s `torqueRequestBody`); (T, 0) without one.
    `result`: diffrax result code (0 = success); `success`: solver succeeded and every output is finite;
    `num_steps`: accepted steps (rk4: the steps of the grid to `t_end`).
    """

    t: Float[Array, " T"]
    r_BN_N: Float[Array, "T 3"]
    v_BN_N: Float[Array, "T 3"]
    r_CN_N: Float[Array, "T 3"]
    v_CN_N: Float[Array, "T 3"]
    sigma_BN: Float[Array, "T 3"]
    omega_BN_B: Float[Array, "T 3"]
    theta: Float[Array, "T panels"]
    thetaDot: Float[Array, "T panels"]
    totOrbEnergy: Float[Array, " T"]
    totRotEnergy: Float[Array, " T"]
    totOrbAngMomPntN_N: Float[Array, "T 3"]
    totRotAngMomPntC_N: Float[Array, "T 3"]
    panel_r_SN_N: Float[Array, "T panels 3"]
    panel_v_SN_N: Float[Array, "T panels 3"]
    panel_sigma_SN: Float[Array, "T panels 3"]
    panel_omega_SN_S: Float[Array, "T panels 3"]
    panel_r_HN_N: Float[Array, "T panels 3"]
    Omega: Float[Array, "T wheels"]
    u_current: Float[Array, "T wheels"]
    sigma_BR: Float[Array, "T control"]
    omega_BR_B: Float[Array, "T control"]
    Lr: Float[Array, "T control"]
    result: Int[Array, ""]
    success: Bool[Array, ""]
    num_steps: Int[Array, ""]

    def relative_drift(self, name: str) -> np.ndarray:
        """$|x(t) - x(0)| / |x(0)|$ per sample of a conserved output (`"totRotEnergy"`, `"totRotAngMomPntC_N"`,
        ...; vectors: Euclidean norms; absolute when $x(0) = 0$), as NumPy. The orbital energy and momentum are
        measured against $|x(0)|$ plus the rotational one's: those of C alone can be pure round-off (C at rest)."""
        other = {"totOrbEnergy": "totRotEnergy", "totOrbAngMomPntN_N": "totRotAngMomPntC_N"}.get(name)
        extra = 0.0 if other is None else np.linalg.norm(np.asarray(getattr(self, other))[0])
        return relative_drift(np.asarray(getattr(self, name)), extra)

    def drift_warning(self, scenario: Scenario, rtol: float = DRIFT_RTOL) -> str | None:
        """The run's health: `None`, or one line naming the outputs `scenario`'s physics conserves (`conserved`)
        that drifted by more than `rtol` (largest `relative_drift`): such a run is not a valid solution (a step
        too coarse for its dynamics, or implausible parameters). One run (not a batch)."""
        bad = [f"{k} {d:.3g}" for k in conserved(scenario) if (d := float(self.relative_drift(k).max())) > rtol]
        return None if not bad else (
            f"relative drift {', '.join(bad)} > {rtol:g}, although with no external loads (and, for the rotational "
            "energy, no damping or motor torque) the physics conserves them: the result is not valid; reduce "
            "simulation.dt (rk4) or rtol/atol, or check the parameters")

    def as_dict(self) -> dict[str, np.ndarray]:
        """The arrays of the `jaxhinge simulate --out` file, as NumPy."""
        return {k: np.asarray(getattr(self, k)) for k in OUTPUT_NAMES}


def failure_reason(code: int, simulation: Scenario | SimulationConfig | None = None) -> str:
    """Why a run failed, from its `Trajectory.result` code (0 with `success` false: a non-finite state), in the
    scenario's own terms (`simulation.max_steps`, `dt`, ...) with what to change. Plain text, one line. Given the
    `Scenario`, an rk4 failure names a hinge whose clamped frequency $\\sqrt{k/(I_{s2} + m d^2)}$ times `dt`
    exceeds rk4's stability limit 2.8 (a hinge too stiff, or a panel too light, for that step)."""
    code, scenario = int(code), simulation if isinstance(simulation, Scenario) else None
    simulation = scenario.simulation if scenario is not None else simulation
    if code == INVALID_MODEL:
        return ("the model breaks a physical rule (a mass, d or mHub <= 0, a negative k or c, l where no panel "
                "hangs, an inertia that is not a rigid body's, a hinge frame that is not a rotation): not a valid run")
    if code == 0:
        hint = "check masses and inertias (near-zero values make the model singular)"
        if simulation is not None and simulation.integrator.fixed_step:
            hint = f"try a smaller simulation.dt (now {simulation.dt:g} s) or a softer hinge, and " + hint
        if scenario is not None and simulation.integrator.fixed_step and (p := scenario.spacecraft.panels).count:
            w = np.sqrt(np.asarray(p.k / (p.IPntS_S[:, 1, 1] + p.mass * p.d**2)))
            if w[j := int(np.argmax(w))] * simulation.dt > 2.8:
                hint = (f"panel {p.labels[j]!r} has a hinge frequency sqrt(k / (I_s2 + m d^2)) = {w[j]:.3g} rad/s, "
                        f"too high for simulation.dt = {simulation.dt:g} s (rk4 needs dt < 2.8 / {w[j]:.3g} = "
                        f"{2.8 / w[j]:.2g} s): check its k, mass and IPntS_S, or reduce dt")
        return f"a non-finite value (NaN/inf) appeared in the state; {hint}"
    if code == diffrax.RESULTS.max_steps_reached._value:
        where = "" if simulation is None else f" ({simulation.integrator.name}, simulation.max_steps = {simulation.max_steps})"
        return (f"the adaptive integrator used all its steps before t_end{where}: raise simulation.max_steps, "
                "loosen simulation.rtol/atol, or check for a very stiff hinge")
    messages = getattr(diffrax.RESULTS, "_index_to_message", ())  # diffrax's own wording, where it has one
    text = messages[code] if 0 <= code < len(messages) else ""
    return f"integrator result code {code}" + (f": {text.splitlines()[0]}" if text else "")


def relative_drift(x: np.ndarray, extra: float = 0.0) -> np.ndarray:
    """$|x(t) - x(0)| / (|x(0)| + extra)$ per sample (leading axis: time; vectors: Euclidean norms); absolute
    when the denominator is 0."""
    x = np.asarray(x, dtype=float)
    x = x.reshape(x.shape[0], -1)
    ref = np.linalg.norm(x[0]) + extra
    return np.linalg.norm(x - x[0], axis=1) / (ref if ref > 0 else 1.0)


def conserved(scenario: Scenario) -> tuple[str, ...]:
    """The outputs `scenario`'s physics conserves. With no external load (constant, pulse or function; gravity
    is part of the model): the orbital energy (with the gravity potential), the orbital momentum about N and the
    rotational momentum about C (springs, dampers, hinge and wheel motors and wheel friction act inside the
    spacecraft); the rotational energy (springs and wheels included) too when no hinge has damping (`c = 0`) or
    motor torque and no wheel has a motor torque or friction. With external loads (recorded ones included, and an
    attitude controller that torques the hub, `HubTorque()`: its actuator is `external`): none. A controller on the wheels
    is a wheel motor torque (internal: the rotational energy is not conserved, the momenta are)."""
    L, p, w, ctrl = scenario.loads, scenario.spacecraft.panels, scenario.spacecraft.wheels, scenario.control
    vectors = (L.extForce_B, L.extForce_N, L.extTorquePntB_B) + (
        () if L.pulses is None else (L.pulses.extForce_B, L.pulses.extForce_N, L.pulses.extTorquePntB_B))
    loaded = L.inputs is not None and any(i >= 0 for idx in L.inputs.targets[:3] for i in idx)
    torqued = ctrl is not None and ctrl.actuator.external  # the controller's torque acts on the hub from outside
    if torqued or loaded or any(f is not None for f in (L.extForce_B_fn, L.extForce_N_fn, L.extTorquePntB_B_fn)) or any(
            np.any(np.asarray(v) != 0) for v in vectors):
        return ()
    driven = L.inputs is not None and any(i >= 0 for idx in L.inputs.targets[3:] for i in idx)
    wheels_active = w is not None and (ctrl is not None or L.wheel_u_fn is not None or any(
        np.any(np.asarray(getattr(w, k)) != 0) for k in ("u", "cViscous", "fCoulomb")))
    passive = (L.motorTorque_fn is None and not np.any(np.asarray(p.c) != 0) and not np.any(np.asarray(p.motorTorque))
               and not driven and not wheels_active)
    return ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N") + ("totRotEnergy",) * passive
