r"""The least-squares core shared by the modal fit (`jaxhinge.fit`) and the telemetry fit (`jaxhinge.identify`).

**Coordinates.** The free list names parameters of the registry (`jaxhinge._model._params`):
`"p0.k"`, `"hub.omega_BN_BInit"` (a vector: its 3 components, `"hub.omega_BN_BInit[1]"` .. `[3]`, 1-based),
`"hub.omega_BN_BInit[2]"` (one component), and ties of one field, `"p0.k = p1.k"` (one fitted number sets
every member). Each entry becomes one `Coordinate` per number. A positive field (`Field.positive`: `k`, `c`,
`mass`, `d`, `mHub`, inertia factors, ...) is fitted as the log-ratio $u = \ln(p/p_0)$; any other linearly,
$p = p_0 + s\,u$ with the field's scale $s$ (`Field.scale`). The initial guess $p_0$ of a tied group is the
geometric (log) or arithmetic (linear) mean of its members' values. `u = 0` is the initial guess.

**Residuals.** A fit is an `AbstractResiduals`: a pytree whose `__call__(u)` returns the weighted residual
vector $r(u)$, whether the model evaluation succeeded and auxiliary outputs (modes, simulated telemetry).
A failed evaluation (failed simulation, non-finite values) gives residuals $10^6$ with zero derivative, so
the solver rejects the step: nothing is raised from inside JAX.

**Jacobian.** Forward mode, $J = \partial r/\partial u$ as one `jvp` batched over the $P$ coordinate
directions (`evaluate`). The solver sees the residuals through a custom JVP that computes this
Jacobian once per point: its linearisations (function value, Jacobian materialisation, trust-region checks)
all reuse it instead of each putting another differentiated model into the compiled loop.

**Solvers.** `"lm"` (`optimistix.LevenbergMarquardt`, the default of both fits), `"dogleg"`, `"gauss_newton"`
(optimistix least-squares solvers), `"adam"`, `"lbfgs"` (optax, through `optimistix.OptaxMinimiser`, on
$\tfrac12\sum r^2$). One compiled loop of solver steps per model structure (`_advance`, `eqx.filter_jit`; free
of host callbacks, so JAX's persistent compilation cache keeps it; the host runs it in chunks and reports progress
between them): names never enter the compiled program (`strip_labels`, `anonymous`); values, targets and data
are array arguments.

**Covariance and identifiability** (`analyse`). At the solution, with $J$ the Jacobian in the fitted
coordinates, $D$ its column norms and $J D^{-1} = U S V^T$:

- $s^2 = \max(s^2_{floor},\ \chi^2/\mathrm{dof})$ when $\mathrm{dof} = n - P > 0$, else 1
  ($s^2_{floor} = 0$: the scatter of the data; $1$: the stated uncertainties as a floor);
- $\mathrm{cov}_u = s^2 (J^TJ)^{+}$, the pseudo-inverse restricted to the determined directions; the
  correlation matrix is that of $\mathrm{cov}_u$; parameter sigmas $\sigma_p = p\,\sigma_u$ (log) or
  $s\,\sigma_u$ (linear);
- singular-value ratios $S_k/S_1$ below `ident_rtol` mark combinations the data do not determine
  (`undetermined`, their parameters get `sigma = inf`), below `warn_rtol` poorly determined ones; each is
  reported by name, e.g. `+1.00 log(p0.k) -1.00 log(p1.k)`; `condition_number` is
  $\mathrm{cond}(D^{-1}J^TJD^{-1}) = (S_1/S_P)^2$.

**Result.** `LeastSquaresResult`: the fields every fit shares; `FitResult` and `IdentifyResult` add their own.
"""

import abc
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array, ArrayLike, Bool, Float, PyTree

from .._model._params import Parameter, ParameterError, anonymous, apply_resolved, expand, nominal
from .._model._scenario import Scenario
from .._programs import program

SOLVERS = ("lm", "dogleg", "gauss_newton", "adam", "lbfgs")
FAIL = 1e6  # residual of a failed evaluation
_LOG_CLIP = 30.0  # log-ratio coordinates are clipped to [-30, 30] (a factor e^30) before exponentiation


