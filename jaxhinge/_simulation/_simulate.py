"""`simulate`: integrate a scenario and return Basilisk-named output arrays.

Two integration paths, one per kind of integrator: the fixed-step `rk4` (Basilisk's `svIntegratorRK4`) is a
nested `lax.scan` over a flat state vector, with dense output at arbitrary times; the adaptive `tsit5` and
`dopri8` are diffrax solvers wrapped in `MRPSwitch`.
"""

from collections.abc import Sequence
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from .._dynamics._backsub import state_derivative, state_derivative_held, wheel_torques
from .._dynamics._energy import diagnostics, initial_state
from .._errors import ScenarioError
from .._math import mrp_shadow
from .._model._loads import rk4_silent_pulse
from .._model._rules import model_ok, model_problems
from .._model._scenario import Scenario, SimulationConfig, compile_key
from .._model._spacecraft import State
from .._runtime._programs import program
from ._memory import _counts, check_memory, save_times, step_times
from ._solver import MRPSwitch
from ._trajectory import (
    INVALID_MODEL,
    Trajectory,
)


class _Solution(NamedTuple):
    """What `simulate_unjitted` needs from a solve: save times, states there, result code, steps taken."""

    ts: Float[Array, " T"]
    ys: State
    result: Int[Array, ""]
    num_steps: Int[Array, ""]


def _save_blocks(cfg: SimulationConfig) -> tuple[int, int, int]:
    """`(K, m, n)`: K save intervals of m rk4 steps each, n steps to t_end (`SimulationConfig` checks that
    `save_dt` and `t_end` are whole multiples of `dt`)."""
    K, n = _counts(cfg)
    return K, round(cfg.save_dt / cfg.dt), n


_RK4_A = (0.5, 0.5, 1.0, 0.0)  # next stage input: y + a_i h k_i (Basilisk's tableau)
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def _flat(y: State) -> Float[Array, "*batch state"]:  # state = 12 + 2N (+ W wheel speeds)
    parts = [y.r_BN_N, y.v_BN_N, y.sigma_BN, y.omega_BN_B, y.theta, y.thetaDot]
    return jnp.concatenate(parts if y.Omega is None else [*parts, y.Omega], -1)


def _unflat(v: Float[Array, "*batch state"], n: int, wheels: bool = False) -> State:
    """The `State` of a flat state vector of `n` panels (and, with `wheels`, the wheel speeds after them)."""
    return State(v[..., 0:3], v[..., 3:6], v[..., 6:9], v[..., 9:12], v[..., 12 : 12 + n], v[..., 12 + n : 12 + 2 * n],
                 v[..., 12 + 2 * n :] if wheels else None)


def _layout(spacecraft) -> tuple[int, bool]:
    """`(panels, has wheels)`: how a flat state vector of this model splits (`_unflat`)."""
    return spacecraft.panels.count, spacecraft.wheels is not None


def _rk4_step(spacecraft, y: Float[Array, " state"], h, loads_t0) -> Float[Array, " state"]:
    """One Basilisk RK4 step of the flat state `y` with loads held at the step start, then the MRP shadow
    switch: `y1 = y + h (k1/6 + k2/3 + k3/3 + k4/6)`, stage inputs `y + h/2 k1`, `y + h/2 k2`, `y + h k3`.

    The four stages run in a `fori_loop` so the vector field is compiled once, not four times (XLA's compile
    time grows with the number of kernels), and the state is one flat vector so each update is one kernel."""
    f_b, f_n, tq, u, u_w = loads_t0
    a, b = jnp.asarray(_RK4_A, y.dtype), jnp.asarray(_RK4_B, y.dtype)

    # checkpointed: reverse mode stores each stage's input and recomputes the vector field, instead of
    # stacking its hundreds of small intermediates (faster gradients, shorter compile)
    def vf(v):
        return _flat(state_derivative_held(spacecraft, _unflat(v, *_layout(spacecraft)), f_b, f_n, tq, u, u_w))

    def stage(i, carry):
        ys, acc = carry
        k = jax.checkpoint(vf)(ys)
        return y + (a[i] * h) * k, acc + b[i] * k

    _, acc = jax.lax.fori_loop(0, 4, stage, (y, jnp.zeros_like(y)))
    y1 = y + h * acc
    return y1.at[6:9].set(mrp_shadow(y1[6:9]))


