"""External loads: constant, piecewise-constant pulses, and user JAX functions of time.

Semantics, chosen to match Basilisk where it matters:
- With the fixed-step `rk4` integrator every time-dependent load is **zero-order held over each step**
  (evaluated at the step's start time), as Basilisk's task-rate messages and `ExecuteSimulation` segments are.
- With adaptive integrators loads are evaluated at the true time; pulse edges are passed to diffrax as
  jump times so they are never stepped over.
"""

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._spacecraft import f64


class Pulses(eqx.Module):
    """Piecewise-constant load pulses; pulse `j` acts on $t_{start,j} \\le t < t_{end,j}$.

    - `t_start`, `t_end`: [s].
    - `extForce_B` [N, B frame], `extForce_N` [N, N frame], `extTorquePntB_B` [N m about B, B frame].
    """

    t_start: Float[Array, " pulses"] = eqx.field(converter=f64)
    t_end: Float[Array, " pulses"] = eqx.field(converter=f64)
    extForce_B: Float[Array, "pulses 3"] = eqx.field(converter=f64)
    extForce_N: Float[Array, "pulses 3"] = eqx.field(converter=f64)
    extTorquePntB_B: Float[Array, "pulses 3"] = eqx.field(converter=f64)

    def active(self, t) -> Float[Array, " pulses"]:
        return ((t >= self.t_start) & (t < self.t_end)).astype(self.t_start.dtype)

    @property
    def jump_times(self) -> Float[Array, " jumps"]:
        return jnp.concatenate([self.t_start, self.t_end])


HOLDS = ("zoh", "linear")
LOAD_COLUMNS = tuple(f"{v}_{j}" for v in ("extForce_B", "extForce_N", "extTorquePntB_B") for j in (1, 2, 3))


class Inputs(eqx.Module):
    r"""Recorded inputs: a time series of loads and commands (a flight record), added to the scenario's other
    loads. Sample times `t` (S,) [s] (strictly increasing, covering the run), `values` (S, C) and the static
    `columns` (C names): `extForce_B_1..3` [N, B], `extForce_N_1..3` [N, N], `extTorquePntB_B_1..3` [N m about B,
    B], `motorTorque_<panel>` [N m], `u_<wheel>` [N m, the wheel's motor torque command].

    `hold` (static): `"zoh"` holds each sample until the next, as flight software holds a command (a value
    changed at T acts from T on; with `rk4` from the step that starts at T, constant over its four stages, as in
    Basilisk); `"linear"` interpolates between samples.

    The record as applied: `gain` (C,) multiplies each column (default 1) and `time_offset` [s] delays the whole
    record (default 0): the input acting at time t is `gain * record(t - time_offset)`, the first (last) sample
    held before (after) the record. Both are array leaves: parameters `inputs.<column>.gain` and
    `inputs.time_offset` of fits, sweeps and sensitivities (a zero-order-held record does not change smoothly
    with a time shift: fit `time_offset` with `hold = "linear"`).

    Build it with `Inputs.of(t, values, columns, hold, panel_names, wheel_names)`, which resolves each column to
    what it drives (`targets`: per load component, panel and wheel, the column index or -1)."""

    t: Float[Array, " samples"] = eqx.field(converter=f64)
    values: Float[Array, "samples columns"] = eqx.field(converter=f64)
    columns: tuple[str, ...] = eqx.field(static=True)
    targets: tuple[tuple[int, ...], ...] = eqx.field(static=True)  # (f_B (3), f_N (3), torque (3), panels, wheels)
    hold: str = eqx.field(static=True, default="zoh")
    source: str = eqx.field(static=True, default="")  # the CSV file the record came from ("" when built in code)
    gain: Float[Array, " columns"] = eqx.field(converter=f64, default=None)
    time_offset: Float[Array, ""] = eqx.field(converter=f64, default=0.0)

    def __post_init__(self):
        if self.gain is None:
            object.__setattr__(self, "gain", np.ones(np.shape(self.values)[-1]))

    @staticmethod
    def of(t, values, columns, hold: str = "zoh", panel_names=(), wheel_names=(), source: str = "", gain=None,
           time_offset=0.0) -> "Inputs":
        """Inputs whose `columns` drive the model with these panel and wheel names (unknown columns: ValueError;
        the file layer names them first)."""
        columns = tuple(columns)
        unknown = [c for c in columns if c not in input_columns(panel_names, wheel_names)]
        if unknown:
            raise ValueError(f"unknown input column {unknown[0]!r}")
        idx = {c: j for j, c in enumerate(columns)}
        targets = tuple(tuple(idx.get(f"{v}_{j}", -1) for j in (1, 2, 3))
                        for v in ("extForce_B", "extForce_N", "extTorquePntB_B"))
        targets += (tuple(idx.get(f"motorTorque_{n}", -1) for n in panel_names),
                    tuple(idx.get(f"u_{n}", -1) for n in wheel_names))
        return Inputs(t, values, columns, targets, hold, source, gain, time_offset)

    def at(self, t) -> Float[Array, " columns"]:
        """The inputs at time `t` (a sample time counts as reached within 1e-12 of its size: step starts k dt)."""
        ts = self.t + self.time_offset
        tol = 1e-12 * jnp.maximum(1.0, jnp.abs(ts))
        S = ts.shape[0]
        i = jnp.clip(jnp.searchsorted(ts - tol, t, side="right") - 1, 0, S - 1)
        if self.hold == "zoh" or S == 1:
            return self.gain * self.values[i]
        i = jnp.minimum(i, S - 2)
        w = jnp.clip((t - ts[i]) / (ts[i + 1] - ts[i]), 0.0, 1.0)
        return self.gain * (self.values[i] * (1.0 - w) + self.values[i + 1] * w)

    def driven(self, t):
        """`(extForce_B, extForce_N, extTorquePntB_B, hinge motor torques, wheel commands)` at `t`, each None when
        no column drives it."""
        v = self.at(t)

        def pick(idx):
            if all(i < 0 for i in idx):
                return None
            return jnp.stack([v[i] if i >= 0 else jnp.zeros((), v.dtype) for i in idx])

        return tuple(pick(idx) for idx in self.targets)


