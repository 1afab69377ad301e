r"""Identify physical parameters and initial conditions from telemetry (time-domain least squares).

**The problem.** Telemetry (`jaxhinge.load_telemetry`: sample times $t_j$, measured columns $y_{jc}$ with
1-sigma noise $\sigma_c$) is compared with the model simulated at the same times (the scenario's loads,
pulses and known initial state; the free parameters set to the current iterate). The residuals are

$$r_{jc} = \frac{\hat y_c(t_j;\,p) - y_{jc}}{\sigma_c}$$

and $\chi^2 = \sum r^2$ is minimised by Levenberg-Marquardt (`optimistix.LevenbergMarquardt`) with
forward-mode Jacobians through diffrax (`ForwardMode`). A simulation that fails inside an iterate (step
budget, non-finite state) gives residuals $10^6$ with zero derivative: the solver rejects that step.

**Free parameters** use the dispersion names of `jaxhinge.sample_dispersions` (one resolver):
`"<panel>.<field>"` (`k`, `c`, `mass`, `d`, `thetaInit`, `thetaDotInit`, `thetaRef`, `thetaDotRef`,
`motorTorque`, `IPntS_S`, `r_HB_B`, `dcm_HB`) and `"hub.<field>"` (`mHub`, `IHubPntBc_B`, `r_BcB_B`,
`r_CN_NInit`, `v_CN_NInit`, `sigma_BNInit`, `omega_BN_BInit`). A vector field frees its 3 components
(named `"hub.omega_BN_BInit[1]"` .. `[3]`, 1-based like the telemetry columns); `"hub.omega_BN_BInit[2]"`
frees one. Inertias are 3 positive scale factors $s$ ($I' = D I D$, $D = \mathrm{diag}\sqrt{s}$, nominal 1),
`dcm_HB` a small rotation vector [rad] (nominal 0), as in dispersions. Scalars of one field may be **tied**:
`"p0.k = p1.k"` fits one value for both (initial guess: geometric/arithmetic mean).

**Coordinates.** Positive quantities (`k`, `c`, `mass`, `d`, `mHub`, inertia factors) are fitted as
$u = \ln(p/p_0)$; signed ones linearly, $p = p_0 + s\,u$ with a fixed scale $s$ per field (`Field.scale` of the parameter registry).

**Uncertainties.** At the solution, $J = \partial r/\partial u$; $s^2 = \chi^2/\mathrm{dof}$
($\mathrm{dof} = $ residuals $-$ parameters) and $\mathrm{cov}_u = s^2 (J^TJ)^{-1}$; the parameter sigmas are
$\sigma_p = p\,\sigma_u$ (log) or $s\,\sigma_u$ (linear), the correlation matrix that of $\mathrm{cov}_u$.

**Identifiability.** The SVD of the column-scaled Jacobian $J D^{-1}$ ($D$ = column norms):
singular values below `ident_rtol` (default $10^{-6}$, i.e. $\mathrm{cond}(J^TJ) > 10^{12}$) times the
largest mark combinations of parameters the data do not determine; they are reported by name (e.g.
`+1.00 log(p0.k) -1.00 log(p1.k)`: equal and opposite relative changes are not seen), and such parameters
get `sigma = inf`. Ratios below `warn_rtol` (default $10^{-2}$, $\mathrm{cond}(J^TJ) > 10^4$) are reported as poorly
determined (e.g. identical panels seen only through the hub rates: their difference enters the outputs at
second order only, and the two panels can be swapped).

**Long records.** `horizon = (0.3, 1.0)`: a growing horizon; fit the samples with $t \le 0.3\,t_{last}$ first,
then continue from that solution on the whole record (one compiled solver: later samples get weight 0).
**Multi-start**: `starts = N` extra starting points $u_0 + \mathrm{spread}\cdot U(-1, 1)$ (seeded), best
$\chi^2$ kept.
"""

import dataclasses
import math
import time
from collections.abc import Callable, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float, Int

from .._io._telemetry import Telemetry, model_outputs, output_names
from .._model._params import Parameter, ParameterError, anonymous, apply_resolved, expand, nominal
from .._model._scenario import Scenario
from .._model._spacecraft import strip_labels
from .._simulation._simulate import simulate_unjitted
from ._fit import _PROGRESS, FitError, _verbose

SOLVERS = ("lm", "dogleg", "gauss_newton")
_FAIL = 1e6