def stores_steps(adjoint: diffrax.AbstractAdjoint | None, cfg: SimulationConfig) -> bool:
    """Whether reverse mode through rk4 keeps every step's stage inputs: asked for by
    `diffrax.RecursiveCheckpointAdjoint(checkpoints=c)` with `c` at least the number of steps (diffrax's meaning:
    as many checkpoints as steps, nothing recomputed). Otherwise (default) only the state at each save time is
    kept and each save interval is recomputed once on the way back."""
    c = getattr(adjoint, "checkpoints", None) if isinstance(adjoint, diffrax.RecursiveCheckpointAdjoint) else None
    return c is not None and c >= _counts(cfg)[1]


def _solve_rk4_scan(scenario: Scenario, blocks: tuple[int, int, int], store: bool = False) -> _Solution:
    """Fixed-step rk4 as nested `lax.scan`s (outer: save intervals, checkpointed for reverse mode unless `store`
    (`stores_steps`); inner: the m steps of one interval). Same grid and semantics as the diffrax path: steps
    between exact multiples of dt, the last one ending at t_end; loads zero-order held; MRP switch after each
    step."""
    cfg = scenario.simulation
    sc, loads = scenario.spacecraft, scenario.loads
    K, m, n = blocks
    dt, t_end = cfg.dt, cfg.t_end
    y0 = _flat(initial_state(sc, scenario.initial))

    def step(y, j):
        jf = j.astype(y.dtype)
        t0 = jf * dt
        t1 = jnp.where(j + 1 == n, t_end, (jf + 1.0) * dt)
        return _rk4_step(sc, y, t1 - t0, loads.at(t0)), None

    def block(y, i):
        y, _ = jax.lax.scan(step, y, i * m + jnp.arange(m))
        return y, y

    y_end, ys = jax.lax.scan(block if store else jax.checkpoint(block), y0, jnp.arange(K))
    if n > K * m:  # steps after the last save time (they change no output, but are part of the run)
        y_end, _ = jax.lax.scan(step, y_end, jnp.arange(K * m, n))
    del y_end
    return _Solution(
        jnp.asarray(save_times(cfg)),
        _unflat(jnp.concatenate([y0[None], ys]), *_layout(sc)),
        jnp.asarray(diffrax.RESULTS.successful._value),
        jnp.asarray(n),
    )


def _rk4_at(scenario: Scenario, ts: Float[ArrayLike, " T"] | Sequence[float], store: bool = False) -> _Solution:
    """rk4 outputs at arbitrary times `ts` in [0, t_end]: every step's state from the scan path, then cubic
    Hermite interpolation inside each step (values and vector-field slopes at both ends, the step's loads held;
    exact at the grid points). The MRP of the step end is taken on the branch of the step start, so a shadow
    switch inside a step does not disturb the interpolation."""
    cfg = scenario.simulation
    sc, loads = scenario.spacecraft, scenario.loads
    grid = step_times(cfg)
    n = len(grid) - 1
    full = _solve_rk4_scan(scenario, (n, 1, n), store)
    Y = _flat(full.ys)  # (n+1, 12+2N)
    g = jnp.asarray(grid)
    ts = jnp.asarray(ts, dtype=Y.dtype)
    i = jnp.clip(jnp.searchsorted(g, ts, side="right") - 1, 0, n - 1)
    t0, t1 = g[i], g[i + 1]
    h = t1 - t0
    s = (ts - t0) / h
    y0, y1 = Y[i], Y[i + 1]
    # step end on the start's MRP branch
    sig1 = y1[:, 6:9]
    shadow1 = -sig1 / jnp.sum(sig1**2, -1, keepdims=True)
    use_shadow = jnp.sum((shadow1 - y0[:, 6:9]) ** 2, -1) < jnp.sum((sig1 - y0[:, 6:9]) ** 2, -1)
    y1 = y1.at[:, 6:9].set(jnp.where(use_shadow[:, None], shadow1, sig1))

    def slope(y, t_hold):
        return _flat(state_derivative_held(sc, _unflat(y, *_layout(sc)), *loads.at(t_hold)))

    # both ends' slopes in one vmapped vector field (one copy of it in the compiled program)
    f0, f1 = jnp.split(jax.vmap(slope)(jnp.concatenate([y0, y1]), jnp.concatenate([t0, t0])), 2)
    s, hh = s[:, None], h[:, None]
    h00 = (1 + 2 * s) * (1 - s) ** 2
    h10 = s * (1 - s) ** 2
    h01 = s**2 * (3 - 2 * s)
    h11 = s**2 * (s - 1)
    y = h00 * y0 + h10 * hh * f0 + h01 * y1 + h11 * hh * f1
    return _Solution(ts, _unflat(y, *_layout(sc)), full.result, full.num_steps)


