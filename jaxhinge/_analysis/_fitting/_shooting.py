r"""Multiple shooting for telemetry fits of long records (`identify(shooting=...)`, docs/telemetry.md).

**Why.** Single shooting integrates the whole record from the initial state at every solver step: a long record
of a lightly damped structure is a strongly nonlinear function of the stiffness (a 15 % frequency error slips the
phase by a quarter period after 1.7 periods), so it needs a growing horizon and hundreds of steps, each one
integrating all the samples. Multiple shooting (Bock 1981) cuts the record into segments integrated side by side,
each from its own initial state, with continuity between them as residuals: far less nonlinear, and parallel.

**Unknowns and residuals.** The record (uniform samples every `m` rk4 steps) is cut into `S` segments of `K`
sample intervals. Segment `s` starts from its own state $z_s$: the flat state after the hub's position and
velocity (hub attitude MRP and rate, hinge angles and rates, wheel speeds), which no other output or
derivative depends on (the position and velocity at each segment start are those of the initial guess's run).
The unknowns are the fit's coordinates $u$ and every $z_s$. The residuals are the data's, segment by segment,
$r_s(z_s, u)$, and the continuity defects

$$e_s = \big(\Phi_{s-1}(z_{s-1}, u) - z_s\big) / c, \qquad \Phi_{-1} = x_0(u)$$

($\Phi_s$: the state at the end of segment $s$, on the MRP set nearer $z_{s+1}$; $x_0$: the scenario's initial
state, known or estimated through $u$). $c$ (per state component) is `continuity_rtol` (default $10^{-3}$) times
the range of that component over the initial guess's run: the stated weight.

**Two phases.**

1. *Levenberg-Marquardt on every residual* (data and weighted defects) from the segment states of the initial
   guess's run (continuous: the defects start at zero; the solver opens them where that fits the data better).
   (Taking the measured states from the data instead starts with large defects and took more steps: 13 against 8
   on tests/test_shooting.py's record.) The normal equations are block tridiagonal in the $z_s$ with a border in $u$: they are solved by
   eliminating the segments one by one (a scan of $S$ factorisations of $n \times n$ blocks) and then the $P
   \times P$ reduced system in $u$; nothing is dense over all the unknowns.
2. *Condensed Gauss-Newton* (Bock's condensing): continuity as constraints, linearised, $\delta z_0 = x_0 -
   z_0 + X_0\,\delta u$, $\delta z_{s+1} = \Phi_s - z_{s+1} + G_s\,\delta z_s + H_s\,\delta u$, so every
   $\delta z_s = a_s + S_s\,\delta u$ and the step is a least-squares problem in $u$ alone with Jacobian
   $\hat J_s = A_s S_s + B_s$. The defects fall quadratically to round-off; where they are zero $\hat J$ is
   single shooting's Jacobian, so the covariance, sigmas and identifiability are single shooting's.

One forward-mode pass per step gives every block: each segment's residuals and end state differentiated in its
$n$ state directions and the $P$ coordinate directions ($A_s, G_s$ and $B_s, H_s$), all segments in one vmapped
program. A step integrates the record once, in $n + P$ directions, only the samples it weighs.
"""

import dataclasses
import math
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Bool, Float

from ..._dynamics._energy import initial_state
from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._runtime._programs import program
from ..._simulation._simulate import flat_state, rk4_step, state_layout, trajectory_of, unflat_state
from ..._simulation._telemetry import Telemetry
from ._lsq_solver import FAIL, Solution

__all__ = ["SHOOTING", "MultipleShooting", "SingleShooting", "as_shooting", "jacobian_factor", "mode_range", "segment_length", "shooting_problem",
           "solve_multiple", "why_not_multiple"]

_ROTATIONAL = 6  # the flat state's first 6 entries (hub position, velocity) are not shooting unknowns
_MIN_INTERVALS = 10  # a segment spans at least this many sample intervals
_MIN_SEGMENTS = 4  # "auto" shoots multiple segments when the record holds at least this many
_SWITCH = 1e-2  # the first phase ends when a step lowers the cost by less than this fraction of it
_SIGMA_TOL = 1e-3  # the second ends when a step moves no coordinate by more than this many of its sigmas


