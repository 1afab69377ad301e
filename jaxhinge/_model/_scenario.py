"""A scenario: model + initial conditions + loads + simulation settings (what a scenario TOML file holds)."""

import dataclasses

import equinox as eqx

from ._loads import Loads
from ._spacecraft import InitialState, Spacecraft

INTEGRATORS = ("rk4", "tsit5", "dopri8")


@dataclasses.dataclass(frozen=True)
class SimulationConfig:
    """Simulation settings (static: they fix array shapes and the compiled program).

    - `t_end`: final time [s] (the run starts at t = 0).
    - `save_dt`: output sampling [s]; t = 0 is included, and `t_end` when it is a multiple of `save_dt`.
    - `integrator`: `"rk4"` (fixed step, Basilisk's tableau, MRP switch after each step: step-for-step
      Basilisk-compatible), `"tsit5"` or `"dopri8"` (adaptive, PID step control).
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
        if self.integrator not in INTEGRATORS:
            raise ValueError(
                f"simulation.integrator = {self.integrator!r}: allowed values are {', '.join(INTEGRATORS)}"
            )
        for name in ("t_end", "save_dt", "dt", "rtol", "atol"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v == v and abs(v) != float("inf") and v > 0):
                raise ValueError(f"simulation.{name} = {v!r}: must be a finite number > 0")


class Scenario(eqx.Module):
    """Everything one run needs. `spacecraft`, `initial` and `loads` are pytrees of array leaves;
    `simulation` is static."""

    spacecraft: Spacecraft
    initial: InitialState
    loads: Loads = eqx.field(default_factory=Loads)
    simulation: SimulationConfig = eqx.field(static=True, default_factory=SimulationConfig)

    def with_simulation(self, **changes) -> "Scenario":
        """A copy with some simulation settings changed, e.g. `s.with_simulation(integrator="dopri8")`."""
        return Scenario(self.spacecraft, self.initial, self.loads, dataclasses.replace(self.simulation, **changes))
