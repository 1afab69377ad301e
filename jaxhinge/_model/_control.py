r"""The attitude controller in the loop: Basilisk's flight-software chain as one pytree.

`simpleNav` (no noise: the true attitude and rate), `inertial3D` (a fixed reference attitude `sigma_R0N`),
`attTrackingError` ($\sigma_{BR}$, $\omega_{BR} = \omega_{BN}$ for an inertial reference), `mrpFeedback` and
either `rwMotorTorque` onto the reaction wheels or a hub torque (`extForceTorque`), sampled every `control_dt`
from the state at the sample time and held until the next sample (`jaxhinge._simulation`).

**`mrpFeedback`** (`controlLawType = 0`, inertial reference: $\omega_{RN} = \dot\omega_{RN} = 0$):

$$L_r = K\sigma_{BR} + P\omega_{BR} + P K_i z - (K_i z) \times (I\omega_{BN} + \textstyle\sum_i J_{s,i}(\hat g_{s,i}^T
\omega_{BN} + \Omega_i)\hat g_{s,i}) + L_{known},$$

with the integral term only when $K_i > 0$: $\int\sigma \mathrel{+}= K\,\Delta t\,\sigma_{BR}$, each component
clipped to `integralLimit`, $z = \int\sigma + I\omega_{BR}$; $\Delta t = 0$ on the first two calls (Basilisk's
`priorTime` reads 0 at its first and second call), `control_dt` after. The torque requested on the hub is
$-L_r$ (`cmdTorqueOutMsg.torqueRequestBody`): the output `Lr` of a trajectory is this request [N m, B].

**The actuator** (`Control.actuator`, `_model/_actuators.py`) makes its command of $L_r$: `WheelTorques()`
(`rwMotorTorque`: the request projected on the `controlAxes_B` rows $C$ and realised by the minimum-norm wheel
torques $u = (CG_s)^T (CG_s (CG_s)^T)^{-1} C L_r$, added to the wheels' other commands and clipped by their
`u_max`) or `HubTorque()` (the request on the hub as it is).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._math import cross3, mv3, sub_mrp
from ._actuators import AbstractActuator, actuator_named
from ._schema import ACTUATOR, field
from ._spacecraft import fill_leaves, schema_leaves


class Control(eqx.Module):
    """A discrete attitude controller (module docstring), Basilisk's names and units.

    - `sigma_R0N` (3,): reference attitude (MRP, inertial pointing).
    - `K` [N m], `P` [N m s]: MRP and rate feedback gains; `Ki` [1/s]: integral gain (<= 0: no integral term,
      Basilisk's convention); `integralLimit`: the clip of each integral component.
    - `ISCPntB_B` (3, 3) [kg m^2]: the controller's inertia model; `knownTorquePntB_B` (3,) [N m].
    - `controlAxes_B` (A, 3): the axes `rwMotorTorque` controls (rows, 1 to 3 of them).
    - `control_dt` [s]: the flight-software period (a whole multiple of the rk4 `dt`).
    - `actuator` (static): what realises the torque, `WheelTorques()` (`rwMotorTorque` onto the `[[wheels]]`) or
      `HubTorque()` (a hub torque), or its file name (`"wheels"`, `"torque"`; default `"wheels"`).

    Every number is an array leaf: the registry's `control.K`, `control.P`, ... (fits, sweeps, sensitivities).
    """

    __annotations__, _leaves = schema_leaves("control")
    # the actuator is an object (`_model/_actuators.py`); a name is converted by the one table, `ACTUATORS`
    __annotations__[ACTUATOR] = AbstractActuator
    _leaves[ACTUATOR] = eqx.field(static=True, default=field("control", ACTUATOR).default, converter=actuator_named)
    locals().update(_leaves)
    del _leaves

    def __init__(self, *args, **kwargs):
        """Leaves by name, or positionally in the schema's order (`sigma_R0N, K, P, Ki, integralLimit, ISCPntB_B,
        knownTorquePntB_B, controlAxes_B, control_dt, actuator`)."""
        fill_leaves(self, "control", args, kwargs)


class ControlState(eqx.Module):
    """What the flight software keeps between calls: `int_sigma` (3,) and the number of calls made (`calls`),
    and the command it holds (`Lr`: the torque request on the hub [N m, B]; `u`: the wheel torques [N m])."""

    int_sigma: Float[Array, "3"]
    calls: Float[Array, ""]
    Lr: Float[Array, "3"]
    u: Float[Array, " wheels"]


def initial_control_state(n_wheels: int, dtype=jnp.float64) -> ControlState:
    z3 = jnp.zeros(3, dtype)
    return ControlState(z3, jnp.zeros((), dtype), z3, jnp.zeros(n_wheels, dtype))


def control_update(control: Control, wheels, sigma_BN, omega_BN_B, Omega, cs: ControlState, omega_RN_B=None,
                   domega_RN_B=None) -> ControlState:
    """One flight-software call at a sample time: the new integral state and the command held until the next
    sample (module docstring). `omega_RN_B`, `domega_RN_B`: a rotating reference's rate and acceleration in B
    (`mrpFeedback`'s full law; zero for `inertial3D`, the only reference in the loop so far)."""
    sigma_BR = sub_mrp(sigma_BN, control.sigma_R0N)
    z3 = jnp.zeros_like(omega_BN_B)
    omega_RN = z3 if omega_RN_B is None else omega_RN_B
    domega_RN = z3 if domega_RN_B is None else domega_RN_B
    omega_BR = omega_BN_B - omega_RN
    I = control.ISCPntB_B
    dt = jnp.where(cs.calls >= 2, control.control_dt, 0.0)
    on = control.Ki > 0
    int_sigma = cs.int_sigma + control.K * dt * sigma_BR
    lim = control.integralLimit
    mag = jnp.abs(int_sigma)
    int_sigma = jnp.where(mag > lim, int_sigma * (lim / jnp.where(mag > lim, mag, 1.0)), int_sigma)
    int_sigma = jnp.where(on, int_sigma, cs.int_sigma)
    z = jnp.where(on, int_sigma + mv3(I, omega_BR), 0.0)
    Kiz = control.Ki * z
    h = mv3(I, omega_BN_B)
    if wheels is not None:
        gs = wheels.gsHat_B
        h = h + jnp.sum((wheels.Js * (gs @ omega_BN_B + Omega))[:, None] * gs, 0)
    Lr = (control.K * sigma_BR + control.P * omega_BR + control.P * Kiz - cross3(omega_RN + Kiz, h)
          + mv3(I, cross3(omega_BN_B, omega_RN) - domega_RN) + control.knownTorquePntB_B)
    request = -Lr
    return control.actuator.realise(control, wheels, Lr, ControlState(int_sigma, cs.calls + 1.0, request, cs.u))
