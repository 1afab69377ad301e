r"""Multiple shooting's solver (`_shooting` sets the problem up; the method: its module docstring): the
Levenberg-Marquardt step of the data and weighted continuity defects by block elimination (`penalty_step`),
Bock's condensing (`condensed`), and the two phases driven from the host with progress (`solve_multiple`)."""

import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..._runtime._programs import program
from ._lsq_solver import FAIL, Solution
from ._shooting import Linearisation, ShootingProblem, chain, evaluate, linearise

__all__ = ["condensed", "penalty_step", "solve_multiple"]

_SWITCH = 1e-2  # the first phase ends when a step lowers the cost by less than this fraction of it
_SIGMA_TOL = 1e-3  # the second ends when a step moves no coordinate by more than this many of its sigmas


# ------------------------------------------------------------------------------------------------------------


def _gaps(phi, x0, Z):
    """The continuity defects (S, n): row s is $\\Phi_{s-1} - z_s$, $\\Phi_{-1} = x_0$ (divided by `c`: the
    weighted residuals)."""
    return jnp.concatenate([x0[None], phi[:-1]]) - Z


@program
def penalty_step(lin: Linearisation, Z, c, lam):
    """The Levenberg-Marquardt step $(\\delta Z, \\delta u)$ and its predicted reduction of $\\sum r^2$, of the data
    and weighted-defect residuals with damping
    `lam` (Marquardt: `lam` times the diagonal of $J^TJ$), by block elimination: the normal equations are block
    tridiagonal in the segment states (diagonal $D_s$, off-diagonal $O_s$), bordered by the coordinates ($C_s$,
    $U$). A scan eliminates the segments (Cholesky of each pivot block), then the $P \\times P$ Schur complement
    gives $\\delta u$ and a backward scan every $\\delta z_s$."""
    n = Z.shape[1]
    E = _gaps(lin.phi, lin.x0, Z) / c
    ic = 1.0 / c
    Gh = lin.G * ic[None, :, None]  # rows scaled: the defect e_{s+1}'s derivative in z_s
    Hh = lin.H * ic[None, :, None]
    Hprev = jnp.concatenate([(lin.X0 * ic[:, None])[None], Hh[:-1]])  # e_s's derivative in u
    zero = jnp.zeros((1, n, n), Z.dtype)
    Gnext = jnp.concatenate([Gh[:-1], zero])  # e_{s+1}'s derivative in z_s (none after the last segment)
    Enext = jnp.concatenate([E[1:], jnp.zeros((1, n), Z.dtype)])
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

    def body(carry, x):
        a, Sm = carry
        es, Gs, Hs = x  # the defect into the next segment, this segment's derivatives
        return (es + Gs @ a, Gs @ Sm + Hs), (a, Sm)

    a0, S0 = e[0], lin.X0
    _, (a, Sm) = jax.lax.scan(body, (a0, S0), (jnp.concatenate([e[1:], e[:1]]), lin.G, lin.H))
    rt = lin.r + jnp.einsum("smn,sn->sm", lin.A, a)
    Jt = jnp.einsum("smn,snp->smp", lin.A, Sm) + lin.B
    return a, Sm, rt, Jt




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
    """Fit by multiple shooting from the coordinates `u0` (module docstring). **Returns** `(Solution, info)`: the
    solution's residuals and Jacobian are single shooting's at the fitted coordinates (in the record's sample
    order), `info` the segments, steps per phase and the continuity defects (`max_defect`: the largest defect
    relative to its component's sigma `c`; `max_defect_abs`: per state component)."""
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    prob = sp.prob
    opts = sp.options
    u = jnp.asarray(u0, dtype=float)
    starts, r_init, ok0 = chain(u, prob)
    Z = jnp.asarray(np.asarray(starts)[:, prob.lead:])  # continuous at the start: the initial guess's run
    c = prob.c
    S = Z.shape[0]

    def merit(r, phi, ok, x0, Z):
        if not bool(np.all(np.asarray(ok))):
            return math.inf
        E = np.asarray(_gaps(phi, x0, Z) / c)
        return float(np.sum(np.asarray(r) ** 2) + np.sum(E**2))

    def lin_at(Z, u, fine=None):
        """The linearisation at `(Z, u)`: residuals, end states and initial state at the fit's step (`fine`:
        `evaluate`'s, when it has run there), their derivatives from the coarser pass (`jacobian_factor`)."""
        r, phi, ok, x0 = evaluate(Z, u, prob) if fine is None else fine
        if sp.coarse is prob:
            return linearise(Z, u, prob)
        d = linearise(Z, u, sp.coarse)
        return Linearisation(r, phi, ok & d.ok, d.A, d.G, d.B, d.H, x0, d.X0)

    history, last = [], t0
    label = f"identify (multiple shooting, {S} segments of {sp.segment_s:g} s)"

    def report(what: str, force: bool = False):
        nonlocal last
        now = time.perf_counter()
        if force or now - last >= every:
            last = now
            say(f"{label}: {what}, {now - t0:.1f} s")

    t_step = [t0]

    def eta(remaining: float) -> str:
        """`, N s per step, about M s to go`: the last step's time (compilation is in the first), times the
        steps still expected."""
        now = time.perf_counter()
        per, t_step[0] = now - t_step[0], now
        return f", {per:.1f} s per step, about {per * remaining:.0f} s to go" if math.isfinite(remaining) else ""

    lam, nu, steps_a = 1e-3, 2.0, 0
    lin = lin_at(Z, u)
    cost = merit(lin.r, lin.phi, lin.ok, lin.x0, Z)
    # at the solution the data's cost is about its degrees of freedom (residuals of the stated noise) and the
    # defects' cost small: the excess over that, and how fast it falls, give the steps still to go (progress)
    floor = float(np.sum(np.asarray(prob.weight) > 0) - u.size)
    excess = max(cost - floor, 0.0)
    status = "successful"
    # phase 1: Levenberg-Marquardt on data and weighted defects (Nielsen's damping update)
    while steps_a < opts.max_steps:
        dZ, du, pred = penalty_step(lin, Z, c, jnp.asarray(lam))
        # a bounded step, as single shooting's: no fitted coordinate moves by more than `max_step` (the solver's:
        # default a log-ratio 0.5, a factor 1.65), so an iterate never leaves the data's basin for a model the
        # segments cannot follow (0: unbounded)
        big = float(jnp.max(jnp.abs(du)))
        scale = min(1.0, max_step / big) if big > 0 and max_step > 0 else 1.0
        dZ, du, pred = scale * dZ, scale * du, scale * float(pred)
        Zt, ut = Z + dZ, u + du
        rt, phit, okt, x0t = evaluate(Zt, ut, prob)
        new = merit(rt, phit, okt, x0t, Zt)
        steps_a += 1
        rho = (cost - new) / max(float(pred), 1e-300)
        if new < cost:
            small = (cost - new) <= _SWITCH * cost
            Z, u, cost = Zt, ut, new
            lam, nu = lam * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), 2.0
            lin = lin_at(Z, u, (rt, phit, okt, x0t))
            history.append(0.5 * cost)
            ratio, excess = max(cost - floor, 1e-300) / max(excess, 1e-300), max(cost - floor, 0.0)
            # steps until one lowers the cost by less than _SWITCH of it, at this ratio; then ~3 condensed
            togo = (math.log(_SWITCH * cost / max(excess * (1 - ratio), 1e-300)) / math.log(ratio)
                    if 0 < ratio < 1 else math.inf)
            report(f"step {steps_a}, cost {0.5 * cost:.6e}, damping {lam:.1e}"
                   + eta(max(togo, 0.0) + 3.0))
            if small:
                break
        else:
            lam, nu = lam * nu, nu * 2.0
            if lam > 1e10:
                break
    # phase 2: condensed Gauss-Newton (continuity as constraints) until a step moves no coordinate by 1e-3 sigma
    steps_b, prev_big = 0, math.inf
    while True:
        a, Sm, rt, Jt = condensed(lin, Z)
        rr = np.asarray(rt).reshape(-1)
        JJ = np.asarray(Jt).reshape(rr.size, -1)
        du = np.linalg.lstsq(JJ, -rr, rcond=None)[0]
        dof = max(rr.size - du.size, 1)
        cov = float(rr @ rr) / dof * np.linalg.pinv(JJ.T @ JJ)
        sigma_u = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        tol = np.maximum(atol + rtol * np.abs(np.asarray(u)), _SIGMA_TOL * sigma_u)
        if steps_b > 0 and np.all(np.abs(du) < tol):
            break
        if steps_b >= opts.max_steps:
            status = "nonlinear_max_steps_reached"
            break
        Z = Z + a + jnp.einsum("snp,p->sn", Sm, jnp.asarray(du))
        u = u + jnp.asarray(du)
        lin = lin_at(Z, u)
        steps_b += 1
        if not bool(np.all(np.asarray(lin.ok))):
            status = "nonfinite"
            break
        history.append(0.5 * float(np.sum(np.asarray(lin.r) ** 2)))
        e = np.asarray(_gaps(lin.phi, lin.x0, Z))
        big = float(np.max(np.abs(du) / np.where(sigma_u > 0, sigma_u, np.inf)))
        rate = big / prev_big if steps_b > 1 and 0 < big < prev_big else math.nan
        prev_big = big
        togo = math.log(_SIGMA_TOL / big) / math.log(rate) if 0 < rate < 1 and big > _SIGMA_TOL else math.nan
        report(f"condensed step {steps_b}, cost {history[-1]:.6e}, largest defect "
               f"{np.max(np.abs(e) / np.asarray(c)):.1e} c, largest step {big:.1e} sigma"
               + eta(togo + 1.0))
    # the segments' states on single shooting's trajectory at u (continuous: the defects at round-off), and the
    # residuals and Jacobian there
    if status == "successful":
        starts, _, _ = chain(u, prob)
        Z = jnp.asarray(np.asarray(starts)[:, prob.lead:])
        lin = lin_at(Z, u)
    e = np.asarray(_gaps(lin.phi, lin.x0, Z))
    a, Sm, rt, Jt = condensed(lin, Z)
    # single shooting's residuals and Jacobian at the solution, in the record's sample order
    seg, point = sp.seg, sp.point
    C = len(sp.columns)
    r_seg = np.asarray(lin.r).reshape(S, prob.K + 1, C)
    J_seg = np.asarray(Jt).reshape(S, prob.K + 1, C, -1)
    r = r_seg[seg, point].reshape(-1)
    J = J_seg[seg, point].reshape(r.size, -1)
    r0 = np.asarray(r_init).reshape(S, prob.K + 1, C)[seg, point].reshape(-1)
    if status != "successful" or not bool(np.all(np.asarray(lin.ok))):
        r, J = np.full_like(r, FAIL), np.zeros_like(J)
    wall = time.perf_counter() - t0
    info = {"method": "multiple", "segments": S, "segment_s": sp.segment_s, "continuity_rtol": opts.continuity_rtol,
            "jacobian_dt": sp.coarse.dt,
            "steps": {"penalty": steps_a, "condensed": steps_b},
            "max_defect": float(np.max(np.abs(e) / np.asarray(c))),
            "max_defect_abs": np.max(np.abs(e), axis=0).tolist()}
    say(f"{label}: {steps_a} + {steps_b} steps, chi2 {float(r @ r):.6g}, largest continuity defect "
        f"{info['max_defect']:.1e} of its sigma, {status}")
    sol = Solution(u=np.asarray(u), status=status, steps=steps_a + steps_b, residuals=r, jacobian=J,
                   history=np.asarray(history), wall_s=wall, initial_residuals=r0 if bool(ok0) else None)
    return sol, info
