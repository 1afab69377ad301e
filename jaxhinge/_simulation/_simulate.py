"""`simulate`: integrate a scenario and return Basilisk-named output arrays.

Two integration paths, one per kind of integrator: the fixed-step `rk4` (Basilisk's `svIntegratorRK4`) steps
the model with `propagate` (`_propagate.py`, the one fixed-step loop of the package), with dense output at
arbitrary times; the adaptive `tsit5` and `dopri8` are diffrax solvers wrapped in `MRPSwitch`.
"""

from collections.abc import Sequence
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from .._dynamics._backsub import state_derivative_held, wheel_torques
from .._dynamics._energy import diagnostics, initial_state
from .._errors import ConfigError, ScenarioError
from .._math import mrp_near, mrp_shadow, sub_mrp
from .._model._control import ControlState, control_update, initial_control_state
from .._model._loads import rk4_silent_pulse
from .._model._rules import model_ok, model_problems
from .._model._scenario import Scenario, SimulationConfig, compile_key
from .._model._spacecraft import State
from .._runtime._programs import program
from ._memory import check_memory, sample_counts, save_times, step_times
from ._propagate import (
    adaptive_parts,
    flat_state,
    held_commands,
    propagate,
    propagate_adaptive,
    state_layout,
    unflat_state,
    with_command,
)
from ._trajectory import (
    INVALID_MODEL,
    Trajectory,
)


class _Solution(NamedTuple):
    """What `simulate_unjitted` needs from a solve: save times, states there, result code, steps taken, and with
    a controller the command held from each save time on (`ControlState`, stacked)."""

    ts: Float[Array, " T"]
    ys: State
    result: Int[Array, ""]
    num_steps: Int[Array, ""]
    control: ControlState | None = None


def _save_blocks(cfg: SimulationConfig) -> tuple[int, int, int]:
    """`(K, m, n)`: K save intervals of m rk4 steps each, n steps to t_end (`SimulationConfig` checks that
    `save_dt` and `t_end` are whole multiples of `dt`)."""
    K, n = sample_counts(cfg)
    return K, round(cfg.save_dt / cfg.dt), n


def stores_steps(adjoint: diffrax.AbstractAdjoint | None, cfg: SimulationConfig) -> bool:
    """Whether reverse mode through rk4 keeps every step's stage inputs: asked for by
    `diffrax.RecursiveCheckpointAdjoint(checkpoints=c)` with `c` at least the number of steps (diffrax's meaning:
    as many checkpoints as steps, nothing recomputed). Otherwise (default) only the state at each save time is
    kept and each save interval is recomputed once on the way back."""
    c = getattr(adjoint, "checkpoints", None) if isinstance(adjoint, diffrax.RecursiveCheckpointAdjoint) else None
    return c is not None and c >= sample_counts(cfg)[1]


def _solve_rk4_scan(scenario: Scenario, blocks: tuple[int, int, int], store: bool = False, t_stop=None
                    ) -> _Solution:
    """Fixed-step rk4 on the save grid: `propagate` from the initial state over the K save intervals of m steps
    (each interval checkpointed for reverse mode unless `store`: `stores_steps`). Same grid and semantics as the
    diffrax path: steps between exact multiples of dt, the last one ending at t_end; loads zero-order held; MRP
    switch after each step; with a controller, the flight software at every step that starts on a control sample,
    its command held to the next. (Steps after the last save time change no output: none is taken.) `t_stop`
    (traced, optional): the steps that start at or after it are skipped."""
    cfg = scenario.simulation
    sc, ctrl = scenario.spacecraft, scenario.control
    K, m, n = blocks
    y0 = flat_state(initial_state(sc, scenario.initial))
    cs0 = None if ctrl is None else initial_control_state(0 if sc.wheels is None else sc.wheels.count, y0.dtype)
    out = propagate(scenario, y0, 0.0, K, m, cs0=cs0, t_stop=t_stop, checkpoint=not store)
    # the command held from each save time on: the call made there, if it is a sample
    held = None if ctrl is None else held_commands(scenario, out, 0.0, m, cfg.dt)
    return _Solution(
        jnp.asarray(save_times(cfg)),
        unflat_state(out.ys, *state_layout(sc)),
        jnp.asarray(diffrax.RESULTS.successful._value),
        jnp.asarray(n),
        held,
    )


