r"""Fit model parameters (hinge stiffness and damping, masses, inertias, ...) to target modal frequencies and
damping ratios (e.g. from FEA).

**The problem.** Targets $f_i$ (and optionally $\zeta_i$) are matched to the model's flexible modes in
ascending `frequency_hz` order: target $i$ to mode $i$, or to the 1-based `mode_numbers` given. The residuals
are relative and weighted by the stated target uncertainties,

$$r_{f,i} = \frac{f_i^{model} - f_i}{\sigma_f\, f_i}, \qquad r_{\zeta,i} = \frac{\zeta_i^{model} - \zeta_i}{\sigma_\zeta\,\zeta_i},$$

($\sigma_f$ = `frequency_sigma`, default 1 %; $\sigma_\zeta$ = `damping_sigma`, default 20 %), with the model values
of `jaxhinge.modes` (`damp` definitions: $|\lambda|/2\pi$ and $-\mathrm{Re}\,\lambda/|\lambda|$ of the damped linear
model). The least squares (coordinates, Jacobian, solver, covariance, identifiability) are those of the core,
`jaxhinge._analysis._fitting._lsq_coords`, `_lsq_solver`, `_lsq_analysis`.

**Free parameters** are any registry parameter that enters the modes (`jaxhinge._model._params`):
`"<panel>.k"` [N m/rad], `"<panel>.c"` [N m s/rad], `"<panel>.mass"`, `"<panel>.d"`, `"<panel>.IPntS_S"` (3
inertia scale factors), `"<panel>.r_HB_B"`, `"hub.mHub"`, `"hub.IHubPntBc_B"`, ...; vectors free their 3
components, `"hub.r_BcB_B[2]"` one. Positive quantities are fitted as log-ratios, the others linearly. Several
parameters of one field **tied** to one fitted value are written as one entry joined by `=`:
`"wing_pY.k = wing_mY.k"` (both wings share one stiffness; its initial guess is the geometric mean of the
members' values). A parameter may appear once only. Initial conditions, `motorTorque` and `thetaDotRef` do
not enter the modes and are refused.

**Solvers.** `"lm"` (default): `optimistix.LevenbergMarquardt` with forward-mode Jacobians. `"adam"` and
`"lbfgs"`: the optax optimisers (through `optimistix.OptaxMinimiser`) on $\tfrac12\sum r^2$.

**Checks before fitting** (each refused with a `FitError` in plain words): more targets than flexible modes;
more free parameters than targets (not identifiable: tie parameters or add targets); a free `c` without damping
targets, or damping targets without a free `c`; a free `c` starting at 0 is seeded from the damping targets
($c = 2\zeta\sqrt{k(I_{s2}+md^2)}$); a positive parameter must start > 0; **reachability** (when only
stiffnesses and dampings are free): every natural frequency is a non-decreasing function of every stiffness
(Courant-Fischer), so target $i$ must lie between mode $i$'s frequencies with all free stiffnesses at
$10^{-6}$ and at $10^{6}$ times their initial values (the limits $k \to 0$ and $k \to \infty$; 0.1 % margin
for the damped-vs-undamped difference); with no free stiffness the frequencies are fixed; a free parameter
that does not change any target (zero Jacobian column) is refused.

**After fitting**: `converged` (the solver's own test), `targets_reached` (every relative frequency error below
`reach_rtol`, damping errors below `100 * reach_rtol`) and a plain-words `message` (e.g. a least-squares
compromise when the targets cannot all be met). Uncertainties: the core's Gauss-Newton covariance
$s^2 (J^TJ)^{+}$ with $J$ the weighted-residual Jacobian, $s^2 = \max(1, \chi^2/\mathrm{dof})$ when there are
more residuals than parameters, $s^2 = 1$ otherwise (the stated target uncertainties propagated); the
correlation matrix and the identifiability report (combinations the targets do not determine, by name).
Directions $J$ does not determine get `sigma = inf`.

**Several solutions** (`starts`, `bounds`): the `"lm"` solver runs from several starting points as one batched
program (`solve_batch`); every distinct converged point that reaches the targets is a `FitResult.solutions`
entry, and several of them are reported as "targets reached by N distinct parameter sets". **Mode shapes**
(`shapes`, a `ShapeMap`): the FEA modes' shapes at named nodes pair the modes (MAC), judge the solutions
(`ShapeMap.mac_min`) and, with `ShapeMap.sigma`, enter the residuals.

**Independent check** (`check=True`): `measure_modes` simulates the fitted nonlinear model, one free response
per mode, and measures frequency and damping from the time histories.
"""

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._loads import Loads
from ..._model._params import Parameter
from ..._model._rules import model_ok
from ..._model._scenario import Scenario, SimulationConfig
from ..._model._spacecraft import strip_labels
from .._linear._closed_loop import closed_loop_modes, closed_loop_modes_unjitted, loop_shape
from .._linear._linearize import check_boundary
from .._linear._measure import ModeMeasurement, measure_modes
from .._linear._modes import Modes, _relabel, modes, modes_unjitted
from ._lsq_analysis import LeastSquaresResult, analyse, common_fields, to_numpy
from ._lsq_coords import Coordinates, apply_coordinates, parse_free
from ._lsq_solver import FAIL, AbstractResiduals, evaluate, make_solver, solve, solve_batch, solvers_of
from ._pairing import (
    _FREQ_WEIGHT,
    FeaModes,
    ShapeMap,
    _pairing_table,
    _pairs_by_hand,
    _totals,
    _unit_vectors,
    fea_shape_vectors,
    mac,
    model_shape_matrix,
    pair_modes,
    shape_mac,
    unclean_free_modes,
)

__all__ = ["SOLVERS", "FitError", "FitResult", "fit"]

SOLVERS = solvers_of("modal")
DEFAULT_STARTS = 8  # modal fits: starts of the batched multi-start search ("lm")
START_FACTOR = 3.0  # default start box: a factor 3 either side of a positive parameter's initial value
_SAME = 1e-5  # two solutions closer than this in every fitted coordinate (log-ratio or scale units) are one
_REACH_SCALE = 1e6  # free stiffnesses scaled by 1e-6 and 1e6 for the reachability bounds
_REACH_MARGIN = 1e-3
_NOT_IN_MODES = ("motorTorque", "thetaDotRef")  # besides the initial conditions
LOOPS = ("open", "closed")


# ------------------------------------------------------------------------------------------------------------
# The residuals (a pytree: repeated fits of one model structure reuse the compiled programs)
# ------------------------------------------------------------------------------------------------------------