@dataclasses.dataclass(frozen=True)
class SingleShooting:
    """Integrate the whole record from the initial state at every solver step (with the growing horizon,
    `identify(horizon=...)`): for records short compared with the slowest mode (`SHOOTING["single"]`)."""

    name = "single"


@dataclasses.dataclass(frozen=True)
class MultipleShooting:
    """Multiple shooting (module docstring; `SHOOTING["multiple"]`).

    - `segment`: the segment length [s], rounded to whole sample intervals (at least 10); `"auto"`: one period of
      the initial model's slowest flexible mode (`segment_length`).
    - `continuity_rtol`: the continuity defects' sigma, relative to each state component's range over the
      initial guess's run (the defects' weight in the first phase).
    - `max_steps`: the most steps of each phase."""

    segment: float | str = "auto"
    continuity_rtol: float = 3e-2
    max_steps: int = 50
    name = "multiple"

    def __post_init__(self):
        seg = self.segment
        if not (seg == "auto" or (isinstance(seg, (int, float)) and not isinstance(seg, bool) and math.isfinite(seg)
                                  and seg > 0)):
            raise FitError.bad(None, "segment", seg, 'must be "auto" or a duration in seconds > 0')
        r = self.continuity_rtol
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r < 1:
            raise FitError.bad(None, "continuity_rtol", r, "must be a number in (0, 1)")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise FitError.bad(None, "max_steps", self.max_steps, "must be an integer >= 1")


SHOOTING = {"single": SingleShooting, "multiple": MultipleShooting}  # the file and CLI names; also "auto"


def as_shooting(x) -> SingleShooting | MultipleShooting | str:
    """A shooting object from itself, its name or `"auto"` (`identify(shooting=...)`)."""
    if isinstance(x, (SingleShooting, MultipleShooting)) or x == "auto":
        return x
    if isinstance(x, str) and x in SHOOTING:
        return SHOOTING[x]()
    raise FitError.bad(None, "shooting", x, 'must be "auto", "single", "multiple" or a SingleShooting() / '
                       "MultipleShooting(...)")


# ------------------------------------------------------------------------------------------------------------
# Which records can be shot in segments, and how long a segment is
# ------------------------------------------------------------------------------------------------------------


def why_not_multiple(scenario, telemetry: Telemetry, time_offset: bool) -> str | None:
    """Why this record cannot be fitted by multiple shooting (None: it can): the fixed-step rk4 integrator,
    uniform samples on its step grid, no controller in the loop (its state is not a shooting unknown), no time
    offset (`time_offset`: one is fitted or set), no hub position or velocity measured."""
    cfg = scenario.simulation
    if not cfg.integrator.fixed_step:
        return f'integrator = "{cfg.integrator.name}": multiple shooting steps with rk4'
    if scenario.control is not None:
        return "a controller is in the loop (its held command is not a segment state)"
    if time_offset:
        return "a sensor time offset is fitted or set (the samples move off the step grid)"
    bad = [c for c in telemetry.columns if c.startswith(("r_", "v_"))]
    if bad:
        return f"column {bad[0]} measures a position or velocity (not a segment state)"
    if telemetry.samples < 3:
        return "fewer than 3 samples"
    return None if _grid(cfg.dt, telemetry.t) is not None else (
        f"the samples are not uniform on the rk4 grid (dt = {_fmt(cfg.dt)} s)")


def _grid(dt: float, t: np.ndarray) -> tuple[int, int] | None:
    """`(first sample's step index, steps per sample interval)` when the samples are uniform on the `dt` grid."""
    t = np.asarray(t, dtype=float)
    step = (t[-1] - t[0]) / (t.size - 1)
    m = round(step / dt)
    i0 = round(t[0] / dt)
    tol = 1e-9 * max(1.0, abs(t[-1]))
    if m < 1 or abs(t[0] - i0 * dt) > tol or np.max(np.abs(t - (i0 + m * np.arange(t.size)) * dt)) > tol:
        return None
    return i0, m


