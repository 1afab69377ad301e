r"""Identify physical parameters and initial conditions from telemetry (time-domain least squares).

**The problem.** Telemetry (`jaxhinge.load_telemetry`: sample times $t_j$, measured columns $y_{jc}$ with
1-sigma noise $\sigma_c$) is compared with the model simulated at the same times (the scenario's loads,
pulses and known initial state; the free parameters set to the current iterate). The residuals are

$$r_{jc} = \frac{\hat y_c(t_j;\,p) - y_{jc}}{\sigma_c}$$

and $\chi^2 = \sum r^2$ is minimised by Levenberg-Marquardt (`optimistix.LevenbergMarquardt`; also `"dogleg"`,
`"gauss_newton"`) with forward-mode Jacobians through diffrax (`ForwardMode`). A simulation that fails inside
an iterate (step budget, non-finite state) gives residuals $10^6$ with zero derivative: the solver rejects
that step. Attitude columns are compared with the closer of the two MRP sets of the simulated attitude, per
sample.

**Free parameters, coordinates, uncertainties, identifiability** are those of the least-squares core
(`jaxhinge._analysis._lsq`, shared with the modal fit). Names are those of the parameter registry and the
dispersions: `"<panel>.<field>"`, `"hub.<field>"`; a vector field frees its 3 components (1-based like the
telemetry columns: `"hub.omega_BN_BInit[2]"` frees one); inertias are 3 positive scale factors, `dcm_HB` a
small rotation vector; `"p0.k = p1.k"` ties two scalars of one field. Positive quantities are fitted as
$\ln(p/p_0)$, signed ones linearly. The covariance is $s^2 (J^TJ)^{-1}$ with $s^2 = \chi^2/\mathrm{dof}$;
singular-value ratios of the column-scaled Jacobian below `ident_rtol` (default $10^{-6}$) mark combinations
the data do not determine (reported by name, e.g. `+1.00 log(p0.k) -1.00 log(p1.k)`; their parameters get
`sigma = inf`), below `warn_rtol` (default $10^{-2}$) poorly determined ones (e.g. identical panels seen only
through the hub rates).

**Long records.** `horizon = (0.3, 1.0)`: a growing horizon; fit the samples with $t \le 0.3\,t_{last}$ first,
then continue from that solution on the whole record (one compiled solver: later samples get weight 0).
**Multi-start**: `starts = N` extra starting points $u_0 + \mathrm{spread}\cdot U(-1, 1)$ (seeded), best
$\chi^2$ kept.
"""

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._io._files import _fmt
from .._io._telemetry import Telemetry, model_outputs, output_names
from .._model._scenario import Scenario, compile_key
from .._simulation._simulate import Trajectory, check_memory, simulate_unjitted
from ._lsq import (
    FAIL,
    AbstractResiduals,
    Coordinate,
    Coordinates,
    FitError,
    LeastSquaresResult,
    analyse,
    apply_coordinates,
    common_fields,
    make_solver,
    parse_free,
    solve,
)

__all__ = ["SOLVERS", "IdentifyResult", "identify"]

SOLVERS = ("lm", "dogleg", "gauss_newton")


# ------------------------------------------------------------------------------------------------------------
# Residuals (a pytree: one compiled solver per model structure, reused across data sets / starts)
# ------------------------------------------------------------------------------------------------------------


class _TelemetryResiduals(AbstractResiduals):
    scenario: Scenario  # label-free
    coordinates: Coordinates
    ts: Float[Array, " T"]
    data: Float[Array, "T C"]
    weight: Float[Array, "T C"]  # 1/sigma, 0 for samples outside the current horizon
    cols: tuple[int, ...] = eqx.field(static=True)  # indices into the model output matrix (static: the
    # program computes only the measured outputs, and their derivatives)
    n_panels: int = eqx.field(static=True)

    def __call__(self, u):
        traj = simulate_unjitted(self.coordinates.apply(self.scenario, u), diffrax.ForwardMode(), ts=self.ts)
        y = self.outputs(traj)
        # samples outside the horizon (weight 0) stay 0 even where the model is not finite
        r = jnp.where(self.weight > 0, (y - self.data) * self.weight, 0.0)
        return r.reshape(-1), traj.success, y

    def outputs(self, traj: Trajectory) -> Float[Array, "T C"]:
        """The measured columns of a trajectory at the sample times (the closer MRP set per sample)."""
        full = model_outputs(traj, self.n_panels)
        s = traj.sigma_BN
        shadow = -s / jnp.sum(s * s, axis=1, keepdims=True).clip(1e-300)
        full_b = jnp.concatenate([full[:, :3], shadow, full[:, 6:]], axis=1)
        a, b = (jnp.stack([x[:, c] for c in self.cols], axis=1) for x in (full, full_b))
        # either MRP set of the attitude matches the data: take the closer one per sample
        cost = lambda y: jnp.sum(((y - self.data) * self.weight) ** 2, axis=1)
        return jnp.where((cost(a) <= cost(b))[:, None], a, b)