class _ModalResiduals(AbstractResiduals):
    scenario: Scenario  # label-free, default loads and simulation settings (they do not enter the modes)
    coordinates: Coordinates
    targets_hz: Float[Array, " targets"]
    damping_ratios: Float[Array, " dtargets"]
    w_f: Float[Array, " targets"]
    w_z: Float[Array, " dtargets"]
    reference_point: Float[Array, "3"]
    mass_targets: Float[Array, "mtargets 6"]  # FEA effective masses of the paired modes (empty: not fitted)
    w_m: Float[Array, "6"]
    track: Float[Array, "ttargets 6"]  # unit-free FEA participation vectors of the paired modes (empty: by index)
    track_scale: Float[Array, "6"]
    boundary: str = eqx.field(static=True)
    mode_index: tuple[int, ...] = eqx.field(static=True)
    track_signed: bool = eqx.field(static=True, default=True)
    loop: tuple[int, bool] | None = eqx.field(static=True, default=None)  # closed loop: `loop_shape`; None: open
    shape_fe: Float[Array, "stargets c"] | None = None  # unit FEA shape vectors of the paired modes (`ShapeMap`)
    shape_w: Float[Array, ""] | None = None  # 1 / ShapeMap.sigma (shape residuals), 0: shapes pair only
    shape_map: ShapeMap | None = eqx.field(static=True, default=None)

    def shape_vectors(self, m: Modes, model: Scenario):
        """Every model mode in the shape coordinates of `shape_map` (modes x c)."""
        return m.shape @ model_shape_matrix(model.spacecraft, self.shape_map).T

    def at(self, u) -> Scenario:
        return self.coordinates.apply(self.scenario, u)

    def index(self, m: Modes):
        """The model mode of each target: fixed (`mode_index`; free-free FEA modes, mode-shape pairing: decided
        once, at the initial guess, so it cannot switch between iterates), or tracked through the fit (clamped
        FEA modes with effective masses): the mode whose participation vector matches the paired FEA mode's best
        (MAC, then frequency), whatever the order of the model's frequencies at this point."""
        if not self.track.shape[0]:
            return np.array(self.mode_index)
        b = m.participation / self.track_scale
        score = mac(self.track, b if self.track_signed else jnp.abs(b)) - _FREQ_WEIGHT * jnp.abs(
            jnp.log(m.frequency_hz[None, :] / self.targets_hz[:, None]))
        return jnp.argmax(score, axis=1)

    def modes_at(self, model: Scenario) -> Modes:
        """The modes the targets refer to: the open-loop structure's (`modes`) or the sampled closed loop's."""
        if self.loop is None:
            return modes_unjitted(model, self.boundary, self.reference_point)
        return closed_loop_modes_unjitted(model, self.loop, self.reference_point)

    def __call__(self, u):
        model = self.at(u)
        m = self.modes_at(model)
        idx = self.index(m)
        r = (m.frequency_hz[idx] - self.targets_hz) * self.w_f
        if self.damping_ratios.shape[0]:
            r = jnp.concatenate([r, (m.damping_ratio[idx] - self.damping_ratios) * self.w_z])
        if self.mass_targets.shape[0]:
            r = jnp.concatenate([r, ((m.effective_mass[idx] - self.mass_targets) * self.w_m).ravel()])
        if self.shape_map is not None and self.shape_map.sigma is not None:  # unit shapes, sign-aligned
            v = self.shape_vectors(m, model)[idx]
            v = v / jnp.linalg.norm(v, axis=1, keepdims=True)
            sign = jnp.where(jnp.sum(v * self.shape_fe, axis=1, keepdims=True) < 0, -1.0, 1.0)
            r = jnp.concatenate([r, ((sign * v - self.shape_fe) * self.shape_w).ravel()])
        return r, model_ok(model.spacecraft), m  # an iterate that breaks a physical rule is a failed evaluation


# ------------------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitResult(LeastSquaresResult):
    """The outcome of `fit`: the fields every fit shares (`LeastSquaresResult`: `names`, `values`, `sigma`,
    `initial`, `units`, `covariance`, `correlation`, `chi2`, `cost`, `dof`, `converged`, `status`, `message`,
    `iterations`, the identifiability report, the fitted `scenario`, `history`, `wall_s`, `solve_s`, ...) and:

    - `modes`, `initial_modes`: the modes of the fitted and of the initial model.
    - `targets_hz`, `damping_targets` (empty if none), `mode_numbers` (1-based, matched modes).
    - `frequency_error`, `damping_error`: relative model-minus-target errors at the solution.
    - `residuals`: the weighted residual vector (frequencies, then damping ratios).
    - `targets_reached`: every error below `reach_rtol` (damping: `100 * reach_rtol`); `boundary`.
    - `check`: the `ModeMeasurement` of the fitted model (`None` if not requested).
    - `pairing`: with FEA modes, one entry per pair (`pair_modes`): FEA mode number and frequency, model mode,
      initial and fitted model frequency, MAC at the start and at the solution, FEA and fitted model effective
      masses; `None` without FEA modes.
    - `warnings`: what the user should know about the inputs (free-free FEA modes that carry effective mass:
      `unclean_free_modes`); the CLI prints each as a warning and `result.json` lists them.
    - `solutions`: every distinct parameter set the multi-start search (`starts`) found that reaches the targets,
      the reported one first; each a dict: `values` (name -> value [unit]), `start` (index of the start it came
      from, 0 = the initial guess), `initial` (that start's values), `steps`, `cost`, `frequency_error` (largest
      relative), `mac` (the paired modes' mode-shape MAC, where shapes are given). Empty when none does.
      `ambiguous`: more than one.
    - `mac_matrix`: with mode shapes (`shapes`), the MAC of every FEA mode read (rows, `fea.mode_numbers`)
      against every model mode at the solution (columns), the FEA mode numbers in `mac_fea_modes`; else None.
    """

    modes: Modes
    initial_modes: Modes
    targets_hz: np.ndarray
    damping_targets: np.ndarray
    mode_numbers: tuple[int, ...]
    frequency_error: np.ndarray
    damping_error: np.ndarray
    residuals: np.ndarray
    targets_reached: bool
    boundary: str
    check: ModeMeasurement | None = None
    pairing: list[dict] | None = None
    warnings: tuple[str, ...] = ()
    solutions: tuple[dict, ...] = ()
    mac_matrix: np.ndarray | None = None
    mac_fea_modes: tuple[int, ...] = ()

    @property
    def ambiguous(self) -> bool:
        """Several distinct parameter sets reach the targets (`solutions`): the data cannot tell them apart."""
        return len(self.solutions) > 1


# ------------------------------------------------------------------------------------------------------------
# fit
# ------------------------------------------------------------------------------------------------------------


def _floats(value, field: str, *, positive: bool) -> np.ndarray:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise FitError(f"{field} = {_fmt(value)}: must be a list of numbers", field=field)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise FitError(f"{field}[{i}] = {_fmt(v)}: must be a number", field=field)
        x = float(v)
        if not math.isfinite(x) or (positive and not x > 0):
            raise FitError(f"{field}[{i}] = {_fmt(v)}: must be a finite number > 0", field=field)
        out.append(x)
    if not out:
        raise FitError(f"{field} = []: give at least one value", field=field)
    return np.asarray(out)


def _fmt_hz(x: float) -> str:
    return f"{x:.6g} Hz"


def _modal_scenario(scenario: Scenario, closed: bool = False) -> Scenario:
    """What the modes depend on, without names, loads or simulation settings (one program per structure); the
    controller too for the closed loop."""
    if not closed:
        return Scenario(strip_labels(scenario.spacecraft), scenario.initial, Loads(), SimulationConfig())
    # the closed loop: its rk4 step (steps per control period) from the scenario's simulation settings
    return Scenario(strip_labels(scenario.spacecraft), scenario.initial, Loads(), scenario.simulation,
                    control=scenario.control)


