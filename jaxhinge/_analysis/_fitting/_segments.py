r"""Multiple shooting for telemetry fits of long records (`identify(shooting=...)`, docs/telemetry.md).

**Why.** Single shooting integrates the whole record from the initial state at every solver step: a long record
of a lightly damped structure is a strongly nonlinear function of the stiffness (a 15 % frequency error slips the
phase by a quarter period after 1.7 periods), so it needs a growing horizon and hundreds of steps, each one
integrating all the samples. Multiple shooting (Bock 1981) cuts the record into segments integrated side by side,
each from its own initial state, with continuity between them as residuals: far less nonlinear, and parallel.

**Unknowns and residuals.** The record (uniform samples every `m` rk4 steps, or for the adaptive integrators on
the samples' own grid, from t = 0) is cut into `S` segments of `K` sample intervals, each integrated by the
simulator's one propagation (`propagate`). Segment `s` starts from its own state $z_s$: the flat state after the hub's position and
velocity (hub attitude MRP and rate, hinge angles and rates, wheel speeds), which no other output or
derivative depends on (the position and velocity at each segment start are those of the initial guess's run).
The unknowns are the fit's coordinates $u$ and every $z_s$. The residuals are the data's, segment by segment,
$r_s(z_s, u)$, and the continuity defects

$$e_s = \big(\Phi_{s-1}(z_{s-1}, u) - z_s\big) / c, \qquad \Phi_{-1} = x_0(u)$$

($\Phi_s$: the state at the end of segment $s$, on the MRP set nearer $z_{s+1}$; $x_0$: the scenario's initial
state, known or estimated through $u$). $c$ (per state component) is `continuity_rtol` (default 0.03) times
the range of that component over the initial guess's run: the stated weight.

**Two phases.**

1. *Levenberg-Marquardt on every residual* (data and weighted defects; Nielsen's damping update, steps bounded
   to 0.5 in every fitted coordinate) from the segment states of the initial guess's run (continuous: the defects
   start at zero; the solver opens them where that fits the data better; taking the measured states from the data
   instead started with large defects and took more steps: 13 against 8 on tests/test_shooting.py's record). The
   normal equations are block tridiagonal in the $z_s$ with a border in $u$: they are solved by eliminating the
   segments one by one (a scan of $S$ factorisations of $n \times n$ blocks) and then the $P \times P$ reduced
   system in $u$; nothing is dense over all the unknowns. The phase ends when a step lowers the cost by less
   than 1 %.
2. *Condensed Gauss-Newton* (Bock's condensing): continuity as constraints, linearised, $\delta z_0 = x_0 -
   z_0 + X_0\,\delta u$, $\delta z_{s+1} = \Phi_s - z_{s+1} + G_s\,\delta z_s + H_s\,\delta u$, so every
   $\delta z_s = a_s + S_s\,\delta u$ and the step is a least-squares problem in $u$ alone with Jacobian
   $\hat J_s = A_s S_s + B_s$ (single shooting's where the defects are zero). It ends when a step would move no
   coordinate by 1e-3 of its sigma; the segments are then put on single shooting's trajectory at $u$ (`chain`):
   the defects are at round-off and the residuals, Jacobian, covariance, sigmas and identifiability are single
   shooting's.

One forward-mode pass per step gives every block: each segment's residuals and end state differentiated in its
$n$ state directions and the $P$ coordinate directions ($A_s, G_s$ and $B_s, H_s$), all segments in one vmapped
program. A step integrates the record once, in $n + P$ directions, only the samples it weighs.
"""

import dataclasses
import math
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ..._dynamics._energy import initial_state
from ..._math import mrp_near
from ..._model._control import ControlState, initial_control_state
from ..._runtime._programs import program
from ..._simulation._propagate import flat_state, held_commands, propagate, state_layout, unflat_state
from ..._simulation._simulate import trajectory_of

