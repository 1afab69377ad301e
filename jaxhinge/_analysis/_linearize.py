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

from .._dynamics._backsub import accelerations, hinge_geometry, panel_inertia_diag
from .._errors import ScenarioError
from .._math import mrp_bmat, tilde
from .._model._scenario import Scenario
from .._model._spacecraft import Spacecraft, State, strip_labels
from .._runtime._programs import program

BOUNDARIES = ("free", "clamped")
EFFECTIVE_MASS_NAMES = ("T1_kg", "T2_kg", "T3_kg", "R1_kg_m2", "R2_kg_m2", "R3_kg_m2")
HUB_DOF_NAMES = ("x_B[1]", "x_B[2]", "x_B[3]", "phi_B[1]", "phi_B[2]", "phi_B[3]")


def check_boundary(boundary: str) -> str:
    """`boundary` if it is `"free"` or `"clamped"`, else a `ValueError` naming the value and the choices."""
    if boundary not in BOUNDARIES:
        raise ValueError(f'boundary = {boundary!r}: allowed values are "free", "clamped"')
    return boundary


def _spacecraft_of(model: Scenario | Spacecraft) -> Spacecraft:
    if isinstance(model, Scenario):
        sc = model.spacecraft
    elif isinstance(model, Spacecraft):
        sc = model
    else:
        raise TypeError(f"expected a jaxhinge Scenario or Spacecraft, got {type(model).__name__}")
    if sc.wheels is not None:  # the gyroscopic coupling of spinning wheels is not in the linearisation yet
        raise ScenarioError.fail(None, "wheels", "linear modes of a spacecraft with reaction wheels are not "
                                 "available yet; simulate it, or remove the [[wheels]] for a modal analysis")
    return sc


def _labels(sc: Spacecraft) -> dict[str, tuple[str, ...]]:
    """The static names of `Modes` (and `Linearization.dof_names`) for the model's panels."""
    names = sc.panels.labels
    return {"panel_names": names, "dof_names": HUB_DOF_NAMES + tuple(f"theta[{nm}]" for nm in names),
            "participants": ("hub_translation", "hub_rotation", *names)}


class Linearization(eqx.Module):
    """The linear model about the rest equilibrium, in the $6+N$ coordinates $(x_B, \\phi_B, \\delta\\theta)$.

    - `M`: mass (kinetic-energy) matrix [kg, kg m, kg m^2 blocks], symmetric positive definite.
    - `C`: damping matrix, $\\mathrm{diag}(0_6, c)$ [N m s/rad]. `K`: stiffness, $\\mathrm{diag}(0_6, k)$ [N m/rad].
    - `A`: first-order state matrix, $\\dot z = Az$ with $z = (q, \\dot q)$ ($2(6+N)$ square), from forward-mode
      autodiff of the simulator's `accelerations`.
    - `dof_names`: the coordinate names (static), hub first, then `theta[<panel name>]`.
    """

    M: Float[Array, "dof dof"]
    C: Float[Array, "dof dof"]
    K: Float[Array, "dof dof"]
    A: Float[Array, "state state"]
    dof_names: tuple[str, ...] = eqx.field(static=True)


class BodyJacobians(eqx.Module):
    """Body velocities at the equilibrium as linear maps of $u$ (body 0 = hub, then the panels).

    `J_v[b] @ u` is the CoM velocity of body b [m/s], `J_w[b] @ u` its angular velocity [rad/s] (B = N frame
    at $\\sigma_{BN} = 0$); `mass[b]` [kg]; `inertia[b]` about its CoM in B [kg m^2]."""

    J_v: Float[Array, "bodies 3 dof"]
    J_w: Float[Array, "bodies 3 dof"]
    mass: Float[Array, " bodies"]
    inertia: Float[Array, "bodies 3 3"]


