r"""Multiple shooting's solver (`_segments` sets the problem up; the method: its module docstring): the
Levenberg-Marquardt step of the data and weighted continuity defects by block elimination (`penalty_step`),
Bock's condensing (`condensed`), both phases one structured solver (`MultipleShootingSolver`) run by the fits' one
driver (`_lsq_solver.solve`: compiled chunks of steps, progress, history, statuses), and the result composed as
single shooting's at the solution (`solve_multiple`)."""

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

from ..._runtime._programs import program
from ._lsq_solver import FAIL, AbstractStructuredSolver, Solution, solve
from ._segments import Linearisation, Segments, ShootingProblem, chain, evaluate, linearise

__all__ = ["MultipleShootingSolver", "condensed", "penalty_step", "solve_multiple"]

_SWITCH = 1e-2  # the first phase ends when a step lowers the cost by less than this fraction of it
_SIGMA_TOL = 1e-3  # the second ends when a step moves no coordinate by more than this many of its sigmas
_DAMPING_MAX = 1e10  # the first phase also ends when its damping grows past this (no step lowers the cost)


# ------------------------------------------------------------------------------------------------------------


def _layout(x0, Z):
    """`(first (R S,), record (R S,))`: whether each segment row starts its record, and its record's index (the
    rows run record after record, S each; `x0` (R, n) holds each record's initial state)."""
    R, RS = x0.shape[0], Z.shape[0]
    i = jnp.arange(RS)
    return i % (RS // R) == 0, i // (RS // R)


def _gaps(phi, x0, Z):
    """The continuity defects (R S, n): row s is $\\Phi_{s-1} - z_s$, and for a record's first segment
    $x_0 - z_s$ with that record's initial state (divided by `c`: the weighted residuals)."""
    first, rec = _layout(x0, Z)
    prev = jnp.concatenate([x0[:1], phi[:-1]])
    return jnp.where(first[:, None], x0[rec], prev) - Z


@program
def penalty_step(lin: Linearisation, Z, c, lam):
    """The Levenberg-Marquardt step $(\\delta Z, \\delta u)$ and its predicted reduction of $\\sum r^2$, of the data
    and weighted-defect residuals with damping
    `lam` (Marquardt: `lam` times the diagonal of $J^TJ$), by block elimination: the normal equations are block
    tridiagonal in the segment states (diagonal $D_s$, off-diagonal $O_s$), bordered by the coordinates ($C_s$,
    $U$). A scan eliminates the segments (Cholesky of each pivot block), then the $P \\times P$ Schur complement
    gives $\\delta u$ and a backward scan every $\\delta z_s$."""
    n = Z.shape[1]
    first, rec = _layout(lin.x0, Z)
    last = jnp.concatenate([first[1:], jnp.ones(1, bool)])  # the row ends its record: no defect after it
    E = _gaps(lin.phi, lin.x0, Z) / c
    ic = 1.0 / c
    Gh = lin.G * ic[None, :, None]  # rows scaled: the defect e_{s+1}'s derivative in z_s
    Hh = lin.H * ic[None, :, None]
    # e_s's derivative in u: its record's initial state's for a first segment, else the previous segment's
    Hprev = jnp.where(first[:, None, None], (lin.X0 * ic[None, :, None])[rec],
                      jnp.concatenate([Hh[:1], Hh[:-1]]))
    Gnext = jnp.where(last[:, None, None], 0.0, Gh)  # e_{s+1}'s derivative in z_s (none after a record's last)
    Enext = jnp.where(last[:, None], 0.0, jnp.concatenate([E[1:], E[:1]]))
    At = jnp.swapaxes(lin.A, 1, 2)
    Gt = jnp.swapaxes(Gnext, 1, 2)
    D = At @ lin.A + jnp.diag(ic**2)[None] + Gt @ Gnext
    O = -Gt * ic[None, None, :]  # block (z_s, z_{s+1})
    Cz = At @ lin.B - Hprev * ic[None, :, None] + Gt @ Hh
    U = jnp.einsum("smp,smq->pq", lin.B, lin.B) + jnp.einsum("snp,snq->pq", Hprev, Hprev)
    gz = jnp.einsum("smn,sm->sn", lin.A, lin.r) - E * ic + jnp.einsum("snk,sn->sk", Gnext, Enext)
    gu = jnp.einsum("smp,sm->p", lin.B, lin.r) + jnp.einsum("snp,sn->p", Hprev, E)
    dD, dU = jax.vmap(jnp.diag)(D), jnp.diag(U)  # Marquardt's scaling: the diagonal of J^T J
    D = D + lam * jax.vmap(jnp.diag)(dD)
    U = U + lam * jnp.diag(dU)
    R = jnp.concatenate([-gz[..., None], Cz], axis=2)  # (S, n, 1 + P): right-hand sides

    def forward(carry, x):
        L_prev, Rt_prev, O_prev = carry
        Ds, Rs, Os = x
        Y = jsl.cho_solve((L_prev, True), O_prev)
        Q = jsl.cho_solve((L_prev, True), Rt_prev)
        Dt = Ds - O_prev.T @ Y
        Rt = Rs - O_prev.T @ Q
        L = jnp.linalg.cholesky(Dt)
        return (L, Rt, Os), (L, Rt)

    init = (jnp.eye(n, dtype=Z.dtype), jnp.zeros_like(R[0]), jnp.zeros((n, n), Z.dtype))
    _, (Ls, Rts) = jax.lax.scan(forward, init, (D, R, O))

    def backward(X_next, x):
        L, Rt, Os = x
        X = jsl.cho_solve((L, True), Rt - Os @ X_next)
        return X, X

    _, X = jax.lax.scan(backward, jnp.zeros_like(R[0]), (Ls, Rts, O), reverse=True)
    xg, XC = X[..., 0], X[..., 1:]
    du = jnp.linalg.solve(U - jnp.einsum("snp,snq->pq", Cz, XC), -gu - jnp.einsum("snp,sn->p", Cz, xg))
    dZ = xg - jnp.einsum("snp,p->sn", XC, du)
    # the reduction of sum r^2 the linear model predicts: -g.d + lam d.Dd (d solves (J^T J + lam D) d = -g)
    pred = -(jnp.sum(gz * dZ) + gu @ du) + lam * (jnp.sum(dD * dZ**2) + dU @ du**2)
    return dZ, du, pred


@program
def condensed(lin: Linearisation, Z):
    """Bock's condensing: continuity as linearised constraints, every $\\delta z_s = a_s + S_s\\,\\delta u$
    (a forward recursion). Returns `(a (S, n), S (S, n, P), r~ (S, M), J~ (S, M, P))`: the data residuals'
    linearisation in $\\delta u$ alone, $\\tilde r_s + \\tilde J_s\\,\\delta u$ ($\\tilde J$ is single shooting's
    Jacobian where the defects are zero)."""
    e = _gaps(lin.phi, lin.x0, Z)  # unweighted defects into each segment
    first, rec = _layout(lin.x0, Z)
    nxt = jnp.concatenate([first[1:], jnp.ones(1, bool)])  # the next row starts a record (or there is none)

    def body(carry, x):
        a, Sm = carry
        es, Gs, Hs, restart, X0s = x  # the defect into the next segment, this segment's derivatives
        a1 = jnp.where(restart, es, es + Gs @ a)  # a record's first segment: its own initial state's
        S1 = jnp.where(restart, X0s, Gs @ Sm + Hs)
        return (a1, S1), (a, Sm)

    a0, S0 = e[0], lin.X0[0]
    rolled = lambda x: jnp.concatenate([x[1:], x[:1]])
    _, (a, Sm) = jax.lax.scan(body, (a0, S0), (rolled(e), lin.G, lin.H, nxt, rolled(lin.X0[rec])))
    rt = lin.r + jnp.einsum("smn,sn->sm", lin.A, a)
    Jt = jnp.einsum("smn,snp->smp", lin.A, Sm) + lin.B
    return a, Sm, rt, Jt




class ShootingArgs(eqx.Module):
    """The solver's problem: the segments at the fit's step (`prob`) and at the derivatives' (`coarse`, the same
    when `same`: `jacobian_factor`)."""

    prob: Segments
    coarse: Segments
    same: bool = eqx.field(static=True)


def _lin_at(args: ShootingArgs, Z, u) -> Linearisation:
    """The linearisation at `(Z, u)`: residuals, end states and initial state at the fit's step, their derivatives
    from the derivatives' pass (`jacobian_factor`)."""
    if args.same:
        return linearise(Z, u, args.prob)
    r, phi, ok, x0 = evaluate(Z, u, args.prob)
    d = linearise(Z, u, args.coarse)
    return Linearisation(r, phi, ok & d.ok, d.A, d.G, d.B, d.H, x0, d.X0)


def _merit(r, phi, ok, x0, Z, c):
    """The first phase's cost $\\sum r^2 + \\sum e^2$ (data and weighted defects); inf where a segment failed."""
    val = jnp.sum(r**2) + jnp.sum((_gaps(phi, x0, Z) / c) ** 2)
    return jnp.where(jnp.all(ok) & jnp.isfinite(val), val, jnp.inf)


class _State(eqx.Module):
    """`phase`: 0 Levenberg-Marquardt on data and weighted defects, 1 condensed Gauss-Newton, 2 the segments put
    on single shooting's trajectory (their linearisation there), 3 done; `stale`: `lin` is not at the current
    point (the next step linearises there first); `merit`: the first phase's cost at the current point; `lam`,
    `nu`: Nielsen's damping; `counts`: steps per phase (first, condensed); `result`: an optimistix result."""

    phase: Int[Array, ""]
    stale: Bool[Array, ""]
    lin: Linearisation
    merit: Float[Array, ""]
    lam: Float[Array, ""]
    nu: Float[Array, ""]
    counts: Int[Array, "2"]
    result: optx.RESULTS


class MultipleShootingSolver(AbstractStructuredSolver):
    """Multiple shooting's two phases (module docstring of `_shooting`) as one structured least-squares solver on
    the flat vector of every unknown (the segment states `Z` (S, n), then the coordinates `u`), run by the fits'
    driver. Each step first linearises at the current point when it moved (one forward-mode pass over every
    segment), then:

    - **first phase**: the Levenberg-Marquardt step by block elimination (`penalty_step`), bounded to `max_step` in
      every fitted coordinate (0: unbounded), tried (`evaluate`) and kept when it lowers the cost (Nielsen's
      damping update); the phase ends when a kept step lowers the cost by less than 1 %, the damping passes
      1e10, or after `phase_steps` steps;
    - **condensed phase**: Bock's condensing (`condensed`) and the full Gauss-Newton step in the coordinates, taken
      unless (after the first) it would move no coordinate by more than `atol + rtol |u|` or 1e-3 of its sigma;
      then the segments are put on single shooting's trajectory (`chain`) and linearised there (the end).

    A segment that fails in the condensed phase ends the run (`nonfinite`); `phase_steps` condensed steps end it
    unconverged."""

    rtol: float
    atol: float
    max_step: float
    phase_steps: int = eqx.field(static=True)
    norm = staticmethod(optx.max_norm)  # (optimistix's field; the stopping rules are the phases' own)
    S: int = eqx.field(static=True)
    n: int = eqx.field(static=True)

    def _split(self, y):
        return y[: self.S * self.n].reshape(self.S, self.n), y[self.S * self.n :]

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        Z, u = self._split(y)
        shape = jax.eval_shape(lambda: _lin_at(args, Z, u))  # a placeholder: the first step linearises
        lin = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shape)
        return _State(jnp.asarray(0), jnp.asarray(True), lin, jnp.asarray(jnp.inf, y.dtype),
                      jnp.asarray(1e-3, y.dtype), jnp.asarray(2.0, y.dtype), jnp.zeros(2, int),
                      optx.RESULTS.successful)

    def step(self, fn, y, args, options, state, tags):
        Z, u = self._split(y)
        c = args.prob.c[0]  # (one sigma per state component, for every record)
        lin = jax.lax.cond(state.stale, lambda: _lin_at(args, Z, u), lambda: state.lin)
        merit = jnp.where(state.stale, _merit(lin.r, lin.phi, lin.ok, lin.x0, Z, c), state.merit)
        state = eqx.tree_at(lambda s: (s.lin, s.merit, s.stale), state, (lin, merit, jnp.asarray(False)))

        def first(state):
            dZ, du, pred = penalty_step(state.lin, Z, c, state.lam)
            big = jnp.max(jnp.abs(du))
            scale = jnp.where((big > 0) & (self.max_step > 0), jnp.minimum(1.0, self.max_step / big), 1.0)
            Zt, ut = Z + scale * dZ, u + scale * du
            rt, phit, okt, x0t = evaluate(Zt, ut, args.prob)
            new = _merit(rt, phit, okt, x0t, Zt, c)
            keep = new < state.merit
            rho = (state.merit - new) / jnp.maximum(scale * pred, 1e-300)
            small = keep & (state.merit - new <= _SWITCH * state.merit)
            lam = jnp.where(keep, state.lam * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3),
                            state.lam * state.nu)
            nu = jnp.where(keep, 2.0, state.nu * 2.0)
            counts = state.counts.at[0].add(1)
            end = small | (lam > _DAMPING_MAX) | (counts[0] >= self.phase_steps)
            y1 = jnp.where(keep, jnp.concatenate([Zt.reshape(-1), ut]), y)
            return y1, _State(jnp.where(end, 1, 0), keep, state.lin, jnp.where(keep, new, state.merit), lam, nu,
                              counts, state.result)

        def condensed_step(state):
            failed = ~jnp.all(state.lin.ok)
            a, Sm, du, small = self._gauss_newton(state.lin, Z, u)
            done = (state.counts[1] > 0) & small
            out_of_steps = ~done & (state.counts[1] >= self.phase_steps)

            def finish():  # the segments on single shooting's trajectory at u
                starts, _, _ = chain(u, args.prob)
                return jnp.concatenate([starts[:, args.prob.lead:].reshape(-1), u])

            def move():
                return jnp.concatenate([(Z + a + jnp.einsum("snp,p->sn", Sm, du)).reshape(-1), u + du])

            stop = failed | out_of_steps
            y1 = jax.lax.cond(stop, lambda: y, lambda: jax.lax.cond(done, finish, move))
            result = optx.RESULTS.where(failed, optx.RESULTS.nonfinite, optx.RESULTS.where(
                out_of_steps, optx.RESULTS.nonlinear_max_steps_reached, state.result))
            counts = state.counts.at[1].add(jnp.where(done | stop, 0, 1))
            return y1, _State(jnp.where(done, 2, 1), ~stop, state.lin, state.merit, state.lam, state.nu, counts,
                              result)

        def last(state):  # linearised on single shooting's trajectory (above): done
            return y, eqx.tree_at(lambda s: s.phase, state, jnp.asarray(3))

        y1, state = jax.lax.switch(jnp.minimum(state.phase, 2), (first, condensed_step, last), state)
        return y1, state, None

    def _gauss_newton(self, lin, Z, u):
        """The condensing at `(Z, u)` and its full Gauss-Newton step in the coordinates, and whether that step is
        below the tolerance (`atol + rtol |u|` or `_SIGMA_TOL` of each coordinate's sigma)."""
        a, Sm, rt, Jt = condensed(lin, Z)
        rr = rt.reshape(-1)
        JJ = Jt.reshape(rr.size, -1)
        du = jnp.linalg.lstsq(JJ, -rr)[0]
        dof = max(rr.size - du.size, 1)
        cov = (rr @ rr) / dof * jnp.linalg.pinv(JJ.T @ JJ)
        sigma_u = jnp.sqrt(jnp.clip(jnp.diag(cov), 0.0, None))
        tol = jnp.maximum(self.atol + self.rtol * jnp.abs(u), _SIGMA_TOL * sigma_u)
        return a, Sm, du, jnp.all(jnp.abs(du) < tol)

    def terminate(self, fn, y, args, options, state, tags):
        return (state.phase == 3) | (state.result != optx.RESULTS.successful), state.result

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return y, aux, {}

    def cost(self, state):
        """The first phase's cost (data and weighted defects) there; the data's after."""
        return 0.5 * jnp.where(state.phase == 0, state.merit, jnp.sum(state.lin.r**2))

    def report(self, state):
        return state.lin, state.counts