__all__ = ["CONTROL_STATES", "ROTATIONAL", "Linearisation", "Segments", "ShootingProblem", "chain", "control_steps",
           "evaluate", "grid", "jacobian_factor", "linearise", "mode_range", "point_step", "segment_length",
           "shooting_problem"]

ROTATIONAL = 6  # the flat state's first 6 entries (hub position, velocity) are not shooting unknowns
CONTROL_STATES = 3  # with a controller in the loop: its integral state joins each segment's unknowns
_MIN_INTERVALS = 10  # a segment spans at least this many sample intervals



def point_step(scenario, t) -> float:
    """The grid the segments' points lie on [s]: rk4's step `dt`; for the adaptive integrators, which step
    themselves between the points, the samples' own interval."""
    if scenario.simulation.integrator.fixed_step:
        return scenario.simulation.dt
    t = np.asarray(t, dtype=float)
    return float((t[-1] - t[0]) / max(t.size - 1, 1))


def control_steps(scenario) -> int:
    """The rk4 steps of one control period (`control_dt / dt`, a whole number: the file layer checks it)."""
    return max(1, round(float(np.asarray(scenario.control.control_dt)) / scenario.simulation.dt))


def grid(dt: float, t: np.ndarray) -> tuple[int, int] | None:
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
    `start` (S,): each segment's start time [s] (a whole number of steps `dt`); `base` (S, lead): the hub position
    and velocity there (when they are not unknowns); `c` (n,): the continuity sigma per state component. The
    problem a fit solves stacks its records' `Segments` (every array with a leading record axis R: records of one
    structure; `linearise`, `evaluate` and `chain` vmap over it)."""

    record: eqx.Module
    data: Float[Array, "*R S K1 C"]
    weight: Float[Array, "*R S K1 C"]
    start: Float[Array, "*R S"]
    base: Float[Array, "*R S lead"]
    c: Float[Array, "*R n"]
    K: int = eqx.field(static=True)
    m: int = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    lead: int = eqx.field(static=True, default=ROTATIONAL)

    @property
    def mrp(self) -> slice:
        """Where the hub's MRP sits in a segment state (after the hub's position and velocity when those are
        unknowns too)."""
        return slice(ROTATIONAL - self.lead, ROTATIONAL - self.lead + 3)

    def coarser(self, f: int) -> "Segments":
        """The same segments integrated with steps `f` times longer (`f` divides `m`): the derivatives' pass."""
        return Segments(self.record, self.data, self.weight, self.start, self.base, self.c, self.K, self.m // f,
                        self.dt * f, self.lead)


def _control_at(sc, z_int, start):
    """The flight software's state at a segment's start (a control sample): its integral `z_int` (a segment
    unknown), the calls made before it (one per `control_dt`); the held command is the call's at the segment's
    first step, so none is carried in."""
    ctrl = sc.control
    W = 0 if sc.spacecraft.wheels is None else sc.spacecraft.wheels.count
    calls = jnp.round(start / ctrl.control_dt).astype(z_int.dtype)
    return ControlState(z_int, calls, jnp.zeros(3, z_int.dtype), jnp.zeros(W, z_int.dtype))


def _outputs(prob: Segments, sc, u, out, start, data, weight):
    """The weighted residuals (K + 1, C) of one segment's propagation `out` and whether they are valid (with a
    controller, its held command at each point: the call made there, if it is a sample, as `simulate`'s)."""
    rec = prob.record
    gain, bias, _ = rec.sensors(u)
    ts = start + jnp.arange(prob.K + 1) * (prob.m * prob.dt)
    held = None if sc.control is None else held_commands(sc, out, start, prob.m, prob.dt)
    traj = trajectory_of(sc, ts, unflat_state(out.ys, *state_layout(sc.spacecraft)), jnp.asarray(0),
                         jnp.asarray(prob.K * prob.m), held)
    y = rec.outputs(traj, gain, bias, data, weight)
    return jnp.where(weight > 0, (y - data) * weight, 0.0), traj.success