def mode_range(scenario) -> tuple[float, float]:
    """`(slowest, fastest)` flexible mode frequency [Hz] of the model (free hub; `jaxhinge.modes`); `(inf, 0)`
    without a flexible mode."""
    from .._linear._modes import modes

    f = np.asarray(modes(scenario).frequency_hz, dtype=float)
    f = f[np.isfinite(f) & (f > 0)]
    return (float(f.min()), float(f.max())) if f.size else (math.inf, 0.0)


def segment_length(scenario, frequencies: tuple[float, float] | None = None) -> float:
    """The default segment length [s]: one period of the initial model's slowest flexible mode (`mode_range`).
    Long enough that a segment's samples determine its state, short enough that a 30 % error in stiffness slips
    the fastest mode's phase by about a quarter period at most within it. Infinite without a flexible mode."""
    slowest = (frequencies or mode_range(scenario))[0]
    return 1.0 / slowest if math.isfinite(slowest) and slowest > 0 else math.inf


_JACOBIAN_STEP = 0.05  # the derivatives' rk4 step times the fastest mode's angular frequency, at most


def jacobian_factor(dt: float, m: int, fastest_hz: float) -> int:
    """How many of the fit's rk4 steps one step of the derivatives' pass spans: the largest divisor `f` of the
    steps per sample interval `m` with `2 pi f_max f dt <= 0.05` (rk4's relative error in a derivative is then
    about (0.05)^4 / 120 per radian of the fastest mode: 5e-8), at least 1. The residuals and continuity defects
    are always evaluated at the fit's own `dt`; only the Jacobian blocks use the longer step (the covariance
    and sigmas too: a relative error of ~1e-7 in them; the fitted values solve the fit's residuals at `dt`, moved
    by the Jacobian's error times the residuals' gradient, far below their sigmas)."""
    if fastest_hz <= 0:
        return m
    h_max = _JACOBIAN_STEP / (2 * math.pi * fastest_hz)
    return max([f for f in range(1, m + 1) if m % f == 0 and f * dt <= h_max * (1 + 1e-12)] or [1])


# ------------------------------------------------------------------------------------------------------------
# The problem (a pytree: one compiled program per model structure and segment shape)
# ------------------------------------------------------------------------------------------------------------


class Segments(eqx.Module):
    """A record cut into `S` segments of `K` sample intervals of `m` rk4 steps. `record`: the record's
    `_TelemetryResiduals` (its model, coordinates and sensor model); `data`, `weight` (S, K + 1, C): the samples at
    each segment's K + 1 points (weight 0 where a point is past the record or is the next segment's first);
    `start` (S,): each segment's start time [s] (a whole number of steps `dt`); `base` (S, 6): the hub position and velocity there; `c` (n,):
    the continuity sigma per state component."""

    record: eqx.Module
    data: Float[Array, "S K1 C"]
    weight: Float[Array, "S K1 C"]
    start: Float[Array, " S"]
    base: Float[Array, "S 6"]
    c: Float[Array, " n"]
    K: int = eqx.field(static=True)
    m: int = eqx.field(static=True)
    dt: float = eqx.field(static=True)

    def coarser(self, f: int) -> "Segments":
        """The same segments integrated with steps `f` times longer (`f` divides `m`): the derivatives' pass."""
        return Segments(self.record, self.data, self.weight, self.start, self.base, self.c, self.K, self.m // f,
                        self.dt * f)


def _near(sig, ref):
    """The MRP set of `sig` nearer `ref` (either describes the same attitude)."""
    shadow = -sig / jnp.sum(sig * sig, -1, keepdims=True).clip(1e-300)
    far = jnp.sum((shadow - ref) ** 2, -1, keepdims=True) < jnp.sum((sig - ref) ** 2, -1, keepdims=True)
    return jnp.where(far, shadow, sig)