def fit(
    scenario: Scenario,
    targets_hz: Sequence[float] | Float[ArrayLike, " targets"] | None,
    *,
    free: Sequence[str],
    damping_ratios: Sequence[float] | Float[ArrayLike, " targets"] | None = None,
    boundary: str = "free",
    mode_numbers: Sequence[int] | None = None,
    frequency_sigma: float = 0.01,
    damping_sigma: float = 0.2,
    solver: str = "lm",
    max_steps: int = 200,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    learning_rate: float = 0.02,
    reach_rtol: float = 1e-6,
    ident_rtol: float = 1e-6,
    warn_rtol: float = 1e-2,
    check: bool | None = None,
    progress: Callable[[str], None] | None = None,
    fea: FeaModes | None = None,
    fea_modes: Sequence[int] | None = None,
    reference_point: Sequence[float] | None = None,
    effective_mass_sigma: float | None = None,
    loop: str = "open",
    starts: int | None = None,
    bounds: Mapping[str, Sequence[float | int]] | None = None,
    shapes: ShapeMap | None = None,
) -> FitResult:
    """Fit model parameters so the model's modes match target frequencies (and damping ratios).

    **Arguments:**

    - `scenario`: the model; its values of the free parameters are the initial guesses.
    - `targets_hz`: target frequencies [Hz], non-decreasing, matched to the lowest flexible modes in order
      (or to `mode_numbers`).
    - `free`: free parameters (registry names, module docstring), e.g. `"<panel>.k"` / `"<panel>.c"` /
      `"<panel>.mass"`; tie parameters of one field with `"a.k = b.k"`.
    - `damping_ratios`: optional target damping ratios (same length as `targets_hz`, each in (0, 1)).
    - `boundary`: `"free"` (as flown) or `"clamped"` (hub fixed: FEA fixture, test stand).
    - `mode_numbers`: 1-based, strictly increasing mode numbers the targets belong to (default 1, 2, ...).
    - `frequency_sigma`, `damping_sigma`: relative 1-sigma uncertainties of the targets (residual weights and
      the basis of the reported `sigma`).
    - `solver`: `"lm"` (Levenberg-Marquardt, default), `"adam"` or `"lbfgs"` (optax); `max_steps`, `rtol`,
      `atol` (termination, on the fitted coordinates and cost), `learning_rate` (adam, in coordinate units).
    - `reach_rtol`: relative frequency error below which the targets count as reached.
    - `ident_rtol`, `warn_rtol`: singular-value ratios below which a parameter combination is reported as
      undetermined or poorly determined (`jaxhinge._analysis._fitting._lsq_analysis.analyse`).
    - `check`: simulate the fitted model and measure its frequencies (`measure_modes`); default: yes, except
      with reaction wheels (whose modes `measure_modes` does not start; `True` with wheels is refused).
    - `progress`: called with progress lines (on long fits, at most once a second), e.g. `print`.
    - `fea`: FEA modes (`read_fea`) instead of `targets_hz` (pass `None` there): each model mode is paired with
      an FEA mode by `pair_modes` (effective-mass MAC and frequency), or by hand with `mode_numbers` (model)
      and `fea_modes` (FEA mode numbers, as in the file), and fitted to its frequency (and to `fea.damping`,
      one damping ratio per FEA mode, where given).
    - `reference_point`: where the FEA's rotational effective masses refer to, in B [m] (default: the FEA's own
      `reference_point`, i.e. the FEA origin at the origin of B).
    - `effective_mass_sigma`: also fit the paired modes' 6 effective masses, with this 1-sigma uncertainty
      relative to each component's total effective mass (default: not fitted, used for pairing only).
    - `loop`: `"open"` (default: the structure's modes) or `"closed"`: the targets are the flexible modes of the
      spacecraft with its attitude controller in the loop (`Scenario.control`, sampled every `control_dt`:
      `closed_loop_modes`), and the controller's gains and inertia model (`control.K`, `control.P`, ...) may be
      free, e.g. the rate gain that damps a panel mode by 2 %. Free-free only, no FEA modes, no simulation check.
    - `shapes`: a `ShapeMap` (FEA grid points -> model coordinates) to pair the FEA modes by the MAC of their
      mode shapes (read with the FEA modes: `FeaModes.shapes`; the pairing is decided at the initial guess and
      held through the fit), judge the solutions (a solution whose paired shapes have a MAC below `ShapeMap.mac_min` does not count) and, with
      `ShapeMap.sigma`, fit the shapes too. Hub-hinged panels only.
    - `starts`: how many starting points the solver runs from, as one batched program (the first is the initial
      guess, the others spread over `bounds` by a Halton sequence); every distinct parameter set that reaches
      the targets is reported (`FitResult.solutions`). Default `DEFAULT_STARTS` for `"lm"`, 1 (the only choice)
      for the optax solvers.
    - `bounds`: `{name: [low, high]}` per free parameter (its name in `free`, or any member of a tie): the box
      the extra starts are spread over [the parameter's unit]; default a factor `START_FACTOR` either side of
      the initial value (positive parameters), +/- one scale unit (the others). Starts only: the solver is not
      bounded.

    **Returns:** a `FitResult`.

    **Raises:** `FitError` (a `ValueError`) for inputs that cannot be fitted (see the module docstring).
    """
    t_start = time.perf_counter()
    say = progress or (lambda s: None)
    _check_settings(scenario, boundary, solver, max_steps, rtol=rtol, atol=atol, learning_rate=learning_rate,
                    reach_rtol=reach_rtol, ident_rtol=ident_rtol, warn_rtol=warn_rtol,
                    frequency_sigma=frequency_sigma, damping_sigma=damping_sigma)
    _check_loop(scenario, loop, boundary, fea, check)
    check = scenario.spacecraft.wheels is None and loop == "open" if check is None else check
    if check and scenario.spacecraft.wheels is not None:
        raise FitError("check = True: the independent check (measure_modes) starts modes of a spacecraft without "
                       "reaction wheels; with wheels, fit with check = False (modes() is checked against the "
                       "simulator's Jacobian in the tests)", field="check", value=check)
    n_starts = _check_starts(starts, solver)
    tg = _targets(scenario, targets_hz, damping_ratios, boundary, mode_numbers, fea, fea_modes, reference_point,
                  effective_mass_sigma, shapes)
    pb = _build(scenario, free, tg, boundary, frequency_sigma, damping_sigma, effective_mass_sigma, say, loop,
                bounds)
    U0 = _start_points(pb.coords, n_starts, bounds)
    pb = dataclasses.replace(pb, starts=U0)
    say(f"fit: {len(pb.coords)} free parameter(s), {pb.n_res} residual(s), solver {solver}"
        + (f", {n_starts} starts" if n_starts > 1 else "") + "; compiling and solving...")
    slv, report = make_solver(solver, rtol, atol, learning_rate), (
        None if progress is None else (lambda s: say(f"fit: {s}")))
    sols = solve_batch(pb.problem, U0, slv, max_steps=max_steps, progress=report) if n_starts > 1 else \
        [solve(pb.problem, U0[0], slv, max_steps=max_steps, progress=report)]
    sol, solutions, multi_notes = _solutions(sols, pb, tg, frequency_sigma, damping_sigma, reach_rtol, ident_rtol)
    pb = dataclasses.replace(pb, notes=pb.notes + multi_notes)
    fitted = apply_coordinates(scenario, pb.coords, jnp.asarray(sol.u))
    measured = None
    if check:
        say("fit: independent check: simulating the fitted nonlinear model, one free response per mode...")
        measured = measure_modes(fitted, boundary)
    options = {"solver": solver, "max_steps": max_steps, "rtol": rtol, "atol": atol, "learning_rate": learning_rate,
               "reach_rtol": reach_rtol, "ident_rtol": ident_rtol, "warn_rtol": warn_rtol,
               "frequency_sigma": frequency_sigma, "damping_sigma": damping_sigma, "boundary": boundary,
               "effective_mass_sigma": effective_mass_sigma, "reference_point": tg.ref.tolist(), "loop": loop,
               "starts": n_starts}
    res = _result(scenario, tg, pb, sol, fitted, measured, options, boundary, reach_rtol, ident_rtol, warn_rtol,
                  wall=time.perf_counter() - t_start)
    low = [] if tg.shape_map is None else [p for p in res.pairing if not p["mac"] >= tg.shape_map.mac_min]
    if low and res.targets_reached:
        res = dataclasses.replace(res, targets_reached=False, message=(
            "the target frequencies are reached but not the mode shapes: " + ", ".join(
                f"FEA mode {p['fea_mode']} / model mode {p['model_mode']} MAC {p['mac']:.3f}" for p in low)
            + f" < mac_min = {tg.shape_map.mac_min:g} (more starts, or bounds around the expected values, may find "
            "the parameters whose shapes match); " + res.message))
    if len(solutions) > 1:
        listed = "; ".join(", ".join(f"{k} = {v:.6g}" for k, v in d["values"].items()) for d in solutions)
        res = dataclasses.replace(res, message=(
            f"targets reached by {len(solutions)} distinct parameter sets: the data cannot tell them apart ({listed}); "
            "targets that tell them apart: mode shapes ([modes.shapes]), the hub-clamped modes, more modes; "
            + res.message))
    return dataclasses.replace(res, solutions=tuple(solutions))


