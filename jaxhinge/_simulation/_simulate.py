"""`simulate`: integrate a scenario and return Basilisk-named output arrays.

Two integration paths, one per kind of integrator: the fixed-step `rk4` (Basilisk's `svIntegratorRK4`) is a
nested `lax.scan` over a flat state vector, with dense output at arbitrary times; the adaptive `tsit5` and
`dopri8` are diffrax solvers wrapped in `MRPSwitch`.
"""

import math
import os
from collections.abc import Sequence
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from .._dynamics._backsub import state_derivative, state_derivative_held
from .._dynamics._energy import diagnostics, initial_state
from .._errors import ConfigError, ScenarioError
from .._math import mrp_shadow
from .._model._loads import rk4_silent_pulse
from .._model._rules import model_ok, model_problems
from .._model._scenario import Scenario, SimulationConfig, compile_key
from .._model._spacecraft import State
from .._runtime._programs import program
from ._solver import MRPSwitch

OUTPUT_UNITS = {  # every trajectory output, in order, and its SI unit
    "t": "s", "r_BN_N": "m", "v_BN_N": "m/s", "r_CN_N": "m", "v_CN_N": "m/s", "sigma_BN": "1 (MRP)",
    "omega_BN_B": "rad/s", "theta": "rad", "thetaDot": "rad/s", "totOrbEnergy": "J", "totRotEnergy": "J",
    "totOrbAngMomPntN_N": "kg m^2/s", "totRotAngMomPntC_N": "kg m^2/s",
}
OUTPUT_NAMES = tuple(OUTPUT_UNITS)
DRIFT_RTOL = 1e-4  # largest relative drift of a conserved output in a valid run (`Trajectory.drift_warning`)
INVALID_MODEL = -1  # `Trajectory.result` of a run whose model breaks a physical rule (`_model._rules.model_ok`)
MEMORY_ENV = "JAXHINGE_MEMORY_LIMIT_GB"  # the memory limit of `check_memory` (default: half the physical memory)


class Trajectory(eqx.Module):
    """Sampled outputs of one run (Basilisk names and frames; T samples, N panels in file order).

    `t` (T,) [s]; `r_BN_N`, `v_BN_N`: hub point B in N; `r_CN_N`, `v_CN_N`: system CoM in N;
    `sigma_BN` (shadow set, $|\\sigma| \\le 1$); `omega_BN_B` [rad/s]; `theta`, `thetaDot` (T, N);
    `totOrbEnergy`, `totRotEnergy` (T,) [J]; `totOrbAngMomPntN_N`, `totRotAngMomPntC_N` (T, 3);
    `panel_r_SN_N`, `panel_v_SN_N`, `panel_sigma_SN`, `panel_omega_SN_S` (T, N, 3): panel inertial states;
    `panel_r_HN_N` (T, N, 3): hinge points in N.
    `result`: diffrax result code (0 = success); `success`: solver succeeded and every output is finite;
    `num_steps`: accepted steps (rk4: the steps of the grid to `t_end`).
    """

    t: Float[Array, " T"]
    r_BN_N: Float[Array, "T 3"]
    v_BN_N: Float[Array, "T 3"]
    r_CN_N: Float[Array, "T 3"]
    v_CN_N: Float[Array, "T 3"]
    sigma_BN: Float[Array, "T 3"]
    omega_BN_B: Float[Array, "T 3"]
    theta: Float[Array, "T panels"]
    thetaDot: Float[Array, "T panels"]
    totOrbEnergy: Float[Array, " T"]
    totRotEnergy: Float[Array, " T"]
    totOrbAngMomPntN_N: Float[Array, "T 3"]
    totRotAngMomPntC_N: Float[Array, "T 3"]
    panel_r_SN_N: Float[Array, "T panels 3"]
    panel_v_SN_N: Float[Array, "T panels 3"]
    panel_sigma_SN: Float[Array, "T panels 3"]
    panel_omega_SN_S: Float[Array, "T panels 3"]
    panel_r_HN_N: Float[Array, "T panels 3"]
    result: Int[Array, ""]
    success: Bool[Array, ""]
    num_steps: Int[Array, ""]

    def relative_drift(self, name: str) -> np.ndarray:
        """$|x(t) - x(0)| / |x(0)|$ per sample of a conserved output (`"totRotEnergy"`, `"totRotAngMomPntC_N"`,
        ...; vectors: Euclidean norms; absolute when $x(0) = 0$), as NumPy. The orbital energy and momentum are
        measured against $|x(0)|$ plus the rotational one's: those of C alone can be pure round-off (C at rest)."""
        other = {"totOrbEnergy": "totRotEnergy", "totOrbAngMomPntN_N": "totRotAngMomPntC_N"}.get(name)
        extra = 0.0 if other is None else np.linalg.norm(np.asarray(getattr(self, other))[0])
        return relative_drift(np.asarray(getattr(self, name)), extra)

    def drift_warning(self, scenario: Scenario, rtol: float = DRIFT_RTOL) -> str | None:
        """The run's health: `None`, or one line naming the outputs `scenario`'s physics conserves (`conserved`)
        that drifted by more than `rtol` (largest `relative_drift`): such a run is not a valid solution (a step
        too coarse for its dynamics, or implausible parameters). One run (not a batch)."""
        bad = [f"{k} {d:.3g}" for k in conserved(scenario) if (d := float(self.relative_drift(k).max())) > rtol]
        return None if not bad else (
            f"relative drift {', '.join(bad)} > {rtol:g}, although with no external loads (and, for the rotational "
            "energy, no damping or motor torque) the physics conserves them: the result is not valid; reduce "
            "simulation.dt (rk4) or rtol/atol, or check the parameters")

    def as_dict(self) -> dict[str, np.ndarray]:
        """The arrays of the `jaxhinge simulate --out` file, as NumPy."""
        return {k: np.asarray(getattr(self, k)) for k in OUTPUT_NAMES}


