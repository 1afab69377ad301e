r"""`propagate`: the one fixed-step propagation of the model, for every caller that steps it in time.

`simulate` (the rk4 path), the closed-loop period map (`_analysis/_linear/_closed_loop.py`) and multiple shooting's
segments (`_analysis/_fitting/_shooting.py`) all step the model here, and nowhere else: the integrator object owns
the arithmetic of one step (`RK4.step`, Basilisk's tableau, in `_model/_integrators.py`), this module owns what
happens around it, the same for every caller:

- **the flat state**: hub position, velocity, MRP, rate, hinge angles and rates, wheel speeds in one vector
  (`flat_state`, `unflat_state`), so each update is one kernel;
- **loads** zero-order held over each step (evaluated at its start $t_j = j\,dt$): constant loads, pulses,
  functions of time and recorded `[inputs]` (`Loads.at`);
- **the controller** in the loop: the flight software runs at the start of every step that starts on a control
  sample ($k$ `control_dt`, `is_sample`), from the state there (`flight_software`), and its command is held over
  the steps until the next (`with_command`);
- **the MRP shadow switch** after each step (as Basilisk's `HubEffector::modifyStates`);
- **the step grid**: step $j$ runs from $j\,dt$ to $(j+1)\,dt$, the run's last one ending exactly at `t_end`
  (rk4 accepts a `t_end` within 1e-9 relative of a whole number of steps).

The adaptive integrators (`Tsit5`, `Dopri8`) step inside diffrax's own loop (`propagate_adaptive`, `MRPSwitch`), to
the same points; the closed loop's period map is rk4 by definition, whatever the scenario's integrator.
"""

from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._dynamics._backsub import state_derivative, state_derivative_held
from .._math import mrp_shadow
from .._model._control import Control, ControlState, control_update
from .._model._integrators import RK4
from .._model._spacecraft import State
from ._memory import sample_counts
from ._solver import MRPSwitch

__all__ = ["Propagated", "adaptive_parts", "flat_state", "flight_software", "held_commands", "is_sample", "propagate",
           "propagate_adaptive", "state_layout", "step", "unflat_state", "with_command"]


def flat_state(y: State) -> Float[Array, "*batch state"]:  # state = 12 + 2N (+ W wheel speeds)
    """The flat state vector of a `State`: `r_BN_N`, `v_BN_N`, `sigma_BN`, `omega_BN_B`, `theta`, `thetaDot`
    (and `Omega`), in that order."""
    parts = [y.r_BN_N, y.v_BN_N, y.sigma_BN, y.omega_BN_B, y.theta, y.thetaDot]
    return jnp.concatenate(parts if y.Omega is None else [*parts, y.Omega], -1)


def unflat_state(v: Float[Array, "*batch state"], n: int, wheels: bool = False) -> State:
    """The `State` of a flat state vector of `n` panels (and, with `wheels`, the wheel speeds after them)."""
    return State(v[..., 0:3], v[..., 3:6], v[..., 6:9], v[..., 9:12], v[..., 12 : 12 + n], v[..., 12 + n : 12 + 2 * n],
                 v[..., 12 + 2 * n :] if wheels else None)


def state_layout(spacecraft) -> tuple[int, bool]:
    """`(panels, has wheels)`: how a flat state vector of this model splits (`unflat_state`)."""
    return spacecraft.panels.count, spacecraft.wheels is not None


def with_command(loads_t0, control: Control | None, cs: ControlState | None):
    """The loads of a step plus the controller's held command (its actuator's: a hub torque or wheel torques)."""
    if control is None:
        return loads_t0
    return control.actuator.loads(loads_t0, cs)


def is_sample(control: Control, j, dt):
    """Whether the step j (starting at j dt) starts on a control sample, k `control_dt` (a whole multiple of
    `dt`: the file layer checks it). Traced: `control_dt` stays an array leaf (sweeps and batches over it)."""
    periods = j * dt / control.control_dt
    return jnp.abs(periods - jnp.round(periods)) < 1e-6