def _shooting_part(prob: Segments, sc, y, cs):
    """A segment's state as an unknown: the flat state after the hub's position and velocity (all of it when they
    are measured: `lead` 0), and with a controller its integral state."""
    part = y[prob.lead:]
    return part if sc.control is None else jnp.concatenate([part, cs.int_sigma])


def _segment(prob: Segments, z, u, start, base, data, weight, ref):
    """One segment from its state `z`: `((residuals (M,), end state (n,) on the MRP set nearer `ref`), ok)`."""
    sc = prob.record.model(u)
    extra = 0 if sc.control is None else CONTROL_STATES
    nf = z.shape[0] - extra
    cs0 = None if sc.control is None else _control_at(sc, z[nf:], start)
    out = propagate(sc, jnp.concatenate([base, z[:nf]]), start, prob.K, prob.m, cs0=cs0, dt=prob.dt,
                    adjoint=diffrax.ForwardMode())
    r, ok = _outputs(prob, sc, u, out, start, data, weight)
    end = _shooting_part(prob, sc, out.ys[-1],
                         None if sc.control is None else jax.tree.map(lambda a: a[-1], out.control))
    end = end.at[prob.mrp].set(mrp_near(end[prob.mrp], ref))
    return (r.reshape(-1), end), ok & jnp.all(jnp.isfinite(end))


def _initial(prob: Segments, u, ref):
    """The scenario's initial state (the shooting part, MRP set nearer `ref`) at the coordinates `u`."""
    sc = prob.record.model(u)
    y = flat_state(initial_state(sc.spacecraft, sc.initial))
    y = _shooting_part(prob, sc, y, None if sc.control is None else initial_control_state(0, y.dtype))
    return y.at[prob.mrp].set(mrp_near(y[prob.mrp], ref))


class Linearisation(eqx.Module):
    """Every segment's residuals `r` (S, M), end state `phi` (S, n), `ok` (S,) and their derivatives in its
    state (`A` (S, M, n), `G` (S, n, n)) and in the coordinates (`B` (S, M, P), `H` (S, n, P)); each record's
    initial state `x0` (R, n) and its derivative `X0` (R, n, P). The segments run record after record (S of
    them in all; one record's alone inside `linearise`'s per-record pass, with `x0` (n,), `X0` (n, P))."""

    r: Float[Array, "S M"]
    phi: Float[Array, "S n"]
    ok: Bool[Array, " S"]
    A: Float[Array, "S M n"]
    G: Float[Array, "S n n"]
    B: Float[Array, "S M P"]
    H: Float[Array, "S n P"]
    x0: Float[Array, "*R n"]
    X0: Float[Array, "*R n P"]


def _refs(Z, prob: Segments):
    """The MRP each segment's end is compared with: the next segment's start (the last: its own)."""
    return jnp.concatenate([Z[1:, prob.mrp], Z[-1:, prob.mrp]])


def _per_record(fn, Z, u, prob: Segments):
    """`fn(Z_r, u, prob_r)` for every record r (the problem's leading axis, `prob.start` (R, S)), vmapped: one
    compiled copy of the model for every record of one structure. `Z`: (R S, n)."""
    R, S = prob.start.shape
    return eqx.filter_vmap(fn, in_axes=(0, None, eqx.if_array(0)))(Z.reshape(R, S, -1), u, prob)


