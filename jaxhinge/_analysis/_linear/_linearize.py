r"""The linearisation about the rest equilibrium: $M, C, K$, the state matrix, free and clamped reductions.

**The linearisation.** The nonlinear model of `jaxhinge._dynamics` is linearised about its rest equilibrium: hub at
rest (attitude arbitrary, taken as $\sigma_{BN} = 0$), every hinge at its spring reference $\theta = \theta_{ref}$,
no loads. Coordinates ($6 + N$ of them, in this order)

$$q = (x_B,\ \phi_B,\ \delta\theta), \qquad \dot q = u = (v_{B/N},\ \omega_{BN},\ \dot\theta),$$

with $x_B$ the hub point B displacement [m], $\phi_B$ the small hub rotation [rad] ($\phi_B = 4\sigma_{BN}$ to first
order, so $\dot\phi_B = \omega_{BN}$), $\delta\theta = \theta - \theta_{ref}$. The linear equations are
$M\ddot q + C\dot q + K q = 0$ with

- $M = \sum_b J_{v,b}^T m_b J_{v,b} + J_{\omega,b}^T I_b J_{\omega,b}$, the kinetic-energy matrix, from each body's
  velocity Jacobian (hub: $v_{B_c} = v_B - \tilde r_{B_c/B}\,\omega$; panel: $v_S = v_B - \tilde r_{S/B}\,\omega +
  d\,\hat s_3\dot\theta$, $\omega_S = \omega + \hat s_2\dot\theta$, with the simulator's own panel geometry at
  $\theta_{ref}$);
- $K = \mathrm{diag}(0_6, k)$: the Hessian of the spring energy $\tfrac12\sum k(\theta-\theta_{ref})^2$;
- $C = \mathrm{diag}(0_6, c)$: the Hessian of the Rayleigh function $\tfrac12\sum c\,\dot\theta^2$.

The first-order state matrix `Linearization.A` is computed separately, by forward-mode autodiff of the
simulator's `accelerations` (the full nonlinear back-substitution) at the equilibrium; the test suite checks
$A = [[0, I], [-M^{-1}K, -M^{-1}C]]$, $M$ = Hessian of the simulator's kinetic energy (`diagnostics`) and
$M^{-1}$ = Jacobian of `accelerations` with respect to the generalized forces, so the modes are those of the
model that `simulate` integrates.

**Excluded from the linearisation:** gravity (Basilisk applies it as a uniform field at the system CoM, which
accelerates the whole spacecraft and does not act on the relative motion; the per-panel gravity torque about
the hinge, which a non-uniform field would give, is zero in that model), external loads, `motorTorque` and
`thetaDotRef` (they move the spacecraft off the rest equilibrium), and the initial state.

**Reaction wheels** (`linear_matrices`): the linearisation is about the wheels spinning at given speeds
$\Omega_0$, held there by their motors. Each wheel adds its spin angle $\psi$ (relative to the hub) as a
coordinate: $M_{\phi\psi} = J_s\hat g_s$, $M_{\psi\psi} = J_s$ (its spin inertia about the hub's axes is in the
hub's, as in Basilisk), the gyroscopic matrix $G_{\phi\phi} = -\tilde h$ of the wheels' momentum
$h = \sum J_s\Omega_0\hat g_s$, and its friction slope in $C_{\psi\psi}$: $M\ddot q + (C + G)\dot q + Kq = 0$.
`state_matrix` differentiates the simulator's vector field with the wheel speeds as states, and the tests check
it against these matrices. The free-free modes with spinning wheels (`_modes`) cannot condense the hub's
rotation (the body-frame momentum is not constant when $h \ne 0$): they come from the first-order system.

**Boundary conditions.**

- `"free"` (what flies): the hub equations carry no stiffness and no damping, so the 6 rigid-body modes are
  eliminated exactly by static condensation of the hub coordinates (zero total linear and angular momentum):
  $M_r = M_{\theta\theta} - M_{\theta h}M_{hh}^{-1}M_{h\theta}$, $C_r = C_{\theta\theta}$, $K_r = K_{\theta\theta}$.
  The hub part of each flexible mode is $q_h = -M_{hh}^{-1}M_{h\theta}\,q_\theta$.
- `"clamped"` (a panel on an FEA fixture or test stand): hub rows and columns removed, $M_r = M_{\theta\theta}$.
  One panel alone then has $f = \sqrt{k/(I_{s2} + m d^2)}/2\pi$.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..._dynamics._backsub import hinge_geometry, panel_inertia_diag, state_derivative_held, wheel_torques
from ..._errors import ScenarioError
from ..._math import tilde
from ..._model._boundary import AbstractBoundary, FreeFree
from ..._model._scenario import Scenario
from ..._model._spacecraft import Spacecraft, State, Wheels, strip_labels
from ..._runtime._programs import program

EFFECTIVE_MASS_NAMES = ("T1_kg", "T2_kg", "T3_kg", "R1_kg_m2", "R2_kg_m2", "R3_kg_m2")
HUB_DOF_NAMES = ("x_B[1]", "x_B[2]", "x_B[3]", "phi_B[1]", "phi_B[2]", "phi_B[3]")


def spacecraft_of(model: Scenario | Spacecraft) -> Spacecraft:
    if isinstance(model, Scenario):
        return model.spacecraft
    if isinstance(model, Spacecraft):
        return model
    raise TypeError(f"expected a jaxhinge Scenario or Spacecraft, got {type(model).__name__}")


def wheel_speeds(model: Scenario | Spacecraft, Omega=None) -> Float[Array, " wheels"] | None:
    """The wheel speeds [rad/s] the model is linearised at: `Omega` if given, else the scenario's `OmegaInit`;
    None without wheels. A bare `Spacecraft` with wheels needs `Omega` (a `ScenarioError` otherwise)."""
    sc = spacecraft_of(model)
    if sc.wheels is None:
        if Omega is not None:
            raise ScenarioError.bad(None, "Omega", Omega, "the spacecraft has no reaction wheels")
        return None
    if Omega is None and isinstance(model, Scenario) and model.initial.OmegaInit is not None:
        Omega = model.initial.OmegaInit
    if Omega is None:
        raise ScenarioError.fail(None, "Omega", "a Spacecraft with reaction wheels is linearised at given wheel "
                                 "speeds: pass Omega=[...] (rad/s, one per wheel) or a Scenario")
    Omega = jnp.asarray(Omega, dtype=jnp.result_type(sc.wheels.Js))
    if Omega.shape not in ((), (sc.wheels.count,)):
        raise ScenarioError.bad(None, "Omega", Omega, f"one speed per wheel ({sc.wheels.count}) expected")
    return jnp.broadcast_to(Omega, (sc.wheels.count,))


def structure(spacecraft: Spacecraft) -> Spacecraft:
    r"""The spacecraft as its structure sees it with the wheels not spinning and free (no friction): no wheels,
    the hub's inertia less the wheels' spin inertia $\sum J_s \hat g_s \hat g_s^T$ (a free wheel does not
    turn with the hub about its axis). Without wheels: the spacecraft itself."""
    w = spacecraft.wheels
    if w is None:
        return spacecraft
    hub = spacecraft.hub
    spin = jnp.einsum("w,wi,wj->ij", w.Js, w.gsHat_B, w.gsHat_B)
    return Spacecraft(eqx.tree_at(lambda h: h.IHubPntBc_B, hub, hub.IHubPntBc_B - spin), spacecraft.panels,
                      spacecraft.gravity, None)


def mode_labels(sc: Spacecraft) -> dict[str, tuple[str, ...]]:
    """The static names of `Modes` for the model's panels."""
    names = sc.panels.labels
    return {"panel_names": names, "dof_names": HUB_DOF_NAMES + tuple(f"theta[{nm}]" for nm in names),
            "participants": ("hub_translation", "hub_rotation", *names)}