def failure_reason(code: int, simulation: Scenario | SimulationConfig | None = None) -> str:
    """Why a run failed, from its `Trajectory.result` code (0 with `success` false: a non-finite state), in the
    scenario's own terms (`simulation.max_steps`, `dt`, ...) with what to change. Plain text, one line. Given the
    `Scenario`, an rk4 failure names a hinge whose clamped frequency $\\sqrt{k/(I_{s2} + m d^2)}$ times `dt`
    exceeds rk4's stability limit 2.8 (a hinge too stiff, or a panel too light, for that step)."""
    code, scenario = int(code), simulation if isinstance(simulation, Scenario) else None
    simulation = scenario.simulation if scenario is not None else simulation
    if code == INVALID_MODEL:
        return ("the model breaks a physical rule (a mass, d or mHub <= 0, a negative k or c, l where no panel "
                "hangs, an inertia that is not a rigid body's, a hinge frame that is not a rotation): not a valid run")
    if code == 0:
        hint = "check masses and inertias (near-zero values make the model singular)"
        if simulation is not None and simulation.integrator == "rk4":
            hint = f"try a smaller simulation.dt (now {simulation.dt:g} s) or a softer hinge, and " + hint
        if scenario is not None and simulation.integrator == "rk4" and (p := scenario.spacecraft.panels).count:
            w = np.sqrt(np.asarray(p.k / (p.IPntS_S[:, 1, 1] + p.mass * p.d**2)))
            if w[j := int(np.argmax(w))] * simulation.dt > 2.8:
                hint = (f"panel {p.labels[j]!r} has a hinge frequency sqrt(k / (I_s2 + m d^2)) = {w[j]:.3g} rad/s, "
                        f"too high for simulation.dt = {simulation.dt:g} s (rk4 needs dt < 2.8 / {w[j]:.3g} = "
                        f"{2.8 / w[j]:.2g} s): check its k, mass and IPntS_S, or reduce dt")
        return f"a non-finite value (NaN/inf) appeared in the state; {hint}"
    if code == diffrax.RESULTS.max_steps_reached._value:
        where = "" if simulation is None else f" ({simulation.integrator}, simulation.max_steps = {simulation.max_steps})"
        return (f"the adaptive integrator used all its steps before t_end{where}: raise simulation.max_steps, "
                "loosen simulation.rtol/atol, or check for a very stiff hinge")
    messages = getattr(diffrax.RESULTS, "_index_to_message", ())  # diffrax's own wording, where it has one
    text = messages[code] if 0 <= code < len(messages) else ""
    return f"integrator result code {code}" + (f": {text.splitlines()[0]}" if text else "")