class FitError(ValueError):
    """A fit that cannot be set up or that asks for something unreachable. `str(error)` is one line naming
    the field, the value and the rule. `field` names the FIT.toml key (or keyword argument) concerned, when
    there is one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


# ------------------------------------------------------------------------------------------------------------
# Coordinates
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Coordinate:
    """One fitted number.

    - `name`: as reported (`"p0.k"`, `"hub.omega_BN_BInit[2]"`, tied: `"p0.k=p1.k"`).
    - `targets`: the registry parameters it sets (several when tied).
    - `log`: fitted as the log-ratio $u = \\ln(p/p_0)$ (positive fields), else linearly $p = p_0 + s\\,u$.
    - `x0`: the initial guess $p_0$ [the field's unit]; `scale`: $s$ [the field's unit] (linear coordinates).
    - `field`, `unit`: the registry field and its unit.
    """

    name: str
    targets: tuple[Parameter, ...]
    log: bool
    x0: float
    scale: float
    field: str
    unit: str

    @property
    def members(self) -> tuple[str, ...]:
        """The parameter names this coordinate sets (one, or the members of a tie)."""
        return tuple(t.name for t in self.targets)

    def value(self, u):
        """The parameter value [unit] at coordinate `u` (traceable)."""
        return self.x0 * jnp.exp(jnp.clip(u, -_LOG_CLIP, _LOG_CLIP)) if self.log else self.x0 + self.scale * u

    def coordinate(self, value) -> float:
        """The coordinate $u$ of a parameter value [unit] (the inverse of `value`)."""
        return float(np.log(value / self.x0) if self.log else (value - self.x0) / self.scale)

    def label(self) -> str:
        """`"log(p0.k)"` or `"p0.thetaInit"`: the coordinate as it enters the identifiability report."""
        return f"log({self.name})" if self.log else self.name


def parse_free(
    scenario: Scenario,
    free: Sequence[str],
    *,
    seed: Callable[[Parameter], float | None] | None = None,
) -> tuple[Coordinate, ...]:
    """The fitted coordinates of a `free` list (syntax: module docstring; names resolved by the registry).

    **Arguments:**

    - `scenario`: the model; its values of the free parameters are the initial guesses.
    - `free`: the list of names and ties (`fit.free` in errors).
    - `seed`: called for a member of a positive field whose value is not > 0 (it cannot start a log-ratio);
      returns its initial guess, or `None` to refuse it.

    **Returns:** one `Coordinate` per fitted number, in the order of `free` (vectors component by component).

    **Raises:** `FitError`, one line naming the entry, the value and the rule.
    """
    if isinstance(free, str) or not isinstance(free, (list, tuple)) or not free:
        raise FitError(f"fit.free = {free!r}: must be a non-empty list of names like \"p0.k\", "
                       "\"hub.omega_BN_BInit\" or \"p0.k = p1.k\"", field="fit.free")
    seen: dict[tuple[str, int | None], int] = {}
    out: list[Coordinate] = []
    for i, entry in enumerate(free):
        where = f"fit.free[{i}]"
        if not isinstance(entry, str):
            raise FitError(f"{where} = {entry!r}: must be a string like \"p0.k\" or \"p0.k = p1.k\"", field=where)
        members = []
        for part in entry.split("="):
            try:
                members.append(expand(scenario, part.strip()))
            except ParameterError as e:  # its text starts with the name: drop it when that is the entry
                why = str(e).removeprefix(f"{part.strip()!r}: ") if part.strip() == entry.strip() else str(e)
                raise FitError(f"{where} = {entry!r}: {why}", field=where) from None
        if len(members) > 1 and (len({m[0].field.name for m in members}) != 1 or any(len(m) != 1 for m in members)):
            what = " to ".join(f"{m[0].name if len(m) == 1 else m[0].base} [{m[0].unit}]" for m in members)
            raise FitError(f"{where} = {entry!r}: cannot tie {what}: only the same field (one number each) can be "
                           "tied, e.g. \"p0.k = p1.k\"", field=where)
        for j in range(len(members[0])):
            targets = [m[j] for m in members]
            for t in targets:
                key = (t.base, t.component)
                clash = [seen[k] for k in seen if k == key or k == (t.base, None)
                         or (t.component is None and k[0] == t.base)]
                if clash:
                    raise FitError(f"{where} = {entry!r}: {t.name} is already free in fit.free[{clash[0]}] "
                                   "(each parameter may appear once)", field=where)
                seen[key] = i
            fld = targets[0].field
            x0s = [float(nominal(scenario, t)) for t in targets]
            if fld.positive:
                for k, (t, x) in enumerate(zip(targets, x0s)):
                    if not x > 0:
                        s = seed(t) if seed is not None else None
                        if s is None or not s > 0:
                            raise FitError(f"{where} = {entry!r}: {t.name} = {x:g} must start > 0 (it is fitted in "
                                           "log space); give a positive initial guess in the scenario", field=where)
                        x0s[k] = float(s)
                x0 = x0s[0] if all(x == x0s[0] for x in x0s) else float(np.exp(np.mean(np.log(x0s))))
            else:
                x0 = float(np.mean(x0s))
            out.append(Coordinate(name="=".join(t.name for t in targets), targets=tuple(targets), log=fld.positive,
                                  x0=x0, scale=fld.scale, field=fld.name, unit=fld.unit))
    return tuple(out)


class Coordinates(eqx.Module):
    """The coordinates as the compiled programs see them: the initial guesses `x0` and scales `scale` (P,) are
    array leaves; which parameters each sets (`parameters`, without names: `anonymous`) and whether it is a
    log-ratio (`log`) are static, so fits of one model structure share one program."""

    x0: Float[Array, " P"]
    scale: Float[Array, " P"]
    parameters: tuple[tuple[Parameter, ...], ...] = eqx.field(static=True)
    log: tuple[bool, ...] = eqx.field(static=True)

    def __init__(self, coords: Sequence[Coordinate]):
        self.x0 = jnp.asarray([c.x0 for c in coords], dtype=float).reshape(len(coords))
        self.scale = jnp.asarray([c.scale for c in coords], dtype=float).reshape(len(coords))
        self.parameters = tuple(anonymous(c.targets) for c in coords)
        self.log = tuple(c.log for c in coords)

    def values(self, u: Float[Array, " P"]) -> Float[Array, " P"]:
        """The parameter values [their units] at the coordinates `u`."""
        lin = self.x0 + self.scale * u
        if not any(self.log):
            return lin
        return jnp.where(np.asarray(self.log), self.x0 * jnp.exp(jnp.clip(u, -_LOG_CLIP, _LOG_CLIP)), lin)

    def apply(self, scenario: Scenario, u: Float[Array, " P"]) -> Scenario:
        """`scenario` with the coordinates `u` applied (traceable)."""
        v = self.values(u)
        pars = [t for ts in self.parameters for t in ts]
        vals = [v[j] for j, ts in enumerate(self.parameters) for _ in ts]
        return apply_resolved(scenario, pars, vals)


def apply_coordinates(scenario: Scenario, coords: Sequence[Coordinate], u: Float[ArrayLike, " P"]) -> Scenario:
    """The scenario with the coordinates `u` (P,) applied: every member of coordinate $j$ set to
    `coords[j].value(u[j])` (traceable)."""
    return Coordinates(coords).apply(scenario, jnp.asarray(u, dtype=float))


# ------------------------------------------------------------------------------------------------------------
# Residuals and their Jacobian
# ------------------------------------------------------------------------------------------------------------


class AbstractResiduals(eqx.Module):
    """A least-squares problem in the fitted coordinates: `__call__(u)` returns `(r, ok, aux)`, the weighted
    residuals (n,), whether the model evaluation succeeded (a scalar bool) and auxiliary outputs (any pytree
    of arrays: modes, simulated outputs). Array data (targets, telemetry, weights, initial guesses) are
    leaves; only what sets shapes is static."""

    @abc.abstractmethod
    def __call__(self, u: Float[Array, " P"]) -> tuple[Float[Array, " n"], Bool[Array, ""], PyTree]:
        raise NotImplementedError


def _guarded(problem: AbstractResiduals, u):
    r, ok, aux = problem(u)
    ok = jnp.asarray(ok) & jnp.all(jnp.isfinite(r))
    return jnp.where(ok, r, FAIL), (ok, aux)


@program
def residuals(u: Float[Array, " P"], problem: AbstractResiduals) -> Float[Array, " n"]:
    """The residuals of `problem` at `u`; $10^6$ (with zero derivative) where the evaluation failed."""
    return _guarded(problem, u)[0]


class Evaluation(eqx.Module):
    """`residuals` (n,), `jacobian` (n, P), `ok` (the model evaluation succeeded) and `aux` (the problem's
    auxiliary outputs) at one point."""

    residuals: Float[Array, " n"]
    jacobian: Float[Array, "n P"]
    ok: Bool[Array, ""]
    aux: PyTree


@program
def evaluate(u: Float[Array, " P"], problem: AbstractResiduals) -> Evaluation:
    """Residuals, their Jacobian $\\partial r/\\partial u$ (n, P), success flag and auxiliary outputs at `u`,
    in one forward-mode pass (`jvp`, batched over the P coordinate directions); one compiled program per
    problem structure. Jitted (as `residuals`) also for the calls inside the solver's trace: JAX then traces
    the model once per structure, and tracing a differentiated simulation costs seconds of Python."""

    def one(t):
        return jax.jvp(lambda v: _guarded(problem, v), (u,), (t,), has_aux=True)

    r, J, (ok, aux) = jax.vmap(one, out_axes=(None, 1, None))(jnp.eye(u.shape[0], dtype=u.dtype))
    return Evaluation(r, J, ok, aux)


@jax.custom_jvp
def _residuals_lm(u, problem):
    """`residuals` as the solver sees it, its JVP from `evaluate` (module docstring). Differentiable in `u`
    only."""
    return residuals(u, problem)


@_residuals_lm.defjvp
def _residuals_lm_jvp(primals, tangents):
    u, problem = primals
    ev = evaluate(u, problem)
    return ev.residuals, ev.jacobian @ tangents[0]


# ------------------------------------------------------------------------------------------------------------
# Solvers
# ------------------------------------------------------------------------------------------------------------


class _BoundedNewtonState(eqx.Module):
    newton: Float[Array, " P"]


class _BoundedNewtonDescent(optx.AbstractDescent):
    """The Gauss-Newton step $\\delta = -J^+ r$ (minimum norm), shortened to the trust radius
    $\\Delta = \\Delta_{max}\\min(1, s)$ in the max-norm of the fitted coordinates ($s$: the trust region's step
    size, 1 at the start, $\\times 0.25$ per rejected step, $\\times 3.5$ per very good one). A first step can
    change no coordinate by more than `max_step` (a log-ratio 0.5: a factor 1.65; one number, or one per
    coordinate), so an iterate far from the data's basin (a failed or wild simulation) is never tried."""

    max_step: float | tuple[float, ...]

    def init(self, y, f_info_struct):
        return _BoundedNewtonState(jnp.zeros_like(y))

    def query(self, y, f_info, state):
        return _BoundedNewtonState(jnp.linalg.lstsq(f_info.jac.as_matrix(), f_info.residual)[0])

    def step(self, step_size, state):
        radius = jnp.asarray(self.max_step, dtype=state.newton.dtype) * jnp.minimum(step_size, 1.0)
        n = jnp.abs(state.newton)
        scale = jnp.minimum(1.0, jnp.min(jnp.where(n > radius, radius / jnp.where(n > 0, n, 1.0), 1.0)))
        return -scale * state.newton, optx.RESULTS.successful