@dataclasses.dataclass(frozen=True)
class Coordinate:
    """One fitted number: `name` (as reported), the scenario parameters it sets (`targets`: (name, component
    or None) pairs, several when tied), `log` (positive, fitted as a log-ratio), `x0` (initial guess),
    `scale` (linear coordinates), `field` and `unit`. Only `targets`/`log` shape the compiled program
    (`x0`, `scale` travel as arrays)."""

    name: str
    targets: tuple[Parameter, ...]
    log: bool
    x0: float
    scale: float
    field: str
    unit: str

    def value(self, u, x0=None, scale=None):
        x0 = self.x0 if x0 is None else x0
        scale = self.scale if scale is None else scale
        return x0 * jnp.exp(jnp.clip(u, -30.0, 30.0)) if self.log else x0 + scale * u

    def label(self) -> str:
        return f"log({self.name})" if self.log else self.name

    def structure(self) -> tuple:
        return (anonymous(self.targets), self.log)


def parse_free(scenario: Scenario, free: Sequence[str], field: str = "fit.free") -> tuple[Coordinate, ...]:
    """The fitted coordinates of the `free` list (syntax: module docstring; names resolved by the parameter
    registry, `jaxhinge._model._params`). **Raises:** `FitError`."""
    if isinstance(free, str) or not isinstance(free, (list, tuple)) or not free:
        raise FitError(f"{field} = {free!r}: must be a non-empty list of names like \"p0.k\", "
                       "\"hub.omega_BN_BInit\" or \"p0.k = p1.k\"", field=field)
    seen: dict[tuple[str, int | None], int] = {}
    out: list[Coordinate] = []
    for i, entry in enumerate(free):
        where = f"{field}[{i}]"
        if not isinstance(entry, str):
            raise FitError(f"{where} = {entry!r}: must be a string like \"p0.k\"", field=where)
        members = []
        for part in entry.split("="):
            try:
                members.append(expand(scenario, part.strip()))
            except ParameterError as e:
                raise FitError(f"{where} = {entry!r}: {e}", field=where) from None
        if len(members) > 1:
            if len({m[0].field.name for m in members}) != 1 or any(len(m) != 1 for m in members):
                raise FitError(f"{where} = {entry!r}: only the same field (one number each) can be tied, e.g. "
                               "\"p0.k = p1.k\"", field=where)
        for j in range(len(members[0])):
            targets = [m[j] for m in members]
            for t in targets:
                key = (t.base, t.component)
                if key in seen or (t.base, None) in seen or (t.component is None and any(k[0] == t.base for k in seen)):
                    raise FitError(f"{where} = {entry!r}: {t.name} is already free (each parameter may appear once)",
                                   field=where)
                seen[key] = i
            x0s = [float(nominal(scenario, t)) for t in targets]
            fld = targets[0].field
            if fld.positive:
                if any(not x > 0 for x in x0s):
                    bad = [t.name for t, x in zip(targets, x0s) if not x > 0]
                    raise FitError(f"{where} = {entry!r}: {', '.join(bad)} must start > 0 (it is fitted in log "
                                   "space); give a positive initial guess in the scenario", field=where)
                x0 = float(np.exp(np.mean(np.log(x0s))))
            else:
                x0 = float(np.mean(x0s))
            out.append(Coordinate(name="=".join(t.name for t in targets), targets=tuple(targets), log=fld.positive,
                                  x0=x0, scale=fld.scale, field=fld.name, unit=fld.unit))
    return tuple(out)


def apply_coordinates(scenario: Scenario, coords: Sequence[Coordinate], u, x0=None, scale=None) -> Scenario:
    """The scenario with the coordinates `u` (P,) applied (traceable; `x0`, `scale` (P,) override the
    coordinates' own initial guesses and scales)."""
    pars, vals = [], []
    for j, c in enumerate(coords):
        v = c.value(u[j], None if x0 is None else x0[j], None if scale is None else scale[j])
        for t in c.targets:
            pars.append(t)
            vals.append(v)
    return apply_resolved(scenario, pars, vals)


# ------------------------------------------------------------------------------------------------------------
# Residuals (module level: one compiled solver per model structure, reused across data sets / starts)
# ------------------------------------------------------------------------------------------------------------