def _dof_names(sc: Spacecraft) -> tuple[str, ...]:
    """`Linearization.dof_names`: the hub, `theta[<panel>]`, then `psi[<wheel>]` (wheel spin angles)."""
    wheels = () if sc.wheels is None else tuple(f"psi[{nm}]" for nm in sc.wheels.labels)
    return mode_labels(sc)["dof_names"] + wheels


class Linearization(eqx.Module):
    r"""The linear model about the rest equilibrium, in the $6+N(+W)$ coordinates $(x_B, \phi_B, \delta\theta,
    \psi)$ ($\psi$: the wheels' spin angles relative to the hub, only with wheels):
    $M\ddot q + (C + G)\dot q + Kq = 0$.

    - `M`: mass (kinetic-energy) matrix [kg, kg m, kg m^2 blocks], symmetric positive definite.
    - `C`: damping matrix, $\mathrm{diag}(0_6, c, c_w)$ [N m s/rad] ($c_w$: the wheels' friction slope).
    - `G`: gyroscopic matrix (skew-symmetric) [N m s]: $-\tilde h$ in the hub rotation block, $h = \sum J_s
      \Omega \hat g_s$ the wheels' momentum; zero without wheels.
    - `K`: stiffness, $\mathrm{diag}(0_6, k, 0_W)$ [N m/rad].
    - `A`: first-order state matrix, $\dot z = Az$ with $z = (q, \dot q)$, from forward-mode autodiff of the
      simulator's vector field (with wheels: $\dot\psi = \Omega - \Omega_0$).
    - `dof_names`: the coordinate names (static), hub first, then `theta[<panel name>]`, then `psi[<wheel>]`.
    """

    M: Float[Array, "dof dof"]
    C: Float[Array, "dof dof"]
    K: Float[Array, "dof dof"]
    A: Float[Array, "state state"]
    G: Float[Array, "dof dof"]
    dof_names: tuple[str, ...] = eqx.field(static=True)


