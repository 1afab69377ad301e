"""The integrators as objects (diffrax's `Tsit5()`, `PIDController(...)`): `RK4(dt)`, `Tsit5(rtol, atol, dt0,
max_steps)`, `Dopri8(...)`. A `SimulationConfig` holds one; the simulation asks it what it does (`fixed_step`,
`solver`, `check_times`), never its name.

Files and the command line name them (`[simulation] integrator = "rk4"`, with `dt`, `rtol`, `atol`, `max_steps`
beside it): `INTEGRATORS` maps those names to the classes, built from each class's `name`, and `from_settings` /
`settings` translate between a file's keys and an object's fields. An integrator's values are checked when it is
built, with a `ConfigError` naming the file key (`simulation.dt`, `simulation.rtol`, ...).
"""

import abc
import dataclasses
import math
from typing import Any, ClassVar, final

import jax
import jax.numpy as jnp

from .._errors import ConfigError
from .._format import fmt_value as _fmt

TICK_RTOL = 1e-9  # rk4: save_dt and t_end must be multiples of dt within this relative tolerance

Number = float | int  # a setting's value (runtime type checks do not take an int for a float)

# The file's settings of the integrators and their defaults, in the file's order
_RK4_A = (0.5, 0.5, 1.0, 0.0)  # the next stage's input: y + a_i h k_i (Basilisk's tableau)
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)  # the weights of the stages' slopes

SETTINGS = {"dt": 1e-3, "rtol": 1e-10, "atol": 1e-12, "max_steps": 1_000_000}


def check_setting(key: str, value: Any) -> None:
    """Refuse a bad value of one of the file's integrator settings (`SETTINGS`): a `ConfigError` naming
    `simulation.<key>`, the value and what is allowed."""
    if key == "max_steps":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError("simulation.max_steps", value, "must be an integer > 0 (adaptive step budget)")
    elif isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"simulation.{key}", value, "must be a finite number > 0")


class AbstractIntegrator(abc.ABC):
    """How a run is integrated in time. Immutable and hashable: a `SimulationConfig` holding it is static data of
    the `Scenario`, so equal integrators share one compiled program.

    - `name`: its name in files and on the command line (`INTEGRATORS`).
    - `fixed_step`: True for a fixed step `dt` (loads zero-order held over each step, outputs on the step grid),
      False for an adaptive step with error control.
    """

    name: ClassVar[str]
    fixed_step: ClassVar[bool]
    # file key -> field, for `settings` and `from_settings`
    _keys: ClassVar[dict[str, str]]

    @property
    @abc.abstractmethod
    def dt(self) -> float:
        """The fixed step, or the adaptive first step [s]."""

    @abc.abstractmethod
    def check_times(self, t_end: float, save_dt: float) -> None:
        """Refuse (`ConfigError`) a final time `t_end` [s] or output sampling `save_dt` [s] this integrator cannot
        produce."""

    def settings(self) -> dict[str, Number]:
        """Its values under the file's keys (`dt`, and for the adaptive ones `rtol`, `atol`, `max_steps`)."""
        return {key: getattr(self, f) for key, f in self._keys.items()}

    @classmethod
    def from_settings(cls, **settings: Number) -> "AbstractIntegrator":
        """One built from the file's keys (`dt`, `rtol`, `atol`, `max_steps`); keys it has no use for are
        ignored (see `SimulationConfig.unused`), missing ones take its defaults."""
        return cls(**{f: settings[key] for key, f in cls._keys.items() if key in settings})

    def replace(self, **settings: Number) -> "AbstractIntegrator":
        """A copy with some of the file's keys changed (those it has no use for are ignored)."""
        return dataclasses.replace(self, **{f: settings[key] for key, f in self._keys.items() if key in settings})


@final
@dataclasses.dataclass(frozen=True)
class RK4(AbstractIntegrator):
    """The classic fixed-step Runge-Kutta method with Basilisk's tableau (`svIntegratorRK4`) and the MRP shadow
    switch after each step: step-for-step comparable with Basilisk. Loads are zero-order held over each step.

    **Arguments:**

    - `dt`: the step [s] (Basilisk's task period). The run's `t_end` and `save_dt` must be whole multiples of it
      (`check_times`), as Basilisk samples at task ticks.
    """

    dt: float = SETTINGS["dt"]

    name: ClassVar[str] = "rk4"
    fixed_step: ClassVar[bool] = True
    _keys: ClassVar[dict[str, str]] = {"dt": "dt"}

    def __post_init__(self):
        check_setting("dt", self.dt)

    @staticmethod
    def step(field, y, h):
        """One step `h` [s] of the flat state `y` under the vector field `field(y) -> dy/dt` (loads held by the
        caller): `y + h (k1/6 + k2/3 + k3/3 + k4/6)`, stage inputs `y + h/2 k1`, `y + h/2 k2`, `y + h k3`
        (Basilisk's `svIntegratorRK4`). The four stages run in a `fori_loop`, so the vector field is compiled once,
        not four times (XLA's compile time grows with the number of kernels); each stage's field is checkpointed
        (reverse mode stores its input and recomputes the field instead of stacking its hundreds of small
        intermediates: faster gradients, shorter compile). The one rk4 arithmetic of the package: every fixed step
        is taken here (`_simulation/_propagate.py`)."""
        a, b = jnp.asarray(_RK4_A, y.dtype), jnp.asarray(_RK4_B, y.dtype)

        def stage(i, carry):
            ys, acc = carry
            k = jax.checkpoint(field)(ys)
            return y + (a[i] * h) * k, acc + b[i] * k

        _, acc = jax.lax.fori_loop(0, 4, stage, (y, jnp.zeros_like(y)))
        return y + h * acc

    def check_times(self, t_end: float, save_dt: float) -> None:
        for key, x in (("save_dt", save_dt), ("t_end", t_end)):
            x = float(x)
            n = round(x / self.dt)
            if n < 1 or abs(x - n * self.dt) > TICK_RTOL * x:
                raise ConfigError(
                    f"simulation.{key}", x,
                    f'must be a whole multiple of dt = {_fmt(self.dt)} with integrator "rk4" (within {TICK_RTOL:g} '
                    "relative; Basilisk samples at task ticks)")


