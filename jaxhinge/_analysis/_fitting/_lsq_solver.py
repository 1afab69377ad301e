r"""The least-squares solver shared by the modal fit and the telemetry fit.

**Residuals.** A fit is an `AbstractResiduals`: a pytree whose `__call__(u)` returns the weighted residual
vector $r(u)$, whether the model evaluation succeeded and auxiliary outputs (modes, simulated telemetry).
A failed evaluation (failed simulation, non-finite values) gives residuals $10^6$ with zero derivative, so
the solver rejects the step: nothing is raised from inside JAX.

**Jacobian.** Forward mode, $J = \partial r/\partial u$ as one `jvp` batched over the $P$ coordinate
directions (`evaluate`). The solver sees the residuals through a custom JVP that computes this
Jacobian once per point: its linearisations (function value, Jacobian materialisation, trust-region checks)
all reuse it instead of each putting another differentiated model into the compiled loop.

**Solvers.** The optimistix solvers the solver objects build (`_solvers`: `LevenbergMarquardt`, the default of
both fits, `Dogleg`, `GaussNewton`; `Adam`, `LBFGS` through `optimistix.OptaxMinimiser`, on $\tfrac12\sum r^2$). One compiled loop of solver steps per model structure (`_advance`, `eqx.filter_jit`; free
of host callbacks, so JAX's persistent compilation cache keeps it; the host runs it in chunks and reports progress
between them): names never enter the compiled program (`strip_labels`, `anonymous`); values, targets and data
are array arguments.
"""


import abc
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Bool, Float, PyTree

from ..._runtime._programs import program

# ------------------------------------------------------------------------------------------------------------
# Residuals and their Jacobian
# ------------------------------------------------------------------------------------------------------------

FAIL = 1e6  # residual of a failed evaluation


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
    `optimistix.ClassicalTrustRegion`): `LevenbergMarquardt(max_step > 0)`, the telemetry fit's default. Near the solution the
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


class AbstractStructuredSolver(optx.AbstractLeastSquaresSolver):
    """A least-squares method that exploits its problem's structure (multiple shooting's block-tridiagonal normal
    equations, Bock's condensing): it evaluates and linearises its problem itself (`args`: the problem; `y`: the
    flat vector of every unknown) instead of through a residual function, and is run by the same driver as the
    optimistix solvers (`solve`: the compiled chunks of steps, the host's progress, history and statuses).
    `cost(state)`: $\\tfrac12\\sum r^2$ at the accepted point (the driver's history); `terminate` owns its stopping
    rule (the driver adds none)."""

    @abc.abstractmethod
    def cost(self, state) -> Float[Array, ""]:
        """$\\tfrac12\\sum r^2$ of the accepted point of `state`."""

    @abc.abstractmethod
    def report(self, state) -> PyTree:
        """What the solver hands back at the end of a run (arrays: `Solution.extra`), e.g. its last
        linearisation, from which its caller composes the residuals and Jacobian it reports."""


def _residual_fn(u, problem):
    return _residuals_lm(u, problem), None


def _cost_fn(u, problem):
    r = _residuals_lm(u, problem)
    return 0.5 * jnp.sum(r * r), None


_CHUNK = 64  # most solver steps per compiled call