def flight_software(scenario, y: Float[Array, " state"], cs: ControlState, j, dt) -> ControlState:
    """The controller's state after the flight software's call at step j's start, when that step starts on a
    control sample (`is_sample`); unchanged otherwise."""
    sc, ctrl = scenario.spacecraft, scenario.control
    st = unflat_state(y, *state_layout(sc))
    new = control_update(ctrl, sc.wheels, st.sigma_BN, st.omega_BN_B, st.Omega, cs)
    return jax.tree.map(lambda a, b: jnp.where(is_sample(ctrl, j, dt), a, b), new, cs)


def step(spacecraft, y: Float[Array, " state"], h, loads_t0) -> Float[Array, " state"]:
    """One step `h` of the flat state `y` with the loads `loads_t0` (and any held command) held over it, by rk4's
    arithmetic (`RK4.step`), then the MRP shadow switch."""
    layout = state_layout(spacecraft)
    f_b, f_n, tq, u, u_w = loads_t0

    def field(v):
        return flat_state(state_derivative_held(spacecraft, unflat_state(v, *layout), f_b, f_n, tq, u, u_w))

    y1 = RK4.step(field, y, h)
    return y1.at[6:9].set(mrp_shadow(y1[6:9]))


def held_commands(scenario, out: "Propagated", t0, m: int, dt) -> ControlState:
    """The controller's command held from each of `propagate`'s points on (`out.control` stacked: the call made
    there when the point's step starts on a control sample, as the run does): what a trajectory reports as
    `Lr` and `u_current` at its sample times. `t0`, `m`, `dt`: as given to `propagate`."""
    j = jnp.round(jnp.asarray(t0) / dt).astype(int) + jnp.arange(out.ys.shape[0]) * m
    return jax.vmap(lambda y, cs, jj: flight_software(scenario, y, cs, jj, dt))(out.ys, out.control, j)


class Propagated(NamedTuple):
    """What `propagate` returns: the flat states at the K + 1 points `ys` (K + 1, state), and with a controller
    the controller's state there `control` (`ControlState`, stacked; the calls made before each point's step),
    else `None`."""

    ys: Float[Array, "K1 state"]
    control: ControlState | None


def adaptive_parts(scenario, adjoint):
    """`(solver, step-size controller, adjoint kwargs)` of the adaptive integrators: Tsit5/Dopri8 in `MRPSwitch`,
    PID control with `rtol`/`atol` (traced after `compile_key`), the loads' jump times as step boundaries."""
    # forward-mode AD needs plain lax loops in the Runge-Kutta stages (diffrax sets this itself for bare
    # solvers; our wrapper sets it on the inner solver)
    scan_kind = "lax" if isinstance(adjoint, diffrax.ForwardMode) else "bounded"
    inner = scenario.simulation.integrator.solver(scan_kind)
    tol = scenario.adaptive_settings
    controller = diffrax.PIDController(rtol=tol.rtol, atol=tol.atol)
    jumps = scenario.loads.jump_times
    if jumps is not None:
        controller = diffrax.ClipStepSizeController(controller, jump_ts=jumps)
    return MRPSwitch(inner), controller, ({} if adjoint is None else {"adjoint": adjoint})


def propagate_adaptive(scenario, y0: State, t0, ts, *, t1=None, adjoint=None):
    """The adaptive integrators (`Tsit5`, `Dopri8`, in diffrax's loop) from the `State` `y0` at `t0` to `t1`
    (default `ts[-1]`), saving at the times `ts` by their dense interpolation: the diffrax solution (`ys` in each
    step's own MRP set; `result`; `stats`). `adjoint`: `diffrax.ForwardMode()` for forward-mode derivatives."""
    cfg = scenario.simulation
    solver, controller, kwargs = adaptive_parts(scenario, adjoint)
    return diffrax.diffeqsolve(
        diffrax.ODETerm(state_derivative),
        solver,
        t0=t0,
        t1=ts[-1] if t1 is None else t1,
        dt0=scenario.adaptive_settings.dt0,
        y0=y0,
        args=(scenario.spacecraft, scenario.loads),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        max_steps=cfg.max_steps,
        throw=False,
        **kwargs,
    )