# ------------------------------------------------------------------------------------------------------------
# The steps of `fit`: check the settings, the targets (and their pairing with FEA modes), build the problem,
# solve, report
# ------------------------------------------------------------------------------------------------------------


def _check_loop(scenario, loop, boundary, fea, check) -> None:
    """`loop = "closed"` needs a controller, the free-free boundary, targets given as numbers, no check."""
    if loop not in LOOPS:
        raise FitError(f"loop = {_fmt(loop)}: allowed values are {', '.join(map(repr, LOOPS))}", field="loop")
    if loop == "open":
        return
    if scenario.control is None:
        raise FitError("loop = 'closed': the scenario has no attitude controller ([control]) to close the loop "
                       "with", field="loop")
    if boundary != "free":
        raise FitError(f"loop = 'closed' with boundary = {_fmt(boundary)}: the closed loop flies free (the "
                       "controller turns the hub); use boundary = 'free'", field="boundary")
    if fea is not None:
        raise FitError("loop = 'closed' with FEA modes: an FEA's modes are the open structure's; fit them with "
                       "loop = 'open', then the controller to closed-loop targets", field="loop")
    if check:
        raise FitError("check = True with loop = 'closed': the simulation check measures free responses of the "
                       "open structure; fit with check = False (the closed-loop poles are checked against "
                       "finite-difference linearisations and simulation in the tests)", field="check")


def _check_settings(scenario, boundary, solver, max_steps, **positive) -> None:
    """The solver and weighting settings, each named by its argument."""
    if not isinstance(scenario, Scenario):
        raise FitError(f"scenario: expected a jaxhinge Scenario, got {type(scenario).__name__}")
    try:
        check_boundary(boundary)
    except ValueError as e:
        raise FitError(f"{e}", field="boundary") from None
    if solver not in SOLVERS:
        raise FitError(f"solver = {solver!r}: allowed values are {', '.join(SOLVERS)}", field="solver")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise FitError(f"max_steps = {_fmt(max_steps)}: must be an integer >= 1", field="max_steps")
    for name, v in positive.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            what = " (relative uncertainty)" if name.endswith("_sigma") else ""
            raise FitError.bad(None, name, v, f"must be a finite number > 0{what}")


def _check_starts(starts, solver: str) -> int:
    """The number of starts: `DEFAULT_STARTS` for the least-squares solver, 1 for the optax ones."""
    if starts is None:
        return DEFAULT_STARTS if solver == "lm" else 1
    if isinstance(starts, bool) or not isinstance(starts, (int, np.integer)) or not 1 <= starts <= 1024:
        raise FitError.bad(None, "starts", starts, "must be an integer between 1 and 1024")
    if starts > 1 and solver != "lm":
        raise FitError.bad(None, "starts", starts, f"the multi-start search runs the least-squares solver "
                           f"(solver = \"lm\"); solver = {solver!r} runs from the initial guess only (starts = 1)")
    return int(starts)


def _halton(n: int, dims: int) -> np.ndarray:
    """The first `n` points (after the origin) of the Halton sequence in [0, 1)^dims (bases: the primes)."""
    primes = [p for p in range(2, 600) if all(p % q for q in range(2, int(p**0.5) + 1))][:dims]
    out = np.zeros((n, dims))
    for d, b in enumerate(primes):
        for i in range(n):
            f, k, x = 1.0, i + 1, 0.0
            while k:
                f /= b
                x += f * (k % b)
                k //= b
            out[i, d] = x
    return out


def _start_points(coords, n: int, bounds) -> np.ndarray:
    """(n, P) starting coordinates: the initial guess (zeros), then n - 1 Halton points of the start box
    (`bounds`, in the fitted coordinates; default `START_FACTOR` either side of a log coordinate, +/- 1 scale
    unit for a linear one)."""
    lo = np.array([-math.log(START_FACTOR) if c.log else -1.0 for c in coords])
    hi = -lo
    by_name = {}
    for j, c in enumerate(coords):
        for name in (c.name, *c.members):
            by_name[name.replace(" ", "")] = j
    for key, pair in (bounds or {}).items():
        field = f"bounds[{key!r}]"
        j = by_name.get(str(key).replace(" ", ""))
        if j is None:
            raise FitError(f"{field}: not a free parameter (free: {', '.join(c.name for c in coords)})",
                           field="bounds")
        vals = _floats(pair, field, positive=coords[j].log)
        if len(vals) != 2 or not vals[0] < vals[1]:
            raise FitError(f"{field} = {_fmt(list(pair))}: must be [low, high] with low < high", field="bounds")
        lo[j], hi[j] = (coords[j].coordinate(v) for v in vals)
    U = np.zeros((n, len(coords)))
    if n > 1:
        U[1:] = lo + (hi - lo) * _halton(n - 1, len(coords))
    return U


