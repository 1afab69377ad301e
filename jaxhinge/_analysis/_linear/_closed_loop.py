r"""Closed-loop poles of the spacecraft with its attitude controller (`Scenario.control`).

**The sampled loop** (what flies, and what `simulate` integrates): the flight software reads the state every
`control_dt` and holds its command until the next call. One control period is a map
$x_{k+1} = \Phi(x_k)$ of the rotational state $x = (\sigma_{BN}, \omega_{BN}, \theta, \dot\theta, \Omega,
\int\!\sigma)$ (the integral only with $K_i > 0$; the translation is left out: without gravity it does not feed
back), built from the simulator itself: the controller's call at the period start (`control_update`, as a call
after the first two) and the `control_dt / dt` rk4 steps with the command held (`period_map`). Its Jacobian at
the equilibrium (`period_matrix`: in closed form, rk4 of the linearised plant, equal to forward-mode autodiff of
`period_map` to round-off and much cheaper) has eigenvalues $z$; the poles are $\lambda = \ln z / T$,
$T$ = `control_dt`, on the branch the eigenvector's own motion picks (`_branch`: a mode above the Nyquist
frequency is not read at its alias).

**The continuous law** (on request): the same controller applied continuously, $\dot x = f(x, u(x))$, the
integral as $\dot{\int\!\sigma} = K\sigma_{BR}$; the poles are the eigenvalues of $\partial f/\partial x$.

The equilibrium: B at the reference ($\sigma_{BN} = \sigma_{R0N}$), at rest, hinges at `thetaRef`, wheels at the
scenario's initial speeds held by their motors (as `linearize`), no loads, no hinge motor torque. (A
`knownTorquePntB_B` other than zero leaves no equilibrium; the poles are then those of the linearised motion
about that state. Wheel saturation, `u_max`, is not in the linearisation.)

Each pole: `frequency_hz` $= |\lambda|/2\pi$, `damping_ratio` $= -\mathrm{Re}\,\lambda/|\lambda|$ (MATLAB `damp`),
`neutral` where $|\lambda| < 10^{-9}$ s$^{-1}$ (a wheel's speed without friction: not controlled, not a
mode); `margin`: the smallest damping ratio of the other poles (negative: unstable). Derivatives with respect to
every array leaf (gains, k, c, inertias) through a custom JVP of the eigenvalues (left and right eigenvectors,
`_modes`).

**Which body moves** in each pole: the kinetic energy of its eigenvector split over the structure as `modes`
does, hub translation (zero total momentum), hub rotation (the wheels' spin inertia taken out of the hub) and
each panel, the shares summing to 1 (`energy_fraction`, `participants` as `modes`). **How hard the actuators
work** in each pole: the largest command of its eigenvector (a wheel's motor torque, or a component of the hub
torque), $\max_i|(G v)_i|$ with $G$ the flight software's Jacobian, per radian of the pole's largest angle
($\max(|\delta\phi_B|, \max_j|\delta\theta_j|)$, $\delta\phi_B = 4B(\sigma_{R0N})^{-1}\delta\sigma_{BN}$ the hub's
rotation), `command_per_rad`; and the amplitude of that angle at which the first wheel reaches its `u_max`
(less the motor torque holding it at the equilibrium), `saturation_angle`: the linearisation describes the loop
only below it (inf: no limit, or a hub torque). (The wheels' spin energy is no measure of their part: the
quadratic energy of a perturbation of a wheel spinning at hundreds of rad/s leaves out the first-order term
$J_s\Omega\,\delta\Omega$, and a small $J_s$ makes it dominate every pole the wheels act on.)
The `flexible` poles are the $2N$ whose eigenvectors hold the largest share of hinge strain energy
$\tfrac12 k|\delta\theta|^2$ against strain plus the structure's kinetic energy (1/2 for a lightly damped
flexible mode; small for the attitude and wheel poles, whose hinges follow quasi-statically);
`flexible_margin` is their smallest damping ratio, the number a control-structure-interaction requirement
("every flexible mode damped by at least 2 %") is written on.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Complex, Float

from ..._dynamics._backsub import state_derivative_held
from ..._errors import ScenarioError
from ..._math import mrp_bmat, sub_mrp
from ..._model._boundary import FreeFree
from ..._model._control import ControlState, control_update, initial_control_state
from ..._model._loads import Loads
from ..._model._scenario import Scenario
from ..._model._spacecraft import State, strip_labels
from ..._runtime._programs import program
from ..._simulation._propagate import flat_state, propagate, state_layout, unflat_state, with_command
from ._linearize import body_jacobians, mass_matrix, mode_labels, rest_spacecraft, structure, wheel_speeds
from ._modes import as_point, eigenvalues, first_order_clusters, modes_unjitted, poles_first_order, relabel

_NEUTRAL = 1e-9  # |lambda| [1/s] below this: a neutral pole (uncontrolled wheel speed)


class ClosedLoopPoles(eqx.Module):
    """The closed-loop poles (module docstring), in ascending `frequency_hz` (complex poles in conjugate pairs).

    - `eigenvalue` [1/s]; `frequency_hz`, `damping_ratio` (`damp` definitions); `neutral`: $|\\lambda| < 10^{-9}$.
    - `energy_fraction` (poles, participants): each pole's kinetic-energy split over the structure (module
      docstring); rows sum to 1 (NaN for neutral poles).
    - `command_per_rad` [N m/rad]: the largest actuator command (wheel motor torque, or hub torque component) per
      radian of the pole's largest angle (hub rotation or hinge); `saturation_angle` [rad]: that angle's
      amplitude at which a wheel's command reaches its `u_max` (inf without a limit or with a hub torque); NaN
      for neutral poles and for poles without angle motion (module docstring).
    - `flexible`: the $2N$ poles of the panels' flexible modes (largest hinge strain-energy share).
    - `margin`: the smallest `damping_ratio` of the poles that are not neutral (< 0: the loop is unstable);
      `flexible_margin`: the smallest of the flexible poles (inf without panels).
    - `growth_rate` [1/s]: the largest real part of the poles that are not neutral (> 0: unstable); for the
      sampled loop $\\ln$ of its spectral radius $\\max|z|$ over `control_dt`.
    - `control_dt` [s]: the period of the sampled loop (NaN for the continuous law).
    - `sampled` (static): the sampled loop (True) or the continuous law (False); `participants` (static):
      `("hub_translation", "hub_rotation", <panels>...)`.

    Derivatives (`jax.grad`, `jax.jacfwd`) of `eigenvalue`, `frequency_hz`, `damping_ratio`, the margins and
    `growth_rate`; `energy_fraction` and `flexible` describe the poles and carry no derivative."""

    eigenvalue: Complex[Array, " poles"]
    frequency_hz: Float[Array, " poles"]
    damping_ratio: Float[Array, " poles"]
    neutral: Bool[Array, " poles"]
    energy_fraction: Float[Array, "poles participants"]
    command_per_rad: Float[Array, " poles"]
    saturation_angle: Float[Array, " poles"]
    flexible: Bool[Array, " poles"]
    margin: Float[Array, ""]
    flexible_margin: Float[Array, ""]
    growth_rate: Float[Array, ""]
    control_dt: Float[Array, ""]
    sampled: bool = eqx.field(static=True)
    participants: tuple[str, ...] = eqx.field(static=True, default=())


def loop_shape(scenario: Scenario) -> tuple[int, bool]:
    """`(steps, integral)`, static: the rk4 steps of one control period (`control_dt / dt`, at least 1; the
    program's loop length) and whether the integral term is on ($K_i > 0$: its state joins the loop's)."""
    if scenario.control is None:
        raise ScenarioError.fail(None, "control", "closed-loop poles need a controller ([control])")
    ctrl = scenario.control
    return max(1, round(float(ctrl.control_dt) / scenario.simulation.dt)), bool(float(ctrl.Ki) > 0)


def _parts(scenario: Scenario, integral: bool):
    """The rest model, the equilibrium state vector and its layout `(panels, wheels, integral)`."""
    ctrl = scenario.control
    sc = rest_spacecraft(scenario.spacecraft, wheel_speeds(scenario))
    n = sc.panels.count
    W = 0 if sc.wheels is None else sc.wheels.count
    dtype = jnp.result_type(sc.hub.mHub)
    parts = [jnp.asarray(ctrl.sigma_R0N, dtype), jnp.zeros(3, dtype), sc.panels.thetaRef, jnp.zeros(n, dtype)]
    if W:
        parts.append(wheel_speeds(scenario))
    if integral:
        parts.append(jnp.zeros(3, dtype))
    return sc, jnp.concatenate(parts), (n, W, integral)


def _split(x, layout):
    n, W, integral = layout
    z3 = jnp.zeros(3, x.dtype)
    st = State(z3, z3, x[0:3], x[3:6], x[6:6 + n], x[6 + n:6 + 2 * n], x[6 + 2 * n:6 + 2 * n + W] if W else None)
    return st, (x[6 + 2 * n + W:] if integral else z3)


def _join(st: State, int_sigma, layout):
    _, W, integral = layout
    parts = [st.sigma_BN, st.omega_BN_B, st.theta, st.thetaDot] + ([st.Omega] if W else [])
    return jnp.concatenate(parts + ([int_sigma] if integral else []))


def period_map(scenario: Scenario, shape: tuple[int, bool] | None = None):
    """`(f, x0, T)`: one control period of the sampled loop as a function of the rotational state vector, its
    equilibrium, and `control_dt` [s] (module docstring; `shape`: `loop_shape`, from the scenario's values when
    not given). The period is `steps` rk4 steps of `control_dt / steps` (the simulation's `dt` when `control_dt`
    is a multiple of it) by the simulator's own propagation (`propagate`: the flight software's call at the
    period's start, its command held), so derivatives with respect to `control_dt` are complete."""
    steps, integral = loop_shape(scenario) if shape is None else shape
    sc, x0, layout = _parts(scenario, integral)
    ctrl = scenario.control
    dt = ctrl.control_dt / steps
    W = layout[1]
    rest = eqx.tree_at(lambda s: (s.spacecraft, s.loads), scenario, (sc, Loads()))

    def f(x):
        st, int_sigma = _split(x, layout)
        # a call after the first two (the integral accumulates), from the state at the period's start
        cs = ControlState(int_sigma, jnp.asarray(2.0, x.dtype), jnp.zeros(3, x.dtype), jnp.zeros(W, x.dtype))
        out = propagate(rest, flat_state(st), 0.0, 1, steps, cs0=cs, dt=dt, rk4=True)
        return _join(unflat_state(out.ys[-1], *state_layout(sc)), out.control.int_sigma[-1], layout)

    return f, x0, ctrl.control_dt


