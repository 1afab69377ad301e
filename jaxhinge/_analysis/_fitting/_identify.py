r"""Identify physical parameters and initial conditions from telemetry (time-domain least squares).

**The problem.** Telemetry (`jaxhinge.load_telemetry`: sample times $t_j$, measured columns $y_{jc}$ with
1-sigma noise $\sigma_c$) is compared with the model simulated at the same times (the scenario's loads,
pulses and known initial state; the free parameters set to the current iterate). The residuals are

$$r_{jc} = \frac{\hat y_c(t_j;\,p) - y_{jc}}{\sigma_c}$$

and $\chi^2 = \sum r^2$ is minimised by Levenberg-Marquardt (`LevenbergMarquardt()`; also `Dogleg()`,
`GaussNewton()`: `_solvers`) with forward-mode Jacobians through diffrax (`ForwardMode`). A simulation that fails inside
an iterate (step budget, non-finite state) gives residuals $10^6$ with zero derivative: the solver rejects
that step. Attitude columns are compared with the closer of the two MRP sets of the simulated attitude, per
sample.

**Free parameters, coordinates, uncertainties, identifiability** are those of the least-squares core
(`jaxhinge._analysis._lsq_*`, shared with the modal fit). Names are those of the parameter registry and the
dispersions: `"<panel>.<field>"`, `"hub.<field>"`; a vector field frees its 3 components (1-based like the
telemetry columns: `"hub.omega_BN_BInit[2]"` frees one); inertias are 3 positive scale factors, `dcm_HB` a
small rotation vector; `"p0.k = p1.k"` ties two scalars of one field. Positive quantities are fitted as
$\ln(p/p_0)$, signed ones linearly. The covariance is $s^2 (J^TJ)^{-1}$ with $s^2 = \chi^2/\mathrm{dof}$;
singular-value ratios of the column-scaled Jacobian below `ident_rtol` (default $10^{-6}$) mark combinations
the data do not determine (reported by name, e.g. `+1.00 log(p0.k) -1.00 log(p1.k)`; their parameters get
`sigma = inf`), below `warn_rtol` (default $10^{-2}$) poorly determined ones (e.g. identical panels seen only
through the hub rates).

**Long records.** Multiple shooting (`shooting="auto"`, the default where the record spans at least 4 periods of
the slowest flexible mode and can be cut into segments; `_shooting`): segments integrated side by side, continuity
as residuals, then as constraints; the result is single shooting's at the fitted values. Otherwise single shooting
with a growing horizon, `horizon = (0.3, 1.0)`: fit the samples with $t \le 0.3\,t_{last}$ first, then continue
from that solution on the whole record (one compiled solver: later samples get weight 0, and no step is
integrated after the stage's last sample). The default `"auto"` chooses the fractions from the model's fastest mode
(`auto_horizon`); `LevenbergMarquardt()` takes bounded Gauss-Newton steps (`max_step`,
`_lsq.BoundedGaussNewton`). `dt="auto"`: the coarsest rk4 step checked to move no fitted value by 0.1 sigma
(`_fit_step`).

**Sensor models and records.** A column is measured as $(1 + \mathrm{scale})\,y(t + \mathrm{time\_offset}) +
\mathrm{bias}$ (names `"<column>.bias"`, `"<column>.scale"`, `"time_offset"`: fixed by `sensors=`, or free); several
records (a list of telemetries, one scenario each) share the physical coordinates, each has its own sensor models
and (`estimate_initial_state`) initial state; their residuals are concatenated (`_JointResiduals`; records of one
structure, e.g. equal lengths and columns, run as one simulation vmapped over them: one compiled model).
**Multi-start**: `RandomStarts(count=N)`: N - 1 extra starting points $u_0 + \mathrm{spread}\cdot U(-1, 1)$ (seeded), best
$\chi^2$ kept.
"""

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._scenario import Scenario, compile_key
from ..._model._telemetry import Telemetry, output_names
from ..._simulation._memory import check_memory
from ..._simulation._simulate import simulate_unjitted
from ..._simulation._telemetry import model_outputs
from ..._simulation._trajectory import Trajectory
from ._fit_options import Acceptance, RandomStarts
from ._fit_step import richardson
from ._lsq_analysis import LeastSquaresResult, analyse, common_fields
from ._lsq_coords import Coordinate, Coordinates, apply_coordinates
from ._lsq_solver import FAIL, AbstractResiduals, solve
from ._records import parse_records
from ._shooting import (
    FitRun,
    MultipleShooting,
    SingleShooting,
    as_shooting,
    auto_horizon,
    check_horizon,
    choose_shooting,
    worse_than_start,
)
from ._solvers import AbstractFitSolver, LevenbergMarquardt, as_solver, solvers_of