@dataclasses.dataclass(frozen=True)
class AbstractAdaptive(AbstractIntegrator):
    """An adaptive Runge-Kutta method from diffrax (`Tsit5`, `Dopri8`) in `MRPSwitch`, with PID step-size control
    (`rtol`, `atol`), a first step `dt0` [s] and a step budget `max_steps`."""

    rtol: float = SETTINGS["rtol"]
    atol: float = SETTINGS["atol"]
    dt0: float = SETTINGS["dt"]
    max_steps: int = SETTINGS["max_steps"]

    fixed_step: ClassVar[bool] = False
    _keys: ClassVar[dict[str, str]] = {"dt": "dt0", "rtol": "rtol", "atol": "atol", "max_steps": "max_steps"}

    def __post_init__(self):
        for key, f in self._keys.items():
            check_setting(key, getattr(self, f))

    @property
    def dt(self) -> float:
        return self.dt0

    def check_times(self, t_end: float, save_dt: float) -> None:
        pass  # the solver's dense output gives any time

    def static_part(self) -> "AbstractAdaptive":
        """The same method with `rtol`, `atol` and `dt0` at their defaults: what stays static once `compile_key` has
        moved them into traced `Tolerances`."""
        return dataclasses.replace(self, rtol=SETTINGS["rtol"], atol=SETTINGS["atol"], dt0=SETTINGS["dt"])

    @abc.abstractmethod
    def solver(self, scan_kind: str):
        """The diffrax solver (`diffrax.AbstractAdaptiveSolver`) with `scan_kind` (`"lax"` for forward-mode
        differentiation, `"bounded"` otherwise)."""


@final
@dataclasses.dataclass(frozen=True)
class Tsit5(AbstractAdaptive):
    """Tsitouras' 5(4) method (`diffrax.Tsit5`) in `MRPSwitch`, adaptive: the general-purpose choice (file name
    `"tsit5"`, the default). Loads are evaluated at the true time; pulse edges are step boundaries.

    **Arguments:**

    - `rtol`, `atol`: relative and absolute tolerances of the PID step-size controller (file: `rtol`, `atol`).
    - `dt0`: the first step [s] (file: `dt`).
    - `max_steps`: step budget; a run that needs more is flagged in its `Trajectory.result`, not raised.

    `rtol`, `atol` and `dt0` are traced (`compile_key`): runs that differ only in them share one program.
    """

    name: ClassVar[str] = "tsit5"

    def solver(self, scan_kind: str):
        import diffrax  # the model floor does not load diffrax until a run needs it

        return diffrax.Tsit5(scan_kind=scan_kind)


@final
@dataclasses.dataclass(frozen=True)
class Dopri8(AbstractAdaptive):
    """Dormand-Prince 8(7) (`diffrax.Dopri8`) in `MRPSwitch`, adaptive: for tight tolerances, e.g. reference
    solutions (file name `"dopri8"`). Loads are evaluated at the true time; pulse edges are step boundaries.

    **Arguments:**

    - `rtol`, `atol`: relative and absolute tolerances of the PID step-size controller (file: `rtol`, `atol`).
    - `dt0`: the first step [s] (file: `dt`).
    - `max_steps`: step budget; a run that needs more is flagged in its `Trajectory.result`, not raised.

    `rtol`, `atol` and `dt0` are traced (`compile_key`): runs that differ only in them share one program.
    """

    name: ClassVar[str] = "dopri8"

    def solver(self, scan_kind: str):
        import diffrax

        return diffrax.Dopri8(scan_kind=scan_kind)


# The one table of names (files, command line) -> classes; each class knows its own name
INTEGRATORS: dict[str, type[AbstractIntegrator]] = {c.name: c for c in (RK4, Tsit5, Dopri8)}


def integrator_class(name: Any) -> type[AbstractIntegrator]:
    """The class a file or the command line names (`"rk4"`, `"tsit5"`, `"dopri8"`). **Raises:** `ConfigError`
    naming `simulation.integrator` for another name."""
    if not isinstance(name, str) or name not in INTEGRATORS:
        raise ConfigError("simulation.integrator", name, f"must be one of {_fmt(tuple(INTEGRATORS))[1:-1]}")
    return INTEGRATORS[name]