def _flat(x):
    """(R, S, ...) -> (R S, ...): the records' segments one after the other."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def _linearise_record(Z, u, prob: Segments) -> Linearisation:
    n, P = Z.shape[1], u.shape[0]

    def one(z, start, base, data, weight, ref):
        def tangent(t):
            f = lambda v: _segment(prob, v[:n], v[n:], start, base, data, weight, ref)
            (r, end), (dr, dend), ok = jax.jvp(f, (jnp.concatenate([z, u]),), (t,), has_aux=True)
            return r, end, ok, dr, dend

        return jax.vmap(tangent, out_axes=(None, None, None, 1, 1))(jnp.eye(n + P, dtype=Z.dtype))

    r, phi, ok, dR, dE = jax.vmap(one)(Z, prob.start, prob.base, prob.data, prob.weight, _refs(Z, prob))
    x0 = _initial(prob, u, Z[0, prob.mrp])
    X0 = jax.jacfwd(lambda v: _initial(prob, v, Z[0, prob.mrp]))(u)
    return Linearisation(r, phi, ok, dR[..., :n], dE[..., :n], dR[..., n:], dE[..., n:], x0, X0)


@program
def linearise(Z: Float[Array, "RS n"], u: Float[Array, " P"], prob: Segments) -> Linearisation:
    """Residuals, end states and all their derivatives at `(Z, u)`: one forward-mode pass per segment in its n
    state and P coordinate directions, the segments (of every record) vmapped side by side. The segments' rows
    (R S) run record after record; `x0` (R, n) and `X0` (R, n, P) are each record's initial state."""
    lin = _per_record(_linearise_record, Z, u, prob)
    return Linearisation(*(_flat(getattr(lin, f)) for f in ("r", "phi", "ok", "A", "G", "B", "H")), lin.x0, lin.X0)


def _evaluate_record(Z, u, prob: Segments):
    (r, phi), ok = jax.vmap(lambda z, *a: _segment(prob, z, u, *a))(Z, prob.start, prob.base, prob.data,
                                                                    prob.weight, _refs(Z, prob))
    return r, phi, ok, _initial(prob, u, Z[0, prob.mrp])


@program
def evaluate(Z: Float[Array, "RS n"], u: Float[Array, " P"], prob: Segments):
    """`(residuals (R S, M), end states (R S, n), ok (R S,), initial states (R, n))` at `(Z, u)`, no
    derivatives."""
    r, phi, ok, x0 = _per_record(_evaluate_record, Z, u, prob)
    return _flat(r), _flat(phi), _flat(ok), x0


def _chain_record(u, prob: Segments):
    sc = prob.record.model(u)
    y0 = flat_state(initial_state(sc.spacecraft, sc.initial))
    ctrl = sc.control
    cs0 = None if ctrl is None else initial_control_state(
        0 if sc.spacecraft.wheels is None else sc.spacecraft.wheels.count, y0.dtype)

    def body(carry, s):
        y, cs = carry
        out = propagate(sc, y, prob.start[s], prob.K, prob.m, cs0=cs, dt=prob.dt, adjoint=diffrax.ForwardMode())
        r, ok = _outputs(prob, sc, u, out, prob.start[s], prob.data[s], prob.weight[s])
        start = y if ctrl is None else jnp.concatenate([y, cs.int_sigma])
        end_cs = None if ctrl is None else jax.tree.map(lambda a: a[-1], out.control)
        return (out.ys[-1], end_cs), (start, r.reshape(-1), ok)

    _, (starts, r, ok) = jax.lax.scan(body, (y0, cs0), jnp.arange(prob.start.shape[0]))
    return starts, r, jnp.all(ok)


@program
def chain(u: Float[Array, " P"], prob: Segments):
    """Single shooting through the segments: each record integrated from its initial state, one segment after
    the other (a scan: memory for the samples, not the steps; the records vmapped). Returns every segment's
    start state (R S, state, and with a controller its integral state after it), the residuals (R S, M) and
    whether every segment succeeded."""
    starts, r, ok = eqx.filter_vmap(_chain_record, in_axes=(None, eqx.if_array(0)))(u, prob)
    return _flat(starts), _flat(r), jnp.all(ok)


# ------------------------------------------------------------------------------------------------------------
# Building the problem
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ShootingProblem:
    """Records cut into segments (`shooting_problem`): the compiled problem `prob` (its arrays with a leading
    record axis R; `coarse`, the same at the derivatives' step: `jacobian_factor`), the samples' places
    `(seg, point)` (T,) in every record (records share their sample times), the segment length `segment_s` [s],
    and the options."""

    prob: Segments
    coarse: Segments
    seg: np.ndarray
    point: np.ndarray
    segment_s: float
    options: Any  # the `MultipleShooting` it was cut for
    columns: tuple[str, ...]

    @property
    def records(self) -> int:
        return int(self.prob.start.shape[0])


