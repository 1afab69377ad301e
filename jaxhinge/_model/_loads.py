"""External loads: constant, piecewise-constant pulses, and user JAX functions of time.

Semantics, chosen to match Basilisk where it matters:
- With the fixed-step `rk4` integrator every time-dependent load is **zero-order held over each step**
  (evaluated at the step's start time), as Basilisk's task-rate messages and `ExecuteSimulation` segments are.
- With adaptive integrators loads are evaluated at the true time; pulse edges are passed to diffrax as
  jump times so they are never stepped over.
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._spacecraft import _f64


class Pulses(eqx.Module):
    """Piecewise-constant load pulses; pulse `j` acts on $t_{start,j} \\le t < t_{end,j}$.

    - `t_start`, `t_end`: [s].
    - `extForce_B` [N, B frame], `extForce_N` [N, N frame], `extTorquePntB_B` [N m about B, B frame].
    """

    t_start: Float[Array, " pulses"] = eqx.field(converter=_f64)
    t_end: Float[Array, " pulses"] = eqx.field(converter=_f64)
    extForce_B: Float[Array, "pulses 3"] = eqx.field(converter=_f64)
    extForce_N: Float[Array, "pulses 3"] = eqx.field(converter=_f64)
    extTorquePntB_B: Float[Array, "pulses 3"] = eqx.field(converter=_f64)

    def active(self, t) -> Float[Array, " pulses"]:
        return ((t >= self.t_start) & (t < self.t_end)).astype(self.t_start.dtype)

    @property
    def jump_times(self) -> Float[Array, " jumps"]:
        return jnp.concatenate([self.t_start, self.t_end])


def _zero3():
    return jnp.zeros(3)


class Loads(eqx.Module):
    """All external loads on the spacecraft.

    - `extForce_B`, `extForce_N`, `extTorquePntB_B`: constant force (B or N frame) [N] and torque about B [N m].
    - `pulses`: optional `Pulses`.
    - `extForce_B_fn`, `extForce_N_fn`, `extTorquePntB_B_fn`: optional JAX functions `f(t) -> (3,)`.
    - `motorTorque_fn`: optional JAX function `f(t) -> (panels,)` [N m], added to `Panels.motorTorque`.
    """

    extForce_B: Float[Array, "3"] = eqx.field(converter=_f64, default_factory=_zero3)
    extForce_N: Float[Array, "3"] = eqx.field(converter=_f64, default_factory=_zero3)
    extTorquePntB_B: Float[Array, "3"] = eqx.field(converter=_f64, default_factory=_zero3)
    pulses: Pulses | None = None
    extForce_B_fn: Callable | None = eqx.field(static=True, default=None)
    extForce_N_fn: Callable | None = eqx.field(static=True, default=None)
    extTorquePntB_B_fn: Callable | None = eqx.field(static=True, default=None)
    motorTorque_fn: Callable | None = eqx.field(static=True, default=None)

    def at(self, t):
        """Loads at time `t`: `(extForce_B, extForce_N, extTorquePntB_B, extra motor torque or 0)`."""
        f_b, f_n, tq = self.extForce_B, self.extForce_N, self.extTorquePntB_B
        if self.pulses is not None:
            w = self.pulses.active(t)
            f_b = f_b + w @ self.pulses.extForce_B
            f_n = f_n + w @ self.pulses.extForce_N
            tq = tq + w @ self.pulses.extTorquePntB_B
        fns = (self.extForce_B_fn, self.extForce_N_fn, self.extTorquePntB_B_fn)
        f_b, f_n, tq = (x if fn is None else x + jnp.asarray(fn(t)) for x, fn in zip((f_b, f_n, tq), fns))
        u = 0.0 if self.motorTorque_fn is None else jnp.asarray(self.motorTorque_fn(t))
        return f_b, f_n, tq, u

    @property
    def jump_times(self):
        return None if self.pulses is None else self.pulses.jump_times


def rk4_silent_pulse(t_start, t_end, dt: float) -> int | None:
    r"""The first pulse that never acts with the fixed-step `rk4` integrator, or None: loads are sampled at the
    start of each step, $t_k = k\,dt$, so a pulse $[t_{start}, t_{end})$ that contains no $t_k$ (shorter than `dt`
    and between two step starts) is never applied."""
    for j, (a, b) in enumerate(zip(np.atleast_1d(np.asarray(t_start, float)), np.atleast_1d(np.asarray(t_end, float)))):
        k = math.ceil(a / dt - 1e-9)  # the first step start at or after t_start (within rounding)
        if not k * dt < b - 1e-9 * dt:
            return j
    return None