class BoundedGaussNewton(optx.AbstractGaussNewton):
    """Gauss-Newton with bounded steps in a classical trust region (`_BoundedNewtonDescent`,
    `optimistix.ClassicalTrustRegion`): the telemetry fit's `"lm"` (`max_step` > 0). Near the solution the
    steps are full Gauss-Newton steps (quadratic convergence on small residuals)."""

    rtol: float
    atol: float
    norm: Callable
    descent: _BoundedNewtonDescent
    search: optx.ClassicalTrustRegion
    verbose: Callable

    def __init__(self, rtol: float, atol: float, max_step: float | tuple[float, ...]):
        self.rtol, self.atol, self.norm = rtol, atol, optx.max_norm
        self.descent = _BoundedNewtonDescent(max_step)
        self.search = optx.ClassicalTrustRegion()
        self.verbose = _quiet


def _quiet(**kwargs) -> None:
    """optimistix's `verbose` hook: print nothing (a module-level function: equal across solver instances)."""


def make_solver(solver: str, rtol: float, atol: float, learning_rate: float = 0.02,
                max_step: float | tuple[float, ...] | None = None):
    """The optimistix solver named `solver` (`SOLVERS`). `learning_rate` is adam's, in coordinate units;
    `max_step` (> 0, `"lm"` only): bounded Gauss-Newton steps (`BoundedGaussNewton`) instead of optimistix's
    Levenberg-Marquardt."""
    if solver not in SOLVERS:
        raise ValueError(f"solver = {solver!r}: allowed values are {', '.join(SOLVERS)}")
    kw = {"rtol": rtol, "atol": atol}
    if solver in ("adam", "lbfgs"):
        return optx.OptaxMinimiser(optax.adam(learning_rate) if solver == "adam" else optax.lbfgs(), **kw)
    if solver == "lm" and max_step is not None:
        return BoundedGaussNewton(rtol, atol, max_step)
    least_squares = {"lm": optx.LevenbergMarquardt, "dogleg": optx.Dogleg, "gauss_newton": optx.GaussNewton}
    return least_squares[solver](**kw)


