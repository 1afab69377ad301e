"""The model's side of telemetry (the data model is `_model._telemetry`): the output matrix of a simulated
`Trajectory` in the telemetry columns' order (`model_outputs`), and each column's unit (`column_unit`)."""

import jax.numpy as jnp

from .._model._telemetry import VECTOR_COLUMNS, WHEEL_OUTPUTS
from ._trajectory import OUTPUT_UNITS

__all__ = ["column_unit", "model_outputs"]


def column_unit(column: str) -> str:
    """The SI unit of a telemetry column (`omega_BN_B_2` -> rad/s, `theta_p0` -> rad)."""
    base = column.rsplit("_", 1)[0] if column.startswith(VECTOR_COLUMNS) else column.split("_", 1)[0]
    return OUTPUT_UNITS[WHEEL_OUTPUTS.get(base, base)]


def model_outputs(traj, n_panels: int):
    """The (T, 18 + 2N + 2W) output matrix of a `Trajectory` in `output_names` order (JAX arrays, traceable)."""
    T = traj.t.shape[0]
    return jnp.concatenate([traj.omega_BN_B, traj.sigma_BN, traj.r_BN_N, traj.v_BN_N, traj.r_CN_N, traj.v_CN_N,
                            traj.theta.reshape(-1, n_panels), traj.thetaDot.reshape(-1, n_panels),
                            traj.Omega.reshape(T, -1), traj.u_current.reshape(T, -1)], axis=1)