class BodyJacobians(eqx.Module):
    r"""Body velocities at the equilibrium as linear maps of $u$ (body 0 = hub, then the panels).

    `J_v[b] @ u` is the CoM velocity of body b [m/s], `J_w[b] @ u` its angular velocity [rad/s] (B = N frame
    at $\sigma_{BN} = 0$); `mass[b]` [kg]; `inertia[b]` about its CoM in B [kg m^2]."""

    J_v: Float[Array, "bodies 3 dof"]
    J_w: Float[Array, "bodies 3 dof"]
    mass: Float[Array, " bodies"]
    inertia: Float[Array, "bodies 3 3"]


def body_jacobians(spacecraft: Spacecraft) -> BodyJacobians:
    r"""Velocity Jacobians of the hub and of every panel at the rest equilibrium ($\theta = \theta_{ref}$).

    Hub: $v_{B_c} = v_B - \tilde r_{B_c/B}\,\omega$, $\omega$. Panel i: $v_{S_i} = v_B -
    \tilde r_{S_i/B}\,\omega + \sum_k a_{ik}\hat s_{k,3} w_k$ and
    $\omega_{S_i} = \omega + \hat s_{i,2} w_i$ with the absolute rates $w = T\dot\theta$ (`_backsub`)."""
    hub, p = spacecraft.hub, spacecraft.panels
    n, dtype = p.count, jnp.result_type(hub.mHub)
    geom = hinge_geometry(p, p.thetaRef, jnp.zeros_like(p.thetaRef))
    T = p.topology.ancestors(jnp.eye(n, dtype=dtype))  # dw/dthetaDot
    eyes = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (n + 1, 3, 3))
    hub_row = jnp.zeros((1, 3, n), dtype)  # the hub's velocity does not depend on thetaDot
    # dv_S_i/dthetaDot_j = sum_k a_ik s3_k T_kj, domega_S_i/dthetaDot_j = s2_i T_ij
    dv = jnp.concatenate([hub_row, p.topology.lever(p.d, p.l, geom.s3[:, :, None] * T[:, None, :])])
    dw = jnp.concatenate([hub_row, geom.s2[:, :, None] * T[:, None, :]])
    r = jnp.concatenate([hub.r_BcB_B[None], geom.r_SB_B])  # body CoMs relative to B
    IPntS_B = jnp.einsum("nia,ni,nib->nab", geom.dcm_SB, panel_inertia_diag(p), geom.dcm_SB)
    return BodyJacobians(J_v=jnp.concatenate([eyes, -tilde(r), dv], 2),
                         J_w=jnp.concatenate([jnp.zeros_like(eyes), eyes, dw], 2),
                         mass=jnp.concatenate([hub.mHub[None], p.mass]),
                         inertia=jnp.concatenate([hub.IHubPntBc_B[None], IPntS_B], 0))


