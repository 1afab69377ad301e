r"""The least-squares solvers of the fits, as objects (diffrax-style strategies, one class per method):
`LevenbergMarquardt`, `Dogleg`, `GaussNewton` (optimistix least-squares solvers on the residuals $r(u)$) and
`Adam`, `LBFGS` (optax, through `optimistix.OptaxMinimiser`, on $\tfrac12\sum r^2$). Each carries its own settings
(termination `rtol`, `atol`, `max_steps`; Adam's `learning_rate`; Levenberg-Marquardt's `max_step` trust limit)
and builds its optimistix solver (`optimiser`); each says which fits offer it (`fits`: `"modal"` for `fit`,
`"telemetry"` for `identify`).

Settings left `None` take the fit's own defaults (`with_defaults`): `fit` rtol = atol = 1e-10, 200 steps;
`identify` rtol = atol = 1e-8, 100 steps per stage and start, `max_step` 0.5.

Files and the command line name them `"lm"`, `"dogleg"`, `"gauss_newton"`, `"adam"`, `"lbfgs"` (`SOLVERS`, the one
name table), mapped to the classes by `as_solver`.
"""

import abc
import dataclasses
import math
from typing import ClassVar

import equinox as eqx
import optimistix as optx

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ._lsq_solver import BoundedGaussNewton

__all__ = [
    "LBFGS",
    "SOLVERS",
    "AbstractFitSolver",
    "Adam",
    "Dogleg",
    "GaussNewton",
    "LevenbergMarquardt",
    "as_solver",
    "solvers_of",
]


def _positive(value, field: str, allow_none: bool = True, zero: bool = False) -> None:
    """A finite number > 0 (>= 0 with `zero`; `None` with `allow_none`), else a `FitError` naming `field`."""
    if value is None and allow_none:
        return
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and (
        value >= 0 if zero else value > 0)
    if not ok:
        raise FitError.bad(None, field, value, f"must be a finite number {'>=' if zero else '>'} 0")


def _steps(value, field: str = "max_steps") -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise FitError(f"{field} = {_fmt(value)}: must be an integer >= 1", field=field)


class AbstractFitSolver(eqx.Module):
    """A least-squares method of the fits with its termination settings (`None`: the fit's default).

    - `rtol`, `atol`: termination tolerances on the fitted coordinates and the cost (optimistix's meaning).
    - `max_steps`: the most solver steps (`identify`: per horizon stage and start).

    Checked on construction: a bad value raises `FitError` naming the field.
    """

    rtol: float | int | None = None
    atol: float | int | None = None
    max_steps: int | None = None

    name: ClassVar[str]  # the file / command-line name (`SOLVERS`)
    fits: ClassVar[tuple[str, ...]]  # "modal" (`fit`), "telemetry" (`identify`)
    multistart: ClassVar[bool]  # the batched multi-start search can run it (least-squares family)

    def __check_init__(self):
        _positive(self.rtol, "rtol")
        _positive(self.atol, "atol")
        _steps(self.max_steps)

    def with_defaults(self, **defaults) -> "AbstractFitSolver":
        """This solver with each of its settings that is `None` set to `defaults[name]` (the fit's own default;
        names it does not have are skipped)."""
        own = {f.name for f in dataclasses.fields(self)}
        return dataclasses.replace(self, **{k: v for k, v in defaults.items() if k in own and getattr(self, k) is None})

    @abc.abstractmethod
    def optimiser(self, trust: tuple[float, ...] | None = None):
        """The optimistix solver (settings filled in: `with_defaults`). `trust`: per fitted coordinate, the factor
        of `max_step` that bounds its first step (Levenberg-Marquardt with `max_step`; others ignore it)."""