def _residual_fn(u, problem):
    return _residuals_lm(u, problem), None


def _cost_fn(u, problem):
    r = _residuals_lm(u, problem)
    return 0.5 * jnp.sum(r * r), None


_CHUNK = 64  # most solver steps per compiled call


def _iteration(solver, u, problem):
    """What the solver iterates: the residuals (Gauss-Newton family, forward-mode Jacobian) or the cost
    $\\tfrac12\\sum r^2$ (optax minimisers), its options, and its initial state as a function of nothing."""
    gauss_newton = isinstance(solver, optx.AbstractGaussNewton)
    fn, options = (_residual_fn, {"jac": "fwd"}) if gauss_newton else (_cost_fn, {})
    f_struct = jax.eval_shape(lambda: fn(u, problem)[0])
    init = lambda: solver.init(fn, u, problem, options, f_struct, None, frozenset())
    return fn, options, init, gauss_newton


def _gauss_newton_converged(solver, u, f_info) -> Bool[Array, ""]:
    """The full Gauss-Newton step from the accepted point `u` (residuals and Jacobian `f_info`), the
    minimum-norm solution of $J\\delta = -r$, is below the solver's tolerance in every coordinate
    ($|\\delta_i| < atol + rtol\\,|u_i|$, optimistix's test of a step taken). Without it a trust-region solver
    spends tens of rejected steps at round-off level before its own test passes. Never true at a failed
    evaluation (residuals `FAIL`, zero Jacobian)."""
    r, J = f_info.residual, f_info.jac.as_matrix()
    delta = jnp.linalg.lstsq(J, r)[0]
    small = jnp.all(jnp.abs(delta) < solver.atol + solver.rtol * jnp.abs(u))
    return small & jnp.any(r != FAIL) & jnp.all(jnp.isfinite(delta))