def propagate(scenario, y0: Float[Array, " state"], t0, K: int, m: int, *, cs0: ControlState | None = None,
              dt=None, t_stop=None, checkpoint: bool = False, adjoint=None, rk4: bool = False) -> Propagated:
    """Step `scenario`'s model from the flat state `y0` at time `t0` over `K` intervals of `m` steps (module
    docstring: loads, controller, MRP switch, grid).

    **Arguments:**

    - `scenario`: a `Scenario` (its `spacecraft`, `loads`, `control` and `simulation` are read).
    - `y0`: the flat state at `t0` (`flat_state`); `t0` [s]: a whole number of steps (traced: segments of a
      record side by side under `vmap`).
    - `K`, `m` (static): the points are `t0 + k m dt`, k = 0..K.
    - `cs0`: the controller's state at `t0` (required with a controller in the loop).
    - `dt` [s]: the step (default the scenario's `simulation.dt`; traced allowed: the closed-loop period map's
      `control_dt / steps`). With the scenario's own step the run's last step ends at `t_end`.
    - `t_stop` (traced, optional): the steps that start at or after it are skipped (`lax.cond`: not computed; the
      state held), so a fit of a record's first part integrates only that part.
    - `checkpoint`: each interval is a `jax.checkpoint` (reverse mode stores the state at the points only and
      recomputes each interval once on the way back).
    - `adjoint`: the adaptive integrators' (`diffrax.ForwardMode()` for forward-mode derivatives).
    - `rk4`: step by rk4 whatever the scenario's integrator (the closed loop's period map).

    An adaptive integrator (`Tsit5`, `Dopri8`; not with a controller in the loop: `simulate` solves those period
    by period) reaches the same points, `t0 + k m dt`, by its own steps (`propagate_adaptive`).

    **Returns:** `Propagated`.
    """
    sc, loads, ctrl = scenario.spacecraft, scenario.loads, scenario.control
    cfg = scenario.simulation
    if not (cfg.integrator.fixed_step or rk4):
        if ctrl is not None:
            raise ValueError("propagate: an adaptive integrator with a controller in the loop is solved period by "
                             "period (simulate); not here")
        ts = t0 + jnp.arange(K + 1) * (m * (cfg.dt if dt is None else dt))
        sol = propagate_adaptive(scenario, unflat_state(y0, *state_layout(sc)), t0, ts, adjoint=adjoint)
        ys = flat_state(sol.ys)
        ok = sol.result == diffrax.RESULTS.successful
        return Propagated(jnp.where(ok, ys, jnp.nan), None)
    own = dt is None or (isinstance(dt, float) and dt == cfg.dt)
    dt = cfg.dt if dt is None else dt
    last = sample_counts(cfg)[1] if own else None  # the run's last step ends at t_end
    first = jnp.round(jnp.asarray(t0) / dt).astype(int)
    if ctrl is not None and cs0 is None:
        raise ValueError("propagate: cs0 (the controller's state) is required with a controller in the loop")

    def advance(carry, j):
        y, cs = carry
        jf = j.astype(y.dtype)
        t_a = jf * dt
        t_b = (jf + 1.0) * dt if last is None else jnp.where(j + 1 == last, cfg.t_end, (jf + 1.0) * dt)
        if ctrl is not None:
            cs = flight_software(scenario, y, cs, j, dt)
        return step(sc, y, t_b - t_a, with_command(loads.at(t_a), ctrl, cs)), cs

    def one(carry, j):
        if t_stop is None:
            return advance(carry, j), None
        return jax.lax.cond(j.astype(carry[0].dtype) * dt < t_stop, advance, lambda c, _: c, carry, j), None

    def interval(carry, k):
        carry, _ = jax.lax.scan(one, carry, first + k * m + jnp.arange(m))
        return carry, carry

    carry0 = (y0, cs0)
    _, (ys, css) = jax.lax.scan(jax.checkpoint(interval) if checkpoint else interval, carry0, jnp.arange(K))
    ys = jnp.concatenate([y0[None], ys])
    if ctrl is None:
        return Propagated(ys, None)
    return Propagated(ys, jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), cs0, css))