class LevenbergMarquardt(AbstractFitSolver):
    """Levenberg-Marquardt (`optimistix.LevenbergMarquardt`), the default of both fits; forward-mode Jacobians.

    - `max_step` (`identify`): > 0: bounded Gauss-Newton steps in a classical trust region whose first radius is
      `max_step` in the fitted coordinates (`BoundedGaussNewton`: no coordinate changes by more in one step);
      0: optimistix's unbounded Levenberg-Marquardt. Default `identify`: 0.5; `fit` takes unbounded steps (leave
      it `None`).
    """

    max_step: float | int | None = None

    name: ClassVar[str] = "lm"
    fits: ClassVar[tuple[str, ...]] = ("modal", "telemetry")
    multistart: ClassVar[bool] = True

    def __check_init__(self):
        if self.max_step is not None and (isinstance(self.max_step, bool) or not isinstance(self.max_step, (
                int, float)) or not (self.max_step >= 0 and math.isfinite(self.max_step))):
            raise FitError(f"max_step = {_fmt(self.max_step)}: must be a finite number >= 0 (0: optimistix's "
                           "Levenberg-Marquardt with unbounded steps)", field="max_step")

    def optimiser(self, trust: tuple[float, ...] | None = None):
        if self.max_step:
            bound = self.max_step if trust is None else tuple(float(self.max_step) * t for t in trust)
            return BoundedGaussNewton(self.rtol, self.atol, bound)
        return optx.LevenbergMarquardt(rtol=self.rtol, atol=self.atol)


class Dogleg(AbstractFitSolver):
    """Powell's dogleg (`optimistix.Dogleg`): a trust-region least-squares method (`identify`)."""

    name: ClassVar[str] = "dogleg"
    fits: ClassVar[tuple[str, ...]] = ("telemetry",)
    multistart: ClassVar[bool] = True

    def optimiser(self, trust: tuple[float, ...] | None = None):
        return optx.Dogleg(rtol=self.rtol, atol=self.atol)


class GaussNewton(AbstractFitSolver):
    """Gauss-Newton (`optimistix.GaussNewton`): full steps, no trust region (`identify`)."""

    name: ClassVar[str] = "gauss_newton"
    fits: ClassVar[tuple[str, ...]] = ("telemetry",)
    multistart: ClassVar[bool] = True

    def optimiser(self, trust: tuple[float, ...] | None = None):
        return optx.GaussNewton(rtol=self.rtol, atol=self.atol)


class Adam(AbstractFitSolver):
    """optax's Adam on $\\tfrac12\\sum r^2$ (`fit` only; one start). `learning_rate` in fitted-coordinate units
    (a log-ratio for positive parameters), default 0.02."""

    learning_rate: float | int = 0.02

    name: ClassVar[str] = "adam"
    fits: ClassVar[tuple[str, ...]] = ("modal",)
    multistart: ClassVar[bool] = False

    def __check_init__(self):
        _positive(self.learning_rate, "learning_rate", allow_none=False)

    def optimiser(self, trust: tuple[float, ...] | None = None):
        import optax  # here, not at the top: its import (~0.3 s) is a quarter of a warm `jaxhinge fit`

        return optx.OptaxMinimiser(optax.adam(self.learning_rate), rtol=self.rtol, atol=self.atol)


class LBFGS(AbstractFitSolver):
    """optax's L-BFGS on $\\tfrac12\\sum r^2$ (`fit` only; one start)."""

    name: ClassVar[str] = "lbfgs"
    fits: ClassVar[tuple[str, ...]] = ("modal",)
    multistart: ClassVar[bool] = False

    def optimiser(self, trust: tuple[float, ...] | None = None):
        import optax

        return optx.OptaxMinimiser(optax.lbfgs(), rtol=self.rtol, atol=self.atol)


# The one name table: file and command-line names -> classes.
SOLVERS: dict[str, type[AbstractFitSolver]] = {
    c.name: c for c in (LevenbergMarquardt, Dogleg, GaussNewton, Adam, LBFGS)}


def solvers_of(fit: str) -> tuple[str, ...]:
    """The names of the solvers a fit (`"modal"`, `"telemetry"`) offers."""
    return tuple(name for name, c in SOLVERS.items() if fit in c.fits)


def as_solver(solver: AbstractFitSolver | str, fit: str) -> AbstractFitSolver:
    """`solver` as an object the fit `fit` (`"modal"`, `"telemetry"`) offers: an object as is, a name of `SOLVERS`
    as its class with default settings; else a `FitError` naming `solver`, the value and the choices."""
    names = solvers_of(fit)
    if isinstance(solver, str) and solver in names:
        return SOLVERS[solver]()
    if isinstance(solver, AbstractFitSolver) and fit in solver.fits:
        return solver
    value = repr(solver) if isinstance(solver, str) else f"{type(solver).__name__}()"
    raise FitError(f"solver = {value}: allowed values are {', '.join(names)} (or the objects "
                   f"{', '.join(SOLVERS[n].__name__ + '()' for n in names)})", field="solver")