def _rk4_at(scenario: Scenario, ts: Float[ArrayLike, " T"] | Sequence[float], store: bool = False, t_stop=None
            ) -> _Solution:
    """rk4 outputs at arbitrary times `ts` in [0, t_end]: every step's state from the scan path, then cubic
    Hermite interpolation inside each step (values and vector-field slopes at both ends, the step's loads held;
    exact at the grid points). The MRP of the step end is taken on the branch of the step start, so a shadow
    switch inside a step does not disturb the interpolation."""
    cfg = scenario.simulation
    sc, loads = scenario.spacecraft, scenario.loads
    grid = step_times(cfg)
    n = len(grid) - 1
    full = _solve_rk4_scan(scenario, (n, 1, n), store, t_stop)
    Y = flat_state(full.ys)  # (n+1, 12+2N)
    g = jnp.asarray(grid)
    ts = jnp.asarray(ts, dtype=Y.dtype)
    i = jnp.clip(jnp.searchsorted(g, ts, side="right") - 1, 0, n - 1)
    t0, t1 = g[i], g[i + 1]
    h = t1 - t0
    s = (ts - t0) / h
    y0, y1 = Y[i], Y[i + 1]
    # step end on the start's MRP branch
    y1 = y1.at[:, 6:9].set(mrp_near(y1[:, 6:9], y0[:, 6:9]))

    ctrl = scenario.control
    cs = None if ctrl is None else jax.tree.map(lambda a: jnp.concatenate([a[i], a[i]]), full.control)

    def slope(y, t_hold, c):
        loads_t = with_command(loads.at(t_hold), ctrl, c)
        return flat_state(state_derivative_held(sc, unflat_state(y, *state_layout(sc)), *loads_t))

    # both ends' slopes in one vmapped vector field (one copy of it in the compiled program); the step's loads
    # and held command at both ends
    f0, f1 = jnp.split(jax.vmap(slope)(jnp.concatenate([y0, y1]), jnp.concatenate([t0, t0]), cs), 2)
    s, hh = s[:, None], h[:, None]
    h00 = (1 + 2 * s) * (1 - s) ** 2
    h10 = s * (1 - s) ** 2
    h01 = s**2 * (3 - 2 * s)
    h11 = s**2 * (s - 1)
    y = h00 * y0 + h10 * hh * f0 + h01 * y1 + h11 * hh * f1
    held = None if ctrl is None else jax.tree.map(lambda a: a[i], full.control)
    return _Solution(ts, unflat_state(y, *state_layout(sc)), full.result, full.num_steps, held)


def _solve(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None, t_stop=None) -> _Solution:
    """rk4: the `lax.scan` path (any adjoint: reverse and forward mode both differentiate through it), saving
    on the step grid, or at given times `ts` by Hermite interpolation between steps (no step after `t_stop`).
    tsit5/dopri8: diffrax (`t_stop` not used)."""
    cfg = scenario.simulation
    if cfg.integrator.fixed_step:
        store = stores_steps(adjoint, cfg)
        if ts is None:
            return _solve_rk4_scan(scenario, _save_blocks(cfg), store)
        return _rk4_at(scenario, ts, store, t_stop)
    if scenario.control is not None:
        return _solve_diffrax_control(scenario, adjoint, ts)
    sol = _solve_diffrax(scenario, adjoint, ts)
    return _Solution(
        sol.ts, sol.ys, jnp.asarray(sol.result._value), jnp.asarray(sol.stats["num_accepted_steps"])
    )


def _solve_diffrax(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None):
    """The adaptive integrators from the initial state over the run, saving at `ts` (default the save grid):
    `propagate_adaptive`."""
    cfg = scenario.simulation
    # `ts`: optional output times in [0, t_end] (non-decreasing), from the solver's dense interpolation
    ts = jnp.asarray(save_times(cfg)) if ts is None else jnp.asarray(ts, dtype=float)
    return propagate_adaptive(scenario, initial_state(scenario.spacecraft, scenario.initial), 0.0, ts,
                              t1=cfg.t_end, adjoint=adjoint)


def _held_field(t, y: State, args) -> State:
    """The vector field with the controller's command held (`args = (spacecraft, loads, control, state)`)."""
    sc, loads, ctrl, cs = args
    return state_derivative_held(sc, y, *with_command(loads.at(t), ctrl, cs))