def input_columns(panel_names=(), wheel_names=()) -> tuple[str, ...]:
    """Every column recorded inputs may have for a model with these panels and wheels."""
    return (*LOAD_COLUMNS, *(f"motorTorque_{n}" for n in panel_names), *(f"u_{n}" for n in wheel_names))


def _zero3():
    return jnp.zeros(3)


class Loads(eqx.Module):
    """All external loads on the spacecraft.

    - `extForce_B`, `extForce_N`, `extTorquePntB_B`: constant force (B or N frame) [N] and torque about B [N m].
    - `pulses`: optional `Pulses`.
    - `extForce_B_fn`, `extForce_N_fn`, `extTorquePntB_B_fn`: optional JAX functions `f(t) -> (3,)`.
    - `motorTorque_fn`: optional JAX function `f(t) -> (panels,)` [N m], added to `Panels.motorTorque`.
    - `inputs`: optional recorded `Inputs` (loads, hinge motor torques and wheel torque commands).
    - `wheel_u_fn`: optional JAX function `f(t) -> (wheels,)` [N m], added to `Wheels.u`.
    """

    extForce_B: Float[Array, "3"] = eqx.field(converter=f64, default_factory=_zero3)
    extForce_N: Float[Array, "3"] = eqx.field(converter=f64, default_factory=_zero3)
    extTorquePntB_B: Float[Array, "3"] = eqx.field(converter=f64, default_factory=_zero3)
    pulses: Pulses | None = None
    inputs: Inputs | None = None
    extForce_B_fn: Callable | None = eqx.field(static=True, default=None)
    extForce_N_fn: Callable | None = eqx.field(static=True, default=None)
    extTorquePntB_B_fn: Callable | None = eqx.field(static=True, default=None)
    motorTorque_fn: Callable | None = eqx.field(static=True, default=None)
    wheel_u_fn: Callable | None = eqx.field(static=True, default=None)

    def at(self, t):
        """Loads at time `t`: `(extForce_B, extForce_N, extTorquePntB_B, extra hinge motor torque or 0, extra wheel
        motor torque command or 0)`."""
        f_b, f_n, tq = self.extForce_B, self.extForce_N, self.extTorquePntB_B
        if self.pulses is not None:
            w = self.pulses.active(t)
            f_b = f_b + w @ self.pulses.extForce_B
            f_n = f_n + w @ self.pulses.extForce_N
            tq = tq + w @ self.pulses.extTorquePntB_B
        fns = (self.extForce_B_fn, self.extForce_N_fn, self.extTorquePntB_B_fn)
        f_b, f_n, tq = (x if fn is None else x + jnp.asarray(fn(t)) for x, fn in zip((f_b, f_n, tq), fns))
        u = 0.0 if self.motorTorque_fn is None else jnp.asarray(self.motorTorque_fn(t))
        u_w = 0.0 if self.wheel_u_fn is None else jnp.asarray(self.wheel_u_fn(t))
        if self.inputs is not None:
            x_b, x_n, x_tq, x_u, x_w = self.inputs.driven(t)
            f_b = f_b if x_b is None else f_b + x_b
            f_n = f_n if x_n is None else f_n + x_n
            tq = tq if x_tq is None else tq + x_tq
            u = u if x_u is None else u + x_u
            u_w = u_w if x_w is None else u_w + x_w
        return f_b, f_n, tq, u, u_w

    @property
    def jump_times(self):
        """Times where a load changes abruptly (pulse edges, the samples of recorded inputs): diffrax's step-size
        controller steps onto them."""
        times = [] if self.pulses is None else [self.pulses.jump_times]
        if self.inputs is not None:
            times.append(self.inputs.t + self.inputs.time_offset)
        return jnp.concatenate(times) if times else None


def rk4_unsampled(t_start, t_end, dt: float) -> np.ndarray:
    r"""Which intervals $[t_{start}, t_{end})$ [s] contain no step start of the fixed-step `rk4` integrator,
    $t_k = k\,dt$ (within rounding), as a bool array: a load that changes only there (a pulse, a recorded sample
    held until the next) is never applied, since loads are sampled at the start of each step."""
    a, b = (np.atleast_1d(np.asarray(x, float)) for x in (t_start, t_end))
    k = np.ceil(a / dt - 1e-9)  # the first step start at or after t_start (within rounding)
    return ~(k * dt < b - 1e-9 * dt)


def rk4_silent_pulse(t_start, t_end, dt: float) -> int | None:
    """The first pulse $[t_{start}, t_{end})$ that never acts with the fixed-step `rk4` integrator
    (`rk4_unsampled`: shorter than `dt` and between two step starts), or None."""
    silent = np.flatnonzero(rk4_unsampled(t_start, t_end, dt))
    return int(silent[0]) if len(silent) else None