@program
def _start(solver, u, problem):
    """The solver's initial state (its arrays) and first termination test."""
    fn, options, init, _ = _iteration(solver, u, problem)
    state = init()
    done, result = solver.terminate(fn, u, problem, options, state, frozenset())
    return eqx.filter(state, eqx.is_array), done, result


@program
def _advance(solver, u, problem, dynamic, n):
    """Up to `n` (<= `_CHUNK`) solver steps from (`u`, state arrays `dynamic`), stopping early when the
    solver terminates or fails. Returns the new point and state arrays, the steps taken, the termination flag
    and result, the cost $\\tfrac12\\sum r^2$ of the accepted point after each step, and the residuals and
    Jacobian at the new point (Gauss-Newton family: from the solver state; optax: `None`, `solve` evaluates
    them at the end). Only arrays cross between calls: the static part of the state is rebuilt from its shape.
    No host callback inside, so the program goes into JAX's persistent compilation cache."""
    fn, options, init, gauss_newton = _iteration(solver, u, problem)
    static = eqx.filter(eqx.filter_eval_shape(init), lambda x: isinstance(x, jax.ShapeDtypeStruct), inverse=True)
    tags = frozenset()

    def cond(carry):
        _, _, k, done, result, _ = carry
        return (k < n) & jnp.invert(done) & (result == optx.RESULTS.successful)

    def body(carry):
        u, dynamic, k, _, _, costs = carry
        u, state, _ = solver.step(fn, u, problem, options, eqx.combine(dynamic, static), tags)
        done, result = solver.terminate(fn, u, problem, options, state, tags)
        if gauss_newton:
            done = done | _gauss_newton_converged(solver, u, state.f_info)
        finite = jnp.all(jnp.isfinite(u))
        result = optx.RESULTS.where(finite, result, optx.RESULTS.nonfinite)
        cost = 0.5 * jnp.sum(state.f_info.residual ** 2) if gauss_newton else state.f
        return u, eqx.filter(state, eqx.is_array), k + 1, done, result, costs.at[k].set(cost)

    carry = (u, dynamic, jnp.array(0), jnp.array(False), optx.RESULTS.successful,
             jnp.full(_CHUNK, jnp.nan, dtype=u.dtype))
    u, dynamic, k, done, result, costs = jax.lax.while_loop(cond, body, carry)
    if not gauss_newton:
        return u, dynamic, k, done, result, costs, None, None
    f_info = eqx.combine(dynamic, static).f_info  # of the last accepted point, which is `u`
    return u, dynamic, k, done, result, costs, f_info.residual, f_info.jac.as_matrix()