def _propagate(sc, y0, t_start, K: int, m: int, dt: float):
    """rk4 from the flat state `y0` at time `t_start` (a whole number of steps `dt`) over K sample intervals of m
    steps (the steps, loads and MRP switch of `simulate`'s scan): the states at the K + 1 points (K + 1, state)."""
    start = jnp.round(t_start / dt).astype(int)

    def step(y, j):
        jf = j.astype(y.dtype)
        t0 = jf * dt
        return rk4_step(sc.spacecraft, y, (jf + 1.0) * dt - t0, sc.loads.at(t0)), None

    def interval(y, k):
        y, _ = jax.lax.scan(step, y, start + k * m + jnp.arange(m))
        return y, y

    _, ys = jax.lax.scan(interval, y0, jnp.arange(K))
    return jnp.concatenate([y0[None], ys])


def _outputs(prob: Segments, sc, u, ys, start, data, weight):
    """The weighted residuals (K + 1, C) of one segment's states `ys` and whether they are valid."""
    rec = prob.record
    gain, bias, _ = rec.sensors(u)
    ts = start + jnp.arange(prob.K + 1) * (prob.m * prob.dt)
    traj = trajectory_of(sc, ts, unflat_state(ys, *state_layout(sc.spacecraft)), jnp.asarray(0),
                         jnp.asarray(prob.K * prob.m))
    y = rec.outputs(traj, gain, bias, data, weight)
    return jnp.where(weight > 0, (y - data) * weight, 0.0), traj.success


def _segment(prob: Segments, z, u, start, base, data, weight, ref):
    """One segment from its state `z`: `((residuals (M,), end state (n,) on the MRP set nearer `ref`), ok)`."""
    sc = prob.record.model(u)
    ys = _propagate(sc, jnp.concatenate([base, z]), start, prob.K, prob.m, prob.dt)
    r, ok = _outputs(prob, sc, u, ys, start, data, weight)
    end = ys[-1, _ROTATIONAL:]
    end = end.at[:3].set(_near(end[:3], ref))
    return (r.reshape(-1), end), ok & jnp.all(jnp.isfinite(end))


def _initial(prob: Segments, u, ref):
    """The scenario's initial state (the shooting part, MRP set nearer `ref`) at the coordinates `u`."""
    sc = prob.record.model(u)
    y = flat_state(initial_state(sc.spacecraft, sc.initial))[_ROTATIONAL:]
    return y.at[:3].set(_near(y[:3], ref))


class Linearisation(eqx.Module):
    """Every segment's residuals `r` (S, M), end state `phi` (S, n), `ok` (S,) and their derivatives in its
    state (`A` (S, M, n), `G` (S, n, n)) and in the coordinates (`B` (S, M, P), `H` (S, n, P)); the initial state
    `x0` (n,) and its derivative `X0` (n, P)."""

    r: Float[Array, "S M"]
    phi: Float[Array, "S n"]
    ok: Bool[Array, " S"]
    A: Float[Array, "S M n"]
    G: Float[Array, "S n n"]
    B: Float[Array, "S M P"]
    H: Float[Array, "S n P"]
    x0: Float[Array, " n"]
    X0: Float[Array, "n P"]


def _refs(Z):
    """The MRP each segment's end is compared with: the next segment's start (the last: its own)."""
    return jnp.concatenate([Z[1:, :3], Z[-1:, :3]])