def _problem(scenario: Scenario, telemetry: Telemetry, coords: Sequence[Coordinate]) -> _TelemetryResiduals:
    names = output_names(scenario)
    cols = np.array([names.index(c) for c in telemetry.columns])
    w = np.broadcast_to(1.0 / telemetry.sigma, telemetry.values.shape).copy()
    return _TelemetryResiduals(scenario=compile_key(scenario), coordinates=Coordinates(coords),
                               ts=jnp.asarray(telemetry.t), data=jnp.asarray(telemetry.values), weight=jnp.asarray(w),
                               cols=tuple(int(c) for c in cols), n_panels=scenario.spacecraft.panels.count)


# ------------------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class IdentifyResult(LeastSquaresResult):
    """The outcome of `identify`: the fields every fit shares (`LeastSquaresResult`; `iterations` counts all
    stages and starts, `history` is the best start's) and:

    - `telemetry`; `fitted` (T, C) simulated outputs at the sample times; `residuals` (T, C) in units of
      sigma; `initial_fitted` (T, C) at the initial guess.
    - `starts`: per start `{"chi2", "status", "steps", "initial"}`.
    """

    telemetry: Telemetry
    fitted: np.ndarray
    residuals: np.ndarray
    initial_fitted: np.ndarray
    starts: list


# ------------------------------------------------------------------------------------------------------------
# identify
# ------------------------------------------------------------------------------------------------------------