def _power_sum(R, m: int):
    """`(R^m, sum_{i<m} R^i)` by repeated squaring of the block matrix [[R, I], [0, I]] (m static)."""
    k = R.shape[0]
    eye = jnp.eye(k, dtype=R.dtype)
    Z = jnp.block([[R, eye], [jnp.zeros_like(R), eye]])
    out = jnp.eye(2 * k, dtype=R.dtype)
    while m:
        if m & 1:
            out = out @ Z
        m >>= 1
        if m:
            Z = Z @ Z
    return out[:k, :k], out[:k, k:]


def period_matrix(scenario: Scenario, shape: tuple[int, bool] | None = None):
    r"""`(Phi, T)`: the Jacobian of `period_map` at the equilibrium, assembled in closed form. At the equilibrium
    every rk4 stage sits at the fixed point, so the linearised rk4 step is rk4 applied to the linearised plant
    $\dot z = A z + B u$ with the command $u$ held: $z_{j+1} = R z_j + h\,Q B u$, $R = \sum_{i\le 4}(hA)^i/i!$,
    $Q = \sum_{i\le 3}(hA)^i/(i+1)!$; over the `steps` steps of a period $z_{k+1} = R^m z_k + S\,hQB\,u_k$ with
    $S = \sum_{i<m} R^i$, and the flight software's call at the period start gives $u_k = G x_k$ (and the new
    integral state). $A$, $B$, $G$ are forward-mode Jacobians of the simulator's own vector field and control
    law; the powers by repeated squaring. The same matrix as `jax.jacfwd(period_map)` (round-off), at a fraction
    of its cost to compile and run, and to differentiate (closed-loop sensitivities)."""
    steps, integral = loop_shape(scenario) if shape is None else shape
    sc, x0, layout = _parts(scenario, integral)
    ctrl = scenario.control
    n, W, _ = layout
    nz = 6 + 2 * n + W
    h = ctrl.control_dt / steps
    zero = jnp.zeros(3, x0.dtype)

    def held(cmd):  # the controller's state holding the command `cmd` (its actuator's: hub or wheel torques)
        return ctrl.actuator.hold(ControlState(zero, jnp.asarray(2.0, x0.dtype), zero, jnp.zeros(W, x0.dtype)), cmd)

    def plant(z, cmd):
        st, _ = _split(jnp.concatenate([z, zero]) if integral else z, layout)
        d = state_derivative_held(sc, st, *with_command((zero, zero, zero, 0.0, 0.0), ctrl, held(cmd)))
        return _join(d, zero, layout)[:nz]

    law = _law(ctrl, sc, layout)
    cmd0, _ = law(x0)
    z0 = x0[:nz]
    A = jax.jacfwd(plant, 0)(z0, cmd0)
    B = jax.jacfwd(plant, 1)(z0, cmd0)
    G, Gi = jax.jacfwd(law)(x0)
    hA = h * A
    eye = jnp.eye(nz, dtype=A.dtype)
    hA2 = hA @ hA
    hA3 = hA2 @ hA
    R = eye + hA + hA2 / 2 + hA3 / 6 + hA3 @ hA / 24
    Q = eye + hA / 2 + hA2 / 6 + hA3 / 24
    Rm, S = _power_sum(R, steps)
    top = S @ (h * Q @ B) @ G  # (nz, full state)
    top = top.at[:, :nz].add(Rm)
    return (jnp.concatenate([top, Gi], 0) if integral else top), ctrl.control_dt