__all__ = ["SOLVERS", "IdentifyResult", "auto_horizon", "check_identify", "identify", "worse_than_start"]

SOLVERS = solvers_of("telemetry")
DEFAULTS = {"rtol": 1e-8, "atol": 1e-8, "max_steps": 100, "max_step": 0.5}  # the solver settings left None


# ------------------------------------------------------------------------------------------------------------
# Residuals (a pytree: one compiled solver per model structure, reused across data sets / starts)
# ------------------------------------------------------------------------------------------------------------


class _TelemetryResiduals(AbstractResiduals):
    """One record's residuals. `index`: the global coordinates that set this record's model (`coordinates`);
    `sensor`: the global coordinates of its sensor model (linear: `sx0 + sscale * u`), `bias_at`/`gain_at`
    (per column) and `offset_at` index into them (-1: the fixed value `bias`/`gain`/`offset`)."""

    scenario: Scenario  # label-free
    coordinates: Coordinates
    ts: Float[Array, " T"]
    data: Float[Array, "T C"]
    weight: Float[Array, "T C"]  # 1/sigma, 0 for samples outside the current horizon
    t_stop: Float[Array, ""]  # the last sample the horizon weighs [s] (inf: all): no step after it
    bias: Float[Array, " C"]
    gain: Float[Array, " C"]  # the scale-factor error (measured = (1 + gain) * model + bias)
    offset: Float[Array, ""]
    sx0: Float[Array, " K"]
    sscale: Float[Array, " K"]
    cols: tuple[int, ...] = eqx.field(static=True)  # indices into the model output matrix (static: the
    # program computes only the measured outputs, and their derivatives)
    index: Int[Array, " M"]  # arrays, not static: records of one structure share one vmapped simulation
    sensor: Int[Array, " K"]
    n_panels: int = eqx.field(static=True)
    bias_at: tuple[int, ...] = eqx.field(static=True)
    gain_at: tuple[int, ...] = eqx.field(static=True)
    offset_at: int = eqx.field(static=True)

    def __call__(self, u):
        sc = self.model(u)
        gain, bias, tau = self.sensors(u)
        # the time offset (fitted or fixed; 0 leaves the sample times exact) samples the model at t + offset
        ts = jnp.clip(self.ts + tau, 0.0, sc.simulation.t_end)
        # no step after the last weighed sample (at its shifted time, one step's margin for rounding)
        traj = simulate_unjitted(sc, diffrax.ForwardMode(), ts=ts, t_stop=self.t_stop + tau + sc.simulation.dt)
        y = self.outputs(traj, gain, bias)
        # samples outside the horizon (weight 0) stay 0 even where the model is not finite
        r = jnp.where(self.weight > 0, (y - self.data) * self.weight, 0.0)
        return r.reshape(-1), traj.success, y

    def model(self, u) -> Scenario:
        """The record's model at the coordinates `u`."""
        return self.coordinates.apply(self.scenario, u[self.index])

    def sensors(self, u):
        """`(gain (C,), bias (C,), time offset)` of the record's sensor model at the coordinates `u` (fitted or
        fixed values; the gain is 1 + the scale-factor error)."""
        sv = self.sx0 + self.sscale * u[self.sensor]
        pick = lambda at, fixed: jnp.stack([sv[j] if j >= 0 else fixed[c] for c, j in enumerate(at)])
        tau = sv[self.offset_at] if self.offset_at >= 0 else self.offset
        return 1.0 + pick(self.gain_at, self.gain), pick(self.bias_at, self.bias), tau

    def outputs(self, traj: Trajectory, gain=1.0, bias=0.0, data=None, weight=None) -> Float[Array, "T C"]:
        """The measured columns of a trajectory at the sample times (the closer MRP set per sample, to `data`
        weighted by `weight`: default the record's), through the sensor model `gain * y + bias` (per column)."""
        data = self.data if data is None else data
        weight = self.weight if weight is None else weight
        full = model_outputs(traj, self.n_panels)
        s = traj.sigma_BN
        shadow = -s / jnp.sum(s * s, axis=1, keepdims=True).clip(1e-300)
        full_b = jnp.concatenate([full[:, :3], shadow, full[:, 6:]], axis=1)
        a, b = (gain * jnp.stack([x[:, c] for c in self.cols], axis=1) + bias for x in (full, full_b))
        # either MRP set of the attitude matches the data: take the closer one per sample
        cost = lambda y: jnp.sum(((y - data) * weight) ** 2, axis=1)
        return jnp.where((cost(a) <= cost(b))[:, None], a, b)


