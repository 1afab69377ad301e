"""A scenario: model + initial conditions + loads + simulation settings (what a scenario TOML file holds)."""

import dataclasses
import math

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float

from .._errors import ConfigError
from .._format import fmt_value as _fmt
from ._control import Control
from ._loads import Loads
from ._spacecraft import InitialState, Spacecraft, _f64, strip_labels

INTEGRATORS = ("rk4", "tsit5", "dopri8")
TICK_RTOL = 1e-9  # rk4: save_dt and t_end must be multiples of dt within this relative tolerance


@dataclasses.dataclass(frozen=True)
class SimulationConfig:
    """Simulation settings (static: they fix array shapes and the compiled program).

    - `t_end`: final time [s] (the run starts at t = 0).
    - `save_dt`: output sampling [s]; t = 0 is included, and `t_end` when it is a multiple of `save_dt`.
    - `integrator`: `"rk4"` (fixed step, Basilisk's tableau, MRP switch after each step: step-for-step
      Basilisk-compatible; `t_end` and `save_dt` must be whole multiples of `dt`, as Basilisk samples at task
      ticks), `"tsit5"` or `"dopri8"` (adaptive, PID step control).
    - `dt`: the rk4 step, or the first step of the adaptive methods [s].
    - `rtol`, `atol`: adaptive tolerances.
    - `max_steps`: step budget of the adaptive methods (a run that needs more is flagged, not raised).
    """

    t_end: float = 10.0
    save_dt: float = 0.01
    integrator: str = "tsit5"
    dt: float = 0.001
    rtol: float = 1e-10
    atol: float = 1e-12
    max_steps: int = 1_000_000

    def __post_init__(self):
        if not isinstance(self.integrator, str) or self.integrator not in INTEGRATORS:
            raise ConfigError("simulation.integrator", self.integrator, f"must be one of {_fmt(INTEGRATORS)[1:-1]}")
        for name in ("t_end", "save_dt", "dt", "rtol", "atol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"simulation.{name}", v, "must be a finite number > 0")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ConfigError("simulation.max_steps", self.max_steps, "must be an integer > 0 (adaptive step budget)")
        # the shortest span first, so the message names the setting that is out of place
        if self.dt > self.t_end:
            raise ConfigError("simulation.dt", self.dt, f"must be <= t_end = {_fmt(self.t_end)} s (the "
                              "rk4 step, or the adaptive integrators' first step)")
        if self.save_dt > self.t_end:
            raise ConfigError("simulation.save_dt", self.save_dt, f"must be <= t_end = "
                              f"{_fmt(self.t_end)} s (outputs are sampled at k * save_dt up to t_end)")
        if self.integrator == "rk4":
            for name in ("save_dt", "t_end"):
                x = float(getattr(self, name))
                n = round(x / self.dt)
                if n < 1 or abs(x - n * self.dt) > TICK_RTOL * x:
                    raise ConfigError(
                        f"simulation.{name}", x,
                        f'must be a whole multiple of dt = {_fmt(self.dt)} with integrator "rk4" (within {TICK_RTOL:g} '
                        "relative; Basilisk samples at task ticks)")


class Tolerances(eqx.Module):
    """The adaptive integrators' settings that do not change shapes, as traced arrays (`compile_key`): relative
    and absolute tolerance and first step [s]."""

    rtol: Float[Array, ""] = eqx.field(converter=_f64)
    atol: Float[Array, ""] = eqx.field(converter=_f64)
    dt0: Float[Array, ""] = eqx.field(converter=_f64)


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
        cfg = self.simulation
        return Tolerances(cfg.rtol, cfg.atol, cfg.dt)

    def part(self, model: str):
        """The pytree that carries a schema model's fields (`jaxhinge._model._schema`, `Field.model`): `"hub"`,
        `"panels"`, `"wheels"`, `"gravity"` (the spacecraft's), `"initial"`, `"control"`, `"inputs"` (the recorded
        inputs of the loads); None where the scenario has none."""
        sc = self.spacecraft
        return {"hub": sc.hub, "panels": sc.panels, "wheels": sc.wheels, "gravity": sc.gravity, "initial": self.initial,
                "control": self.control, "inputs": self.loads.inputs}[model]

    def with_simulation(self, **changes) -> "Scenario":
        """A copy with some simulation settings changed, e.g. `s.with_simulation(integrator="dopri8")`."""
        return dataclasses.replace(self, simulation=dataclasses.replace(self.simulation, **changes), tolerances=None)


_CANONICAL = {"rtol": 1e-10, "atol": 1e-12, "dt": 1e-3}


def compile_key(scenario: Scenario) -> Scenario:
    """`scenario` as the compiled programs see it: no panel names (`strip_labels`) and, for the adaptive
    integrators, `rtol`, `atol` and the first step moved from the static `simulation` into traced
    `tolerances`, so models that differ only in those share one compiled program. Entry points call it before
    `jit`; results do not depend on it."""
    scenario = strip_labels(scenario)
    cfg = scenario.simulation
    if cfg.integrator == "rk4" or scenario.tolerances is not None:
        return scenario
    tol = Tolerances(cfg.rtol, cfg.atol, cfg.dt)
    grid = None if scenario.control is None else control_grid(scenario.control.control_dt, cfg)
    return dataclasses.replace(scenario, simulation=dataclasses.replace(cfg, **_CANONICAL), tolerances=tol,
                               control_grid=grid)


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