def _law(ctrl, sc, layout):
    """The flight software's call (after its first two) as a function of the loop's state vector: `x ->
    (command, new integral)`, the command being the actuator's (`command`: the hub torque or the wheel torques)."""
    W = layout[1]

    def law(x):
        st, int_sigma = _split(x, layout)
        cs = ControlState(int_sigma, jnp.asarray(2.0, x.dtype), jnp.zeros(3, x.dtype), jnp.zeros(W, x.dtype))
        cs = control_update(ctrl, sc.wheels, st.sigma_BN, st.omega_BN_B, st.Omega, cs)
        return ctrl.actuator.command(cs), cs.int_sigma

    return law


def closed_loop_field(scenario: Scenario, integral: bool | None = None):
    """`(f, x0)`: the continuous-law closed loop $\\dot x = f(x)$ (module docstring) and its equilibrium
    (`integral`: `loop_shape`'s, from the scenario's value when not given)."""
    sc, x0, layout = _parts(scenario, loop_shape(scenario)[1] if integral is None else integral)
    ctrl = scenario.control
    W = layout[1]

    def f(x):
        st, int_sigma = _split(x, layout)
        cs = ControlState(int_sigma, jnp.asarray(0.0, x.dtype), jnp.zeros(3, x.dtype), jnp.zeros(W, x.dtype))
        cs = control_update(ctrl, sc.wheels, st.sigma_BN, st.omega_BN_B, st.Omega, cs)  # dt = 0: no integration
        zero = jnp.zeros(3, x.dtype)
        d = state_derivative_held(sc, st, *with_command((zero, zero, zero, 0.0, 0.0), ctrl, cs))
        return _join(d, ctrl.K * sub_mrp(st.sigma_BN, ctrl.sigma_R0N), layout)

    return f, x0