def result_name(result) -> str:
    """The name of an `optimistix.RESULTS` value (`"successful"`, `"nonlinear_max_steps_reached"`, ...)."""
    for name in optx.RESULTS._name_to_item:
        if result == getattr(optx.RESULTS, name):
            return name
    return "unknown"


@dataclasses.dataclass(frozen=True)
class Solution:
    """One solver run: the final coordinates `u`, `status` (`result_name`), `steps`, the `residuals` and
    `jacobian` at `u` (all `FAIL` and 0 where the model evaluation failed), `history` (the cost
    $\\tfrac12\\sum r^2$ of the accepted point after each solver step), `wall_s` (compilation included) and
    `initial_residuals` (at `u0`; Gauss-Newton family, whose first step evaluates there, else `None`)."""

    u: np.ndarray
    status: str
    steps: int
    residuals: np.ndarray
    jacobian: np.ndarray
    history: np.ndarray
    wall_s: float
    initial_residuals: np.ndarray | None = None

    @property
    def chi2(self) -> float:
        """$\\sum r^2$ at `u`."""
        return float(self.residuals @ self.residuals)

    @property
    def converged(self) -> bool:
        """The solver's own termination test passed."""
        return self.status == "successful"


def solve(
    problem: AbstractResiduals,
    u0: Float[ArrayLike, " P"],
    solver: Any,
    *,
    max_steps: int,
    progress: Callable[[str], None] | None = None,
    every: float = 1.0,
) -> Solution:
    """Minimise $\\sum r(u)^2$ from `u0` with `solver` (`make_solver`) in at most `max_steps` steps.
    `progress` receives lines `"step N, cost C"` (at most one per `every` seconds). A failure is reported in
    the `Solution`'s `status`, never raised.

    The steps run in compiled chunks (`_advance`): 1 step, then twice as many each call while a call takes
    under `every` seconds (at most `_CHUNK`). Between chunks the host reports progress and keeps the cost
    history."""
    t0 = time.perf_counter()
    u = jnp.asarray(u0, dtype=float)
    dynamic, done, result = _start(solver, u, problem)
    steps, history, chunk, last = 0, [], 1, t0
    r = J = r0 = None
    while not bool(done) and result == optx.RESULTS.successful and steps < max_steps:
        tc = time.perf_counter()
        n = min(chunk, _CHUNK, max_steps - steps)
        u, dynamic, k, done, result, costs, r, J = _advance(solver, u, problem, dynamic, jnp.asarray(n))
        k = int(k)
        if steps == 0 and k == 1 and r is not None:  # the first step accepts `u0`: the residuals there
            r0 = np.asarray(r)
        steps += k
        history.extend(np.asarray(costs[:k]).tolist())
        now = time.perf_counter()
        if now - tc < every:
            chunk *= 2
        if progress is not None and now - last >= every:
            last = now
            progress(f"step {steps}, cost {history[-1]:.6e}")
    if result == optx.RESULTS.successful and not bool(done):
        result = optx.RESULTS.nonlinear_max_steps_reached
    if r is None:  # optax minimisers (or no step taken): evaluate at the final point
        ev = evaluate(u, problem)
        r, J = ev.residuals, ev.jacobian
    return Solution(u=np.asarray(u), status=result_name(result), steps=steps, residuals=np.asarray(r),
                    jacobian=np.asarray(J), history=np.asarray(history), wall_s=time.perf_counter() - t0,
                    initial_residuals=r0)