def _solutions(sols, pb: "_Problem", tg: "_Targets", frequency_sigma, damping_sigma, reach_rtol, ident_rtol):
    """The reported solution and every distinct parameter set that reaches the targets (`FitResult.solutions`).
    A start reaches them when it converged with every frequency error within `reach_rtol` (damping: 100 x), a
    Jacobian of full rank (a continuum of solutions along an undetermined direction is the identifiability
    report's, not a list of points) and, with mode shapes, a MAC of every pair of at least `ShapeMap.mac_min`.
    The start from the initial guess is reported when it reaches the targets, else the reaching start of lowest
    cost, else the initial guess's. Points within `_SAME` of each other are one."""
    nf, nz = len(tg.ft), len(tg.zt)
    coords = pb.coords

    def reaches_values(s) -> bool:
        r = np.asarray(s.residuals)
        if not (s.converged and np.all(np.isfinite(r)) and np.all(r != FAIL)):
            return False
        ok = np.all(np.abs(r[:nf]) * frequency_sigma <= reach_rtol) and \
            np.all(np.abs(r[nf:nf + nz]) * damping_sigma <= 100 * reach_rtol)
        sv = np.linalg.svd(np.asarray(s.jacobian), compute_uv=False)
        return bool(ok and len(sv) and sv[-1] > ident_rtol * sv[0])

    def distinct(indices) -> list[int]:
        groups: list[int] = []
        for i in indices:
            if all(np.max(np.abs(sols[i].u - sols[g].u)) > _SAME for g in groups):
                groups.append(i)
        return groups

    values_ok = [i for i, s in enumerate(sols) if reaches_values(s)]
    macs = {i: _pair_macs(pb.problem, sols[i].u) for i in values_ok} if tg.shape_map is not None else {}
    good = [i for i in values_ok if tg.shape_map is None or np.min(macs[i]) >= tg.shape_map.mac_min]
    notes = []
    say = lambda i: ", ".join(f"{c.name} = {float(c.value(sols[i].u[j])):.6g}" for j, c in enumerate(coords))
    rejected = distinct([i for i in values_ok if i not in good])
    if rejected:
        notes.append("rejected by the mode shapes (every target frequency reached, but a paired mode's shape MAC "
                     f"below mac_min = {tg.shape_map.mac_min:g}): " + "; ".join(
                         f"{say(i)} (MAC {', '.join(f'{x:.3f}' for x in macs[i])})" for i in rejected))
    if not good:
        return sols[0], [], notes
    first = 0 if 0 in good else min(good, key=lambda i: sols[i].chi2)
    if first != 0:
        why = "its mode shapes do not match" if 0 in values_ok else f"status {sols[0].status}"
        notes.insert(0, f"the solver's run from the initial guess did not reach the targets ({why}); start "
                     f"{first} of the multi-start search did, and is reported")
    groups = distinct([first] + sorted((i for i in good if i != first), key=lambda i: sols[i].chi2))
    out = []
    for i in groups:
        s = sols[i]
        out.append({
            "values": {c.name: float(c.value(s.u[j])) for j, c in enumerate(coords)},
            "start": i, "initial": {c.name: float(c.value(pb.starts[i, j])) for j, c in enumerate(coords)},
            "steps": int(s.steps), "cost": 0.5 * s.chi2,
            "frequency_error": float(np.max(np.abs(np.asarray(s.residuals)[:nf])) * frequency_sigma),
            "mac": None if tg.shape_map is None else macs[i].tolist(),
        })
    return sols[first], out, notes


@dataclasses.dataclass(frozen=True)
class _Targets:
    """What the fit aims at: frequency and damping targets `ft`, `zt`, the model mode index of each, the FEA
    effective masses fitted (`em_t`), the FEA pairing at the start (`pairs0`, `by_hand`), the tracked FEA
    participation vectors (`track`, `track_scale`) and the reference point `ref` [m, B]."""

    ft: np.ndarray
    zt: np.ndarray
    idx: tuple[int, ...]
    em_t: np.ndarray
    pairs0: tuple | None
    by_hand: bool
    track: np.ndarray
    track_scale: np.ndarray
    ref: np.ndarray
    fea: FeaModes | None
    warnings: tuple[str, ...] = ()
    shape_map: ShapeMap | None = None  # panels by index
    shape_fe: np.ndarray | None = None  # (FEA modes, c) the FEA modes in the shape coordinates