def _energies(sc, X, layout):
    """Kinetic energy of each body of the structure and the hinges' strain energy of eigenvectors `X` (poles,
    state) (module docstring): `(parts (poles, participants), strain)`."""
    n = layout[0]
    w, thd = X[:, 3:6], X[:, 6 + n:6 + 2 * n]
    s = structure(sc)
    M = mass_matrix(s).astype(X.dtype)
    q = jnp.concatenate([w, thd], 1)  # (poles, 3 + n)
    v = -jnp.linalg.solve(M[:3, :3], M[:3, 3:] @ q.T).T  # the hub translation of zero total momentum
    u = jnp.concatenate([v, q], 1)
    bj = body_jacobians(s)
    vb = jnp.einsum("bia,pa->pbi", bj.J_v, u)
    wb = jnp.einsum("bia,pa->pbi", bj.J_w, u)
    e_t = 0.5 * bj.mass * jnp.sum(jnp.abs(vb) ** 2, -1)
    e_r = 0.5 * jnp.real(jnp.einsum("pbi,bij,pbj->pb", jnp.conj(wb), bj.inertia, wb))
    parts = jnp.concatenate([e_t[:, :1], e_r[:, :1], (e_t + e_r)[:, 1:]], 1)
    strain = 0.5 * jnp.sum(sc.panels.k * jnp.abs(X[:, 6:6 + n]) ** 2, -1)
    return parts, strain