def solve_multiple(
    sp: ShootingProblem,
    u0: np.ndarray,
    *,
    rtol: float,
    atol: float,
    max_step: float,
    progress: Callable[[str], None] | None = None,
    every: float = 1.0,
) -> tuple[Solution, dict]:
    """Fit by multiple shooting from the coordinates `u0` (`MultipleShootingSolver` run by the fits' driver).
    **Returns** `(Solution, info)`: the solution's residuals and Jacobian are single shooting's at the fitted
    coordinates (in the record's sample order), `info` the segments, steps per phase and the continuity defects
    (`max_defect`: the largest defect relative to its component's sigma `c`; `max_defect_abs`: per state
    component)."""
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    prob, opts = sp.prob, sp.options
    u = jnp.asarray(u0, dtype=float)
    starts, r_init, ok0 = chain(u, prob)
    Z = jnp.asarray(np.asarray(starts)[:, prob.lead:])  # continuous at the start: the initial guess's run
    S, n = Z.shape  # every record's segments, record after record
    R = sp.records
    label = (f"identify (multiple shooting, {S // R} segments of {sp.segment_s:g} s"
             + (f" in each of {R} records)" if R > 1 else ")"))
    solver = MultipleShootingSolver(rtol, atol, float(max_step), opts.max_steps, S, n)
    run = solve(ShootingArgs(prob, sp.coarse, sp.coarse is prob), jnp.concatenate([Z.reshape(-1), u]), solver,
                max_steps=2 * opts.max_steps + 2, progress=lambda s: say(f"{label}: {s}"), every=every)
    Z, u = (jnp.asarray(x) for x in solver._split(jnp.asarray(run.u)))
    lin, counts = run.extra
    status = run.status
    e = np.asarray(_gaps(lin.phi, lin.x0, Z))
    _, _, _, Jt = condensed(lin, Z)
    # single shooting's residuals and Jacobian at the solution, in the record's sample order
    seg, point = sp.seg, sp.point
    C = len(sp.columns)
    r = np.asarray(lin.r).reshape(R, S // R, prob.K + 1, C)[:, seg, point].reshape(-1)
    J = np.asarray(Jt).reshape(R, S // R, prob.K + 1, C, -1)[:, seg, point].reshape(r.size, -1)
    r0 = np.asarray(r_init).reshape(R, S // R, prob.K + 1, C)[:, seg, point].reshape(-1)
    if status != "successful" or not bool(np.all(np.asarray(lin.ok))):
        r, J = np.full_like(r, FAIL), np.zeros_like(J)
    counts = np.asarray(counts)
    info = {"method": "multiple", "segments": S // R, "segment_s": sp.segment_s,
            "continuity_rtol": opts.continuity_rtol, "jacobian_dt": sp.coarse.dt, **({"records": R} if R > 1 else {}),
            "steps": {"penalty": int(counts[0]), "condensed": int(counts[1])},
            "max_defect": float(np.max(np.abs(e) / np.asarray(prob.c[0]))),
            "max_defect_abs": np.max(np.abs(e), axis=0).tolist()}
    say(f"{label}: {counts[0]} + {counts[1]} steps, chi2 {float(r @ r):.6g}, largest continuity defect "
        f"{info['max_defect']:.1e} of its sigma, {status}")
    sol = Solution(u=np.asarray(u), status=status, steps=int(counts.sum()), residuals=r, jacobian=J,
                   history=run.history, wall_s=time.perf_counter() - t0,
                   initial_residuals=r0 if bool(ok0) else None)
    return sol, info