@program
def linearise(Z: Float[Array, "S n"], u: Float[Array, " P"], prob: Segments) -> Linearisation:
    """Residuals, end states and all their derivatives at `(Z, u)`: one forward-mode pass per segment in its n
    state and P coordinate directions, the segments vmapped (side by side)."""
    n, P = Z.shape[1], u.shape[0]

    def one(z, start, base, data, weight, ref):
        def tangent(t):
            f = lambda v: _segment(prob, v[:n], v[n:], start, base, data, weight, ref)
            (r, end), (dr, dend), ok = jax.jvp(f, (jnp.concatenate([z, u]),), (t,), has_aux=True)
            return r, end, ok, dr, dend

        return jax.vmap(tangent, out_axes=(None, None, None, 1, 1))(jnp.eye(n + P, dtype=Z.dtype))

    r, phi, ok, dR, dE = jax.vmap(one)(Z, prob.start, prob.base, prob.data, prob.weight, _refs(Z))
    x0 = _initial(prob, u, Z[0, :3])
    X0 = jax.jacfwd(lambda v: _initial(prob, v, Z[0, :3]))(u)
    return Linearisation(r, phi, ok, dR[..., :n], dE[..., :n], dR[..., n:], dE[..., n:], x0, X0)


@program
def evaluate(Z: Float[Array, "S n"], u: Float[Array, " P"], prob: Segments):
    """`(residuals (S, M), end states (S, n), ok (S,), initial state (n,))` at `(Z, u)`, no derivatives."""
    (r, phi), ok = jax.vmap(lambda z, *a: _segment(prob, z, u, *a))(Z, prob.start, prob.base, prob.data,
                                                                    prob.weight, _refs(Z))
    return r, phi, ok, _initial(prob, u, Z[0, :3])


@program
def chain(u: Float[Array, " P"], prob: Segments):
    """Single shooting through the segments: the whole record integrated from the initial state, one segment
    after the other (a scan: memory for the samples, not the steps). Returns every segment's start state (S,
    state), the residuals (S, M) and whether every segment succeeded."""
    sc = prob.record.model(u)
    y0 = flat_state(initial_state(sc.spacecraft, sc.initial))

    def body(y, s):
        ys = _propagate(sc, y, prob.start[s], prob.K, prob.m, prob.dt)
        r, ok = _outputs(prob, sc, u, ys, prob.start[s], prob.data[s], prob.weight[s])
        return ys[-1], (y, r.reshape(-1), ok)

    _, (starts, r, ok) = jax.lax.scan(body, y0, jnp.arange(prob.start.shape[0]))
    return starts, r, jnp.all(ok)


# ------------------------------------------------------------------------------------------------------------
# The two phases' linear algebra (compiled, no dense matrix over all the unknowns)
# ------------------------------------------------------------------------------------------------------------


def _defects(lin_phi, x0, Z, c):
    """The weighted continuity defects (S, n): row s is $e_s = (\\Phi_{s-1} - z_s)/c$, $\\Phi_{-1} = x_0$."""
    return (jnp.concatenate([x0[None], lin_phi[:-1]]) - Z) / c


@program
def penalty_step(lin: Linearisation, Z, c, lam):
    """The Levenberg-Marquardt step $(\\delta Z, \\delta u)$ and its predicted reduction of $\\sum r^2$, of the data
    and weighted-defect residuals with damping
    `lam` (Marquardt: `lam` times the diagonal of $J^TJ$), by block elimination: the normal equations are block
    tridiagonal in the segment states (diagonal $D_s$, off-diagonal $O_s$), bordered by the coordinates ($C_s$,
    $U$). A scan eliminates the segments (Cholesky of each pivot block), then the $P \\times P$ Schur complement
    gives $\\delta u$ and a backward scan every $\\delta z_s$."""
    n = Z.shape[1]
    E = _defects(lin.phi, lin.x0, Z, c)
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
    e = jnp.concatenate([lin.x0[None], lin.phi[:-1]]) - Z  # unweighted defects into each segment

    def body(carry, x):
        a, Sm = carry
        es, Gs, Hs = x  # the defect into the next segment, this segment's derivatives
        return (es + Gs @ a, Gs @ Sm + Hs), (a, Sm)

    a0, S0 = e[0], lin.X0
    _, (a, Sm) = jax.lax.scan(body, (a0, S0), (jnp.concatenate([e[1:], e[:1]]), lin.G, lin.H))
    rt = lin.r + jnp.einsum("smn,sn->sm", lin.A, a)
    Jt = jnp.einsum("smn,snp->smp", lin.A, Sm) + lin.B
    return a, Sm, rt, Jt


