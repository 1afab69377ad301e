"""Figures: the shared conventions, and the trajectory plot (matplotlib; Agg backend outside notebooks: files
only, no display needed). Every other figure is in its report module (`_fit`, `_identify`, `_sweep`, `_sensitivity`).

Figure convention: files and the API are SI (radians); figures show angles in deg and rates in deg/s
(`shown`), and every axis label carries its unit ([-] for dimensionless quantities). Legends sit outside the
axes (`legend_outside`) so they never cover a curve."""

import numpy as np

from .._simulation._trajectory import relative_drift
from ._simulate import saturation

__all__ = ["legend_outside", "plot_trajectory", "pyplot", "shown"]


def pyplot():
    """pyplot; the Agg backend (files only) unless pyplot is already in use or this is a Jupyter kernel, whose
    inline figures must keep working after a jaxhinge plot."""
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and "ipykernel" not in sys.modules:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def shown(values, unit: str):
    """`(values, unit)` as figures show them: rad and rad/s (also "rad (rotation vector)") converted to deg and
    deg/s, other units unchanged (an empty unit becomes "-")."""
    head, _, rest = (unit or "-").partition(" ")
    if head in ("rad", "rad/s"):
        return np.asarray(values) * np.degrees(1.0), " ".join(["deg" + head[3:], rest]).strip()
    return np.asarray(values), unit or "-"


def legend_outside(ax, **kw) -> None:
    """The legend to the right of the axes, outside the plotted area."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0, **kw)


def plot_trajectory(traj: dict, panel_names, path, title: str = "", fmt: str | None = None,
                    wheel_names=None, u_max=None, conserved=None) -> None:
    """Hinge angles, hub rates, the wheels' speed changes and applied motor torques `u_current` (with wheels; with
    their `u_max` (W,) [N m]: the limits dashed and the samples at a limit marked), the attitude error and the
    controller's torque request (with a controller), and energy/momentum drift of a trajectory dict
    (`Trajectory.as_dict()`); `conserved`: the outputs the run's physics conserves (`_trajectory.conserved`),
    named in the drift panel (None: not known)."""
    plt = pyplot()
    t = traj["t"]
    wheels = traj.get("Omega") is not None and np.shape(traj["Omega"])[-1] > 0
    control = traj.get("sigma_BR") is not None and np.shape(traj["sigma_BR"])[-1] > 0
    rows = 3 + 2 * int(wheels) + 2 * int(control)
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3 + 2.9 * rows), sharex=True)
    ax_theta, ax_rate, ax = axes[0], axes[1], axes[-1]
    if wheels:  # the speed change of each wheel (their speeds are hundreds of rad/s) and its applied torque
        ax_w, ax_u = axes[2], axes[3]
        names = wheel_names if wheel_names is not None else [f"rw{j + 1}" for j in range(traj["Omega"].shape[-1])]
        for j, name in enumerate(names):
            ax_w.plot(t, traj["Omega"][:, j] - traj["Omega"][0, j], label=f"{name} ({traj['Omega'][0, j]:.0f} rad/s at 0)")
            line = ax_u.step(t, traj["u_current"][:, j], where="post", label=name)[0]
            if u_max is not None and u_max[j] > 0:
                at = saturation(traj["u_current"][:, j:j + 1], u_max[j:j + 1])[:, 0]
                ax_u.plot(t[at], traj["u_current"][at, j], "o", ms=3, color=line.get_color(),
                          label=f"{name} at u_max ({at.sum()} samples)" if at.any() else None)
        for lim in sorted({abs(float(v)) for v in (() if u_max is None else u_max) if v > 0}):
            ax_u.axhline(lim, color="0.4", ls="--", lw=0.8)
            ax_u.axhline(-lim, color="0.4", ls="--", lw=0.8, label=f"+-u_max = {lim:g} N m")
        ax_w.set_ylabel("wheel speed change\nOmega - Omega(0) [rad/s]")
        ax_u.set_ylabel("applied wheel motor torque\nu_current [N m] (held)")
        for a in (ax_w, ax_u):
            legend_outside(a)
            a.grid(alpha=0.3)
    if control:  # the pointing error (principal angle 4 atan|sigma_BR|) and the torque requested on the hub
        ax_e, ax_l = axes[2 + 2 * int(wheels)], axes[3 + 2 * int(wheels)]
        ax_e.semilogy(t, np.maximum(np.degrees(4 * np.arctan(np.linalg.norm(traj["sigma_BR"], axis=-1))), 1e-12),
                      label="4 atan|sigma_BR|")
        ax_e.set_ylabel("attitude error [deg]")
        legend_outside(ax_e)
        ax_e.grid(alpha=0.3, which="both")
        for j in range(3):
            ax_l.step(t, traj["Lr"][:, j], where="post", label=f"Lr_{j + 1}")
        ax_l.set_ylabel("torque request on the hub\nLr [N m] (held)")
        legend_outside(ax_l)
        ax_l.grid(alpha=0.3)
    for i, name in enumerate(panel_names):
        ax_theta.plot(t, np.degrees(traj["theta"][:, i]), label=name)
    ax_theta.set_ylabel("hinge angle theta [deg]")
    if len(panel_names):
        legend_outside(ax_theta)
    ax_theta.grid(alpha=0.3)
    for j in range(3):
        ax_rate.plot(t, np.degrees(traj["omega_BN_B"][:, j]), label=f"omega_BN_B_{j + 1}")
    ax_rate.set_ylabel("hub rate omega_BN_B [deg/s]")
    legend_outside(ax_rate)
    ax_rate.grid(alpha=0.3)
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        ax.semilogy(t, np.maximum(relative_drift(traj[key]), 1e-17), label=key)
    ax.set_ylabel("relative drift from t = 0 [-]")
    ax.set_xlabel("t [s]")
    legend_outside(ax)
    ax.grid(alpha=0.3, which="both")
    if conserved is None:
        note = "conserved only without damping, motor torque, loads (and, for rot. energy, thetaRef motion)"
    else:
        note = ("conserved in this run: " + ", ".join(conserved) if conserved else
                "none conserved in this run (external loads or a hub-torque controller act)")
    ax.set_title(note, fontsize="x-small")
    if title:  # 0.1 in below the edge (by default 2 % of this tall figure down, over the first axes)
        fig.suptitle(title, y=1.0 - 0.1 / fig.get_figheight())
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)