def _iteration(solver, u, problem):
    """What the solver iterates: the residuals (Gauss-Newton family, forward-mode Jacobian), the cost
    $\\tfrac12\\sum r^2$ (optax minimisers) or its own problem (`AbstractStructuredSolver`: no function), its
    options, its initial state as a function of nothing, and its kind (`"gauss_newton"`, `"minimiser"`,
    `"structured"`)."""
    if isinstance(solver, AbstractStructuredSolver):
        return None, {}, lambda: solver.init(None, u, problem, {}, None, None, frozenset()), "structured"
    gauss_newton = isinstance(solver, optx.AbstractGaussNewton)
    fn, options = (_residual_fn, {"jac": "fwd"}) if gauss_newton else (_cost_fn, {})
    f_struct = jax.eval_shape(lambda: fn(u, problem)[0])
    init = lambda: solver.init(fn, u, problem, options, f_struct, None, frozenset())
    return fn, options, init, "gauss_newton" if gauss_newton else "minimiser"


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
    fn, options, init, kind = _iteration(solver, u, problem)
    static = eqx.filter(eqx.filter_eval_shape(init), lambda x: isinstance(x, jax.ShapeDtypeStruct), inverse=True)
    tags = frozenset()

    def cond(carry):
        _, _, k, done, result, _ = carry
        return (k < n) & jnp.invert(done) & (result == optx.RESULTS.successful)

    def body(carry):
        u, dynamic, k, _, _, costs = carry
        u, state, _ = solver.step(fn, u, problem, options, eqx.combine(dynamic, static), tags)
        done, result = solver.terminate(fn, u, problem, options, state, tags)
        if kind == "gauss_newton":
            done = done | _gauss_newton_converged(solver, u, state.f_info)
        finite = jnp.all(jnp.isfinite(u))
        result = optx.RESULTS.where(finite, result, optx.RESULTS.nonfinite)
        cost = {"gauss_newton": lambda: 0.5 * jnp.sum(state.f_info.residual ** 2), "minimiser": lambda: state.f,
                "structured": lambda: solver.cost(state)}[kind]()
        return u, eqx.filter(state, eqx.is_array), k + 1, done, result, costs.at[k].set(cost)

    carry = (u, dynamic, jnp.array(0), jnp.array(False), optx.RESULTS.successful,
             jnp.full(_CHUNK, jnp.nan, dtype=u.dtype))
    u, dynamic, k, done, result, costs = jax.lax.while_loop(cond, body, carry)
    if kind == "structured":
        return u, dynamic, k, done, result, costs, solver.report(eqx.combine(dynamic, static)), None
    if kind != "gauss_newton":
        return u, dynamic, k, done, result, costs, None, None
    f_info = eqx.combine(dynamic, static).f_info  # of the last accepted point, which is `u`
    return u, dynamic, k, done, result, costs, f_info.residual, f_info.jac.as_matrix()


@program
def _start_batch(solver, U, problem):
    """`_start` for each row of `U` (one program: the starts of a multi-start fit)."""
    return eqx.filter_vmap(_start.__wrapped__, in_axes=(None, 0, None))(solver, U, problem)


@program
def _advance_batch(solver, U, problem, dynamic, n):
    """`_advance` for each row of `U` and its state arrays `dynamic` (vmapped: the members step in lockstep,
    each stops when it terminates; the call ends when every member has, or after `n` steps)."""
    return eqx.filter_vmap(_advance.__wrapped__, in_axes=(None, 0, None, 0, None))(solver, U, problem, dynamic, n)


def result_name(result, member: int | None = None) -> str:
    """The name of an `optimistix.RESULTS` value (`"successful"`, `"nonlinear_max_steps_reached"`, ...); of its
    `member`-th entry when it is batched (`solve_batch`)."""
    value = np.asarray(result._value)
    value = value if member is None else value[member]
    for name in optx.RESULTS._name_to_item:
        if value == np.asarray(getattr(optx.RESULTS, name)._value):
            return name
    return "unknown"


@dataclasses.dataclass(frozen=True)
class Solution:
    """One solver run: the final coordinates `u`, `status` (`result_name`), `steps`, the `residuals` and
    `jacobian` at `u` (all `FAIL` and 0 where the model evaluation failed), `history` (the cost
    $\\tfrac12\\sum r^2$ of the accepted point after each solver step), `wall_s` (compilation included) and
    `initial_residuals` (at `u0`; Gauss-Newton family, whose first step evaluates there, else `None`);
    `extra`: what a structured solver reports at its end (`AbstractStructuredSolver.report`), else `None`."""

    u: np.ndarray
    status: str
    steps: int
    residuals: np.ndarray
    jacobian: np.ndarray
    history: np.ndarray
    wall_s: float
    initial_residuals: np.ndarray | None = None
    extra: Any = None

    @property
    def chi2(self) -> float:
        """$\\sum r^2$ at `u`."""
        return float(self.residuals @ self.residuals)

    @property
    def converged(self) -> bool:
        """The solver's own termination test passed."""
        return self.status == "successful"


def solve(
    problem: AbstractResiduals | eqx.Module,
    u0: Float[ArrayLike, " P"],
    solver: Any,
    *,
    max_steps: int,
    progress: Callable[[str], None] | None = None,
    every: float = 1.0,
) -> Solution:
    """Minimise $\\sum r(u)^2$ from `u0` with `solver` (an optimistix solver: `AbstractFitSolver.optimiser`, on the
    `AbstractResiduals` `problem`; or an `AbstractStructuredSolver` on its own `problem`) in at most `max_steps` steps.
    `progress` receives lines `"step N, cost C"` (at most one per `every` seconds). A failure is reported in
    the `Solution`'s `status`, never raised.

    The steps run in compiled chunks (`_advance`): 1 step, then twice as many each call while a call takes
    under `every` seconds (at most `_CHUNK`). Between chunks the host reports progress and keeps the cost
    history."""
    return _drive(problem, jnp.asarray(u0, dtype=float), solver, max_steps=max_steps, progress=progress,
                  every=every, batched=False)[0]