# ------------------------------------------------------------------------------------------------------------
# Covariance and identifiability
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Analysis:
    """`analyse`'s outcome: `chi2` ($\\sum r^2$), `dof` (n - P), `s2` (the residual variance used),
    `covariance` (P, P) in the fitted coordinates, `sigma_u` (P,) their sigmas (`inf`: undetermined),
    `correlation` (P, P; NaN rows for undetermined coordinates), `condition_number`, `singular_values`
    (relative, descending), `undetermined` / `poorly_determined` (lists of `{"combination", "coefficients",
    "ratio", "description"}`)."""

    chi2: float
    dof: int
    s2: float
    covariance: np.ndarray
    sigma_u: np.ndarray
    correlation: np.ndarray
    condition_number: float
    singular_values: np.ndarray
    undetermined: list
    poorly_determined: list

    def sigma(self, coords: Sequence[Coordinate], values: np.ndarray) -> np.ndarray:
        """Parameter sigmas [their units]: $p\\,\\sigma_u$ (log coordinates) or $s\\,\\sigma_u$ (linear)."""
        return np.abs(np.array([values[j] * self.sigma_u[j] if c.log else c.scale * self.sigma_u[j]
                                for j, c in enumerate(coords)], dtype=float).reshape(len(coords)))


def _combination(v: np.ndarray, coords: Sequence[Coordinate], seen: str) -> tuple[str, dict, str]:
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


