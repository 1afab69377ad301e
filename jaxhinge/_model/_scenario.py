"""A scenario: model + initial conditions + loads + simulation settings (what a scenario TOML file holds)."""

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float

from .._errors import ConfigError
from .._format import fmt_value as _fmt
from ._control import Control
from ._integrators import SETTINGS, AbstractIntegrator, Number, check_setting, integrator_class
from ._loads import Loads
from ._spacecraft import InitialState, Spacecraft, f64, strip_labels

_LOOSE = tuple(SETTINGS)  # dt, rtol, atol, max_steps: the file's keys of the integrator settings


@dataclasses.dataclass(frozen=True, init=False)
class SimulationConfig:
    """Simulation settings (static: they fix array shapes and the compiled program).

    **Arguments:**

    - `t_end`: final time [s] (the run starts at t = 0).
    - `save_dt`: output sampling [s]; t = 0 is included, and `t_end` when it is a multiple of `save_dt`.
    - `integrator`: an integrator object, `RK4(dt)` (fixed step, Basilisk's tableau, MRP switch after each step:
      step-for-step Basilisk-compatible; `t_end` and `save_dt` must be whole multiples of `dt`, as Basilisk
      samples at task ticks), `Tsit5(rtol, atol, dt0, max_steps)` or `Dopri8(...)` (adaptive, PID step
      control); or its file name, `"rk4"`, `"tsit5"` (default) or `"dopri8"`, built from the keywords below.
    - `dt`, `rtol`, `atol`, `max_steps`: the file's integrator settings (the rk4 step or the adaptive first step
      [s]; adaptive tolerances; adaptive step budget). Given, they set the integrator's values (named or given
      as an object: `dataclasses.replace(cfg, dt=...)` changes the step); those it has no use for (rk4:
      `rtol`, `atol`, `max_steps`) are kept in `unused`.

    Read back, `dt`, `rtol`, `atol` and `max_steps` are the integrator's (`dt`: the adaptive first step `dt0`),
    else `unused`'s, else the defaults. `unused` (a tuple of `(key, value)`) takes no part in equality: it
    only lets a written file read back the same and a switch by name (`with_simulation(integrator="tsit5")`)
    keep them, as before integrators were objects.
    """

    t_end: float
    save_dt: float
    integrator: AbstractIntegrator
    unused: tuple[tuple[str, Number], ...] = dataclasses.field(compare=False, repr=False)

    def __init__(
        self,
        t_end: Number = 10.0,
        save_dt: Number = 0.01,
        integrator: AbstractIntegrator | str = "tsit5",
        dt: Number | None = None,
        rtol: Number | None = None,
        atol: Number | None = None,
        max_steps: int | None = None,
        *,
        unused: tuple[tuple[str, Number], ...] = (),
    ):
        kind = None if isinstance(integrator, AbstractIntegrator) else integrator_class(integrator)
        for name, v in (("t_end", t_end), ("save_dt", save_dt)):
            check_setting(name, v)
        loose = {k: v for k, v in zip(_LOOSE, (dt, rtol, atol, max_steps)) if v is not None}
        for k, v in loose.items():
            check_setting(k, v)
        integrator = integrator.replace(**loose) if kind is None else kind.from_settings(**loose)
        kept = {k: v for k, v in (dict(unused) | loose).items() if k not in integrator.settings()}
        object.__setattr__(self, "t_end", t_end)
        object.__setattr__(self, "save_dt", save_dt)
        object.__setattr__(self, "integrator", integrator)
        object.__setattr__(self, "unused", tuple((k, kept[k]) for k in _LOOSE if k in kept))
        # the shortest span first, so the message names the setting that is out of place
        if integrator.dt > t_end:
            raise ConfigError("simulation.dt", integrator.dt, f"must be <= t_end = {_fmt(t_end)} s (the "
                              "rk4 step, or the adaptive integrators' first step)")
        if save_dt > t_end:
            raise ConfigError("simulation.save_dt", save_dt, f"must be <= t_end = "
                              f"{_fmt(t_end)} s (outputs are sampled at k * save_dt up to t_end)")
        integrator.check_times(t_end, save_dt)

    def _setting(self, key: str):
        return (SETTINGS | dict(self.unused) | self.integrator.settings())[key]

    @property
    def dt(self) -> float:
        """The rk4 step, or the adaptive first step [s]."""
        return self._setting("dt")

    @property
    def rtol(self) -> float:
        """The adaptive relative tolerance (rk4: `unused`'s or the default)."""
        return self._setting("rtol")

    @property
    def atol(self) -> float:
        """The adaptive absolute tolerance (rk4: `unused`'s or the default)."""
        return self._setting("atol")

    @property
    def max_steps(self) -> int:
        """The adaptive step budget (rk4: `unused`'s or the default)."""
        return self._setting("max_steps")

    def replace(self, **changes) -> "SimulationConfig":
        """A copy with some settings changed (`Scenario.with_simulation`): `t_end`, `save_dt`, `integrator` (an
        object, or a name built from this configuration's `dt`, `rtol`, `atol`, `max_steps` and the keywords
        beside it) and the loose `dt`, `rtol`, `atol`, `max_steps` (they change the integrator's values)."""
        known = ("t_end", "save_dt", "integrator", *_LOOSE)
        for k, v in changes.items():
            if k not in known:
                raise ConfigError(f"simulation.{k}", v, f"is not a simulation setting; the settings are "
                                  f"{', '.join(known)}")
        kw: dict[str, Any] = {"t_end": self.t_end, "save_dt": self.save_dt, "unused": self.unused}
        if isinstance(changes.get("integrator"), str):  # a switch by name keeps the file's settings
            kw |= {k: self._setting(k) for k in _LOOSE}
        elif "integrator" in changes:
            kw["unused"] = ()  # an object is the whole integrator
        else:
            kw["integrator"] = self.integrator
        return SimulationConfig(**(kw | changes))