def _solve_diffrax_control(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None) -> _Solution:
    """An adaptive integrator with the controller in the loop: one `diffeqsolve` per control period, so every
    sample instant k `control_dt` is a step boundary (the command jumps there), the flight software called
    at each period's start from the state there (as on the rk4 path) and its command held to the next sample.
    Outputs on the save grid: each period saves the save times in $[t_k, t_{k+1})$ (the last one up to and
    including t_end), at most `saves` of them (`Scenario.control_grid`, static). The step size restarts from
    the first step `dt` every period. Result: the first failure of any period; steps: their sum."""
    if ts is not None:
        raise ConfigError("ts", "output times", "an adaptive integrator with a controller saves on its save grid "
                          "(k save_dt) only; for outputs at given times use integrator \"rk4\"")
    if scenario.control_grid is None:
        raise ConfigError("control_grid", None, "an adaptive run with a controller is shaped by compile_key "
                          "(jh.simulate, jh.batch and the analyses call it)")
    cfg = scenario.simulation
    sc, loads, ctrl = scenario.spacecraft, scenario.loads, scenario.control
    periods, saves = scenario.control_grid
    times = jnp.asarray(save_times(cfg))
    T = times.shape[0]
    y0 = initial_state(sc, scenario.initial)
    dtype = y0.sigma_BN.dtype
    cs0 = initial_control_state(0 if sc.wheels is None else sc.wheels.count, dtype)
    solver, controller, kwargs = adaptive_parts(scenario, adjoint)
    t_end, cdt = jnp.asarray(cfg.t_end, dtype), ctrl.control_dt
    eps = 1e-9 * jnp.maximum(cdt, cfg.save_dt)

    def period(carry, k):
        y, cs, failed, steps = carry
        kf = k.astype(dtype)
        t0 = jnp.minimum(kf * cdt, t_end)
        t1 = jnp.minimum((kf + 1.0) * cdt, t_end)
        last = (kf + 1.0) * cdt >= t_end - eps
        cs = control_update(ctrl, sc.wheels, y.sigma_BN, y.omega_BN_B, y.Omega, cs)
        first = jnp.searchsorted(times, t0 - eps, side="left")
        idx = first + jnp.arange(saves)
        t_save = times[jnp.minimum(idx, T - 1)]
        inside = (idx < T) & (t0 < t_end - eps) & jnp.where(last, t_save <= t_end + eps, t_save < t1 - eps)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(_held_field), solver, t0=t0, t1=t1, dt0=jnp.minimum(scenario.adaptive_settings.dt0, cdt),
            y0=y, args=(sc, loads, ctrl, cs), saveat=diffrax.SaveAt(ts=jnp.clip(t_save, t0, t1), t1=True),
            stepsize_controller=controller, max_steps=cfg.max_steps, throw=False, **kwargs)
        ys = jax.tree.map(lambda a: a[:-1], sol.ys)
        end = jax.tree.map(lambda a: a[-1], sol.ys)
        code = jnp.asarray(sol.result._value)
        failed = jnp.where(failed == diffrax.RESULTS.successful._value, code, failed)
        return (end, cs, failed, steps + sol.stats["num_accepted_steps"]), (ys, cs, jnp.where(inside, idx, T))

    ok = jnp.asarray(diffrax.RESULTS.successful._value)
    (y_end, cs_end, result, steps), (ys, css, where) = jax.lax.scan(
        period, (y0, cs0, ok, jnp.asarray(0)), jnp.arange(periods))
    where = where.reshape(-1)

    def place(a, per_period: bool):  # (periods, saves, ...) or (periods, ...) -> (T, ...) at the save indices
        a = jnp.repeat(a, saves, axis=0) if per_period else a.reshape(-1, *a.shape[2:])
        return jnp.zeros((T, *a.shape[1:]), a.dtype).at[where].set(a, mode="drop")

    held = jax.tree.map(lambda a: place(a, True), css)
    # a save at t_end on a sample instant reports the call made there (the rk4 path's convention)
    on_sample = (jnp.abs(t_end / cdt - jnp.round(t_end / cdt)) < 1e-6) & (times[-1] >= t_end - eps)
    final = control_update(ctrl, sc.wheels, y_end.sigma_BN, y_end.omega_BN_B, y_end.Omega, cs_end)
    held = jax.tree.map(lambda h, f: h.at[-1].set(jnp.where(on_sample, f, h[-1])), held, final)
    return _Solution(times, jax.tree.map(lambda a: place(a, False), ys), result, steps, held)


def _wheel_outputs(scenario: Scenario, ts, ys: State, control: ControlState | None = None) -> dict:
    """`Omega` and the motor torque `u_current` applied at each sample time (T, W) (the command held from that time
    on, after the `u_max` limit); (T, 0) without wheels."""
    wheels = scenario.spacecraft.wheels
    T = ys.theta.shape[0]
    if wheels is None:
        empty = jnp.zeros((T, 0), ys.theta.dtype)
        return {"Omega": empty, "u_current": empty}
    ctrl = scenario.control

    def applied(t, Om, cs):  # the wheels' commands at t: the loads' and any the controller holds from t on
        return wheel_torques(wheels, Om, with_command(scenario.loads.at(t), ctrl, cs)[4])[0]

    u = jax.vmap(applied)(ts, ys.Omega, control)
    return {"Omega": ys.Omega, "u_current": u}


