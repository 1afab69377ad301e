r"""Which modes a modal fit fits, as objects: `OpenLoop()` (the structure's modes, the default) or `ClosedLoop()`
(the flexible modes of the spacecraft with its attitude controller in the loop, `Scenario.control`, sampled every
`control_dt`: `closed_loop_modes`; the controller's gains and inertia model may then be free).

What differs lives here, once: what each needs (`check_fit`: the closed loop needs a controller, flies free, takes
no FEA modes and no simulation check), whether controller parameters may be free (`closed`), the default of the
simulation check, and the static shape of the closed-loop program (`shape`). Files name them `"open"`,
`"closed"` (`LOOPS`), mapped by `as_loop`.
"""

import abc
from typing import ClassVar

import equinox as eqx

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._boundary import AbstractBoundary
from ..._model._scenario import Scenario
from .._linear._closed_loop import loop_shape

__all__ = ["LOOPS", "AbstractLoop", "ClosedLoop", "OpenLoop", "as_loop"]


class AbstractLoop(eqx.Module):
    """Open or closed loop: the modes a modal fit matches to its targets. Stateless, equal and hashable by kind."""

    name: ClassVar[str]  # the file name (`LOOPS`)
    closed: ClassVar[bool]  # the controller is in the loop (its parameters may be free)

    @abc.abstractmethod
    def check_fit(self, scenario: Scenario, boundary: AbstractBoundary, fea, check: bool | None) -> None:
        """Refuse (`FitError`, naming the field) what this loop cannot fit, before any compute."""

    @abc.abstractmethod
    def default_check(self, scenario: Scenario) -> bool:
        """Whether `fit` runs the simulation check when `check` is not given."""

    @abc.abstractmethod
    def shape(self, scenario: Scenario) -> tuple[int, bool] | None:
        """The static shape of the closed-loop program (`loop_shape`); `None`: the open structure's modes."""


class OpenLoop(AbstractLoop):
    """The structure's modes (`modes`): no controller."""

    name: ClassVar[str] = "open"
    closed: ClassVar[bool] = False

    def check_fit(self, scenario: Scenario, boundary: AbstractBoundary, fea, check: bool | None) -> None:
        return None

    def default_check(self, scenario: Scenario) -> bool:
        return scenario.spacecraft.wheels is None  # `measure_modes` starts the modes of a wheel-less spacecraft

    def shape(self, scenario: Scenario) -> tuple[int, bool] | None:
        return None


class ClosedLoop(AbstractLoop):
    """The flexible modes with the attitude controller in the loop (`closed_loop_modes`): free-free, targets given
    as numbers, no simulation check; the controller's gains and inertia model (`control.K`, `control.P`, ...) may
    be free, e.g. the rate gain that damps a panel mode by 2 %."""

    name: ClassVar[str] = "closed"
    closed: ClassVar[bool] = True

    def check_fit(self, scenario: Scenario, boundary: AbstractBoundary, fea, check: bool | None) -> None:
        if scenario.control is None:
            raise FitError("loop = 'closed': the scenario has no attitude controller ([control]) to close the loop "
                           "with", field="loop")
        if not boundary.hub_free:
            raise FitError(f"loop = 'closed' with boundary = {_fmt(boundary.name)}: the closed loop flies free (the "
                           "controller turns the hub); use boundary = 'free'", field="boundary")
        if fea is not None:
            raise FitError("loop = 'closed' with FEA modes: an FEA's modes are the open structure's; fit them with "
                           "loop = 'open', then the controller to closed-loop targets", field="loop")
        if check:
            raise FitError("check = True with loop = 'closed': the simulation check measures free responses of the "
                           "open structure; fit with check = False (the closed-loop poles are checked against "
                           "finite-difference linearisations and simulation in the tests)", field="check")

    def default_check(self, scenario: Scenario) -> bool:
        return False

    def shape(self, scenario: Scenario) -> tuple[int, bool] | None:
        return loop_shape(scenario)


# The one name table: file names -> kinds.
LOOPS: dict[str, type[AbstractLoop]] = {"open": OpenLoop, "closed": ClosedLoop}


def as_loop(loop: AbstractLoop | str) -> AbstractLoop:
    """`loop` as an `AbstractLoop`: an object as is, a name of `LOOPS` as its kind; else a `FitError`."""
    if isinstance(loop, AbstractLoop):
        return loop
    if isinstance(loop, str) and loop in LOOPS:
        return LOOPS[loop]()
    raise FitError(f"loop = {_fmt(loop)}: allowed values are {', '.join(map(repr, LOOPS))} (or the objects "
                   "OpenLoop(), ClosedLoop())", field="loop")