def _commands(X, G, headroom, layout, sigma_R):
    """`(command_per_rad, saturation_angle)` of eigenvectors `X` (poles, state) (module docstring): `G` the
    flight software's Jacobian (commands, state), `headroom` (commands,) each command's room to its limit [N m]
    (inf: none)."""
    n = layout[0]
    phi = 4.0 * jnp.linalg.solve(mrp_bmat(sigma_R), X[:, 0:3].T).T  # the hub's rotation
    amp = jnp.maximum(jnp.sqrt(jnp.sum(jnp.abs(phi) ** 2, 1)), jnp.max(jnp.abs(X[:, 6:6 + n]), 1, initial=0.0))
    moves = amp > 1e-12 * jnp.sqrt(jnp.sum(jnp.abs(X) ** 2, 1))
    u = jnp.abs(X @ G.T.astype(X.dtype)) / jnp.where(moves, amp, 1.0)[:, None]  # per radian of the largest angle
    sat = jnp.min(jnp.where(u > 0, headroom / jnp.where(u > 0, u, 1.0), jnp.inf), 1, initial=jnp.inf)
    return jnp.where(moves, jnp.max(u, 1, initial=0.0), jnp.nan), jnp.where(moves, sat, jnp.nan)


def _branch(z, X, sigma_R, layout, T):
    r"""The branch $k$ of $\lambda = (\ln z + 2\pi i k)/T$ of each sampled pole (no derivative): the one nearest
    the rate its eigenvector (the state at a period start) moves at, $\hat\lambda = v^H p / p^H p$ with positions
    $p = (\delta\sigma_{BN}, \delta\theta)$ and their rates $v = (\tfrac14 B(\sigma_{R0N})\,\delta\omega,
    \delta\dot\theta)$. A flexible mode above the Nyquist frequency $1/(2T)$ aliases in $z$ (the principal
    branch reads it below Nyquist); this reads it at its own frequency. Poles without position motion: $k = 0$."""
    n = layout[0]
    X = jax.lax.stop_gradient(X)
    pos = jnp.concatenate([X[:, 0:3], X[:, 6:6 + n]], 1)
    vel = jnp.concatenate([0.25 * X[:, 3:6] @ mrp_bmat(jax.lax.stop_gradient(sigma_R)).T, X[:, 6 + n:6 + 2 * n]], 1)
    pp = jnp.sum(jnp.abs(pos) ** 2, 1)
    est = jnp.sum(vel * jnp.conj(pos), 1) / jnp.where(pp > 0, pp, 1.0)
    lam0 = jnp.log(jax.lax.stop_gradient(z)) / jax.lax.stop_gradient(T)
    k = jnp.round((jnp.imag(est) - jnp.imag(lam0)) * jax.lax.stop_gradient(T) / (2 * jnp.pi))
    return jnp.where(pp > 1e-12 * jnp.sum(jnp.abs(X) ** 2, 1), k, 0.0)