def _targets(scenario, targets_hz, damping_ratios, boundary, mode_numbers, fea, fea_modes, reference_point,
             effective_mass_sigma, shapes=None) -> _Targets:
    """The targets from the arguments or the FEA modes (paired automatically or by hand), checked."""
    sc = scenario.spacecraft
    names = sc.panels.labels
    n = len(names)
    ref = np.zeros(3) if fea is None else np.asarray(fea.reference_point, float)
    if reference_point is not None:
        ref = _floats(reference_point, "reference_point", positive=False)
        if ref.shape != (3,):
            raise FitError(f"reference_point = {_fmt(reference_point)}: must be 3 numbers [m] in B",
                           field="reference_point")
    if shapes is not None and fea is None:
        raise FitError("shapes (a mode-shape map) need FEA modes with their shapes: give fea", field="shapes")
    elif fea is not None and fea.reference_grid and fea.effective_mass is not None and reference_point is None:
        raise FitError(f"{fea.source}: its effective masses refer to grid {fea.reference_grid} (PARAM GRDPNT), whose "
                       "coordinates are not in the file: give reference_point (that grid's position in B [m])",
                       field="reference_point")
    em_t, pairs0, track, track_scale, by_hand = np.zeros((0, 6)), None, np.zeros((0, 6)), np.ones(6), False
    smap = fe_vecs = None
    warnings: tuple[str, ...] = ()
    if fea is not None and boundary == "free":
        if effective_mass_sigma is not None:
            raise FitError("effective_mass_sigma with free-free FEA modes: free-free elastic modes carry no "
                           "effective mass (the model's are zero), so there is nothing to fit; it applies to "
                           "clamped modes", field="effective_mass_sigma")
        unclean = unclean_free_modes(fea)
        warnings = () if unclean is None else (unclean,)
    if fea is not None:
        if fea.boundary is not None and fea.boundary != boundary:
            raise FitError(f"boundary = {_fmt(boundary)} but the FEA modes ({fea.source}) are {fea.boundary}: "
                           "fit the model with the FEA's boundary condition", field="boundary")
        if targets_hz is not None:
            raise FitError("give either targets_hz or FEA modes (fea), not both", field="targets_hz")
        by_hand = mode_numbers is not None or fea_modes is not None
        if shapes is not None:
            smap, fe_vecs = _shape_setup(scenario, fea, shapes)
        fi, idx_f = _pairs_by_hand(fea, n, mode_numbers, fea_modes) if by_hand else \
            pair_modes(fea, modes(scenario, boundary, ref), shapes=None if shapes is None else (
                fe_vecs, model_shape_matrix(sc, smap)))[:2]
        pairs0 = (fi, idx_f)
        targets_hz, mode_numbers = fea.frequencies[fi], [j + 1 for j in idx_f]
        if fea.damping is not None:
            if damping_ratios is not None:
                raise FitError("give damping ratios either with the FEA modes (FeaModes.damping, "
                               "fea_damping_ratios) or as damping_ratios, not both", field="damping_ratios")
            damping_ratios = np.asarray(fea.damping, float)[fi]
        if effective_mass_sigma is not None:
            if fea.effective_mass is None:
                why = "" if fea.unread is None else f" ({fea.unread})"
                raise FitError(f"effective_mass_sigma is given but {fea.source} has no effective masses{why}",
                               field="effective_mass_sigma")
            em_t = np.asarray(fea.effective_mass, float)[fi]
        vec = _unit_vectors(fea, modes(scenario, boundary, ref))
        if vec is not None and not by_hand and shapes is None:  # tracked by participation; by hand: fixed
            track, track_scale = vec[0][fi], np.sqrt(_totals(fea))
    ft = _floats(targets_hz, "targets_hz", positive=True)
    if fea is None and np.any(np.diff(ft) < 0):
        raise FitError(f"targets_hz = {_fmt(ft)}: must be in ascending order (they are matched to the modes "
                       "in ascending frequency)", field="targets_hz")
    zt = np.zeros(0)
    if damping_ratios is not None:
        zt = _floats(damping_ratios, "damping_ratios", positive=True)
        if len(zt) != len(ft):
            raise FitError(f"damping_ratios has {len(zt)} values but targets_hz has {len(ft)}: give one "
                           "damping ratio per target frequency", field="damping_ratios")
        if np.any(zt >= 1):
            raise FitError(f"damping_ratios = {_fmt(zt)}: each must be < 1 (an oscillating mode)",
                           field="damping_ratios")
    if n == 0:
        raise FitError("the scenario has no panels, hence no flexible modes to fit", field="scenario")
    if len(ft) > n:
        raise FitError(f"{len(ft)} target frequencies but the model has only {n} flexible mode(s) (one per panel; "
                       f"the {boundary} hub adds none): no parameter values can produce the extra ones",
                       field="targets_hz")
    if mode_numbers is None:
        idx = tuple(range(len(ft)))
    else:
        mn = list(mode_numbers)
        if len(mn) != len(ft) or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in mn):
            raise FitError(f"mode_numbers = {_fmt(mn)}: must be {len(ft)} integers (one per target)",
                           field="mode_numbers")
        if any(x < 1 or x > n for x in mn) or (fea is None and any(b <= a for a, b in itertools.pairwise(mn))):
            raise FitError(f"mode_numbers = {_fmt(mn)}: must be strictly increasing, between 1 and {n}",
                           field="mode_numbers")
        idx = tuple(int(x) - 1 for x in mn)

    return _Targets(ft, zt, idx, em_t, pairs0, by_hand, track, track_scale, ref, fea, warnings, smap, fe_vecs)


def _shape_setup(scenario, fea: FeaModes, shapes: ShapeMap):
    """The shape map with panels by index, checked against the FEA file and the model, and the FEA modes in its
    coordinates (`fea_shape_vectors`)."""
    sc = scenario.spacecraft
    if not isinstance(shapes, ShapeMap):
        raise FitError(f"shapes: expected a ShapeMap, got {type(shapes).__name__}", field="shapes")
    if fea.shapes is None:
        raise FitError(f"shapes: {fea.source} has no mode shapes (CalculiX: *NODE PRINT or *NODE FILE of U in the "
                       "*FREQUENCY step, the .dat or the .frd; NASTRAN: DISP(PRINT) = <set>): docs/modes-and-fea.md",
                       field="shapes")
    known = [int(x) for x in fea.shape_nodes]
    for what, node in (("hub", shapes.hub), ("hub_rotation", shapes.hub_rotation),
                       *((f"panels.{p}", nd) for p, nd, _ in shapes.panels)):
        if node is not None and node not in known:
            raise FitError(f"shapes.{what} = {_fmt(node)}: not a node with mode shapes in "
                           f"{fea.shapes_source or fea.source} (nodes: "
                           f"{', '.join(map(str, known))})", field="shapes")
    if shapes.hub is None and shapes.hub_rotation is not None:
        raise FitError("shapes.hub_rotation is given without shapes.hub", field="shapes")
    if not shapes.panels:
        raise FitError("shapes.panels: map at least one panel to a node", field="shapes")
    labels = list(sc.panels.labels)
    panels = []
    for name, node, dist in shapes.panels:
        if name not in labels:
            raise FitError(f"shapes.panels.{name}: not a panel of the model (panels: {', '.join(labels)})",
                           field="shapes")
        j = labels.index(name)
        if sc.panels.parent[j] != -1:
            raise FitError(f"shapes.panels.{name}: a panel of a chain; mode shapes map panels hinged to the hub "
                           "only", field="shapes")
        if dist is not None and not (isinstance(dist, (int, float)) and math.isfinite(dist) and dist > 0):
            raise FitError(f"shapes.panels.{name}.distance = {_fmt(dist)}: must be a distance > 0 [m] from the "
                           "hinge line", field="shapes")
        panels.append((j, int(node), None if dist is None else float(dist)))
    smap = dataclasses.replace(shapes, panels=tuple(panels))
    if shapes.hub is not None and shapes.hub_rotation is None and not np.all(np.isfinite(
            fea.shapes[:, known.index(shapes.hub), 3:])):
        raise FitError(f"shapes.hub = {shapes.hub}: the file has no rotations at this node (CalculiX writes none): "
                       "give hub_rotation, a node whose displacements are the hub's rotation (a *RIGID BODY ROT "
                       "NODE)", field="shapes")
    vecs = fea_shape_vectors(fea, smap, sc)
    if not np.all(np.isfinite(vecs)):
        raise FitError(f"shapes: {fea.source} lacks values of the mapped nodes' shapes (NaN)", field="shapes")
    if shapes.sigma is not None and not (math.isfinite(shapes.sigma) and shapes.sigma > 0):
        raise FitError(f"shapes.sigma = {_fmt(shapes.sigma)}: must be a finite number > 0", field="shapes")
    if not 0 <= shapes.mac_min <= 1:
        raise FitError(f"shapes.mac_min = {_fmt(shapes.mac_min)}: must be in [0, 1]", field="shapes")
    return smap, vecs


@dataclasses.dataclass(frozen=True)
class _Problem:
    """The least-squares problem: its coordinates, residuals, counts, the initial modes and notes so far."""

    coords: tuple
    problem: "_ModalResiduals"
    n_res: int
    m_init: Modes
    notes: list
    starts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((1, 0)))


