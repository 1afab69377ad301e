"""The console report of `jaxhinge simulate`: its progress header (what is simulated) and its summary."""

import os

import numpy as np

from .._simulation._trajectory import DRIFT_RTOL, conserved

__all__ = ["saturation", "simulate_header", "simulate_report_lines"]

MAX_PANEL_LINES = 12  # more panels than this: the ones with the largest |theta| and a count of the others


def simulate_header(path: str, scenario) -> str:
    """The progress line of `jaxhinge simulate`: panels, wheels, the controller (actuator, period, gains), recorded
    inputs and pulses, then the run's settings."""
    sc, cfg, ctrl, loads = scenario.spacecraft, scenario.simulation, scenario.control, scenario.loads
    parts = [f"{sc.panels.count} panel(s)"]
    if sc.wheels is not None:
        limits = sorted({float(v) for v in np.asarray(sc.wheels.u_max) if v > 0})
        parts.append(f"{sc.wheels.count} wheel(s)" + (
            f" (u_max {', '.join(f'{v:g}' for v in limits)} N m)" if limits else " (no torque limit)"))
    if ctrl is not None:
        parts.append(f"attitude controller on {ctrl.actuator.words} every {float(ctrl.control_dt):g} s "
                     f"(K = {float(ctrl.K):g}, P = {float(ctrl.P):g})")
    if loads.inputs is not None:
        src = os.path.basename(loads.inputs.source) if loads.inputs.source else "recorded"
        parts.append(f"inputs {src} ({len(loads.inputs.columns)} column(s), {loads.inputs.hold})")
    if loads.pulses is not None:
        parts.append(f"{np.shape(loads.pulses.t_start)[0]} load pulse(s)")
    return (f"jaxhinge: {path}: {', '.join(parts)}; t_end = {cfg.t_end} s, integrator {cfg.integrator.name}, "
            f"dt = {cfg.dt} s; compiling and running...")


def saturation(u_current, u_max) -> np.ndarray:
    """(T, W) bool: where each wheel's applied motor torque `u_current` (T, W) sits at its limit, $|u| = $ `u_max`
    (W,) (the clipped command equals the limit exactly; never for a wheel with `u_max` <= 0, no limit)."""
    u, lim = np.asarray(u_current, dtype=float), np.asarray(u_max, dtype=float)
    return (lim > 0) & (np.abs(u) >= np.abs(lim))


def _wheel_lines(out: dict, wheels, ctrl) -> list[str]:
    """Per wheel: final speed, largest applied torque and how long it sat at u_max (samples x the sample step);
    with a controller, a note when a wheel saturated (the closed loop was not linear then)."""
    t, u = out["t"], out["u_current"]
    names, u_max = wheels.labels, np.asarray(wheels.u_max)
    step = float(t[1] - t[0]) if len(t) > 1 else 0.0
    sat = saturation(u, u_max)
    lines = []
    for j, name in enumerate(names):
        line = f"u_current[{name}]".ljust(20) + f"max |u| {np.abs(u[:, j]).max():.6g} N m"
        if u_max[j] > 0:
            k = np.flatnonzero(sat[:, j])
            line += f", at u_max = {u_max[j]:g} N m for {k.size * step:g} s ({k.size} of {len(t)} samples"
            line += f", t = {t[k[0]]:g} .. {t[k[-1]]:g} s)" if k.size else ")"
        lines.append(line + f"; Omega final {out['Omega'][-1, j]:.9g} rad/s")
    if ctrl is not None and ctrl.actuator.saturates and sat.any():
        k = np.flatnonzero(sat.any(axis=1))
        lines.append(f"{'note':<20}saturated: a wheel at u_max for {k.size * step:g} s (t = {t[k[0]]:g} .. {t[k[-1]]:g} "
                     "s); the loop is not linear there: its closed-loop poles (modes --closed-loop) describe this run "
                     "only where no wheel is at u_max")
    return lines


def simulate_report_lines(path: str, traj, names, wall_s: float, scenario=None) -> list[str]:
    """Samples, steps and wall time; per panel the final and largest hinge angle (at most `MAX_PANEL_LINES`
    panels, those with the largest |theta|, then a count of the rest); final hub rate and attitude; with the
    `scenario`'s wheels, each wheel's largest applied torque and time at `u_max`; with its controller, the final
    attitude error and a note when the wheels saturated; the drift of each conserved quantity."""
    out = traj.as_dict()
    theta = np.asarray(out["theta"]).reshape(len(out["t"]), -1)
    lines = [f"scenario            {path}",
             (f"samples             {len(out['t'])} (t = 0 .. {out['t'][-1]:g} s), {int(traj.num_steps)} steps, "
              f"{wall_s:.2f} s wall (incl. compilation)")]
    peak = np.abs(theta).max(axis=0) if theta.size else np.zeros(0)
    shown = range(len(names)) if len(names) <= MAX_PANEL_LINES else sorted(
        np.argsort(-peak, kind="stable")[:MAX_PANEL_LINES].tolist())
    for i in shown:
        lines.append(f"theta[{names[i]}]".ljust(20) + f"final {theta[-1, i]: .9e} rad, max |theta| {peak[i]:.6e} rad")
    if len(names) > MAX_PANEL_LINES:
        lines.append(f"{'':20}... {len(names) - MAX_PANEL_LINES} more panels (the {MAX_PANEL_LINES} above have the "
                     "largest |theta|; every panel is in --out)")
    wheels = None if scenario is None else scenario.spacecraft.wheels
    ctrl = None if scenario is None else scenario.control
    if wheels is not None:
        lines += _wheel_lines(out, wheels, ctrl)
    elif out["Omega"].shape[-1]:
        lines.append("Omega final [rad/s] " + np.array2string(out["Omega"][-1], precision=9))
    lines.append("omega_BN_B final    " + np.array2string(out["omega_BN_B"][-1], precision=9))
    lines.append("sigma_BN final      " + np.array2string(out["sigma_BN"][-1], precision=9))
    if out["sigma_BR"].shape[-1]:
        err = np.degrees(4 * np.arctan(np.linalg.norm(out["sigma_BR"], axis=-1)))
        lines.append(f"{'attitude error':<20}final {err[-1]:.6g} deg, max {err.max():.6g} deg (4 atan|sigma_BR|)")
    kept = None if scenario is None else conserved(scenario)
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        line = f"{key:<20}max relative drift {traj.relative_drift(key).max():.3e}"
        if kept is not None:
            line += (f"  (conserved: a valid run keeps it below {DRIFT_RTOL:g})" if key in kept else
                     "  (not conserved here: external loads, a hub-torque controller, damping or motors act)")
        lines.append(line)
    return lines
