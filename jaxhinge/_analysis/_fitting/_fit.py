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

**Solvers** (objects, `_solvers`): `LevenbergMarquardt()` (default): `optimistix.LevenbergMarquardt` with
forward-mode Jacobians. `Adam()`, `LBFGS()`: the optax optimisers (through `optimistix.OptaxMinimiser`) on
$\tfrac12\sum r^2$. The options (targets, starts, acceptance) are objects too (`_fit_options`).

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

**Several solutions** (`Starts(count, bounds)`): the least-squares solver runs from several starting points as one batched
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
import time
from collections.abc import Callable, Sequence

import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from ..._errors import FitError
from ..._model._boundary import AbstractBoundary, FreeFree, as_boundary
from ..._model._scenario import Scenario
from .._linear._measure import measure_modes
from ._fit_options import Acceptance, FeaTargets, ModalTargets, Starts
from ._fit_problem import build_problem, start_points
from ._fit_result import FitResult, fit_result, pick_solutions
from ._fit_targets import fit_targets
from ._loop import AbstractLoop, OpenLoop, as_loop
from ._lsq_coords import apply_coordinates
from ._lsq_solver import solve, solve_batch
from ._solvers import AbstractFitSolver, Adam, LevenbergMarquardt, as_solver, solvers_of

__all__ = ["SOLVERS", "FitError", "FitResult", "fit"]

SOLVERS = solvers_of("modal")
DEFAULT_STARTS = 8  # modal fits: starts of the batched multi-start search (least-squares solver)
DEFAULTS = {"rtol": 1e-10, "atol": 1e-10, "max_steps": 200}  # the solver settings left None
REACH_RTOL = 1e-6  # `Acceptance.reach_rtol` left None