class Tolerances(eqx.Module):
    """The adaptive integrators' settings that do not change shapes, as traced arrays (`compile_key`): relative
    and absolute tolerance and first step [s]."""

    rtol: Float[Array, ""] = eqx.field(converter=f64)
    atol: Float[Array, ""] = eqx.field(converter=f64)
    dt0: Float[Array, ""] = eqx.field(converter=f64)


class Scenario(eqx.Module):
    """Everything one run needs. `spacecraft`, `initial` and `loads` are pytrees of array leaves;
    `simulation` is static. Hinge vectors (`initial.thetaInit`, outputs) follow the order of
    `spacecraft.panels`. `tolerances` is set by `compile_key` only (None: `simulation`'s values). `control`:
    an attitude controller in the loop (`Control`), or None (open loop). `control_grid` (static) is set by
    `compile_key` only, for an adaptive integrator with a controller: `(control periods to t_end, save times in
    one period at most)`, the shapes of its period-by-period solve."""

    spacecraft: Spacecraft
    initial: InitialState
    loads: Loads = eqx.field(default_factory=Loads)
    simulation: SimulationConfig = eqx.field(static=True, default_factory=SimulationConfig)
    tolerances: Tolerances | None = None
    control: Control | None = None
    control_grid: tuple[int, int] | None = eqx.field(static=True, default=None)

    @property
    def adaptive_settings(self) -> Tolerances:
        """`(rtol, atol, dt0)` of the adaptive integrators: the traced `tolerances` when set, else `simulation`'s."""
        if self.tolerances is not None:
            return self.tolerances
        integ = self.simulation.integrator
        return Tolerances(integ.rtol, integ.atol, integ.dt0)

    def part(self, model: str):
        """The pytree that carries a schema model's fields (`jaxhinge._model._schema`, `Field.model`): `"hub"`,
        `"panels"`, `"wheels"`, `"gravity"` (the spacecraft's), `"initial"`, `"control"`, `"inputs"` (the recorded
        inputs of the loads); None where the scenario has none."""
        sc = self.spacecraft
        return {"hub": sc.hub, "panels": sc.panels, "wheels": sc.wheels, "gravity": sc.gravity, "initial": self.initial,
                "control": self.control, "inputs": self.loads.inputs}[model]

    def with_simulation(self, **changes) -> "Scenario":
        """A copy with some simulation settings changed (`SimulationConfig.replace`), e.g.
        `s.with_simulation(integrator=jh.Dopri8(rtol=1e-12))`, `s.with_simulation(t_end=2.0)` (same integrator),
        `s.with_simulation(dt=5e-4)` (the integrator's step) or, by file name, `s.with_simulation(integrator="rk4",
        dt=1e-3)`."""
        return dataclasses.replace(self, simulation=self.simulation.replace(**changes), tolerances=None)


def compile_key(scenario: Scenario) -> Scenario:
    """`scenario` as the compiled programs see it: no panel names (`strip_labels`) and, for the adaptive
    integrators, `rtol`, `atol` and the first step moved from the static `simulation` into traced
    `tolerances`, so models that differ only in those share one compiled program. Entry points call it before
    `jit`; results do not depend on it."""
    scenario = strip_labels(scenario)
    cfg = scenario.simulation
    if cfg.integrator.fixed_step or scenario.tolerances is not None:
        return scenario
    integ = cfg.integrator
    tol = Tolerances(integ.rtol, integ.atol, integ.dt0)
    grid = None if scenario.control is None else control_grid(scenario.control.control_dt, cfg)
    shared = SimulationConfig(cfg.t_end, cfg.save_dt, integ.static_part())
    return dataclasses.replace(scenario, simulation=shared, tolerances=tol, control_grid=grid)


def control_grid(control_dt, cfg: SimulationConfig) -> tuple[int, int]:
    """`(periods, saves)`: the control periods to `t_end` for the shortest `control_dt` and the most save times
    one period of the longest holds (a batch's members may differ; a member's periods past t_end do nothing).
    Needs the values: under a caller's own `jax.jit`/`vmap` they are traced, and the adaptive integrators
    refuse them there."""
    if isinstance(control_dt, jax.core.Tracer):
        raise ConfigError("control.control_dt", "a traced value", "an adaptive integrator with a controller "
                          "integrates period by period, so it needs control_dt's value when it compiles (call "
                          "jh.simulate / jh.simulate_batch, which take it from the scenario, or use integrator "
                          "\"rk4\", whose control_dt may be traced)")
    values = np.asarray(control_dt, dtype=float)
    periods = max(1, math.ceil(cfg.t_end / float(np.min(values)) * (1.0 - 1e-12)))
    return periods, int(np.floor(float(np.max(values)) / cfg.save_dt * (1.0 + 1e-12))) + 1