def _solve(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None) -> _Solution:
    """rk4: the `lax.scan` path (any adjoint: reverse and forward mode both differentiate through it), saving
    on the step grid, or at given times `ts` by Hermite interpolation between steps. tsit5/dopri8: diffrax."""
    cfg = scenario.simulation
    if cfg.integrator == "rk4":
        store = stores_steps(adjoint, cfg)
        return _solve_rk4_scan(scenario, _save_blocks(cfg), store) if ts is None else _rk4_at(scenario, ts, store)
    sol = _solve_diffrax(scenario, adjoint, ts)
    return _Solution(
        sol.ts, sol.ys, jnp.asarray(sol.result._value), jnp.asarray(sol.stats["num_accepted_steps"])
    )


def _solve_diffrax(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None):
    cfg = scenario.simulation
    sc, loads = scenario.spacecraft, scenario.loads
    y0 = initial_state(sc, scenario.initial)
    # `ts`: optional output times in [0, t_end] (non-decreasing), from the solver's dense interpolation
    ts = jnp.asarray(save_times(cfg)) if ts is None else jnp.asarray(ts, dtype=float)
    term = diffrax.ODETerm(state_derivative)
    # forward-mode AD needs plain lax loops in the Runge-Kutta stages (diffrax sets this itself for bare
    # solvers; our wrapper sets it on the inner solver)
    scan_kind = "lax" if isinstance(adjoint, diffrax.ForwardMode) else "bounded"
    inner = (diffrax.Tsit5 if cfg.integrator == "tsit5" else diffrax.Dopri8)(scan_kind=scan_kind)
    solver = MRPSwitch(inner)
    tol = scenario.adaptive_settings  # traced after `compile_key`
    controller = diffrax.PIDController(rtol=tol.rtol, atol=tol.atol)
    jumps = loads.jump_times
    if jumps is not None:
        controller = diffrax.ClipStepSizeController(controller, jump_ts=jumps)
    dt0, max_steps = tol.dt0, cfg.max_steps
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    return diffrax.diffeqsolve(
        term,
        solver,
        t0=0.0,
        t1=cfg.t_end,
        dt0=dt0,
        y0=y0,
        args=(sc, loads),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
        **kwargs,
    )


def _wheel_outputs(scenario: Scenario, ts, ys: State) -> dict:
    """`Omega` and the motor torque `u_current` applied at each sample time (T, W) (the command held from that time
    on, after the `u_max` limit); (T, 0) without wheels."""
    wheels = scenario.spacecraft.wheels
    T = ys.theta.shape[0]
    if wheels is None:
        empty = jnp.zeros((T, 0), ys.theta.dtype)
        return {"Omega": empty, "u_current": empty}
    u, _ = jax.vmap(lambda t, Om: wheel_torques(wheels, Om, scenario.loads.at(t)[4]))(ts, ys.Omega)
    return {"Omega": ys.Omega, "u_current": u}


def refuse_invalid(scenario: Scenario, source: str) -> None:
    """Refuse, before any compute, a scenario given with values (not traced) whose model breaks a physical rule
    (`_model._rules.model_problems`; a batch: member by member): a `ScenarioError` naming the member, the field,
    the value and the rule. Traced scenarios are checked inside the program (`model_ok`, per member)."""
    sc, pulses = scenario.spacecraft, scenario.loads.pulses
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((sc, pulses))):
        return
    if pulses is not None and scenario.simulation.integrator == "rk4" and np.ndim(pulses.t_start) == 1:
        j = rk4_silent_pulse(pulses.t_start, pulses.t_end, scenario.simulation.dt)
        if j is not None:
            raise ScenarioError.bad(source, f"loads.pulses.t_start[{j}], t_end[{j}]",
                                    [float(pulses.t_start[j]), float(pulses.t_end[j])],
                                    f"never acts: with integrator \"rk4\" loads are sampled at the start of each step "
                                    f"(t = k dt, dt = {scenario.simulation.dt:g} s) and this pulse contains none")
    if not bool(np.all(np.asarray(jax.vmap(model_ok)(sc) if np.ndim(sc.hub.mHub) == 1 else model_ok(sc)))):
        problem = model_problems(sc, plausible=False)
        if problem is not None:
            member, field, value, rule = problem
            raise ScenarioError.bad(f"{source}: {member}" if member else source, field, value, rule)


