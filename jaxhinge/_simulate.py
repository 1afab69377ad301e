"""`simulate`: integrate a scenario with diffrax and return Basilisk-named output arrays."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ._dynamics import state_derivative
from ._energy import diagnostics, initial_state
from ._math import mrp_shadow
from ._scenario import Scenario, SimulationConfig
from ._solver import RK4, MRPSwitch

OUTPUT_NAMES = (
    "t",
    "r_BN_N",
    "v_BN_N",
    "r_CN_N",
    "v_CN_N",
    "sigma_BN",
    "omega_BN_B",
    "theta",
    "thetaDot",
    "totOrbEnergy",
    "totRotEnergy",
    "totOrbAngMomPntN_N",
    "totRotAngMomPntC_N",
)


class Trajectory(eqx.Module):
    """Sampled outputs of one run (Basilisk names and frames; T samples, N panels in file order).

    `t` (T,) [s]; `r_BN_N`, `v_BN_N`: hub point B in N; `r_CN_N`, `v_CN_N`: system CoM in N;
    `sigma_BN` (shadow set, $|\\sigma| \\le 1$); `omega_BN_B` [rad/s]; `theta`, `thetaDot` (T, N);
    `totOrbEnergy`, `totRotEnergy` (T,) [J]; `totOrbAngMomPntN_N`, `totRotAngMomPntC_N` (T, 3);
    `panel_r_SN_N`, `panel_v_SN_N`, `panel_sigma_SN`, `panel_omega_SN_S` (T, N, 3): panel inertial states.
    `result`: diffrax result code (0 = success); `success`: solver succeeded and every output is finite;
    `num_steps`: accepted steps.
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
    result: Int[Array, ""]
    success: Bool[Array, ""]
    num_steps: Int[Array, ""]

    def as_dict(self) -> dict[str, np.ndarray]:
        """The arrays of the `jaxhinge simulate --out` file, as NumPy."""
        return {k: np.asarray(getattr(self, k)) for k in OUTPUT_NAMES}


def save_times(cfg: SimulationConfig) -> np.ndarray:
    """Output times: $k\\,\\Delta t_{save}$ for $k = 0..\\lfloor t_{end}/\\Delta t_{save}\\rfloor$."""
    n = int(np.floor(cfg.t_end / cfg.save_dt * (1.0 + 1e-12) + 1e-9))
    ts = np.arange(n + 1) * cfg.save_dt
    return np.minimum(ts, cfg.t_end)


def step_times(cfg: SimulationConfig) -> np.ndarray:
    """The rk4 step grid $k\\,dt$ (exact multiples, as Basilisk's integer-nanosecond clock), ending at t_end."""
    n = int(np.ceil(cfg.t_end / cfg.dt * (1.0 - 1e-12) - 1e-9))
    ts = np.arange(n + 1) * cfg.dt
    ts[-1] = cfg.t_end
    return ts


def _solve(scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None, ts=None):
    cfg = scenario.simulation
    sc, loads = scenario.spacecraft, scenario.loads
    y0 = initial_state(sc, scenario.initial)
    # `ts`: optional output times in [0, t_end] (non-decreasing; e.g. irregular telemetry samples), served by
    # the solver's dense interpolation between steps (rk4: cubic Hermite; exact on the step grid)
    ts = jnp.asarray(save_times(cfg)) if ts is None else jnp.asarray(ts, dtype=float)
    term = diffrax.ODETerm(state_derivative)
    # forward-mode AD needs plain lax loops in the Runge-Kutta stages (diffrax sets this itself for bare
    # solvers; our wrapper sets it on the inner solver)
    scan_kind = "lax" if isinstance(adjoint, diffrax.ForwardMode) else "bounded"
    if cfg.integrator == "rk4":
        grid = step_times(cfg)
        solver = MRPSwitch(RK4(scan_kind=scan_kind), zoh=True)
        controller = diffrax.StepTo(ts=jnp.asarray(grid))
        dt0, max_steps = None, len(grid) - 1
    else:
        inner = (diffrax.Tsit5 if cfg.integrator == "tsit5" else diffrax.Dopri8)(scan_kind=scan_kind)
        solver = MRPSwitch(inner, zoh=False)
        controller = diffrax.PIDController(rtol=cfg.rtol, atol=cfg.atol)
        jumps = loads.jump_times
        if jumps is not None:
            controller = diffrax.ClipStepSizeController(controller, jump_ts=jumps)
        dt0, max_steps = cfg.dt, cfg.max_steps
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    return diffrax.diffeqsolve(
        term,
        solver,
        t0=0.0,
        t1=cfg.t_end,
        dt0=dt0,
        y0=y0,
        args=(sc, loads, None),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
        **kwargs,
    )


def simulate_unjitted(
    scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None = None, ts: ArrayLike | None = None
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
    ok = (sol.result == diffrax.RESULTS.successful) & finite
    return Trajectory(
        **fields,
        result=jnp.asarray(sol.result._value),
        success=ok,
        num_steps=jnp.asarray(sol.stats["num_accepted_steps"]),
    )


@eqx.filter_jit
def simulate(
    scenario: Scenario, adjoint: diffrax.AbstractAdjoint | None = None, ts: ArrayLike | None = None
) -> Trajectory:
    """Integrate one scenario and return its `Trajectory`.

    **Arguments:**

    - `scenario`: a `Scenario` (from `load_scenario` or built in code). Its `simulation` settings pick
      the integrator: `"rk4"` (fixed step `dt`, Basilisk's tableau, loads zero-order held per step,
      step-for-step comparable with Basilisk) or `"tsit5"`/`"dopri8"` (adaptive, PID control with
      `rtol`/`atol`, pulse edges as jump times).
    - `adjoint`: a diffrax adjoint. Default `RecursiveCheckpointAdjoint` (reverse mode, `jax.grad`);
      pass `diffrax.ForwardMode()` for `jax.jacfwd` (least-squares fits).
    - `ts`: optional output times (default: `k * save_dt`), non-decreasing, within `[0, t_end]`, e.g. the
      irregular sample times of telemetry. Between solver steps the outputs come from the solver's dense
      interpolation (rk4: cubic Hermite, so exact only on the `k * dt` grid; tsit5/dopri8: their own
      high-order interpolants).

    **Returns:** a `Trajectory`. Numerical failure (step budget exhausted, non-finite state) does not
    raise: check `trajectory.success` / `trajectory.result`.

    Compiled once per model structure (number of panels, gravity on/off, loads kinds, simulation
    settings); jit, `vmap` and `grad` over every array leaf of the scenario.
    """
    return simulate_unjitted(scenario, adjoint, ts)