def shooting_problem(scenarios, telemetries, records, options, u0) -> ShootingProblem:
    """Cut the `telemetries` (one or several records with the same sample times and columns; one scenario and
    `_TelemetryResiduals` each, `records`; `why_not_multiple` says they can be) into segments, the segment length
    from the first scenario's modes. The segment states' position and velocity and the continuity sigmas (one
    per state component, the largest of the records') come from the run at `u0`."""
    scenario, telemetry = scenarios[0], telemetries[0]
    dt = point_step(scenario, telemetry.t)
    i0, m = grid(dt, telemetry.t)
    T = telemetry.samples
    p0 = i0 // m  # the points run from t = 0 every m steps (`why_not_multiple`: the samples lie on them)
    step_s = m * dt
    freqs = mode_range(scenario)
    seg_s = segment_length(scenario, freqs) if options.segment == "auto" else float(options.segment)
    K = max(_MIN_INTERVALS, round(seg_s / step_s)) if math.isfinite(seg_s) else p0 + T - 1
    q = 1
    if scenario.control is not None:  # every segment starts on a control sample (the flight software's call)
        c_steps = control_steps(scenario)
        q = c_steps // math.gcd(m, c_steps)
    K = min(-(-K // q) * q, -(-(p0 + T - 1) // q) * q)
    S = -(-(p0 + T - 1) // K)
    j = p0 + np.arange(T)
    seg = np.minimum(j // K, S - 1)
    point = j - seg * K
    C = len(telemetry.columns)
    start = m * K * np.arange(S) * dt
    y0 = flat_state(initial_state(scenario.spacecraft, scenario.initial))
    # the hub's position and velocity are segment unknowns only where they are measured
    lead = 0 if any(c.startswith(("r_", "v_")) for c in telemetry.columns) else ROTATIONAL
    n = y0.shape[0] - lead + (0 if scenario.control is None else CONTROL_STATES)
    parts = []
    for tel, record in zip(telemetries, records):
        data = np.zeros((S, K + 1, C))
        weight = np.zeros((S, K + 1, C))
        data[seg, point] = np.asarray(tel.values)
        weight[seg, point] = np.asarray(record.weight)
        parts.append(Segments(record=record, data=jnp.asarray(data), weight=jnp.asarray(weight),
                              start=jnp.asarray(start), base=jnp.zeros((S, lead)), c=jnp.ones(n), K=K, m=m,
                              dt=float(dt), lead=lead))
    prob = jax.tree.map(lambda *xs: jnp.stack(xs), *parts)  # records of one structure: a leading record axis
    starts, _, _ = chain(jnp.asarray(u0, dtype=float), prob)
    starts = np.asarray(starts)
    span = np.ptp(starts[:, lead:].reshape(len(parts), S, -1), axis=1).max(axis=0)
    floor = 1e-6 * np.maximum(1.0, np.max(np.abs(starts[:, lead:]), axis=0))
    c = options.continuity_rtol * np.maximum(span, floor)
    R = len(parts)
    prob = eqx.tree_at(lambda p: (p.base, p.c), prob, (jnp.asarray(starts[:, :lead].reshape(R, S, lead)),
                                                       jnp.asarray(np.broadcast_to(c, (R, n)))))
    f = jacobian_factor(dt, math.gcd(m, control_steps(scenario)) if scenario.control is not None else m, freqs[1])
    f = f if scenario.simulation.integrator.fixed_step else 1  # (the adaptive integrators choose their own steps)
    coarse = prob if f == 1 else prob.coarser(f)
    return ShootingProblem(prob, coarse, seg, point, K * step_s, options, tuple(telemetry.columns))