def mass_matrix(spacecraft: Spacecraft) -> Float[Array, "dof dof"]:
    r"""$M = \sum_b J_{v,b}^T m_b J_{v,b} + J_{\omega,b}^T I_b J_{\omega,b}$ at the rest equilibrium ($6+N$
    square: the hub with the wheels locked in it, and the panels)."""
    bj = body_jacobians(spacecraft)
    M = jnp.einsum("n,nia,nib->ab", bj.mass, bj.J_v, bj.J_v)
    M = M + jnp.einsum("nia,nij,njb->ab", bj.J_w, bj.inertia, bj.J_w)
    return 0.5 * (M + M.T)


def wheel_friction_slope(wheels: Wheels, Omega: Float[Array, " wheels"]) -> Float[Array, " wheels"]:
    r"""$c_w = -\partial(\text{friction torque})/\partial\Omega$ at `Omega` [N m s]: `cViscous`, or the linear
    law's slope $(f_C + c_V\Omega_{lc})/\Omega_{lc}$ below `omegaLimitCycle` (`_backsub.wheel_torques`)."""
    olc = wheels.omegaLimitCycle
    return jnp.where(jnp.abs(Omega) < olc, (wheels.fCoulomb + wheels.cViscous * olc) / olc, wheels.cViscous)


def linear_matrices(spacecraft: Spacecraft, Omega=None):
    r"""$(M, C, G, K)$ in the coordinates $(x_B, \phi_B, \delta\theta, \psi)$ (`Linearization`).

    The wheels' kinetic energy $\tfrac12 J_s(\dot\psi + \hat g_s^T\omega)^2$ less the $\tfrac12 J_s
    (\hat g_s^T\omega)^2$ already in the hub's inertia adds $M_{\phi\psi} = J_s\hat g_s$, $M_{\psi\psi} = J_s$;
    the spinning wheels' momentum $h$ adds $G_{\phi\phi} = -\tilde h$ (Euler's $\omega \times h$);
    friction adds $C_{\psi\psi} = c_w$."""
    p, w = spacecraft.panels, spacecraft.wheels
    M = mass_matrix(spacecraft)
    dtype = M.dtype
    if w is None:
        z6 = jnp.zeros(6, dtype)
        return (M, jnp.diag(jnp.concatenate([z6, p.c])), jnp.zeros_like(M), jnp.diag(jnp.concatenate([z6, p.k])))
    n, nw = p.count, w.count
    dof = 6 + n + nw
    Mw = jnp.zeros((dof, dof), dtype).at[: 6 + n, : 6 + n].set(M)
    coupling = (w.Js[:, None] * w.gsHat_B).T  # (3, wheels)
    Mw = Mw.at[3:6, 6 + n:].set(coupling).at[6 + n:, 3:6].set(coupling.T)
    Mw = Mw.at[6 + n:, 6 + n:].set(jnp.diag(w.Js))
    z6, zw = jnp.zeros(6, dtype), jnp.zeros(nw, dtype)
    C = jnp.diag(jnp.concatenate([z6, p.c, wheel_friction_slope(w, Omega)]))
    h = jnp.sum((w.Js * Omega)[:, None] * w.gsHat_B, 0)
    G = jnp.zeros((dof, dof), dtype).at[3:6, 3:6].set(-tilde(h))
    K = jnp.diag(jnp.concatenate([z6, p.k, zw]))
    return Mw, C, G, K