class _Problem(eqx.Module):
    scenario: Scenario
    ts: Float[Array, " T"]
    data: Float[Array, "T C"]
    weight: Float[Array, "T C"]  # 1/sigma, 0 for samples outside the current horizon
    cols: Int[Array, " C"]  # indices into the model output matrix
    x0: Float[Array, " P"]
    scale: Float[Array, " P"]
    structure: tuple = eqx.field(static=True)  # (targets, log) per coordinate
    n_panels: int = eqx.field(static=True)

    def outputs(self, u):
        coords = [Coordinate("", t, lg, 1.0, 1.0, "", "") for t, lg in self.structure]
        sc = apply_coordinates(self.scenario, coords, u, self.x0, self.scale)
        traj = simulate_unjitted(sc, diffrax.ForwardMode(), ts=self.ts)
        full = model_outputs(traj, self.n_panels)
        s = traj.sigma_BN
        shadow = -s / jnp.sum(s * s, axis=1, keepdims=True).clip(1e-300)
        full_b = jnp.concatenate([full[:, :3], shadow, full[:, 6:]], axis=1)
        a, b = full[:, self.cols], full_b[:, self.cols]
        # either MRP set of the attitude matches the data: take the closer one per sample
        pick = jnp.sum(((a - self.data) * self.weight) ** 2, axis=1) <= jnp.sum(((b - self.data) * self.weight) ** 2,
                                                                                axis=1)
        return jnp.where(pick[:, None], a, b), traj.success


def _residuals(u, problem: _Problem):
    y, ok = problem.outputs(u)
    r = jnp.nan_to_num((y - problem.data) * problem.weight, nan=_FAIL, posinf=_FAIL, neginf=-_FAIL)
    return jnp.where(ok, r, _FAIL * jnp.sign(problem.weight)).reshape(-1)


def _residuals_and_jacobian(u, problem: _Problem):
    """Residuals and their Jacobian in one forward-mode pass (`jvp` of the simulation, batched over the P
    coordinate directions)."""
    eye = jnp.eye(u.shape[0], dtype=u.dtype)
    r, J = jax.vmap(lambda t: jax.jvp(lambda v: _residuals(v, problem), (u,), (t,)), out_axes=(None, 1))(eye)
    return r, J


@jax.custom_jvp
def _residuals_lm(u, problem: _Problem):
    """`_residuals` for the least-squares solver, with a custom JVP: the solver linearises the residuals several
    times per step (function value, Jacobian materialisation, trust-region checks), and each linearisation of the
    plain function would put another copy of the differentiated simulation into the compiled loop. Here every
    linearisation reuses one Jacobian, computed once per point (same values; compile time ~10x shorter)."""
    return _residuals(u, problem)


@_residuals_lm.defjvp
def _residuals_lm_jvp(primals, tangents):
    u, problem = primals
    du = tangents[0]
    r, J = _residuals_and_jacobian(u, problem)
    return r, J @ du


@eqx.filter_jit
def _evaluate(u, problem: _Problem):
    """Residuals, their Jacobian and the simulated outputs at `u` (one compiled program)."""
    y, ok = problem.outputs(u)
    return _residuals(u, problem), jax.jacfwd(_residuals)(u, problem), y, ok


def _make_solver(solver: str, rtol: float, atol: float):
    kw = {"verbose": _verbose}  # always: one compiled solver whether or not progress is shown
    if solver == "lm":
        return optx.LevenbergMarquardt(rtol=rtol, atol=atol, **kw)
    if solver == "dogleg":
        return optx.Dogleg(rtol=rtol, atol=atol, **kw)
    return optx.GaussNewton(rtol=rtol, atol=atol, **kw)


@eqx.filter_jit
def _solve(solver, u0, problem, max_steps: int):
    sol = optx.least_squares(_residuals_lm, solver, u0, problem, {"jac": "fwd"}, max_steps=max_steps, throw=False)
    r = _residuals(sol.value, problem)
    return sol.value, sol.result, sol.stats["num_steps"], jnp.sum(r * r)