def relative_drift(x: np.ndarray, extra: float = 0.0) -> np.ndarray:
    """$|x(t) - x(0)| / (|x(0)| + extra)$ per sample (leading axis: time; vectors: Euclidean norms); absolute
    when the denominator is 0."""
    x = np.asarray(x, dtype=float)
    x = x.reshape(x.shape[0], -1)
    ref = np.linalg.norm(x[0]) + extra
    return np.linalg.norm(x - x[0], axis=1) / (ref if ref > 0 else 1.0)


def conserved(scenario: Scenario) -> tuple[str, ...]:
    """The outputs `scenario`'s physics conserves. With no external load (constant, pulse or function; gravity
    is part of the model): the orbital energy (with the gravity potential), the orbital momentum about N and the
    rotational momentum about C (springs, dampers and motors act inside the spacecraft); the rotational energy
    (springs included) too when no hinge has damping (`c = 0`) or motor torque. With external loads: none."""
    L, p = scenario.loads, scenario.spacecraft.panels
    vectors = (L.extForce_B, L.extForce_N, L.extTorquePntB_B) + (
        () if L.pulses is None else (L.pulses.extForce_B, L.pulses.extForce_N, L.pulses.extTorquePntB_B))
    if any(f is not None for f in (L.extForce_B_fn, L.extForce_N_fn, L.extTorquePntB_B_fn)) or any(
            np.any(np.asarray(v) != 0) for v in vectors):
        return ()
    passive = L.motorTorque_fn is None and not np.any(np.asarray(p.c) != 0) and not np.any(np.asarray(p.motorTorque))
    return ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N") + ("totRotEnergy",) * passive


def memory_limit() -> float:
    """Bytes a run's outputs and working arrays may take: `$JAXHINGE_MEMORY_LIMIT_GB` GB, else half the physical
    memory (8 GB where the system does not say). **Raises:** `ConfigError` for a setting that is not a number > 0."""
    env = os.environ.get(MEMORY_ENV)
    try:
        gb = float(env) if env is not None else 5e-10 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a number; or no sysconf (Windows)
        gb = math.nan if env is not None else 8.0
    if not gb > 0:
        raise ConfigError(MEMORY_ENV, env, "must be a number of GB > 0 (the memory a run may use)")
    return gb * 1e9


def _counts(cfg: SimulationConfig) -> tuple[int, int]:
    """`(K, n)`: K save intervals ($\\lfloor t_{end}/\\Delta t_{save}\\rfloor$), n rk4 steps to t_end; no array built."""
    return (int(np.floor(cfg.t_end / cfg.save_dt * (1.0 + 1e-12) + 1e-9)),
            int(np.ceil(cfg.t_end / cfg.dt * (1.0 - 1e-12) - 1e-9)))


def save_times(cfg: SimulationConfig) -> np.ndarray:
    """Output times: $k\\,\\Delta t_{save}$ for $k = 0..\\lfloor t_{end}/\\Delta t_{save}\\rfloor$."""
    return np.minimum(np.arange(_counts(cfg)[0] + 1) * cfg.save_dt, cfg.t_end)


def step_times(cfg: SimulationConfig) -> np.ndarray:
    """The rk4 step grid $k\\,dt$ (exact multiples, as Basilisk's integer-nanosecond clock), ending at t_end."""
    ts = np.arange(_counts(cfg)[1] + 1) * cfg.dt
    ts[-1] = cfg.t_end
    return ts