def _build(scenario, free, tg: _Targets, boundary, frequency_sigma, damping_sigma, effective_mass_sigma,
           say, loop: str = "open", bounds=None) -> _Problem:
    """The fitted coordinates (a free c at 0 seeded from the damping targets) and the residuals, refused when
    the targets cannot determine them, cannot be reached, or do not depend on one of them."""
    sc = scenario.spacecraft
    ft, zt, idx, em_t, ref, fea = tg.ft, tg.zt, tg.idx, tg.em_t, tg.ref, tg.fea
    # the coordinates; a free c at 0 is seeded from the damping targets (the panel alone about its own hinge)
    k0 = np.asarray(sc.panels.k, float)
    Itheta = np.asarray(sc.panels.IPntS_S[:, 1, 1] + sc.panels.mass * sc.panels.d**2, float)

    def seed(par: Parameter) -> float | None:
        if par.field.name != "c":
            return None
        if not len(zt):
            raise FitError(f"free: {par.name} is free but no damping_ratios are given: the damping c hardly "
                           "changes the frequencies, so it cannot be fitted to them; add [modes] damping_ratios or "
                           "fix c", field="free")
        return float(2.0 * np.mean(zt) * np.sqrt(max(k0[par.panel], 1e-12) * Itheta[par.panel]))

    coords = parse_free(scenario, free, seed=seed)
    for c in coords:
        f = c.targets[0].field
        if f.owner == "control" and loop == "open":
            raise FitError(f"free: {c.name} is a controller parameter, which does not enter the structure's modes; "
                           "fit closed-loop targets with loop = \"closed\"", field="free")
        if f.owner == "control" and f.name == "sigma_R0N":
            raise FitError(f"free: {c.name} is the reference attitude, about which the loop is linearised: "
                           "it does not move the closed-loop modes", field="free")
        if f.initial or f.name in _NOT_IN_MODES:
            what = "an initial condition" if f.initial else f"{f.name} ({f.description})"
            raise FitError(f"free: {c.name} is {what}, which does not enter the modes (linearised about "
                           "rest); a modal fit frees model parameters such as k, c, mass, d, IPntS_S",
                           field="free")
    _start_points(coords, 1, bounds)  # the bounds checked against the free parameters, before any compute
    n_shape = 0 if tg.shape_map is None or tg.shape_map.sigma is None else len(ft) * tg.shape_fe.shape[1]
    n_par, n_res = len(coords), len(ft) + len(zt) + em_t.size + n_shape
    if n_par > n_res:
        raise FitError(f"{n_par} free parameters but only {n_res} target{'s' if n_res != 1 else ''}: the parameters "
                       "cannot all be determined; "
                       "tie parameters (\"a.k = b.k\") or add targets (damping_ratios)", field="free")
    kinds = {c.field for c in coords}
    c_coords = [c for c in coords if c.field == "c"]
    if c_coords and not len(zt):
        raise FitError(f"free: {c_coords[0].name} is free but no damping_ratios are given: the damping c hardly "
                       "changes the frequencies, so it cannot be fitted to them; add [modes] damping_ratios or fix c",
                       field="free")
    damps = "c" in kinds or (loop == "closed" and any(c.targets[0].field.owner == "control" for c in coords))
    if len(zt) and not damps:
        raise FitError("damping_ratios are given but no damping c is free: free at least one \"<panel>.c\" "
                       + ("(or a controller gain) " if loop == "closed" else "")
                       + "or drop the damping targets", field="damping_ratios")
    notes = [f"{c.name} started at 0; seeded with 2 zeta sqrt(k I) = {c.x0:.6g}"
             for c in c_coords if any(float(sc.panels.c[t.panel]) <= 0 for t in c.targets)]

    problem = _ModalResiduals(
        scenario=_modal_scenario(scenario, loop == "closed"),
        coordinates=Coordinates(coords),
        targets_hz=jnp.asarray(ft),
        damping_ratios=jnp.asarray(zt),
        w_f=jnp.asarray(1.0 / (frequency_sigma * ft)),
        w_z=jnp.asarray(1.0 / (damping_sigma * zt)) if len(zt) else jnp.zeros(0),
        reference_point=jnp.asarray(ref),
        mass_targets=jnp.asarray(em_t),
        w_m=jnp.asarray(1.0 / (effective_mass_sigma * _totals(fea)) if len(em_t) else np.zeros(6)),
        track=jnp.asarray(tg.track), track_scale=jnp.asarray(tg.track_scale), track_signed=fea is None or
        fea.participation is not None,
        boundary=boundary,
        mode_index=idx,
        loop=loop_shape(scenario) if loop == "closed" else None,
        **({} if tg.shape_map is None else {
            "shape_map": tg.shape_map, "shape_fe": jnp.asarray(_unit_rows(tg.shape_fe[tg.pairs0[0]])),
            "shape_w": jnp.asarray(0.0 if tg.shape_map.sigma is None else 1.0 / tg.shape_map.sigma)}),
    )
    u0 = jnp.zeros(n_par)

    # reachability of the frequency targets (natural frequencies are monotone in every stiffness)
    say("fit: checking that the targets are reachable...")
    m_init = to_numpy(_relabel(_target_modes(problem, problem.at(u0)), sc))
    if kinds <= {"k", "c"} and not len(tg.track) and loop == "open":  # (tracked modes may change their order with k)
        _check_reach(problem, coords, m_init, ft, idx, boundary)

    # every free parameter must move the targets
    J0 = np.asarray(evaluate(u0, problem).jacobian)
    col = np.linalg.norm(J0, axis=0)
    for j, c in enumerate(coords):
        if not col[j] > 1e-9 * max(col.max(), 1e-300):
            raise FitError(f"free: {c.name} has no effect on the targeted modes (zero sensitivity at the "
                           "initial guess): fix it or target modes it takes part in", field="free")
    return _Problem(tuple(coords), problem, n_res, m_init, notes)


def _pair_macs(problem: "_ModalResiduals", u) -> np.ndarray:
    """The mode-shape MAC of each FEA-model pair at coordinates `u`."""
    model = problem.at(jnp.asarray(u))
    m = _target_modes(problem, model)
    idx = np.asarray(problem.index(m))
    return np.asarray(mac(problem.shape_fe, problem.shape_vectors(m, model)))[np.arange(len(idx)), idx]


def _unit_rows(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)


def _target_modes(problem: "_ModalResiduals", model: Scenario) -> Modes:
    """The modes the targets refer to (`_ModalResiduals.modes_at`), compiled: `modes` or `closed_loop_modes`."""
    ref = problem.reference_point
    return modes(model, problem.boundary, ref) if problem.loop is None else closed_loop_modes(model, ref)


