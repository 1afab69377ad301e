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

The steps of `fit`, one module each: the settings checked (here), the targets (`_fit_targets`), the least-squares
problem (`_fit_problem`), the solve (`_lsq_solver`), the solutions and the result (`_fit_result`).
"""

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._scenario import Scenario
from .._linear._linearize import check_boundary
from .._linear._measure import measure_modes
from ._fit_problem import build_problem, start_points
from ._fit_result import FitResult, fit_result, pick_solutions
from ._fit_targets import fit_targets
from ._lsq_coords import apply_coordinates
from ._lsq_solver import make_solver, solve, solve_batch, solvers_of
from ._pairing import FeaModes, ShapeMap

__all__ = ["SOLVERS", "FitError", "FitResult", "fit"]

SOLVERS = solvers_of("modal")
DEFAULT_STARTS = 8  # modal fits: starts of the batched multi-start search ("lm")
LOOPS = ("open", "closed")


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
    tg = fit_targets(scenario, targets_hz, damping_ratios, boundary, mode_numbers, fea, fea_modes,
                     reference_point, effective_mass_sigma, shapes)
    pb = build_problem(scenario, free, tg, boundary, frequency_sigma, damping_sigma, effective_mass_sigma, say,
                       loop, bounds)
    U0 = start_points(pb.coords, n_starts, bounds)
    pb = dataclasses.replace(pb, starts=U0)
    say(f"fit: {len(pb.coords)} free parameter(s), {pb.n_res} residual(s), solver {solver}"
        + (f", {n_starts} starts" if n_starts > 1 else "") + "; compiling and solving...")
    slv, report = make_solver(solver, rtol, atol, learning_rate), (
        None if progress is None else (lambda s: say(f"fit: {s}")))
    sols = solve_batch(pb.problem, U0, slv, max_steps=max_steps, progress=report) if n_starts > 1 else \
        [solve(pb.problem, U0[0], slv, max_steps=max_steps, progress=report)]
    sol, solutions, multi_notes = pick_solutions(sols, pb, tg, frequency_sigma, damping_sigma, reach_rtol,
                                                 ident_rtol)
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
    res = fit_result(scenario, tg, pb, sol, fitted, measured, options, boundary, reach_rtol, ident_rtol,
                     warn_rtol, wall=time.perf_counter() - t_start)
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
# Checks of the settings, before any compute
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