def _poles(A, sc, layout, sigma_R, G, headroom, T=None) -> ClosedLoopPoles:
    A0 = jax.lax.stop_gradient(A)
    ev = eigenvalues(A0)
    proj, X = first_order_clusters(ev, A0)
    parts, strain = _energies(jax.lax.stop_gradient(sc), X[:, :, -1], layout)
    G, headroom, sigma_R0 = jax.lax.stop_gradient((G, headroom, sigma_R))
    command, saturation = _commands(X[:, :, -1], G, headroom, layout, sigma_R0)
    kinetic = jnp.sum(parts, 1)
    ev = poles_first_order(A, ev, proj)
    lam = ev if T is None else (jnp.log(ev) + 2j * jnp.pi * _branch(ev, X[:, :, -1], sigma_R, layout, T)) / T
    mag = jnp.abs(lam)
    neutral = mag < _NEUTRAL
    zeta = jnp.where(neutral, 1.0, -jnp.real(lam) / jnp.where(neutral, 1.0, mag))
    order = jnp.argsort(mag, stable=True)
    lam, mag, zeta, neutral = lam[order], mag[order], zeta[order], neutral[order]
    parts, kinetic, strain = parts[order], kinetic[order], strain[order]
    n = layout[0]
    rank = jnp.argsort(-strain / jnp.maximum(strain + kinetic, 1e-300), stable=True)
    flexible = jnp.zeros(lam.shape, bool).at[rank[: 2 * n]].set(True)
    margin = jnp.min(jnp.where(neutral, jnp.inf, zeta))
    flexible_margin = jnp.min(jnp.where(flexible & ~neutral, zeta, jnp.inf))
    growth = jnp.max(jnp.where(neutral, -jnp.inf, jnp.real(lam)))
    dt = jnp.asarray(jnp.nan if T is None else T, mag.dtype)
    fraction = jnp.where(neutral[:, None], jnp.nan, parts / jnp.maximum(kinetic, 1e-300)[:, None])
    command, saturation = (jnp.where(neutral, jnp.nan, x[order]) for x in (command, saturation))
    return ClosedLoopPoles(lam, mag / (2 * jnp.pi), jnp.where(neutral, jnp.nan, zeta), neutral, fraction, command,
                           saturation, flexible, margin, flexible_margin, growth, dt, T is not None,
                           mode_labels(sc)["participants"])


def closed_loop_unjitted(scenario: Scenario, shape: tuple[int, bool], sampled: bool) -> ClosedLoopPoles:
    """`closed_loop_poles` inside a caller's own program: `shape` from `loop_shape` (static), `sampled` as
    there."""
    sc, x0, layout = _parts(scenario, shape[1])
    ctrl, wheels = scenario.control, scenario.spacecraft.wheels
    G = jax.jacfwd(lambda x: _law(ctrl, sc, layout)(x)[0])(x0)
    headroom = ctrl.actuator.headroom(wheels, None if sc.wheels is None else sc.wheels.u, x0.dtype)
    if sampled:
        Phi, T = period_matrix(scenario, shape)
        return _poles(Phi, sc, layout, x0[:3], G, headroom, T)
    f, x0 = closed_loop_field(scenario, shape[1])
    return _poles(jax.jacfwd(f)(x0), sc, layout, x0[:3], G, headroom)