class _JointResiduals(AbstractResiduals):
    """Several records fitted together: their residuals concatenated (shared and per-record coordinates)."""

    records: tuple[_TelemetryResiduals, ...]

    def __call__(self, u):
        recs = self.records
        shapes = [(jax.tree.leaves(jax.tree.map(lambda x: (x.shape, x.dtype), eqx.filter(r, eqx.is_array))),
                   jax.tree.leaves(eqx.filter(r, eqx.is_array, inverse=True))) for r in recs]
        if len(recs) > 1 and all(jax.tree.structure(r) == jax.tree.structure(recs[0]) for r in recs) and \
                all(s == shapes[0] for s in shapes):
            # records of one structure (same static fields and shapes): one simulation vmapped over them, so
            # the compiled program holds one copy of the differentiated model, not one per record
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs) if eqx.is_array(xs[0]) else xs[0], *recs)
            params, static = eqx.partition(stacked, eqx.is_array)
            r, ok, y = jax.vmap(lambda p: eqx.combine(p, static)(u))(params)
            return r.reshape(-1), jnp.all(ok), tuple(y[k] for k in range(len(recs)))
        out = [rec(u) for rec in recs]
        ok = jnp.all(jnp.stack([jnp.asarray(o[1]) for o in out]))
        return jnp.concatenate([o[0] for o in out]), ok, tuple(o[2] for o in out)


def _problem(scenario: Scenario, telemetry: Telemetry, coords: Sequence[Coordinate]) -> _TelemetryResiduals:
    """One record's residuals with every coordinate setting its model (no sensor model)."""
    return _record_problem(scenario, telemetry, coords, tuple(range(len(coords))), {}, [])