def _result(scenario, tg: _Targets, pb: _Problem, sol, fitted, measured, options, boundary, reach_rtol,
            ident_rtol, warn_rtol, wall) -> "FitResult":
    """The `FitResult`: the fitted modes, errors, covariance and identifiability, pairing, and the status in
    words."""
    sc, coords, problem, m_init, ft, zt, fea = (scenario.spacecraft, pb.coords, pb.problem, pb.m_init, tg.ft,
                                                tg.zt, tg.fea)
    notes, n_par, n_res = list(pb.notes), len(pb.coords), pb.n_res
    r, J = sol.residuals, sol.jacobian
    m_fit = to_numpy(_relabel(_target_modes(problem, problem.at(jnp.asarray(sol.u))), sc))
    converged = sol.converged and bool(np.all(np.isfinite(m_fit.frequency_hz)) and np.all(r != FAIL))
    idx = tuple(int(j) for j in np.asarray(problem.index(m_fit)))
    f_fit = np.asarray(m_fit.frequency_hz)[list(idx)]
    ferr = (f_fit - ft) / ft
    derr = (np.asarray(m_fit.damping_ratio)[list(idx)] - zt) / zt if len(zt) else np.zeros(0)
    a = analyse(J, r, coords, ident_rtol=ident_rtol, warn_rtol=warn_rtol, s2_floor=1.0)
    if a.dof > 0:
        sigma_note = (f"Gauss-Newton covariance (J^T J)^-1 of the weighted residuals (target uncertainties "
                      f"propagated), scaled by max(1, chi^2/dof) = {a.s2:.3g} (dof = {a.dof})")
    else:
        sigma_note = ("Gauss-Newton covariance (J^T J)^-1 of the weighted residuals: the stated target uncertainties "
                      "(frequency_sigma, damping_sigma) propagated to the parameters (as many targets as parameters, "
                      "so the fit itself gives no scatter estimate)")
    values = np.array([c.value(sol.u[j]) for j, c in enumerate(coords)], dtype=float)
    sigma = a.sigma(coords, values)
    reached = bool(np.all(np.abs(ferr) <= reach_rtol) and np.all(np.abs(derr) <= 100 * reach_rtol))
    poor = [f"{c.name} is poorly determined by these targets (sigma = {100 * sigma[j] / abs(values[j]):.0f} % of "
            "its value): tie it to a similar parameter or add targets"
            for j, c in enumerate(coords) if c.log and np.isfinite(sigma[j]) and sigma[j] > 0.5 * abs(values[j])]
    pairing = mac_matrix = None
    mac_modes: tuple[int, ...] = ()
    if fea is not None:
        shp = None if tg.shape_map is None else (
            tg.shape_fe, model_shape_matrix(problem.at(jnp.zeros(n_par)).spacecraft, tg.shape_map),
            model_shape_matrix(problem.at(jnp.asarray(sol.u)).spacecraft, tg.shape_map))
        pairing, swapped = _pairing_table(fea, tg.pairs0, list(idx), m_init, m_fit, auto=not tg.by_hand,
                                          shapes=shp)
        if shp is not None:
            mac_matrix = np.asarray(shape_mac(shp[0], m_fit, shp[2]))
            mac_modes = tuple(int(x) for x in fea.mode_numbers)
        notes += swapped
        if len(set(idx)) < len(idx):
            notes.append(f"two FEA modes ended up paired with one model mode ({[j + 1 for j in idx]}): fix the "
                         "pairing with mode_numbers and fea_modes")
    message = _message(converged, reached, sol.status, sol.steps, ferr, derr,
                       [d["description"] for d in a.undetermined], notes, n_par, n_res, J, r, poor)

    return FitResult(
        **common_fields(coords, sol.u, a, sigma_note=sigma_note, converged=converged, status=sol.status,
                        message=message, iterations=sol.steps, scenario=fitted, solver=options["solver"], options=options,
                        history=sol.history, wall_s=wall, solve_s=sol.wall_s),
        modes=m_fit,
        initial_modes=m_init,
        targets_hz=ft,
        damping_targets=zt,
        mode_numbers=tuple(j + 1 for j in idx),
        frequency_error=ferr,
        damping_error=derr,
        residuals=r,
        targets_reached=reached,
        boundary=boundary,
        check=measured,
        pairing=pairing,
        warnings=tg.warnings,
        mac_matrix=mac_matrix,
        mac_fea_modes=mac_modes,
    )


def _check_reach(problem: _ModalResiduals, coords, m_init: Modes, ft, idx, boundary: str) -> None:
    """Refuse a target outside what the free stiffnesses can reach (the others fixed)."""
    k_idx = [j for j, c in enumerate(coords) if c.field == "k"]
    shift = np.zeros(len(coords))
    shift[k_idx] = math.log(_REACH_SCALE)
    lo = np.sort(np.asarray(modes(problem.at(jnp.asarray(-shift)), boundary).natural_frequency_hz))
    hi = np.sort(np.asarray(modes(problem.at(jnp.asarray(shift)), boundary).natural_frequency_hz))
    free_k = ", ".join(coords[j].name for j in k_idx)
    for i, j in enumerate(idx):
        if lo[j] * (1 - _REACH_MARGIN) <= ft[i] <= hi[j] * (1 + _REACH_MARGIN):
            continue
        ef = np.asarray(m_init.energy_fraction)[j]
        dom = m_init.participants[int(np.argmax(ef))]
        if not k_idx:
            why = (f"no stiffness is free, so mode {j + 1} stays at {_fmt_hz(hi[j])} whatever the damping; "
                   "free a stiffness k")
        else:
            side = "above the highest" if ft[i] > hi[j] else "below the lowest"
            how = "infinitely stiff" if ft[i] > hi[j] else "infinitely soft"
            why = (f"it is {side} frequency mode {j + 1} can have: with the free stiffnesses ({free_k}) anywhere "
                   f"in (0, inf) and the other parameters fixed, mode {j + 1} stays between {_fmt_hz(lo[j])} "
                   f"and {_fmt_hz(hi[j])} (the limit when they are {how})")
        raise FitError(f"target {i + 1} = {_fmt_hz(ft[i])} ({boundary} boundary) is out of reach: {why}. Mode "
                       f"{j + 1} is dominated by {dom} ({100 * ef.max():.0f} % of its kinetic energy); free the "
                       "stiffness of the part that dominates it, or check the target", field="targets_hz")


def _message(converged, reached, status, steps, ferr, derr, undetermined, notes, n_par, n_res, J, r, poor) -> str:
    parts = []
    worst_f = float(np.max(np.abs(ferr))) if len(ferr) else 0.0
    worst_z = float(np.max(np.abs(derr))) if len(derr) else 0.0
    if converged and reached:
        parts.append(f"converged in {steps} steps; every target reached (largest relative error: frequency "
                     f"{worst_f:.2e}" + (f", damping ratio {worst_z:.2e})" if len(derr) else ")"))
    elif converged:
        g = J.T @ r
        stationary = float(np.max(np.abs(g))) <= 1e-6 * max(1.0, float(r @ r))
        parts.append(
            f"converged in {steps} steps to a least-squares compromise: the targets cannot all be reached "
            + ("by any nearby values of the free parameters" if stationary else "")
            + f" (largest relative error: frequency {worst_f:.2e}"
            + (f", damping ratio {worst_z:.2e})" if len(derr) else ")")
            + ("; there are more targets than free parameters" if n_res > n_par else "")
        )
    else:
        why = {"max_steps_reached": f"it used all {steps} allowed steps (raise max_steps)",
               "nonlinear_max_steps_reached": f"it used all {steps} allowed steps (raise max_steps)"}.get(
            status, f"the solver stopped with status {status!r}")
        parts.append(f"did NOT converge: {why}; the values written are the last iterate, not a solution "
                     f"(largest relative error: frequency {worst_f:.2e}"
                     + (f", damping ratio {worst_z:.2e})" if len(derr) else ")"))
    for u in undetermined:
        parts.append(f"not determined by these targets: {u}")
    parts += poor
    parts += notes
    return "; ".join(parts)