# ------------------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class IdentifyResult:
    """The outcome of `identify`.

    - `names`, `values`, `sigma`, `initial`, `units`: fitted coordinates (see the module docstring) with their
      1-sigma uncertainties (`inf`: not determined by the data) and initial guesses.
    - `covariance` (in the fitted coordinates $u$), `correlation` (P, P); `chi2`, `dof`, `chi2_per_dof`.
    - `converged`, `status` (optimistix result name), `message` (plain words), `iterations` (all stages).
    - `identifiable` (no undetermined combination), `well_posed` (none poorly determined either),
      `condition_number` (of the column-scaled $J^TJ$), `singular_values` (relative),
      `undetermined` / `poorly_determined`: lists of dicts `{"combination", "coefficients", "ratio",
      "description"}`.
    - `scenario`: the scenario with the fitted values; `telemetry`; `fitted` (T, C) simulated outputs at the
      sample times; `residuals` (T, C) in units of sigma; `initial_fitted` (T, C) at the initial guess.
    - `starts`: per start `{"chi2", "status", "u0"}`; `wall_s`; `options`.
    """

    names: tuple[str, ...]
    values: np.ndarray
    sigma: np.ndarray
    initial: np.ndarray
    units: tuple[str, ...]
    covariance: np.ndarray
    correlation: np.ndarray
    chi2: float
    dof: int
    chi2_per_dof: float
    converged: bool
    status: str
    message: str
    iterations: int
    identifiable: bool
    well_posed: bool
    condition_number: float
    singular_values: np.ndarray
    undetermined: list
    poorly_determined: list
    scenario: Scenario
    telemetry: Telemetry
    fitted: np.ndarray
    residuals: np.ndarray
    initial_fitted: np.ndarray
    starts: list
    wall_s: float
    options: dict

    def parameter(self, name: str) -> tuple[float, float]:
        """`(value, sigma)` of one free parameter (also a member of a tied group)."""
        for i, n in enumerate(self.names):
            if name == n or name in n.split("="):
                return float(self.values[i]), float(self.sigma[i])
        raise KeyError(f"{name!r} is not a free parameter; free: {', '.join(self.names)}")


def _combination(v: np.ndarray, coords: Sequence[Coordinate], seen: str = "not seen") -> tuple[str, dict, str]:
    v = v / np.max(np.abs(v))
    keep = [j for j in np.argsort(-np.abs(v)) if abs(v[j]) >= 0.05]
    terms = " ".join(f"{v[j]:+.2f} {coords[j].label()}" for j in keep)
    coef = {coords[j].name: float(v[j]) for j in keep}
    if len(keep) == 1:
        desc = f"{coords[keep[0]].name} is {seen} in the data"
    elif len(keep) == 2:
        a, b = (coords[j].name for j in keep)
        same = v[keep[0]] * v[keep[1]] > 0
        what = "relative " if all(coords[j].log for j in keep) else ""
        desc = (f"{a} and {b}: {'changes of the same sign' if same else 'equal and opposite'} {what}changes "
                f"(ratio {abs(v[keep[1]] / v[keep[0]]):.2g}) are {seen} in the data")
    else:
        desc = f"the combination {terms} is {seen} in the data"
    return terms, coef, desc


