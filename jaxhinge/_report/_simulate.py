"""The console report of `jaxhinge simulate`."""

import numpy as np

__all__ = ["simulate_report_lines"]

MAX_PANEL_LINES = 12  # more panels than this: the ones with the largest |theta| and a count of the others


def simulate_report_lines(path: str, traj, names, wall_s: float) -> list[str]:
    """Samples, steps and wall time; per panel the final and largest hinge angle (at most `MAX_PANEL_LINES`
    panels, those with the largest |theta|, then a count of the rest); final hub rate and attitude; the drift of
    each conserved quantity."""
    out = traj.as_dict()
    theta = np.asarray(out["theta"]).reshape(len(out["t"]), -1)
    lines = [f"scenario            {path}",
             f"samples             {len(out['t'])} (t = 0 .. {out['t'][-1]:g} s), {int(traj.num_steps)} steps, "
             f"{wall_s:.2f} s wall (incl. compilation)"]
    peak = np.abs(theta).max(axis=0) if theta.size else np.zeros(0)
    shown = range(len(names)) if len(names) <= MAX_PANEL_LINES else sorted(
        np.argsort(-peak, kind="stable")[:MAX_PANEL_LINES].tolist())
    for i in shown:
        lines.append(f"theta[{names[i]}]".ljust(20) + f"final {theta[-1, i]: .9e} rad, max |theta| {peak[i]:.6e} rad")
    if len(names) > MAX_PANEL_LINES:
        lines.append(f"{'':20}... {len(names) - MAX_PANEL_LINES} more panels (the {MAX_PANEL_LINES} above have the "
                     "largest |theta|; every panel is in --out)")
    if out["Omega"].shape[-1]:
        lines.append("Omega final [rad/s] " + np.array2string(out["Omega"][-1], precision=9))
    lines.append("omega_BN_B final    " + np.array2string(out["omega_BN_B"][-1], precision=9))
    lines.append("sigma_BN final      " + np.array2string(out["sigma_BN"][-1], precision=9))
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        lines.append(f"{key:<20}max relative drift {traj.relative_drift(key).max():.3e}")
    return lines