def check_memory(cfg: SimulationConfig, panels: int, members: int = 1, samples: int | None = None,
                 field: str | None = None, value=None, stored_steps: bool = False) -> None:
    """The one memory estimate, made before compute by every entry point (simulate, batches, the fit check,
    sensitivities, telemetry fits): 8 bytes x members x (samples x (39 + 19 N) + steps x (13 + 2 N)), N panels: each
    saved sample (default: the `save_dt` grid) holds the outputs and the solver state; rk4 keeps its `steps` for
    output at given times, and with `stored_steps` (`stores_steps`) another 4 (12 + 2 N) + 17 per step for reverse
    mode. **Raises:** `ConfigError` (`field = value`, default `save_dt`, or `dt` when the steps dominate) with the
    estimate and the limit (`memory_limit`) when it does not fit."""
    K, n = _counts(cfg)
    steps = n + 1 if samples is not None and cfg.integrator == "rk4" else 0
    samples = K + 1 if samples is None else samples
    per_step = (13 + 2 * panels) * (steps > 0) + (4 * (12 + 2 * panels) + 17) * stored_steps
    steps = max(steps, n) if stored_steps else steps
    need, limit = 8.0 * members * (samples * (39 + 19 * panels) + steps * per_step), memory_limit()
    if need > limit:
        if field is None and stored_steps:
            field, value = "adjoint.checkpoints", n
        elif field is None:
            field, value = ("simulation.dt", cfg.dt) if steps > samples else ("simulation.save_dt", cfg.save_dt)
        what = f"{samples:.4g} samples" + (f" + {steps:.4g} rk4 steps" if steps else "")
        what += " kept for reverse mode" if stored_steps else ""
        raise ConfigError(field, value, f"{members} run(s) x {what} with {panels} panel(s) need about {need / 1e9:.3g}"
                          f" GB of outputs and working memory, above the limit of {limit / 1e9:.3g} GB (set "
                          f"{MEMORY_ENV} to raise it)")


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


def _flat(y: State) -> Float[Array, "*batch state"]:  # state = 12 + 2N
    return jnp.concatenate([y.r_BN_N, y.v_BN_N, y.sigma_BN, y.omega_BN_B, y.theta, y.thetaDot], -1)


def _unflat(v: Float[Array, "*batch state"]) -> State:
    n = (v.shape[-1] - 12) // 2
    return State(v[..., 0:3], v[..., 3:6], v[..., 6:9], v[..., 9:12], v[..., 12 : 12 + n], v[..., 12 + n :])


def _rk4_step(spacecraft, y: Float[Array, " state"], h, loads_t0) -> Float[Array, " state"]:
    """One Basilisk RK4 step of the flat state `y` with loads held at the step start, then the MRP shadow
    switch: `y1 = y + h (k1/6 + k2/3 + k3/3 + k4/6)`, stage inputs `y + h/2 k1`, `y + h/2 k2`, `y + h k3`.

    The four stages run in a `fori_loop` so the vector field is compiled once, not four times (XLA's compile
    time grows with the number of kernels), and the state is one flat vector so each update is one kernel."""
    f_b, f_n, tq, u = loads_t0
    a, b = jnp.asarray(_RK4_A, y.dtype), jnp.asarray(_RK4_B, y.dtype)

    # checkpointed: reverse mode stores each stage's input and recomputes the vector field, instead of
    # stacking its hundreds of small intermediates (faster gradients, shorter compile)
    def vf(v):
        return _flat(state_derivative_held(spacecraft, _unflat(v), f_b, f_n, tq, u))

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
        _unflat(jnp.concatenate([y0[None], ys])),
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
        f_b, f_n, tq, u = loads.at(t_hold)
        return _flat(state_derivative_held(sc, _unflat(y), f_b, f_n, tq, u))

    # both ends' slopes in one vmapped vector field (one copy of it in the compiled program)
    f0, f1 = jnp.split(jax.vmap(slope)(jnp.concatenate([y0, y1]), jnp.concatenate([t0, t0])), 2)
    s, hh = s[:, None], h[:, None]
    h00 = (1 + 2 * s) * (1 - s) ** 2
    h10 = s * (1 - s) ** 2
    h01 = s**2 * (3 - 2 * s)
    h11 = s**2 * (s - 1)
    y = h00 * y0 + h10 * hh * f0 + h01 * y1 + h11 * hh * f1
    return _Solution(ts, _unflat(y), full.result, full.num_steps)


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