def _analyse(J: np.ndarray, r: np.ndarray, coords, ident_rtol: float, warn_rtol: float):
    n, p = J.shape
    chi2 = float(r @ r)
    dof = n - p
    s2 = chi2 / dof if dof > 0 else 1.0
    norms = np.linalg.norm(J, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    Js = J / safe
    _, sv, vt = np.linalg.svd(Js, full_matrices=False)
    smax = sv[0] if sv.size and sv[0] > 0 else 1.0
    rel = sv / smax
    cond = float(np.inf if rel[-1] == 0 else (1.0 / rel[-1]) ** 2)
    undetermined, poor = [], []
    bad_dirs = []
    for k in range(p):
        if rel[k] < ident_rtol or norms[np.argmax(np.abs(vt[k]))] == 0:
            bad_dirs.append(k)
    for k in range(p):
        v = vt[k] / safe  # direction in the fitted coordinates
        v = np.where(norms > 0, v, vt[k])
        terms, coef, desc = _combination(v, coords, "not seen" if k in bad_dirs else "barely seen")
        item = {"combination": terms, "coefficients": coef, "ratio": float(rel[k]), "description": desc}
        if k in bad_dirs:
            undetermined.append(item)
        elif rel[k] < warn_rtol:
            poor.append(item)
    good = [k for k in range(p) if k not in bad_dirs]
    # pseudo-inverse restricted to the determined directions (scaled coordinates)
    inv = (vt[good].T / sv[good] ** 2) @ vt[good] if good else np.zeros((p, p))
    cov = s2 * inv / safe[:, None] / safe[None, :]
    var = np.diag(cov).copy()
    undet_params = np.zeros(p, bool)
    for k in bad_dirs:
        v = np.abs(vt[k])
        undet_params |= v >= 0.05 * v.max()
    var[undet_params] = np.inf
    sig_u = np.sqrt(var)
    d = np.sqrt(np.diag(cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / d[:, None] / d[None, :]
    corr = np.where(np.isfinite(corr), corr, np.nan)
    corr[undet_params, :] = np.nan
    corr[:, undet_params] = np.nan
    np.fill_diagonal(corr, 1.0)
    return dict(chi2=chi2, dof=dof, s2=s2, cov=cov, sig_u=sig_u, corr=corr, cond=cond, rel=rel,
                undetermined=undetermined, poor=poor)


# ------------------------------------------------------------------------------------------------------------
# identify
# ------------------------------------------------------------------------------------------------------------


def _problem(scenario, telemetry: Telemetry, coords) -> _Problem:
    names = output_names(scenario)
    cols = np.array([names.index(c) for c in telemetry.columns])
    w = np.broadcast_to(1.0 / telemetry.sigma, telemetry.values.shape).copy()
    return _Problem(scenario=strip_labels(scenario), ts=jnp.asarray(telemetry.t), data=jnp.asarray(telemetry.values),
                    weight=jnp.asarray(w), cols=jnp.asarray(cols),
                    x0=jnp.asarray([c.x0 for c in coords], dtype=float),
                    scale=jnp.asarray([c.scale for c in coords], dtype=float),
                    structure=tuple(c.structure() for c in coords), n_panels=scenario.spacecraft.panels.count)


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
    names = output_names(scenario)
    for c in telemetry.columns:
        if c not in names:
            raise FitError(f"{telemetry.source}: column {c!r} is not an output of the scenario; outputs: "
                           f"{', '.join(names)}", field="data.columns")
    t_end = float(scenario.simulation.t_end)
    if telemetry.t[0] < -1e-9 * max(1, t_end) or telemetry.t[-1] > t_end * (1 + 1e-9):
        raise FitError(f"{telemetry.source}: samples span [{telemetry.t[0]!r}, {telemetry.t[-1]!r}] s, outside the "
                       f"scenario's [0, {t_end!r}] s", field="data")
    if solver not in SOLVERS:
        raise FitError(f"fit.solver = {solver!r}: allowed values are {', '.join(SOLVERS)}", field="fit.solver")
    for k, v in (("max_steps", max_steps), ("starts", starts)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise FitError(f"fit.{k} = {v!r}: must be an integer >= 1", field=f"fit.{k}")
    for k, v in (("rtol", rtol), ("atol", atol), ("spread", spread), ("ident_rtol", ident_rtol),
                 ("warn_rtol", warn_rtol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise FitError(f"fit.{k} = {v!r}: must be a finite number > 0", field=f"fit.{k}")
    hz = list(horizon) if not isinstance(horizon, (int, float)) else [horizon]
    if not hz or any(isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h <= 1 for h in hz) or \
            any(b <= a for a, b in zip(hz, hz[1:])) or hz[-1] != 1:
        raise FitError(f"fit.horizon = {horizon!r}: must be increasing fractions in (0, 1] ending with 1, e.g. "
                       "[0.25, 0.5, 1.0]", field="fit.horizon")
    coords = parse_free(scenario, free)
    P = len(coords)
    n_res = telemetry.values.size
    if n_res <= P:
        raise FitError(f"{n_res} residual(s) for {P} free parameter(s): need more samples or columns than free "
                       "parameters", field="fit.free")
    say = progress or (lambda s: None)
    base = _problem(scenario, telemetry, coords)
    w_full = base.weight
    t_rel = telemetry.t - telemetry.t[0]
    span = max(t_rel[-1], 1e-300)
    slv = _make_solver(solver, rtol, atol)
    rng = np.random.default_rng(seed)
    u_starts = [np.zeros(P)] + [rng.uniform(-spread, spread, P) for _ in range(starts - 1)]
    runs = []
    iterations = 0
    for si, u0 in enumerate(u_starts):
        u = jnp.asarray(u0)
        result = None
        for h in hz:
            mask = (t_rel <= h * span * (1 + 1e-12))[:, None]
            prob = eqx.tree_at(lambda p: p.weight, base, jnp.where(jnp.asarray(mask), w_full, 0.0))
            _PROGRESS.start(None if progress is None else (
                lambda s, si=si, h=h: say(f"identify: start {si + 1}/{starts}, horizon {h:g}: "
                                          + s.removeprefix("fit: "))))
            u, result, steps, chi2 = _solve(slv, u, prob, max_steps)
            iterations += int(steps)
            _PROGRESS.start(None)
            if progress is not None:
                say(f"identify: start {si + 1}/{starts}, horizon {h:g}: {int(steps)} steps, chi2 {float(chi2):.6g}"
                    f" ({int(mask.sum())} samples), {_result_name(result)}")
        runs.append(dict(u=np.asarray(u), chi2=float(chi2), status=_result_name(result), steps=int(steps),
                         u0=np.asarray(u0)))
    finite = [r for r in runs if np.isfinite(r["chi2"])]
    best = min(finite or runs, key=lambda r: r["chi2"])
    u = jnp.asarray(best["u"])
    r, J, fitted, ok = (np.asarray(x) for x in _evaluate(u, base))
    fitted0 = np.asarray(_evaluate(jnp.zeros(P), base)[2])
    ok = bool(ok)
    a = _analyse(J, r, coords, ident_rtol, warn_rtol)
    values = np.array([float(c.value(best["u"][j])) for j, c in enumerate(coords)])
    sigma = np.array([values[j] * a["sig_u"][j] if c.log else c.scale * a["sig_u"][j] for j, c in enumerate(coords)])
    sigma = np.abs(sigma)
    converged = best["status"] == "successful" and ok
    notes = []
    if not ok:
        notes.append("the simulation of the fitted model failed (step budget or non-finite state)")
    elif not converged:
        notes.append(f"the solver stopped without converging ({best['status']}); raise max_steps or try "
                     "starts > 1 / a growing horizon")
    if a["undetermined"]:
        notes.append("not identifiable from these data: " + "; ".join(d["description"] for d in a["undetermined"]))
    if a["poor"]:
        notes.append("poorly determined (cond(J^T J) = " + f"{a['cond']:.3g}): "
                     + "; ".join(d["description"] for d in a["poor"]))
    if a["chi2"] / max(a["dof"], 1) > 4:
        notes.append(f"chi2/dof = {a['chi2'] / max(a['dof'], 1):.3g} >> 1: the model does not explain the data "
                     "within the stated sigma (wrong model, wrong sigma, or a local minimum)")
    message = ("converged" if converged else "not converged") + (": " + "; ".join(notes) if notes else "")
    fitted_sc = apply_coordinates(scenario, coords, u)
    fitted_sc = jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, fitted_sc)
    return IdentifyResult(
        names=tuple(c.name for c in coords), values=values, sigma=sigma,
        initial=np.array([c.x0 for c in coords]), units=tuple(c.unit for c in coords),
        covariance=a["cov"], correlation=a["corr"], chi2=a["chi2"], dof=a["dof"],
        chi2_per_dof=a["chi2"] / a["dof"] if a["dof"] > 0 else float("nan"),
        converged=converged, status=best["status"], message=message, iterations=iterations,
        identifiable=not a["undetermined"], well_posed=not (a["undetermined"] or a["poor"]), condition_number=a["cond"], singular_values=a["rel"],
        undetermined=a["undetermined"], poorly_determined=a["poor"], scenario=fitted_sc, telemetry=telemetry,
        fitted=np.asarray(fitted), residuals=r.reshape(telemetry.values.shape),
        initial_fitted=np.asarray(fitted0),
        starts=[{"chi2": x["chi2"], "status": x["status"], "steps": x["steps"],
                 "initial": [float(c.value(x["u0"][j])) for j, c in enumerate(coords)]} for x in runs],
        wall_s=time.perf_counter() - t_start,
        options=dict(solver=solver, max_steps=max_steps, rtol=rtol, atol=atol, starts=starts, spread=spread,
                     seed=seed, horizon=hz, ident_rtol=ident_rtol, warn_rtol=warn_rtol),
    )


def _result_name(result) -> str:
    for name in ("successful", "max_steps_reached", "nonlinear_max_steps_reached", "nonlinear_divergence",
                 "singular"):
        if hasattr(optx.RESULTS, name) and result == getattr(optx.RESULTS, name):
            return name
    return "failed"