def body_jacobians(spacecraft: Spacecraft) -> BodyJacobians:
    """Velocity Jacobians of the hub and of every panel at the rest equilibrium ($\\theta = \\theta_{ref}$).

    Hub: $v_{B_c} = v_B - \\tilde r_{B_c/B}\\,\\omega$, $\\omega$. Panel i: $v_{S_i} = v_B -
    \\tilde r_{S_i/B}\\,\\omega + \\sum_k a_{ik}\\hat s_{k,3} w_k$ and
    $\\omega_{S_i} = \\omega + \\hat s_{i,2} w_i$ with the absolute rates $w = T\\dot\\theta$ (`_backsub`)."""
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
    """$M = \\sum_b J_{v,b}^T m_b J_{v,b} + J_{\\omega,b}^T I_b J_{\\omega,b}$ at the rest equilibrium."""
    bj = body_jacobians(spacecraft)
    M = jnp.einsum("n,nia,nib->ab", bj.mass, bj.J_v, bj.J_v)
    M = M + jnp.einsum("nia,nij,njb->ab", bj.J_w, bj.inertia, bj.J_w)
    return 0.5 * (M + M.T)


def _rest_spacecraft(spacecraft: Spacecraft) -> Spacecraft:
    """The unforced model: no gravity, no motor torque, no damper reference rate."""
    p = spacecraft.panels
    z = jnp.zeros_like(p.k)
    return Spacecraft(spacecraft.hub, eqx.tree_at(lambda q: (q.motorTorque, q.thetaDotRef), p, (z, z)), None)


def state_matrix(spacecraft: Spacecraft) -> Float[Array, "state state"]:
    """$A = \\partial \\dot z / \\partial z$ at the rest equilibrium, $z = (x_B, \\phi_B, \\delta\\theta, v_B, \\omega,
    \\dot\\theta)$, by forward-mode autodiff of the simulator's `accelerations` ($\\sigma_{BN} = \\phi_B/4$)."""
    sc = _rest_spacecraft(spacecraft)
    dof = 6 + sc.panels.count
    zero3 = jnp.zeros(3, jnp.result_type(sc.hub.mHub))

    def field(z):
        q, u = z[:dof], z[dof:]
        state = State(r_BN_N=q[:3], v_BN_N=u[:3], sigma_BN=q[3:6] / 4.0, omega_BN_B=u[3:6],
                      theta=sc.panels.thetaRef + q[6:], thetaDot=u[6:])
        rDDot_N, omegaDot, thetaDDot = accelerations(sc, state, zero3, zero3, zero3, 0.0)
        phiDot = mrp_bmat(state.sigma_BN) @ state.omega_BN_B  # = 4 sigmaDot
        return jnp.concatenate([u[:3], phiDot, u[6:], rDDot_N, omegaDot, thetaDDot])

    return jax.jacfwd(field)(jnp.zeros(2 * dof, zero3.dtype))


@program
def _linearize(sc: Spacecraft) -> Linearization:
    zeros6 = jnp.zeros(6, jnp.result_type(sc.hub.mHub))
    return Linearization(M=mass_matrix(sc), C=jnp.diag(jnp.concatenate([zeros6, sc.panels.c])),
                         K=jnp.diag(jnp.concatenate([zeros6, sc.panels.k])), A=state_matrix(sc),
                         dof_names=_labels(sc)["dof_names"])


def linearize(model: Scenario | Spacecraft) -> Linearization:
    """Linearise the model about its rest equilibrium (see the module docstring for coordinates and what is
    excluded).

    **Arguments:**

    - `model`: a `Scenario` or `Spacecraft` (only the spacecraft is used).

    **Returns:** a `Linearization` with `M`, `C`, `K` ($6+N$ square) and the state matrix `A`.

    Compiled once per model structure (`eqx.filter_jit`); differentiable.
    """
    sc = _spacecraft_of(model)
    return dataclasses.replace(_linearize(strip_labels(sc)), dof_names=_labels(sc)["dof_names"])


def reduced_matrices(
    spacecraft: Spacecraft, boundary: str = "free"
) -> tuple[Float[Array, "panels panels"], Float[Array, "panels panels"], Float[Array, "panels panels"]]:
    """$(M_r, C_r, K_r)$ in the hinge coordinates: free (hub condensed) or clamped (hub removed)."""
    check_boundary(boundary)
    M = mass_matrix(spacecraft)
    Mtt = M[6:, 6:]
    if boundary == "free":
        Mtt = Mtt - M[:6, 6:].T @ jnp.linalg.solve(M[:6, :6], M[:6, 6:])
    return 0.5 * (Mtt + Mtt.T), jnp.diag(spacecraft.panels.c), jnp.diag(spacecraft.panels.k)