def _record_problem(scenario, telemetry, model_coords, index, fixed, sensor_coords) -> _TelemetryResiduals:
    """One record's residuals: `model_coords` (global indices `index`) set its model; `fixed`: {(kind, column)
    -> value} its fixed sensor values; `sensor_coords`: [(global index, Coordinate, _Sensor)] its free ones."""
    names = output_names(scenario)
    cols = np.array([names.index(c) for c in telemetry.columns])
    w = np.broadcast_to(1.0 / telemetry.sigma, telemetry.values.shape).copy()
    C = len(telemetry.columns)
    bias = np.array([fixed.get(("bias", c), 0.0) for c in telemetry.columns], dtype=float).reshape(C)
    gain = np.array([fixed.get(("scale", c), 0.0) for c in telemetry.columns], dtype=float).reshape(C)
    at = {(sen.kind, sen.column): j for j, (_, _, sen) in enumerate(sensor_coords)}
    sx0 = np.array([c.x0 for _, c, _ in sensor_coords], dtype=float).reshape(len(sensor_coords))
    ss = np.array([c.scale for _, c, _ in sensor_coords], dtype=float).reshape(len(sensor_coords))
    return _TelemetryResiduals(
        scenario=compile_key(scenario), coordinates=Coordinates(model_coords), ts=jnp.asarray(telemetry.t),
        data=jnp.asarray(telemetry.values), weight=jnp.asarray(w), t_stop=jnp.asarray(np.inf),
        bias=jnp.asarray(bias), gain=jnp.asarray(gain),
        offset=jnp.asarray(float(fixed.get(("time_offset", None), 0.0))), sx0=jnp.asarray(sx0),
        sscale=jnp.asarray(ss), cols=tuple(int(c) for c in cols), n_panels=scenario.spacecraft.panels.count,
        index=jnp.asarray(np.asarray(index, dtype=int).reshape(len(index))),
        sensor=jnp.asarray(np.array([g for g, _, _ in sensor_coords], dtype=int).reshape(len(sensor_coords))),
        bias_at=tuple(at.get(("bias", c), -1) for c in telemetry.columns),
        gain_at=tuple(at.get(("scale", c), -1) for c in telemetry.columns),
        offset_at=at.get(("time_offset", None), -1))


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
    - `records`: per record `{"telemetry", "fitted", "residuals", "initial_fitted"}` (several records; the
      fields above are the first's). `fitted` includes the sensor model.
    - `shooting`: `{"method": "single", "horizon": [...]}` or, by multiple shooting, `{"method": "multiple",
      "segments", "segment_s", "continuity_rtol", "steps": {"penalty", "condensed"}, "max_defect" (the largest
      continuity defect at the solution, relative to its sigma), "max_defect_abs" (per state component)}`.
    - `integration`: `{"dt": the rk4 step [s]}`; with `dt="auto"` also `"tolerance_sigma"` and `"pairs"`, the
      Richardson checks made (`_fit_step.richardson`).
    """

    telemetry: Telemetry
    fitted: np.ndarray
    residuals: np.ndarray
    initial_fitted: np.ndarray
    starts: list
    records: list = dataclasses.field(default_factory=list)
    shooting: dict = dataclasses.field(default_factory=dict)
    integration: dict = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------------------------------------------------
# identify
# ------------------------------------------------------------------------------------------------------------

def check_identify(
    scenario: Scenario | Sequence[Scenario],
    telemetry: Telemetry | Sequence[Telemetry],
    free: Sequence[str],
    *,
    sensors: Mapping[str, float] | None = None,
    estimate_initial_state: bool = False,
    shooting: SingleShooting | MultipleShooting | str = "auto",
):
    """Every check of `identify`'s model, records, free list and shooting, before any compute (the FIT.toml loader
    calls it too). Returns `(scenarios, telemetries, coordinates, records)` (one scenario per record; `records` as
    `_parse`'s). Raises `FitError`, one line."""
    tels = [telemetry] if isinstance(telemetry, Telemetry) else list(telemetry)
    R = len(tels)
    if not R or not all(isinstance(x, Telemetry) for x in tels):
        raise FitError("telemetry: expected a Telemetry or a non-empty list of them", field="telemetry")
    scens = [scenario] * R if isinstance(scenario, Scenario) else list(scenario)
    if len(scens) != R or not all(isinstance(x, Scenario) for x in scens):
        raise FitError(f"scenario: expected a jaxhinge Scenario (or one per record: {R}), got "
                       f"{type(scenario).__name__}", field="scenario")
    for k, (sc, tel) in enumerate(zip(scens, tels)):
        if sc.spacecraft.panels.labels != scens[0].spacecraft.panels.labels:
            raise FitError(f"data[{k + 1}]: its scenario's panels {', '.join(sc.spacecraft.panels.labels)} differ "
                           f"from the first's ({', '.join(scens[0].spacecraft.panels.labels)}): records share one "
                           "model", field="scenario")
        names = output_names(sc)
        for c in tel.columns:
            if c not in names:
                raise FitError(f"{tel.source}: column {c!r} is not an output of the scenario; outputs: "
                               f"{', '.join(names)}", field="columns")
        t_end = float(sc.simulation.t_end)
        if tel.t[0] < -1e-9 * max(1, t_end) or tel.t[-1] > t_end * (1 + 1e-9):
            raise FitError(f"{tel.source}: samples span [{_fmt(tel.t[0])}, {_fmt(tel.t[-1])}] s, outside "
                           f"the scenario's [0, {_fmt(t_end)}] s", field="telemetry")
    if not isinstance(estimate_initial_state, bool):
        raise FitError(f"estimate_initial_state = {_fmt(estimate_initial_state)}: must be true or false",
                       field="estimate_initial_state")
    coords, parts = parse_records(scens, tels, free, sensors, estimate_initial_state)
    P = len(coords)
    for sc, tel in zip(scens, tels):
        check_memory(sc.simulation, sc.spacecraft.panels.count, P + 1, samples=len(tel.t))
    n_res = sum(tel.values.size for tel in tels)
    if n_res <= P:
        raise FitError(f"{n_res} residual(s) for {P} free parameter(s): need more samples or columns than free "
                       "parameters", field="free")
    if as_shooting(shooting) != "auto":  # ("auto" chooses from the model's modes: in `identify`)
        choose_shooting(shooting, scens, tels, parts)
    return scens, tels, coords, parts


def identify(
    scenario: Scenario | Sequence[Scenario],
    telemetry: Telemetry | Sequence[Telemetry],
    free: Sequence[str],
    *,
    solver: AbstractFitSolver | str = LevenbergMarquardt(),
    starts: RandomStarts | int = RandomStarts(),
    horizon: Sequence[float] | str = "auto",
    sensors: Mapping[str, float] | None = None,
    estimate_initial_state: bool = False,
    acceptance: Acceptance = Acceptance(),
    progress: Callable[[str], None] | None = None,
    shooting: SingleShooting | MultipleShooting | str = "auto",
    dt: str | None = None,
) -> IdentifyResult:
    """Fit the `free` parameters of `scenario` to `telemetry` (see the module docstring).

    **Arguments:**

    - `scenario`: the model (the free parameters' values are the initial guesses; loads, pulses and the other
      initial conditions are known); a list: one model per record, same structure, the shared free parameters'
      guesses from the first.
    - `telemetry`: `load_telemetry` / `telemetry_from_arrays`; a list: several records fitted together.
    - `free`: registry names shared by every record, `"data[k]."`-prefixed names for record k alone, sensor models
      `"<column>.bias"`, `"<column>.scale"`, `"time_offset"`, one per record.
    - `solver`: `LevenbergMarquardt()` (default; `max_step`, default 0.5: the largest change of any fitted model
      coordinate in one step, the first trust radius; 0: optimistix's unbounded Levenberg-Marquardt), `Dogleg()`,
      `GaussNewton()`, with `rtol`/`atol` (termination, default 1e-8) and `max_steps` (per stage and start, default
      100); or their names `"lm"`, `"dogleg"`, `"gauss_newton"`.
    - `starts`: `RandomStarts(count, spread, seed)` (the first start is the scenario's guess, the others spread by
      `spread` in the fitted coordinates, seeded by `seed`); an integer is `RandomStarts(count)`.
    - `horizon`: growing-horizon fractions of the record, last 1.0; `"auto"`: `auto_horizon`.
    - `sensors`: fixed sensor-model values, or the initial guesses of free ones, by the same names.
    - `estimate_initial_state`: free each record's `hub.omega_BN_BInit` and every panel's `thetaInit`,
      `thetaDotInit`.
    - `acceptance`: `Acceptance(ident_rtol=..., warn_rtol=...)`, the identifiability thresholds (`reach_rtol` is
      the modal fit's).
    - `progress`: a callable receiving one-line messages.
    - `shooting`: `"auto"` (default: multiple shooting for a record long compared with the slowest mode,
      `choose_shooting`), `"single"` / `SingleShooting()` (the whole record from the initial state, with the
      growing `horizon`), `"multiple"` / `MultipleShooting(segment=..., continuity_rtol=...)` (`_shooting`).
    - `dt`: `None` (default): the scenario's integrator and step, as given; `"auto"` (rk4): the coarsest step
      whose truncation error moves no fitted value by 0.1 sigma, checked by a Richardson pair (`_fit_step`).

    **Returns:** an `IdentifyResult`. Bad input raises `FitError` before any compute; numerical failure is
    reported in the result (`converged`, `message`), not raised.
    """
    t_start = time.perf_counter()
    if dt is not None:
        return _identify_auto_dt(scenario, telemetry, free, dt, t_start, solver=solver, starts=starts,
                                 horizon=horizon, sensors=sensors, estimate_initial_state=estimate_initial_state,
                                 acceptance=acceptance, progress=progress, shooting=shooting)
    solver = as_solver(solver, "telemetry").with_defaults(**DEFAULTS)
    starts = starts if isinstance(starts, RandomStarts) else RandomStarts(starts)
    if not isinstance(acceptance, Acceptance):
        raise FitError(f"acceptance: expected an Acceptance, got {type(acceptance).__name__}", field="acceptance")
    if acceptance.reach_rtol is not None:
        raise FitError.bad(None, "reach_rtol", acceptance.reach_rtol, "applies to the modal fit (fit) only")
    ident_rtol, warn_rtol = acceptance.ident_rtol, acceptance.warn_rtol
    max_steps, rtol, atol = solver.max_steps, solver.rtol, solver.atol
    max_step = solver.max_step if isinstance(solver, LevenbergMarquardt) else DEFAULTS["max_step"]
    hz = check_horizon(horizon)
    scens, tels, coords, parts = check_identify(scenario, telemetry, free, sensors=sensors,
                                                estimate_initial_state=estimate_initial_state, shooting=shooting)
    P = len(coords)
    shoot = choose_shooting(shooting, scens, tels, parts, solver)
    say = progress or (lambda s: None)
    base = _JointResiduals(tuple(
        _record_problem(scens[k], tels[k], mc, idx, fx, sc_) for k, (idx, mc, fx, sc_) in enumerate(parts)))
    # bias and scale enter linearly: their steps are bounded only by the trust region's shrinking
    slv = solver.optimiser(trust=tuple(1e3 if c.field in ("bias", "scale") else 1.0 for c in coords))
    starts, spread, seed = starts.count, starts.spread, starts.seed
    rng = np.random.default_rng(seed)
    u_starts = [np.zeros(P)] + [rng.uniform(-spread, spread, P) for _ in range(starts - 1)]
    fit = FitRun(scens, tels, base, coords, slv, max_steps, rtol, atol, max_step, hz, starts, say)
    prepared = shoot.prepare(fit, u_starts[0])
    hz = prepared if isinstance(shoot, SingleShooting) else [1.0]  # (multiple: the segments take it at once)
    runs = [shoot.run(fit, prepared, si, u0) for si, u0 in enumerate(u_starts)]
    solve_s = sum(run["wall"] for run in runs)
    finite = [r for r in runs if np.isfinite(r["sol"].chi2)]
    best = min(finite or runs, key=lambda r: r["sol"].chi2)
    sol = best["sol"]  # its last stage fits the whole record: the residuals and Jacobian at the solution
    r, J = sol.residuals, sol.jacobian
    # the model outputs at the solution and at the initial guess, from the residuals there (full weights)
    r_init = runs[0]["r_init"]
    if r_init is None:  # the first stage fitted a shorter horizon: one step on the whole record (same program)
        r_init = solve(base, np.zeros(P), slv, max_steps=1).initial_residuals
    ok = not np.all(r == FAIL)
    per_record = []
    at = 0
    for tel, w in zip(tels, [rec.weight for rec in base.records]):
        n = tel.values.size
        shape = tel.values.shape
        fitted, fitted0 = (tel.values + np.where(x[at:at + n] == FAIL, np.nan, x[at:at + n]).reshape(shape)
                           / np.asarray(w) for x in (r, r_init))
        per_record.append({"telemetry": tel, "fitted": fitted, "residuals": r[at:at + n].reshape(shape),
                           "initial_fitted": fitted0})
        at += n
    a = analyse(J, r, coords, ident_rtol=ident_rtol, warn_rtol=warn_rtol)
    converged = sol.converged and ok
    notes = []
    if not ok:
        notes.append("the simulation of the fitted model failed (step budget or non-finite state)")
    elif not converged:
        notes.append(f"the solver stopped without converging ({sol.status}); raise max_steps or try "
                     "starts > 1 / a growing horizon")
    fb = best["shooting"].get("fallback")
    if fb:
        notes.append(f"multiple shooting ended worse than its start ({fb['reason']}): this is single shooting's "
                     "fit from the same start (the fall-back)")
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
    options = {"solver": solver.name, "max_steps": max_steps, "rtol": rtol, "atol": atol, "starts": starts,
               "spread": spread, "seed": seed, "horizon": hz, "max_step": max_step,
               "estimate_initial_state": estimate_initial_state, "sensors": dict(sensors or {}), "ident_rtol": ident_rtol, "warn_rtol": warn_rtol}
    integration = {"dt": float(scens[0].simulation.dt)} if scens[0].simulation.integrator.fixed_step else {}
    return IdentifyResult(
        **common_fields(coords, sol.u, a, sigma_note=sigma_note, converged=converged, status=sol.status,
                        message=message, iterations=sum(x["steps"] for x in runs),
                        scenario=apply_coordinates(scens[0], parts[0][1], sol.u[np.asarray(parts[0][0], int)]),
                        solver=solver.name, options=options, history=best["history"],
                        wall_s=time.perf_counter() - t_start, solve_s=solve_s),
        **per_record[0],
        records=per_record,
        shooting=best["shooting"],
        integration=integration,
        starts=[{"chi2": x["sol"].chi2, "status": x["sol"].status, "steps": x["steps"],
                 "initial": [float(c.value(x["u0"][j])) for j, c in enumerate(coords)]} for x in runs],
    )


def _identify_auto_dt(scenario, telemetry, free, dt, t_start, **kwargs) -> IdentifyResult:
    """`identify(dt="auto")`: the fit at the step `_fit_step.richardson` accepts, with its report."""
    if dt != "auto":
        raise FitError.bad(None, "dt", dt, 'must be "auto" (or left out: the scenario\'s own step)')
    scens = [scenario] if isinstance(scenario, Scenario) else list(scenario)
    if not all(isinstance(x, Scenario) and x.simulation.integrator.fixed_step for x in scens):
        raise FitError.bad(None, "dt", dt, 'needs the scenario\'s integrator "rk4" (adaptive integrators choose their '
                           "own steps)")
    tels = [telemetry] if isinstance(telemetry, Telemetry) else list(telemetry)
    say = kwargs.get("progress") or (lambda s: None)

    def fit(sc):
        h = sc.simulation.dt
        say(f"identify (dt = \"auto\"): fitting at dt = {_fmt(h)} s")
        per = sc if isinstance(scenario, Scenario) else [x.with_simulation(dt=h) for x in scens]
        return identify(per, telemetry, free, **kwargs)

    result, report = richardson(scens[0], tels, fit)
    for p in report["pairs"]:
        say(f"identify (dt = \"auto\"): dt = {_fmt(p['dt'])} s against {_fmt(p['checked_with'])} s: largest "
            f"change {p['max_error_sigma']:.3g} sigma ({'accepted' if p['accepted'] else 'too large'})")
    message = result.message + ("; " + report["note"] if "note" in report else "")
    return dataclasses.replace(result, integration=report, message=message,
                               wall_s=time.perf_counter() - t_start)