_closed_loop_jit = program(closed_loop_unjitted)


def first_command(scenario: Scenario) -> float | None:
    """The largest $|u_i| / u_{max,i}$ of the wheels at the flight software's first call, from the scenario's
    initial state (the wheels' own `u` added): above 1 the run starts saturated, outside the linearisation. None
    for a hub torque or wheels without a limit. Host values (no compiled program)."""
    ctrl, wheels, init = scenario.control, scenario.spacecraft.wheels, scenario.initial
    if ctrl is None or not ctrl.actuator.saturates or not bool(jnp.any(wheels.u_max > 0)):
        return None
    cs = control_update(ctrl, wheels, init.sigma_BNInit, init.omega_BN_BInit, init.OmegaInit,
                        initial_control_state(wheels.count, jnp.result_type(wheels.Js)))
    u, lim = jnp.abs(cs.u + wheels.u), jnp.abs(wheels.u_max)
    return float(jnp.max(jnp.where(lim > 0, u / jnp.where(lim > 0, lim, 1.0), 0.0)))


def closed_loop_poles(scenario: Scenario, sampled: bool = True) -> ClosedLoopPoles:
    r"""The poles of the spacecraft with its controller (module docstring): the sampled loop (default) or the
    continuous law. Compiled once per model structure and steps per control period; differentiable with respect
    to every array leaf (`control_dt` too: the period is a fixed number of rk4 steps, `loop_shape`, of
    `control_dt / steps` each)."""
    if scenario.control is None:
        raise ScenarioError.fail(None, "control", "closed-loop poles need a controller ([control])")
    steps, integral = loop_shape(scenario)
    poles = _closed_loop_jit(strip_labels(scenario), (steps if sampled else 0, integral), sampled)
    return dataclasses.replace(poles, participants=mode_labels(scenario.spacecraft)["participants"])


def closed_loop_modes_unjitted(scenario: Scenario, shape: tuple[int, bool], reference_point=None):
    """The flexible modes of the sampled closed loop as a `Modes` (what the modal fit with `loop = "closed"`
    fits): frequency, damping ratio, damped frequency, pole and overdamped flag of each of the N flexible
    pole pairs in ascending frequency, and their energy shares; the undamped frequencies, shapes, participation
    factors and effective masses are those of the open-loop free-free modes in the same frequency order (the
    structure the controller acts on). Inside a caller's program: `shape` from `loop_shape` (static)."""
    cl = closed_loop_unjitted(scenario, shape, True)
    ref = modes_unjitted(scenario, FreeFree(), reference_point)
    n = scenario.spacecraft.panels.count
    order = jnp.argsort(~cl.flexible, stable=True)[: 2 * n]  # the flexible poles, ascending |lambda|
    lam = cl.eigenvalue[order]
    a, b = lam[0::2], lam[1::2]
    rep = jnp.where(jnp.imag(a) >= 0, a, b)
    overdamped = jnp.abs(jnp.imag(rep)) <= 1e-12 * jnp.abs(rep)
    return dataclasses.replace(
        ref, frequency_hz=cl.frequency_hz[order][0::2], damping_ratio=cl.damping_ratio[order][0::2],
        damped_frequency_hz=jnp.abs(jnp.imag(rep)) / (2 * jnp.pi), eigenvalue=rep, overdamped=overdamped,
        energy_fraction=cl.energy_fraction[order][0::2])


_closed_loop_modes_jit = program(closed_loop_modes_unjitted)


def closed_loop_modes(scenario: Scenario, reference_point=None):
    """`closed_loop_modes_unjitted` of a scenario with a controller, compiled (one program per structure)."""
    poles_shape = loop_shape(scenario)
    m = _closed_loop_modes_jit(strip_labels(scenario), poles_shape, as_point(reference_point))
    return relabel(m, scenario.spacecraft)