def solve_batch(
    problem: AbstractResiduals,
    U0: Float[ArrayLike, "S P"],
    solver: Any,
    *,
    max_steps: int,
    progress: Callable[[str], None] | None = None,
    every: float = 1.0,
) -> list[Solution]:
    """`solve` from each row of `U0` (S starts) as one batched program (`_advance_batch`, the solver vmapped over
    the starts): one `Solution` per start, each with its own status, steps and history (a member that has
    terminated stops stepping while the others go on). `progress` lines: `"step N: K of S starts running,
    lowest cost C"`. Gauss-Newton family only (the optax minimisers are not batched)."""
    return _drive(problem, jnp.asarray(U0, dtype=float), solver, max_steps=max_steps, progress=progress,
                  every=every, batched=True)


def _drive(problem, U, solver, *, max_steps: int, progress, every: float, batched: bool) -> list[Solution]:
    """The host loop of `solve` (one start, `U` of shape (P,): `_start`, `_advance`) and `solve_batch` (S starts,
    (S, P): `_start_batch`, `_advance_batch`): compiled chunks of steps, 1 step first, then twice as many each call
    while a call takes under `every` seconds (at most `_CHUNK`); between chunks the host keeps each start's cost
    history and reports progress. A start stops when it terminates or fails; the loop when every start has, or
    after `max_steps` lockstep steps."""
    t0 = time.perf_counter()
    start, advance = (_start_batch, _advance_batch) if batched else (_start, _advance)
    S = U.shape[0] if batched else 1
    col = (lambda a: np.asarray(a)) if batched else (lambda a: np.asarray(a)[None])  # one entry per start
    row = (lambda a, i: np.asarray(a)[i]) if batched else (lambda a, i: np.asarray(a))  # (index on the host)
    running = lambda d, res: ~col(d) & (col(res._value) == np.asarray(optx.RESULTS.successful._value))
    dynamic, done, result = start(solver, U, problem)
    steps, history = np.zeros(S, dtype=int), [[] for _ in range(S)]
    r0: list[np.ndarray | None] = [None] * S
    chunk, last, total, r, J = 1, t0, 0, None, None
    while total < max_steps and np.any(running(done, result)):
        tc = time.perf_counter()
        n = min(chunk, _CHUNK, max_steps - total)
        U, dynamic, k, done, result, costs, r, J = advance(solver, U, problem, dynamic, jnp.asarray(n))
        k, costs = col(k), np.asarray(costs).reshape(S, -1)
        for i in range(S):
            if total == 0 and k[i] == 1 and r is not None and J is not None:  # the first step accepts the start
                r0[i] = row(r, i)
            history[i].extend(costs[i, :k[i]].tolist())
        steps += k
        total += int(k.max())
        now = time.perf_counter()
        if now - tc < every:
            chunk *= 2
        if progress is not None and now - last >= every:
            last = now
            if batched:
                best = min((h[-1] for h in history if h), default=float("nan"))
                progress(f"step {total}: {int(np.sum(running(done, result)))} of {S} starts running, lowest cost "
                         f"{best:.6e}")
            else:
                progress(f"step {total}, cost {history[0][-1]:.6e}")
    still = running(done, result)
    wall = time.perf_counter() - t0
    structured = isinstance(solver, AbstractStructuredSolver)
    out = []
    for i in range(S):
        u = row(U, i)
        extra = None
        if structured:  # its residuals are its caller's to compose, from its report
            ri, Ji = np.zeros(0), np.zeros((0, u.size))
            extra = jax.tree.map(lambda a, i=i: row(a, i), r) if r is not None else None
        elif r is None:  # optax minimisers (or no step taken): evaluate at the final point
            ev = evaluate(jnp.asarray(u), problem)
            ri, Ji = np.asarray(ev.residuals), np.asarray(ev.jacobian)
        else:
            ri, Ji = row(r, i), row(J, i)
        status = "nonlinear_max_steps_reached" if still[i] else result_name(result, i if batched else None)
        out.append(Solution(u=u, status=status, steps=int(steps[i]), residuals=ri, jacobian=Ji,
                            history=np.asarray(history[i]), wall_s=wall, initial_residuals=r0[i], extra=extra))
    return out