def _control_outputs(scenario: Scenario, ys: State, control: ControlState | None) -> dict:
    """`sigma_BR`, `omega_BR_B` (attTrackingError's, from the state) and the torque request `Lr` held from each
    sample time on (T, 3); (T, 0) without a controller."""
    T = ys.theta.shape[0]
    if control is None:
        empty = jnp.zeros((T, 0), ys.theta.dtype)
        return {"sigma_BR": empty, "omega_BR_B": empty, "Lr": empty}
    ref = scenario.control.sigma_R0N
    return {"sigma_BR": jax.vmap(lambda s: sub_mrp(s, ref))(ys.sigma_BN), "omega_BR_B": ys.omega_BN_B,
            "Lr": control.Lr}


def refuse_invalid(scenario: Scenario, source: str) -> None:
    """Refuse, before any compute, a scenario given with values (not traced) whose model breaks a physical rule
    (`_model._rules.model_problems`; a batch: member by member): a `ScenarioError` naming the member, the field,
    the value and the rule. Traced scenarios are checked inside the program (`model_ok`, per member)."""
    sc, pulses = scenario.spacecraft, scenario.loads.pulses
    actuator = None if scenario.control is None else scenario.control.actuator
    problem = None if actuator is None else actuator.problem(None if sc.wheels is None else sc.wheels.gsHat_B)
    if problem is not None:
        raise ScenarioError.bad(source, f"control.{problem[0]}", actuator.name, problem[1])
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((sc, pulses))):
        return
    if pulses is not None and scenario.simulation.integrator.fixed_step and np.ndim(pulses.t_start) == 1:
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
    t_stop=None,
) -> Trajectory:
    """`simulate` without its `eqx.filter_jit` (to compose inside a caller's own jit/vmap/grad). `t_stop`
    (rk4 at given `ts`, traced): no step starts at or after it (the outputs at later times are not computed:
    a fit weighs none of them)."""
    sol = _solve(scenario, adjoint, ts, t_stop)
    return trajectory_of(scenario, sol.ts, sol.ys, sol.result, sol.num_steps, sol.control)


def trajectory_of(scenario: Scenario, ts, ys: State, result, num_steps, control: ControlState | None = None
                  ) -> Trajectory:
    """The `Trajectory` of states `ys` (T, ...) at times `ts`: the Basilisk outputs (shadow-set MRP, energy and
    momentum, panel and wheel outputs), `success` when `result` is 0, every output finite and the model valid.
    The one place a solve's states become outputs (`simulate`, the segments of a multiple-shooting fit)."""
    ys = eqx.tree_at(lambda y: y.sigma_BN, ys, mrp_shadow(ys.sigma_BN))
    diag = jax.vmap(diagnostics, in_axes=(None, 0))(scenario.spacecraft, ys)
    sol = _Solution(ts, ys, result, num_steps, control)
    fields = dict(
        t=sol.ts,
        r_BN_N=ys.r_BN_N,
        v_BN_N=ys.v_BN_N,
        sigma_BN=ys.sigma_BN,
        omega_BN_B=ys.omega_BN_B,
        theta=ys.theta,
        thetaDot=ys.thetaDot,
        **_wheel_outputs(scenario, sol.ts, ys, sol.control),
        **_control_outputs(scenario, ys, sol.control),
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
      the integrator: `RK4(dt)` (file name `"rk4"`: fixed step `dt`, Basilisk's tableau, loads zero-order held
      per step, step-for-step comparable with Basilisk) or `Tsit5(...)`/`Dopri8(...)` (`"tsit5"`/`"dopri8"`:
      adaptive, PID control with `rtol`/`atol`, pulse edges as jump times).
    - `adjoint`: a diffrax adjoint. Default `RecursiveCheckpointAdjoint` (reverse mode, `jax.grad`);
      pass `diffrax.ForwardMode()` for `jax.jacfwd` (least-squares fits). `RK4` is a plain `lax.scan`, which
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
    store = cfg.integrator.fixed_step and stores_steps(adjoint, cfg)
    check_memory(cfg, scenario.spacecraft.panels.count, samples=None if ts is None else np.shape(ts)[0],
                 stored_steps=store)
    if cfg.integrator.fixed_step:  # the scan path reads one thing of the adjoint: one program for each choice
        adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=sample_counts(cfg)[1]) if store else None
    return _simulate_jit(compile_key(scenario), adjoint, ts)
