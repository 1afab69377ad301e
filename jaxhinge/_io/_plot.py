"""Plots (matplotlib, Agg backend: files only, no display needed)."""

import numpy as np

from .._simulation._simulate import relative_drift


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_trajectory(traj: dict, panel_names, path, title: str = "", fmt: str | None = None) -> None:
    """Hinge angles, hub rates, and energy/momentum drift of a trajectory dict (`Trajectory.as_dict()`)."""
    plt = _plt()
    t = traj["t"]
    fig, (ax_theta, ax_rate, ax) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for i, name in enumerate(panel_names):
        ax_theta.plot(t, np.degrees(traj["theta"][:, i]), label=name)
    ax_theta.set_ylabel("hinge angle theta [deg]")
    if len(panel_names):
        ax_theta.legend(loc="upper right", fontsize="small", ncol=min(4, len(panel_names)))
    ax_theta.grid(alpha=0.3)
    for j in range(3):
        ax_rate.plot(t, np.degrees(traj["omega_BN_B"][:, j]), label=f"omega_BN_B[{j + 1}]")
    ax_rate.set_ylabel("hub rate [deg/s]")
    ax_rate.legend(loc="upper right", fontsize="small", ncol=3)
    ax_rate.grid(alpha=0.3)
    for key in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        ax.semilogy(t, np.maximum(relative_drift(traj[key]), 1e-17), label=key)
    ax.set_ylabel("relative drift from t = 0")
    ax.set_xlabel("t [s]")
    ax.legend(loc="lower right", fontsize="small", ncol=2)
    ax.grid(alpha=0.3, which="both")
    ax.set_title("conserved only without damping, motor torque, loads (and, for rot. energy, thetaRef motion)",
                 fontsize="x-small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)
