r"""What realises the attitude controller's torque, as objects: `WheelTorques()` (Basilisk's `rwMotorTorque` onto the
`[[wheels]]`) and `HubTorque()` (a torque on the hub, `extForceTorque`'s `cmdTorqueInMsg`). A `Control` holds one
(`Control.actuator`); the flight software, the propagation, the closed loop, the conservation checks and the
reports ask it what it does, never its name.

Each owns its behaviour: the command it makes of the control law's torque $L_r$ (`realise`), the command it holds
(`command`, `hold`) and how that command enters a step's loads (`loads`), whether it is an external load on the hub
(`external`), whether the wheels' `u_max` can saturate it (`saturates`, `headroom`), its words in reports (`words`)
and what it needs of the spacecraft (`problem`).

Files and the command line name them (`[control] actuator = "wheels"` or `"torque"`): `ACTUATORS` maps those names
to the objects, built from each class's `name`; `actuator_named` translates (a `ConfigError` naming
`control.actuator` for another name).
"""

import abc
import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._errors import ConfigError
from .._format import fmt_value as _fmt

__all__ = ["ACTUATORS", "AbstractActuator", "HubTorque", "WheelTorques", "actuator_named"]

Loads5 = tuple  # a step's held loads: (extForce_B, extForce_N, extTorquePntB_B, motorTorque, wheel u)


class AbstractActuator(eqx.Module):
    """What realises the controller's torque request. Immutable and hashable, without fields: it is static data
    of a `Control`, so equal actuators share one compiled program.

    - `name`: its name in files and on the command line (`ACTUATORS`).
    - `words`: what it is in a report line ("attitude controller on <words>").
    - `external`: True when its command is a torque on the hub from outside the spacecraft (energy and momentum
      are then not conserved); False when it acts inside (a wheel motor torque).
    - `saturates`: True when its command is limited by the wheels' `u_max` (the loop is not linear there).
    """

    name: ClassVar[str]
    words: ClassVar[str]
    external: ClassVar[bool]
    saturates: ClassVar[bool]

    @abc.abstractmethod
    def realise(self, control, wheels, Lr: Float[Array, "3"], cs: eqx.Module) -> eqx.Module:
        """The controller's state `cs` after a call (`_control.control_update`), its torque request $-L_r$
        already set, with this actuator's command set from the law's torque `Lr` [N m, B]."""

    @abc.abstractmethod
    def command(self, cs: eqx.Module) -> Float[Array, " command"]:
        """The command held in the controller's state `cs`: the hub torque request (3,) [N m, B] or the wheel
        motor torques (W,) [N m]."""

    @abc.abstractmethod
    def hold(self, cs: eqx.Module, command: Float[Array, " command"]) -> eqx.Module:
        """The controller's state `cs` holding `command` (as `command` returns it) instead."""

    @abc.abstractmethod
    def loads(self, loads_t0: Loads5, cs: eqx.Module) -> Loads5:
        """A step's held loads `(extForce_B, extForce_N, extTorquePntB_B, motorTorque, wheel u)` plus the command
        held in `cs`."""

    @abc.abstractmethod
    def headroom(self, wheels, u_rest, dtype: Any) -> Float[Array, " command"]:
        """Per command component, how far it may go from an equilibrium before it saturates [N m] (inf: no
        limit): `wheels` the spacecraft's (their `u_max`), `u_rest` (W,) [N m] the motor torques that hold the
        wheels at the equilibrium."""

    @abc.abstractmethod
    def problem(self, spin_axes, control_axes=None, input_columns=()) -> tuple[str, str] | None:
        """What this actuator needs of the spacecraft, refused before any compute: `(key of [control], what is
        wrong)` or None. `spin_axes` (W, 3): the wheels' (None: no wheels); `control_axes` (A, 3): the axes the
        controller controls (None: not checked); `input_columns`: the recorded inputs' columns."""