def simulate_unjitted(
    scenario: Scenario,
    adjoint: diffrax.AbstractAdjoint | None = None,
    ts: ArrayLike | Sequence[float] | None = None,
) -> Trajectory:
    """`simulate` without its `eqx.filter_jit` (to compose inside a caller's own jit/vmap/grad)."""
    sol = _solve(scenario, adjoint, ts)
    ys = sol.ys
    ys = eqx.tree_at(lambda y: y.sigma_BN, ys, mrp_shadow(ys.sigma_BN))
    diag = jax.vmap(diagnostics, in_axes=(None, 0))(scenario.spacecraft, ys)
    fields = dict(
        t=sol.ts,
        r_BN_N=ys.r_BN_N,
        v_BN_N=ys.v_BN_N,
        sigma_BN=ys.sigma_BN,
        omega_BN_B=ys.omega_BN_B,
        theta=ys.theta,
        thetaDot=ys.thetaDot,
        **_wheel_outputs(scenario, sol.ts, ys),
        **diag._asdict(),
    )
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(v)) for v in jax.tree.leaves(fields)]))
    valid = model_ok(scenario.spacecraft)  # a member of a traced batch that breaks a rule fails, reported
    ok = (sol.result == diffrax.RESULTS.successful._value) & finite & valid
    result = jnp.where(valid, sol.result, INVALID_MODEL)
    return Trajectory(**fields, result=result, success=ok, num_steps=sol.num_steps)


@program
def _simulate_jit(scenario: Scenario, adjoint, ts) -> Trajectory:
    return simulate_unjitted(scenario, adjoint, ts)


def simulate(
    scenario: Scenario,
    adjoint: diffrax.AbstractAdjoint | None = None,
    ts: ArrayLike | Sequence[float] | None = None,
) -> Trajectory:
    """Integrate one scenario and return its `Trajectory`.

    **Arguments:**

    - `scenario`: a `Scenario` (from `load_scenario` or built in code). Its `simulation` settings pick
      the integrator: `"rk4"` (fixed step `dt`, Basilisk's tableau, loads zero-order held per step,
      step-for-step comparable with Basilisk) or `"tsit5"`/`"dopri8"` (adaptive, PID control with
      `rtol`/`atol`, pulse edges as jump times).
    - `adjoint`: a diffrax adjoint. Default `RecursiveCheckpointAdjoint` (reverse mode, `jax.grad`);
      pass `diffrax.ForwardMode()` for `jax.jacfwd` (least-squares fits). `"rk4"` is a plain `lax.scan`, which
      `jax.grad` and `jax.jacfwd` both differentiate directly; of the adjoint it only reads
      `RecursiveCheckpointAdjoint(checkpoints=c)`: with `c` at least the number of steps, reverse mode keeps every
      step's four stage inputs and recomputes nothing (faster gradients, memory ~8 (4 (12 + 2N) + 17) bytes
      per step, 6.5 MB for 10 s at 1 ms with 2 panels, times the members of a `vmap`); otherwise (default) it
      keeps the state at each save time and recomputes each save interval once on the way back.
    - `ts`: optional output times (default: `k * save_dt`), non-decreasing, within `[0, t_end]`, e.g. the
      irregular sample times of telemetry. rk4: every step is kept and the outputs between grid points are
      cubic Hermite interpolated (exact on the `k * dt` grid); tsit5/dopri8: their own dense interpolants.

    **Returns:** a `Trajectory`. Numerical failure (step budget exhausted, non-finite state) does not
    raise: check `trajectory.success` / `trajectory.result`, and `trajectory.drift_warning(scenario)` (energy and
    momentum that the physics conserves, checked). **Raises:** `ConfigError` when the outputs would not fit in
    memory (`check_memory`), before compiling.

    Compiled once per model structure (number of panels and their parents, gravity on/off, loads kinds,
    the simulation settings that set shapes; panel names, `rtol`, `atol` and the adaptive first step do not
    count: `compile_key`); jit, `vmap` and `grad` over every array leaf of the scenario.
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"simulate: expected a jaxhinge Scenario (from load_scenario or jh.Scenario(...)), got "
                        f"{type(scenario).__name__}")
    refuse_invalid(scenario, "simulate")
    cfg = scenario.simulation
    store = cfg.integrator == "rk4" and stores_steps(adjoint, cfg)
    check_memory(cfg, scenario.spacecraft.panels.count, samples=None if ts is None else np.shape(ts)[0],
                 stored_steps=store)
    if cfg.integrator == "rk4":  # the scan path reads one thing of the adjoint: one program for each choice
        adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=_counts(cfg)[1]) if store else None
    return _simulate_jit(compile_key(scenario), adjoint, ts)