# ------------------------------------------------------------------------------------------------------------
# Building the problem and solving it
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ShootingProblem:
    """A record cut into segments (`shooting_problem`): the compiled problem `prob` (and `coarse`, the same at the
    derivatives' step: `jacobian_factor`), the samples' places `(seg, point)` (T,), the segment length
    `segment_s` [s], and the options."""

    prob: Segments
    coarse: Segments
    seg: np.ndarray
    point: np.ndarray
    segment_s: float
    options: MultipleShooting
    columns: tuple[str, ...]


def shooting_problem(scenario, telemetry: Telemetry, record, options: MultipleShooting, u0) -> ShootingProblem:
    """Cut `telemetry` into segments for `record` (a `_TelemetryResiduals`; `why_not_multiple` says it can be).
    The segment states' position and velocity and the continuity sigmas come from the run at `u0`."""
    dt = scenario.simulation.dt
    i0, m = _grid(dt, telemetry.t)
    T = telemetry.samples
    step_s = m * dt
    freqs = mode_range(scenario)
    seg_s = segment_length(scenario, freqs) if options.segment == "auto" else float(options.segment)
    K = max(_MIN_INTERVALS, round(seg_s / step_s)) if math.isfinite(seg_s) else T - 1
    K = min(K, T - 1)
    S = -(-(T - 1) // K)
    j = np.arange(T)
    seg = np.minimum(j // K, S - 1)
    point = j - seg * K
    values, w = np.asarray(telemetry.values), np.asarray(record.weight)
    C = values.shape[1]
    data = np.zeros((S, K + 1, C))
    weight = np.zeros((S, K + 1, C))
    data[seg, point] = values
    weight[seg, point] = w
    start = (i0 + m * K * np.arange(S)) * dt
    n = flat_state_size(scenario) - _ROTATIONAL
    prob = Segments(record=record, data=jnp.asarray(data), weight=jnp.asarray(weight), start=jnp.asarray(start),
                    base=jnp.zeros((S, _ROTATIONAL)), c=jnp.ones(n), K=K, m=m, dt=float(dt))
    starts, _, _ = chain(jnp.asarray(u0, dtype=float), prob)
    starts = np.asarray(starts)
    span = np.ptp(starts[:, _ROTATIONAL:], axis=0)
    floor = 1e-6 * np.maximum(1.0, np.max(np.abs(starts[:, _ROTATIONAL:]), axis=0))
    c = options.continuity_rtol * np.maximum(span, floor)
    prob = eqx.tree_at(lambda p: (p.base, p.c), prob, (jnp.asarray(starts[:, :_ROTATIONAL]), jnp.asarray(c)))
    f = jacobian_factor(dt, m, freqs[1])
    coarse = prob if f == 1 else prob.coarser(f)
    return ShootingProblem(prob, coarse, seg, point, K * step_s, options, tuple(telemetry.columns))


def flat_state_size(scenario) -> int:
    """The length of the flat state vector (12 + 2N + W)."""
    sc = scenario.spacecraft
    return 12 + 2 * sc.panels.count + (0 if sc.wheels is None else sc.wheels.count)


def solve_multiple(
    sp: ShootingProblem,
    u0: np.ndarray,
    *,
    rtol: float,
    atol: float,
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
    Z = jnp.asarray(np.asarray(starts)[:, _ROTATIONAL:])  # continuous at the start: the initial guess's run
    c = prob.c
    S = Z.shape[0]

    def merit(r, phi, ok, x0, Z):
        if not bool(np.all(np.asarray(ok))):
            return math.inf
        E = np.asarray(_defects(phi, x0, Z, c))
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
        e = np.asarray(jnp.concatenate([lin.x0[None], lin.phi[:-1]]) - Z)
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
        Z = jnp.asarray(np.asarray(starts)[:, _ROTATIONAL:])
        lin = lin_at(Z, u)
    e = np.asarray(jnp.concatenate([lin.x0[None], lin.phi[:-1]]) - Z)
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