def identify(
    scenario: Scenario,
    telemetry: Telemetry,
    free: Sequence[str],
    *,
    solver: str = "lm",
    max_steps: int = 100,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    starts: int = 1,
    spread: float = 0.3,
    seed: int = 0,
    horizon: Sequence[float] = (1.0,),
    ident_rtol: float = 1e-6,
    warn_rtol: float = 1e-2,
    progress: Callable[[str], None] | None = None,
) -> IdentifyResult:
    """Fit the `free` parameters of `scenario` to `telemetry` (see the module docstring).

    **Arguments:** `scenario` (the free parameters' values are the initial guesses; loads, pulses and the
    other initial conditions are known), `telemetry` (`load_telemetry` / `telemetry_from_arrays`), `free`
    (names), `solver` (`"lm"` default, `"dogleg"`, `"gauss_newton"`), `max_steps` per stage and start,
    `rtol`/`atol` (solver termination), `starts` (>= 1; the first is the scenario's guess, the others
    spread by `spread` in the fitted coordinates, seeded by `seed`), `horizon` (growing-horizon fractions of
    the record, last 1.0), `ident_rtol`/`warn_rtol` (identifiability thresholds), `progress` (a callable
    receiving one-line messages).

    **Returns:** an `IdentifyResult`. Bad input raises `FitError` before any compute; numerical failure is
    reported in the result (`converged`, `message`), not raised.
    """
    t_start = time.perf_counter()
    if not isinstance(scenario, Scenario):
        raise FitError(f"scenario: expected a jaxhinge Scenario, got {type(scenario).__name__}", field="scenario")
    names = output_names(scenario)
    for c in telemetry.columns:
        if c not in names:
            raise FitError(f"{telemetry.source}: column {c!r} is not an output of the scenario; outputs: "
                           f"{', '.join(names)}", field="data.columns")
    t_end = float(scenario.simulation.t_end)
    if telemetry.t[0] < -1e-9 * max(1, t_end) or telemetry.t[-1] > t_end * (1 + 1e-9):
        raise FitError(f"{telemetry.source}: samples span [{_fmt(telemetry.t[0])}, {_fmt(telemetry.t[-1])}] s, outside "
                       f"the scenario's [0, {_fmt(t_end)}] s", field="data")
    if solver not in SOLVERS:
        raise FitError(f"fit.solver = {solver!r}: allowed values are {', '.join(SOLVERS)}", field="fit.solver")
    for k, v in (("max_steps", max_steps), ("starts", starts)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise FitError(f"fit.{k} = {_fmt(v)}: must be an integer >= 1", field=f"fit.{k}")
    for k, v in (("rtol", rtol), ("atol", atol), ("spread", spread), ("ident_rtol", ident_rtol),
                 ("warn_rtol", warn_rtol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise FitError(f"fit.{k} = {_fmt(v)}: must be a finite number > 0", field=f"fit.{k}")
    hz = list(horizon) if not isinstance(horizon, (int, float)) else [horizon]
    if not hz or any(isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h <= 1 for h in hz) or \
            any(b <= a for a, b in itertools.pairwise(hz)) or hz[-1] != 1:
        raise FitError(f"fit.horizon = {_fmt(horizon)}: must be increasing fractions in (0, 1] ending with 1, e.g. "
                       "[0.25, 0.5, 1.0]", field="fit.horizon")
    coords = parse_free(scenario, free)
    P = len(coords)
    check_memory(scenario.simulation, scenario.spacecraft.panels.count, P + 1, samples=len(telemetry.t))
    n_res = telemetry.values.size
    if n_res <= P:
        raise FitError(f"{n_res} residual(s) for {P} free parameter(s): need more samples or columns than free "
                       "parameters", field="fit.free")
    say = progress or (lambda s: None)
    base = _problem(scenario, telemetry, coords)
    w_full = base.weight
    t_rel = telemetry.t - telemetry.t[0]
    span = max(t_rel[-1], 1e-300)
    slv = make_solver(solver, rtol, atol)
    rng = np.random.default_rng(seed)
    u_starts = [np.zeros(P)] + [rng.uniform(-spread, spread, P) for _ in range(starts - 1)]
    runs, solve_s = [], 0.0
    for si, u0 in enumerate(u_starts):
        u, history, steps, r_init = u0, [], 0, None
        for h in hz:
            mask = (t_rel <= h * span * (1 + 1e-12))[:, None]
            prob = eqx.tree_at(lambda p: p.weight, base, jnp.where(jnp.asarray(mask), w_full, 0.0))
            stage = f"identify: start {si + 1}/{starts}, horizon {h:g}"
            sol = solve(prob, u, slv, max_steps=max_steps,
                        progress=lambda s, stage=stage: say(f"{stage}: {s}"))
            if h == 1 and steps == 0:
                r_init = sol.initial_residuals
            u = sol.u
            history.append(sol.history)
            steps += sol.steps
            solve_s += sol.wall_s
            say(f"{stage}: {sol.steps} steps, chi2 {sol.chi2:.6g} ({int(mask.sum())} samples), {sol.status}")
        runs.append({"sol": sol, "r_init": r_init, "steps": steps, "u0": u0,
                     "history": np.concatenate(history)})
    finite = [r for r in runs if np.isfinite(r["sol"].chi2)]
    best = min(finite or runs, key=lambda r: r["sol"].chi2)
    sol = best["sol"]  # its last stage fits the whole record: the residuals and Jacobian at the solution
    r, J = sol.residuals, sol.jacobian
    # the model outputs at the solution and at the initial guess, from the residuals there (full weights)
    r_init = runs[0]["r_init"]
    if r_init is None:  # the first stage fitted a shorter horizon: one step on the whole record (same program)
        r_init = solve(base, np.zeros(P), slv, max_steps=1).initial_residuals
    ok = not np.all(r == FAIL)
    shape = telemetry.values.shape
    fitted, fitted0 = (telemetry.values + np.where(x == FAIL, np.nan, x).reshape(shape) / np.asarray(w_full)
                       for x in (r, r_init))
    a = analyse(J, r, coords, ident_rtol=ident_rtol, warn_rtol=warn_rtol)
    converged = sol.converged and ok
    notes = []
    if not ok:
        notes.append("the simulation of the fitted model failed (step budget or non-finite state)")
    elif not converged:
        notes.append(f"the solver stopped without converging ({sol.status}); raise max_steps or try "
                     "starts > 1 / a growing horizon")
    if a.undetermined:
        notes.append("not identifiable from these data: " + "; ".join(d["description"] for d in a.undetermined))
    if a.poorly_determined:
        notes.append("poorly determined (cond(J^T J) = " + f"{a.condition_number:.3g}): "
                     + "; ".join(d["description"] for d in a.poorly_determined))
    if a.chi2 / max(a.dof, 1) > 4:
        notes.append(f"chi2/dof = {a.chi2 / max(a.dof, 1):.3g} >> 1: the model does not explain the data "
                     "within the stated sigma (wrong model, wrong sigma, or a local minimum)")
    message = ("converged" if converged else "not converged") + (": " + "; ".join(notes) if notes else "")
    sigma_note = (f"Gauss-Newton covariance s^2 (J^T J)^-1 of the residuals / sigma, s^2 = chi^2/dof = {a.s2:.4g} "
                  f"(dof = {a.dof})")
    options = {"solver": solver, "max_steps": max_steps, "rtol": rtol, "atol": atol, "starts": starts,
               "spread": spread, "seed": seed, "horizon": hz, "ident_rtol": ident_rtol, "warn_rtol": warn_rtol}
    return IdentifyResult(
        **common_fields(coords, sol.u, a, sigma_note=sigma_note, converged=converged, status=sol.status,
                        message=message, iterations=sum(x["steps"] for x in runs),
                        scenario=apply_coordinates(scenario, coords, sol.u),
                        solver=solver, options=options, history=best["history"],
                        wall_s=time.perf_counter() - t_start, solve_s=solve_s),
        telemetry=telemetry,
        fitted=fitted,
        residuals=r.reshape(shape),
        initial_fitted=fitted0,
        starts=[{"chi2": x["sol"].chi2, "status": x["sol"].status, "steps": x["steps"],
                 "initial": [float(c.value(x["u0"][j])) for j, c in enumerate(coords)]} for x in runs],
    )