def rest_spacecraft(spacecraft: Spacecraft, Omega=None) -> Spacecraft:
    """The unforced model: no gravity, no motor torque, no damper reference rate; wheels at the speeds `Omega`
    held by their motors (the motor torque balances the friction torque, so that the spinning wheels are in
    equilibrium: the friction's slope enters the linearisation, its constant part does not)."""
    p, w = spacecraft.panels, spacecraft.wheels
    z = jnp.zeros_like(p.k)
    if w is not None:
        w = eqx.tree_at(lambda q: (q.u, q.u_max), w, (jnp.zeros_like(w.u), jnp.zeros_like(w.u)))
        if Omega is not None:
            w = eqx.tree_at(lambda q: q.u, w, -wheel_torques(w, Omega)[1])
    return Spacecraft(spacecraft.hub, eqx.tree_at(lambda q: (q.motorTorque, q.thetaDotRef), p, (z, z)), None, w)


def state_matrix(spacecraft: Spacecraft, Omega=None) -> Float[Array, "state state"]:
    r"""$A = \partial \dot z / \partial z$ at the rest equilibrium, $z = (x_B, \phi_B, \delta\theta, \psi, v_B,
    \omega, \dot\theta, \Omega - \Omega_0)$, by forward-mode autodiff of the simulator's vector field
    (`state_derivative_held`; $\sigma_{BN} = \phi_B/4$, wheels at the speeds `Omega`)."""
    sc = rest_spacecraft(spacecraft, Omega)
    n = sc.panels.count
    nw = 0 if sc.wheels is None else sc.wheels.count
    dof = 6 + n + nw
    zero3 = jnp.zeros(3, jnp.result_type(sc.hub.mHub))

    def field(z):
        q, u = z[:dof], z[dof:]
        state = State(r_BN_N=q[:3], v_BN_N=u[:3], sigma_BN=q[3:6] / 4.0, omega_BN_B=u[3:6],
                      theta=sc.panels.thetaRef + q[6:6 + n], thetaDot=u[6:6 + n],
                      Omega=None if nw == 0 else Omega + u[6 + n:])
        d = state_derivative_held(sc, state, zero3, zero3, zero3, 0.0, 0.0)
        wheels = [] if nw == 0 else [d.Omega]
        return jnp.concatenate([u[:3], 4.0 * d.sigma_BN, u[6:], d.v_BN_N, d.omega_BN_B, d.thetaDot, *wheels])

    return jax.jacfwd(field)(jnp.zeros(2 * dof, zero3.dtype))


@program
def _linearize(sc: Spacecraft, Omega) -> Linearization:
    M, C, G, K = linear_matrices(sc, Omega)
    return Linearization(M=M, C=C, K=K, A=state_matrix(sc, Omega), G=G, dof_names=_dof_names(sc))


def linearize(model: Scenario | Spacecraft, *, Omega=None) -> Linearization:
    """Linearise the model about its rest equilibrium (see the module docstring for coordinates and what is
    excluded).

    **Arguments:**

    - `model`: a `Scenario` or `Spacecraft` (only the spacecraft is used, and the wheels' initial speeds).
    - `Omega`: with reaction wheels, their speeds relative to the hub [rad/s] (default: the scenario's
      `OmegaInit`; required for a bare `Spacecraft` with wheels).

    **Returns:** a `Linearization` with `M`, `C`, `G`, `K` ($6+N+W$ square) and the state matrix `A`.

    Compiled once per model structure (`eqx.filter_jit`); differentiable.
    """
    sc, Om = spacecraft_of(model), wheel_speeds(model, Omega)
    return dataclasses.replace(_linearize(strip_labels(sc), Om), dof_names=_dof_names(sc))


def reduced_matrices(
    spacecraft: Spacecraft, boundary: AbstractBoundary = FreeFree()
) -> tuple[Float[Array, "panels panels"], Float[Array, "panels panels"], Float[Array, "panels panels"]]:
    """$(M_r, C_r, K_r)$ in the hinge coordinates: free (hub condensed) or clamped (hub removed)."""
    M = mass_matrix(spacecraft)
    Mtt = M[6:, 6:]
    if boundary.hub_free:
        Mtt = Mtt - M[:6, 6:].T @ jnp.linalg.solve(M[:6, :6], M[:6, 6:])
    return 0.5 * (Mtt + Mtt.T), jnp.diag(spacecraft.panels.c), jnp.diag(spacecraft.panels.k)