def fit(
    scenario: Scenario,
    targets: ModalTargets | FeaTargets | Sequence[float | int] | Float[ArrayLike, " targets"],
    *,
    free: Sequence[str],
    boundary: AbstractBoundary | str = FreeFree(),
    loop: AbstractLoop | str = OpenLoop(),
    solver: AbstractFitSolver | str = LevenbergMarquardt(),
    starts: Starts | int | None = None,
    acceptance: Acceptance = Acceptance(),
    check: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> FitResult:
    """Fit model parameters so the model's modes match target frequencies (and damping ratios).

    **Arguments:**

    - `scenario`: the model; its values of the free parameters are the initial guesses.
    - `targets`: the target modes: `ModalTargets` (frequencies [Hz], optional damping ratios, mode numbers and
      their uncertainties), `FeaTargets` (the modes of an FEA file, paired with the model's), or a plain list of
      target frequencies [Hz] (`ModalTargets(targets)`).
    - `free`: free parameters (registry names, module docstring), e.g. `"<panel>.k"` / `"<panel>.c"` /
      `"<panel>.mass"`; tie parameters of one field with `"a.k = b.k"`.
    - `boundary`: `FreeFree()` (as flown, default) or `HubClamped()` (hub fixed: FEA fixture, test stand); or
      their names `"free"`, `"clamped"`.
    - `loop`: `OpenLoop()` (default: the structure's modes) or `ClosedLoop()`: the targets are the flexible modes
      of the spacecraft with its attitude controller in the loop (`Scenario.control`, sampled every
      `control_dt`: `closed_loop_modes`), and the controller's gains and inertia model (`control.K`,
      `control.P`, ...) may be free. Free-free only, no FEA modes, no simulation check. Or `"open"`, `"closed"`.
    - `solver`: `LevenbergMarquardt()` (default), `Adam()` or `LBFGS()` (optax), with their termination settings
      (`rtol`, `atol` on the fitted coordinates and cost, default 1e-10; `max_steps`, default 200; Adam's
      `learning_rate`, in coordinate units); or their names `"lm"`, `"adam"`, `"lbfgs"`.
    - `starts`: `Starts(count, bounds)`: how many starting points the solver runs from, as one batched program
      (the first is the initial guess, the others spread over `bounds` by a Halton sequence); every distinct
      parameter set that reaches the targets is reported (`FitResult.solutions`). Default `DEFAULT_STARTS` for
      the least-squares solver, 1 (the only choice) for the optax solvers. An integer is `Starts(count)`.
    - `acceptance`: `Acceptance(reach_rtol, ident_rtol, warn_rtol)`: the relative frequency error below which
      the targets count as reached (default 1e-6), and the singular-value ratios below which a parameter
      combination is reported as undetermined or poorly determined
      (`jaxhinge._analysis._fitting._lsq_analysis.analyse`).
    - `check`: simulate the fitted model and measure its frequencies (`measure_modes`); default: yes, except
      with reaction wheels (whose modes `measure_modes` does not start; `True` with wheels is refused) or in
      the closed loop.
    - `progress`: called with progress lines (on long fits, at most once a second), e.g. `print`.

    **Returns:** a `FitResult`.

    **Raises:** `FitError` (a `ValueError`) for inputs that cannot be fitted (see the module docstring), naming
    the argument, before any compute.
    """
    t_start = time.perf_counter()
    say = progress or (lambda s: None)
    if not isinstance(scenario, Scenario):
        raise FitError(f"scenario: expected a jaxhinge Scenario, got {type(scenario).__name__}")
    try:
        boundary = as_boundary(boundary)
    except ValueError as e:
        raise FitError(f"{e}", field="boundary") from None
    loop = as_loop(loop)
    solver = as_solver(solver, "modal").with_defaults(**DEFAULTS)
    if isinstance(solver, LevenbergMarquardt) and solver.max_step:
        raise FitError.bad(None, "max_step", solver.max_step, "the trust limit of the telemetry fit (identify); "
                           "the modal fit takes Levenberg-Marquardt's own steps (leave it None)")
    if not isinstance(acceptance, Acceptance):
        raise FitError(f"acceptance: expected an Acceptance, got {type(acceptance).__name__}", field="acceptance")
    starts = starts if isinstance(starts, Starts) else Starts(starts)
    tgt = targets if isinstance(targets, (ModalTargets, FeaTargets)) else ModalTargets(targets)
    fea = tgt.fea if isinstance(tgt, FeaTargets) else None
    loop.check_fit(scenario, boundary, fea, check)
    check = loop.default_check(scenario) if check is None else check
    if check and scenario.spacecraft.wheels is not None:
        raise FitError("check = True: the independent check (measure_modes) starts modes of a spacecraft without "
                       "reaction wheels; with wheels, fit with check = False (modes() is checked against the "
                       "simulator's Jacobian in the tests)", field="check", value=check)
    n_starts = _check_starts(starts.count, solver)
    reach_rtol = REACH_RTOL if acceptance.reach_rtol is None else acceptance.reach_rtol
    ident_rtol, warn_rtol = acceptance.ident_rtol, acceptance.warn_rtol
    frequency_sigma, damping_sigma = tgt.frequency_sigma, tgt.damping_sigma
    effective_mass_sigma = tgt.effective_mass_sigma if fea is not None else None
    if fea is None:
        tg = fit_targets(scenario, boundary, targets_hz=tgt.targets_hz, damping_ratios=tgt.damping_ratios,
                         mode_numbers=tgt.mode_numbers)
    else:
        tg = fit_targets(scenario, boundary, damping_ratios=tgt.damping_ratios, mode_numbers=tgt.mode_numbers,
                         fea=fea, fea_modes=tgt.fea_modes, reference_point=tgt.reference_point,
                         effective_mass_sigma=effective_mass_sigma, shapes=tgt.shapes)
    pb = build_problem(scenario, free, tg, boundary, frequency_sigma, damping_sigma, effective_mass_sigma, say,
                       loop, starts.bounds)
    U0 = start_points(pb.coords, n_starts, starts.bounds)
    pb = dataclasses.replace(pb, starts=U0)
    say(f"fit: {len(pb.coords)} free parameter(s), {pb.n_res} residual(s), solver {solver.name}"
        + (f", {n_starts} starts" if n_starts > 1 else "") + "; compiling and solving...")
    slv, report = solver.optimiser(), (None if progress is None else (lambda s: say(f"fit: {s}")))
    sols = solve_batch(pb.problem, U0, slv, max_steps=solver.max_steps, progress=report) if n_starts > 1 else \
        [solve(pb.problem, U0[0], slv, max_steps=solver.max_steps, progress=report)]
    sol, solutions, multi_notes = pick_solutions(sols, pb, tg, frequency_sigma, damping_sigma, reach_rtol,
                                                 ident_rtol)
    pb = dataclasses.replace(pb, notes=pb.notes + multi_notes)
    fitted = apply_coordinates(scenario, pb.coords, jnp.asarray(sol.u))
    measured = None
    if check:
        say("fit: independent check: simulating the fitted nonlinear model, one free response per mode...")
        measured = measure_modes(fitted, boundary)
    learning_rate = solver.learning_rate if isinstance(solver, Adam) else Adam().learning_rate
    options = {"solver": solver.name, "max_steps": solver.max_steps, "rtol": solver.rtol, "atol": solver.atol,
               "learning_rate": learning_rate, "reach_rtol": reach_rtol, "ident_rtol": ident_rtol,
               "warn_rtol": warn_rtol, "frequency_sigma": frequency_sigma, "damping_sigma": damping_sigma,
               "boundary": boundary.name, "effective_mass_sigma": effective_mass_sigma,
               "reference_point": tg.ref.tolist(), "loop": loop.name, "starts": n_starts}
    res = fit_result(scenario, tg, pb, sol, fitted, measured, options, boundary.name, reach_rtol, ident_rtol,
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


def _check_starts(count: int | None, solver: AbstractFitSolver) -> int:
    """The number of starts: `DEFAULT_STARTS` for the least-squares solver, 1 for the optax ones."""
    if count is None:
        return DEFAULT_STARTS if solver.multistart else 1
    if count > 1 and not solver.multistart:
        raise FitError.bad(None, "starts", count, f"the multi-start search runs the least-squares solver "
                           f"(solver = \"lm\"); solver = {solver.name!r} runs from the initial guess only (starts = 1)")
    return int(count)