def analyse(
    J: Float[ArrayLike, "n P"],
    r: Float[ArrayLike, " n"],
    coords: Sequence[Coordinate],
    *,
    ident_rtol: float = 1e-6,
    warn_rtol: float = 1e-2,
    s2_floor: float = 0.0,
) -> Analysis:
    """Gauss-Newton covariance and the identifiability report at a solution (module docstring).

    **Arguments:** `J` (n, P) the Jacobian of the weighted residuals `r` (n,) in the fitted coordinates of
    `coords`; `ident_rtol`, `warn_rtol` (singular-value ratios below which a combination is undetermined or
    poorly determined); `s2_floor` (the residual variance is $\\max(s^2_{floor}, \\chi^2/\\mathrm{dof})$).
    """
    J, r = np.asarray(J, dtype=float), np.asarray(r, dtype=float)
    n, p = J.shape
    chi2 = float(r @ r)
    dof = n - p
    s2 = max(float(s2_floor), chi2 / dof) if dof > 0 else 1.0
    norms = np.linalg.norm(J, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    _, sv, vt = np.linalg.svd(J / safe, full_matrices=False)
    if sv.size < p:  # fewer residuals than coordinates: the missing singular values are 0
        _, _, vt = np.linalg.svd(J / safe, full_matrices=True)
        sv = np.concatenate([sv, np.zeros(p - sv.size)])
    smax = sv[0] if sv.size and sv[0] > 0 else 1.0
    rel = sv / smax
    cond = float(np.inf if not rel.size or rel[-1] == 0 else (1.0 / rel[-1]) ** 2)
    bad = [k for k in range(p) if rel[k] < ident_rtol or norms[np.argmax(np.abs(vt[k]))] == 0]
    undetermined, poor = [], []
    for k in range(p):
        v = np.where(norms > 0, vt[k] / safe, vt[k])  # the direction in the fitted coordinates
        terms, coef, desc = _combination(v, coords, "not seen" if k in bad else "barely seen")
        item = {"combination": terms, "coefficients": coef, "ratio": float(rel[k]), "description": desc}
        if k in bad:
            undetermined.append(item)
        elif rel[k] < warn_rtol:
            poor.append(item)
    good = [k for k in range(p) if k not in bad]
    inv = (vt[good].T / sv[good] ** 2) @ vt[good] if good else np.zeros((p, p))
    cov = s2 * inv / safe[:, None] / safe[None, :]
    undet = np.zeros(p, bool)  # the coordinates taking part in an undetermined combination
    for k in bad:
        a = np.abs(vt[k])
        undet |= a >= 0.05 * a.max()
    d = np.sqrt(np.diag(cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / d[:, None] / d[None, :]
    corr = np.where(np.isfinite(corr) & ~np.logical_or.outer(undet, undet), corr, np.nan)
    np.fill_diagonal(corr, 1.0)
    return Analysis(chi2=chi2, dof=dof, s2=s2, covariance=cov, sigma_u=np.where(undet, np.inf, d),
                    correlation=corr, condition_number=cond, singular_values=rel, undetermined=undetermined,
                    poorly_determined=poor)


# ------------------------------------------------------------------------------------------------------------
# The common result
# ------------------------------------------------------------------------------------------------------------


def to_numpy(tree):
    """`tree` with its JAX arrays as NumPy arrays (results hold NumPy)."""
    return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, tree)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeastSquaresResult:
    """What every fit returns (NumPy; `FitResult` and `IdentifyResult` add their own fields).

    - `names`: the fitted coordinates (tied groups as `"a.k=b.k"`, vector components as `"hub.r_BcB_B[2]"`);
      `members`: the parameters each sets; `fields`, `units`: registry field and unit of each; `log`: fitted
      as a log-ratio (else linearly).
    - `values`, `sigma`, `initial`: fitted values, 1-sigma uncertainties (`inf`: not determined) and initial
      guesses [the units].
    - `covariance` (P, P) in the fitted coordinates $u$; `correlation` (P, P); `sigma_note`: the covariance's
      basis in words.
    - `chi2` ($\\sum r^2$ of the weighted residuals), `dof` (residuals - parameters), `chi2_per_dof` (NaN when
      dof <= 0); `cost` = `chi2` / 2.
    - `converged` (the solver's own test, and the model evaluated at the solution), `status` (optimistix
      result name), `message` (plain words), `iterations` (solver steps, all stages and starts).
    - `identifiable` (no undetermined combination), `well_posed` (none poorly determined either),
      `condition_number`, `singular_values` (relative), `undetermined`, `poorly_determined` (see `Analysis`).
    - `scenario`: the input scenario with the fitted values.
    - `solver`, `options` (the settings used), `history` (the cost per solver step), `wall_s` (the whole fit,
      compilation included), `solve_s` (the solver runs alone, compilation included).
    """

    names: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    fields: tuple[str, ...]
    units: tuple[str, ...]
    log: tuple[bool, ...]
    values: np.ndarray
    sigma: np.ndarray
    initial: np.ndarray
    covariance: np.ndarray
    correlation: np.ndarray
    sigma_note: str
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
    solver: str
    options: dict
    history: np.ndarray
    wall_s: float
    solve_s: float

    @property
    def cost(self) -> float:
        """$\\tfrac12\\sum r^2$ at the solution."""
        return 0.5 * self.chi2

    def parameter(self, name: str) -> tuple[float, float]:
        """`(value, sigma)` of one free parameter (`"p0.k"`), also when it is a member of a tied group."""
        for i, members in enumerate(self.members):
            if name == self.names[i] or name in members:
                return float(self.values[i]), float(self.sigma[i])
        raise KeyError(f"{name!r} is not a free parameter; free: {', '.join(self.names)}")


def common_fields(
    coords: Sequence[Coordinate],
    u: np.ndarray,
    a: Analysis,
    *,
    scenario: Scenario,
    history: np.ndarray,
    wall_s: float,
    solve_s: float,
    **settings: Any,
) -> dict[str, Any]:
    """The `LeastSquaresResult` fields of a fit at the coordinates `u` with the analysis `a` (keyword
    arguments for a result type). `settings`: the fields given as they are (`sigma_note`, `converged`,
    `status`, `message`, `iterations`, `solver`, `options`)."""
    values = np.array([float(c.value(u[j])) for j, c in enumerate(coords)], dtype=float).reshape(len(coords))
    return {
        "names": tuple(c.name for c in coords),
        "members": tuple(c.members for c in coords),
        "fields": tuple(c.field for c in coords),
        "units": tuple(c.unit for c in coords),
        "log": tuple(c.log for c in coords),
        "values": values,
        "sigma": a.sigma(coords, values),
        "initial": np.array([c.x0 for c in coords], dtype=float),
        "covariance": a.covariance,
        "correlation": a.correlation,
        "chi2": a.chi2,
        "dof": a.dof,
        "chi2_per_dof": a.chi2 / a.dof if a.dof > 0 else math.nan,
        "identifiable": not a.undetermined,
        "well_posed": not (a.undetermined or a.poorly_determined),
        "condition_number": a.condition_number,
        "singular_values": a.singular_values,
        "undetermined": a.undetermined,
        "poorly_determined": a.poorly_determined,
        "scenario": to_numpy(scenario),
        "history": np.asarray(history, dtype=float),
        "wall_s": float(wall_s),
        "solve_s": float(solve_s),
        **settings,
    }