class WheelTorques(AbstractActuator):
    r"""Basilisk's `rwMotorTorque` onto the `[[wheels]]` (file name `"wheels"`): the torque $L_r$ projected on the
    `controlAxes_B` rows $C$ and realised by the minimum-norm wheel torques $u = (CG_s)^T (CG_s (CG_s)^T)^{-1} C L_r$
    (a wheel's motor torque acts on the hub as $-u\,\hat g_s$), added to the wheels' other commands and clipped by
    their `u_max`. Internal to the spacecraft: the momenta are conserved."""

    name: ClassVar[str] = "wheels"
    words: ClassVar[str] = "the wheels"
    external: ClassVar[bool] = False
    saturates: ClassVar[bool] = True

    def realise(self, control, wheels, Lr: Float[Array, "3"], cs: eqx.Module) -> eqx.Module:
        C = control.controlAxes_B
        CG = C @ wheels.gsHat_B.T  # (axes, wheels)
        return dataclasses.replace(cs, u=CG.T @ jnp.linalg.solve(CG @ CG.T, C @ Lr))

    def command(self, cs: eqx.Module) -> Float[Array, " wheels"]:
        return cs.u

    def hold(self, cs: eqx.Module, command: Float[Array, " wheels"]) -> eqx.Module:
        return dataclasses.replace(cs, u=command)

    def loads(self, loads_t0: Loads5, cs: eqx.Module) -> Loads5:
        f_b, f_n, tq, u, u_w = loads_t0
        return f_b, f_n, tq, u, u_w + cs.u

    def headroom(self, wheels, u_rest, dtype: Any) -> Float[Array, " wheels"]:
        # u_max less the motor torque that holds each wheel at the equilibrium
        return jnp.where(wheels.u_max > 0, jnp.abs(wheels.u_max) - jnp.abs(u_rest), jnp.inf)

    def problem(self, spin_axes, control_axes=None, input_columns=()) -> tuple[str, str] | None:
        if spin_axes is None:
            return "actuator", "the spacecraft has no [[wheels]]; use actuator = \"torque\" (a hub torque) or add wheels"
        if control_axes is not None:
            sv = np.linalg.svd(np.asarray(control_axes) @ np.asarray(spin_axes).T, compute_uv=False)
            if sv.size < len(control_axes) or sv[-1] <= 1e-9 * max(sv[0], 1e-300):
                return "controlAxes_B", (f"the wheels' spin axes do not span these {len(control_axes)} control axes "
                                         "(rwMotorTorque could not realise a torque about each)")
        if any(c.startswith("u_") for c in input_columns):
            return "actuator", ("the controller commands the wheels; recorded wheel commands (u_<wheel> columns in "
                                "[inputs]) would be added to its command")
        return None


class HubTorque(AbstractActuator):
    """A torque on the hub (file name `"torque"`; Basilisk's `extForceTorque` fed by `cmdTorqueInMsg`): the
    controller's torque request is applied as it is, without a limit. An external load: energy and momentum are
    not conserved."""

    name: ClassVar[str] = "torque"
    words: ClassVar[str] = "a hub torque"
    external: ClassVar[bool] = True
    saturates: ClassVar[bool] = False

    def realise(self, control, wheels, Lr: Float[Array, "3"], cs: eqx.Module) -> eqx.Module:
        return cs  # the command is the torque request itself

    def command(self, cs: eqx.Module) -> Float[Array, "3"]:
        return cs.Lr

    def hold(self, cs: eqx.Module, command: Float[Array, "3"]) -> eqx.Module:
        return dataclasses.replace(cs, Lr=command)

    def loads(self, loads_t0: Loads5, cs: eqx.Module) -> Loads5:
        f_b, f_n, tq, u, u_w = loads_t0
        return f_b, f_n, tq + cs.Lr, u, u_w

    def headroom(self, wheels, u_rest, dtype: Any) -> Float[Array, "3"]:
        return jnp.full(3, jnp.inf, dtype)

    def problem(self, spin_axes, control_axes=None, input_columns=()) -> tuple[str, str] | None:
        return None


# The one table of names (files, command line) -> actuators; each class knows its own name
ACTUATORS: dict[str, AbstractActuator] = {a.name: a for a in (WheelTorques(), HubTorque())}


def actuator_named(actuator: Any) -> AbstractActuator:
    """The actuator a file or the command line names (`"wheels"`, `"torque"`), or an actuator object as it is.
    **Raises:** `ConfigError` naming `control.actuator` for another name."""
    if isinstance(actuator, AbstractActuator):
        return actuator
    if not isinstance(actuator, str) or actuator not in ACTUATORS:
        raise ConfigError("control.actuator", actuator, f"must be one of {_fmt(tuple(ACTUATORS))[1:-1]}")
    return ACTUATORS[actuator]
