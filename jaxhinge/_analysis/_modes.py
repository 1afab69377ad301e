r"""Linear modal analysis about the rest equilibrium: $M, C, K$, free and clamped modes, damped poles.

**The linearisation.** The nonlinear model of `_dynamics.py` is linearised about its rest equilibrium: hub at
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

**Modes.** Undamped: $M_r = LL^T$ (Cholesky), `eigh` of the symmetric $\tilde K = L^{-1}K_rL^{-T}$ gives $\omega^2$
and mass-normalised shapes (differentiable, robust to repeated frequencies). Damped: the $2N$ poles $\lambda$ of
$\lambda^2 I + \lambda\tilde C + \tilde K$ (eigenvalues of the first-order matrix, computed inside the compiled
program: `jnp.linalg.eigvals`, LAPACK on CPU, with no host callback, so the modal programs go into the compile
cache; on other backends on the host, `_eigvals`). Each flexible mode is a pair of poles $(a, b)$: a
complex-conjugate pair (underdamped), or two real poles (overdamped, paired by their overlap with the undamped
modes). MATLAB `damp` definitions:
`frequency_hz` $= |\lambda|/2\pi = \sqrt{ab}/2\pi$, `damping_ratio` $= -\mathrm{Re}\,\lambda/|\lambda| =
-(a+b)/(2\sqrt{ab})$, `damped_frequency_hz` $= |\mathrm{Im}\,\lambda|/2\pi$. An overdamped mode reports the
equivalent second-order values ($\zeta \ge 1$; `damp` would list its two real poles separately with
$\zeta = 1$). Pole pairs are matched to undamped modes by maximum overlap (assignment problem), which gives
each mode its `natural_frequency_hz`, `shape` and `energy_fraction`; modes are ordered by ascending
`frequency_hz`.

**Derivatives.** $\omega^2$ through `eigh`. Poles through a custom JVP of the quadratic eigenproblem,
$d\lambda = -x^T(\lambda\,d\tilde C + d\tilde K)x / x^T(2\lambda I + \tilde C)x$ ($x$: right = left eigenvector,
the matrices being symmetric). Within a cluster of repeated poles (symmetric panels) every member gets the
cluster's mean derivative, $-\mathrm{tr}(G^{-1}V^T(\lambda\,d\tilde C + d\tilde K)V)/m$ ($V$: a basis of the
eigenspace, $G = V^T(2\lambda I + \tilde C)V$): exact for perturbations that keep the symmetry (tied parameters),
and exact for any symmetric function of the cluster (a sorted-target loss) otherwise. Never NaN at repeated
frequencies; the mode *shapes* inside a degenerate cluster are arbitrary (any basis of the eigenspace) and
their derivatives are not defined there.
"""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Complex, Float, Int

from .._dynamics._backsub import accelerations, hinge_geometry, panel_inertia_diag
from .._io._files import json_number as _num
from .._math import assignment, mrp_bmat, safe_sqrt, tilde
from .._model._loads import Loads
from .._model._scenario import Scenario, SimulationConfig, compile_key
from .._model._spacecraft import InitialState, Spacecraft, State, strip_labels
from .._programs import program
from .._simulation._simulate import check_memory, simulate_unjitted

BOUNDARIES = ("free", "clamped")
EFFECTIVE_MASS_NAMES = ("T1_kg", "T2_kg", "T3_kg", "R1_kg_m2", "R2_kg_m2", "R3_kg_m2")
HUB_DOF_NAMES = ("x_B[1]", "x_B[2]", "x_B[3]", "phi_B[1]", "phi_B[2]", "phi_B[3]")
_CLUSTER_RTOL = 1e-8  # poles closer than this (relative to the largest |lambda|) form one cluster
_IMAG_RTOL = 1e-12  # |Im lambda| below this (relative) counts as a real pole


def check_boundary(boundary: str) -> str:
    """`boundary` if it is `"free"` or `"clamped"`, else a `ValueError` naming the value and the choices."""
    if boundary not in BOUNDARIES:
        raise ValueError(f'boundary = {boundary!r}: allowed values are "free", "clamped"')
    return boundary


def _spacecraft_of(model: Scenario | Spacecraft) -> Spacecraft:
    if isinstance(model, Scenario):
        return model.spacecraft
    if isinstance(model, Spacecraft):
        return model
    raise TypeError(f"expected a jaxhinge Scenario or Spacecraft, got {type(model).__name__}")


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


# ------------------------------------------------------------------------------------------------------------
# Damped poles: eigen-solve in the program (LAPACK geev through XLA) + custom JVP
# ------------------------------------------------------------------------------------------------------------


def _pole_clusters(lam, Kt, Ct, phi):
    """For every pole: the cluster's mean-derivative projector $V G^+ V^T / m$ (`_poles_jvp`) and the
    cluster's overlap with the undamped modes `phi` (squared components of its eigenspace basis, normalised).
    The cluster of pole $i$: the poles within `_CLUSTER_RTOL` of it, $m$ of them, mean $\\lambda_c$; $V$ the
    right singular vectors of $\\lambda_c^2 I + \\lambda_c\\tilde C + \\tilde K$ of its $m$ smallest singular
    values (its null space), kept by a mask so that every shape is static."""
    n = Kt.shape[-1]
    scale = jnp.maximum(jnp.max(jnp.abs(lam)), 1e-300)
    near = jnp.abs(lam[:, None] - lam[None, :]) <= _CLUSTER_RTOL * scale
    m = jnp.sum(near, 1)
    lc = jnp.sum(jnp.where(near, lam[None, :], 0.0), 1) / m
    eye = jnp.eye(n, dtype=lam.dtype)
    _, _, vh = jnp.linalg.svd(lc[:, None, None] ** 2 * eye + lc[:, None, None] * Ct + Kt)
    keep = jnp.arange(n)[None, :] >= n - jnp.minimum(m, n)[:, None]  # the m smallest singular values
    V = jnp.where(keep[:, None, :], jnp.conj(jnp.swapaxes(vh, -1, -2)), 0.0)  # (poles, n, n), columns kept
    Vt = jnp.swapaxes(V, -1, -2)
    G = Vt @ ((2.0 * lc)[:, None, None] * eye + Ct) @ V
    proj = V @ jnp.linalg.pinv(G, rtol=1e-12) @ Vt / m[:, None, None]
    overlap = jnp.sum(jnp.abs(jnp.einsum("ka,pkc->pac", phi, V)) ** 2, -1)
    overlap = overlap / jnp.maximum(jnp.sum(jnp.abs(V) ** 2, (-1, -2)), 1e-300)[:, None]
    return proj, overlap


def _eigvals_host(a):
    """`np.linalg.eigvals` through a host callback (batched like the input)."""
    return jax.pure_callback(lambda x: np.linalg.eigvals(x).astype(np.complex128),
                             jax.ShapeDtypeStruct(a.shape[:-1], jnp.complex128), a, vmap_method="broadcast_all")


def _eigvals(a):
    """Eigenvalues of real square matrices: LAPACK inside the program on CPU (no callback, so the program can be
    cached); on other backends, whose support for nonsymmetric eigenproblems varies, on the host. Only the
    branch of the backend in use is compiled (`lax.platform_dependent`)."""
    return jax.lax.platform_dependent(a, cpu=lambda x: jnp.linalg.eigvals(x).astype(jnp.complex128),
                                      default=_eigvals_host)


def _poles_in_program(Kt, Ct):
    """Poles ordered as mode pairs, their derivative projectors, the matched undamped mode, overdamped flags.

    Every mode is a pair of poles: a pole with $\\mathrm{Im} > 0$ and its conjugate (LAPACK returns conjugate
    pairs exactly), or two real poles, paired by the undamped mode they overlap most when each undamped mode
    gets exactly two, else adjacent in value. Modes are matched to undamped modes by maximum total overlap
    (`assignment`) and ordered by ascending $|\\lambda|$, ties by the undamped frequency."""
    n = Kt.shape[-1]
    eye = jnp.eye(n, dtype=Kt.dtype)
    lam = _eigvals(jnp.block([[jnp.zeros_like(Kt), eye], [-Kt, -Ct]]))
    w2, phi = jnp.linalg.eigh(0.5 * (Kt + Kt.T))
    proj, overlap = _pole_clusters(lam, Kt, Ct, phi)
    tol_im = _IMAG_RTOL * jnp.maximum(jnp.max(jnp.abs(lam)), 1e-300)
    upper, real = jnp.imag(lam) > tol_im, jnp.abs(jnp.imag(lam)) <= tol_im

    # real poles: sorted by (undamped mode overlapped most, when each such mode has exactly two; value)
    group = jnp.argmax(overlap, 1)
    per_group = jnp.sum(real[:, None] & (group[:, None] == jnp.arange(n)[None, :]), 0)
    by_group = jnp.all((per_group == 0) | (per_group == 2))
    sorted_real = jnp.lexsort((jnp.real(lam), jnp.where(by_group, group, 0), ~real))
    rank = jnp.zeros(2 * n, jnp.int32).at[sorted_real].set(jnp.arange(2 * n, dtype=jnp.int32))
    next_real = sorted_real[jnp.minimum(rank + 1, 2 * n - 1)]

    # one leader pole per mode (n of them): each upper pole, and every other real pole in sorted order
    leader = upper | (real & (rank % 2 == 0))
    a = jnp.argsort(~leader, stable=True)[:n]
    over = real[a]
    b = jnp.where(over, next_real[a], a)
    lam_a, proj_a = lam[a], proj[a]
    lam_b = jnp.where(over, lam[b], jnp.conj(lam_a))  # the conjugate partner: its projector is the conjugate
    proj_b = jnp.where(over[:, None, None], proj[b], jnp.conj(proj_a))
    undamped = assignment(0.5 * (overlap[a] + overlap[b]))
    wn = jnp.sqrt(jnp.maximum(jnp.real(lam_a * lam_b), 0.0))
    order = jnp.lexsort((w2[undamped], wn))
    pair = lambda x, y: jnp.stack([x[order], y[order]], 1).reshape((2 * n,) + x.shape[1:])
    return pair(lam_a, lam_b), pair(proj_a, proj_b), undamped[order], over[order]


@jax.custom_jvp
def _poles(Kt, Ct, lam, proj):
    return lam


@_poles.defjvp
def _poles_jvp(primals, tangents):
    _, _, lam, proj = primals
    dK, dC = (jnp.asarray(t, dtype=proj.dtype) for t in tangents[:2])
    return lam, -jnp.einsum("iab,iba->i", proj, lam[:, None, None] * dC[None] + dK[None])


def damped_poles(
    Kt: Float[Array, "n n"], Ct: Float[Array, "n n"]
) -> tuple[Complex[Array, " two_n"], Int[Array, " n"], Bool[Array, " n"]]:
    """Poles of $\\lambda^2 I + \\lambda\\tilde C + \\tilde K$ as mode pairs `(lam[2j], lam[2j+1])`, modes in
    ascending $|\\lambda|$; the undamped mode (index into ascending $\\omega^2$ of $\\tilde K$) matched to each;
    whether each mode is overdamped. Differentiable in `Kt`, `Ct` (custom JVP, see the module docstring)."""
    lam, proj, undamped, over = _poles_in_program(jax.lax.stop_gradient(Kt), jax.lax.stop_gradient(Ct))
    return _poles(Kt, Ct, lam, proj), undamped, over


# ------------------------------------------------------------------------------------------------------------
# Modes
# ------------------------------------------------------------------------------------------------------------


class Modes(eqx.Module):
    """The flexible modes of one spacecraft (N of them, one per panel), ordered by ascending `frequency_hz`.

    - `frequency_hz`: $|\\lambda|/2\\pi$ of the damped linear system [Hz] (MATLAB `damp`'s natural frequency).
    - `damping_ratio`: $-\\mathrm{Re}\\,\\lambda/|\\lambda|$ (`damp`'s damping); $\\ge 1$ for overdamped modes.
    - `damped_frequency_hz`: $|\\mathrm{Im}\\,\\lambda|/2\\pi$ [Hz], the oscillation frequency of a free response.
    - `natural_frequency_hz`: undamped natural frequency [Hz] of the matched undamped mode ($C = 0$).
    - `eigenvalue`: the pole $\\lambda$ with $\\mathrm{Im} \\ge 0$ [1/s] (overdamped: the slower real pole).
    - `overdamped`: the mode's two poles are real.
    - `shape`: the matched undamped mode shape in the $6+N$ coordinates $(x_B$ [m], $\\phi_B$ [rad],
      $\\delta\\theta$ [rad]$)$, mass-normalised ($x^TMx = 1$), sign such that its largest hinge component is
      positive. Clamped: the hub part is zero.
    - `energy_fraction`: the mode's kinetic energy split into hub translation, hub rotation (about the hub CoM)
      and each panel (columns, in `participants` order); rows sum to 1.
    - `participation`: the 6 participation factors of each mass-normalised mode for rigid motion of the hub
      about `reference_point` (translations x, y, z [kg^0.5], rotations about x, y, z through the point
      [kg^0.5 m]): $\\Gamma = X M R$ with $R$ the $(6+N) \\times 6$ rigid-body motion of the hub about the point
      ($x_B = u_P + \\phi \\times (r_B - r_P)$, $\\phi_B = \\phi$, $\\delta\\theta = 0$); sign as `shape`'s.
    - `effective_mass`: $\\Gamma^2$ per component [kg, kg m^2]: the modal effective masses of base motion as FEA
      solvers print them. Clamped: summed over the N modes they give the diagonal of $M_{R\\theta}
      M_{\\theta\\theta}^{-1} M_{\\theta R}$, the panels' mass as seen through their hinges. Free: zero (a
      free-free elastic mode carries no momentum), as in a free-free FEA.
    - `reference_point`: the point the rotational components refer to, in B [m].
    - `boundary` (static): `"free"` or `"clamped"`; `panel_names`, `dof_names`, `participants` (static).

    Gradients of `frequency_hz`, `damping_ratio`, `natural_frequency_hz` are defined also at repeated
    frequencies, where shapes and energy fractions are an arbitrary basis of the eigenspace.
    """

    frequency_hz: Float[Array, " modes"]
    damping_ratio: Float[Array, " modes"]
    damped_frequency_hz: Float[Array, " modes"]
    natural_frequency_hz: Float[Array, " modes"]
    eigenvalue: Complex[Array, " modes"]
    overdamped: Bool[Array, " modes"]
    shape: Float[Array, "modes dof"]
    energy_fraction: Float[Array, "modes participants"]
    participation: Float[Array, "modes 6"]
    effective_mass: Float[Array, "modes 6"]
    reference_point: Float[Array, "3"]
    boundary: str = eqx.field(static=True)
    panel_names: tuple[str, ...] = eqx.field(static=True)
    dof_names: tuple[str, ...] = eqx.field(static=True)
    participants: tuple[str, ...] = eqx.field(static=True)

    def as_dict(self) -> dict:
        """Plain Python (JSON-ready; NaN/inf as `None`): `{"boundary", "modes": [...]}`, one entry per mode."""
        values = {k: np.asarray(getattr(self, k))
                  for k in ("frequency_hz", "damping_ratio", "damped_frequency_hz", "natural_frequency_hz")}
        lam, over, shape, ef, em = (np.asarray(x) for x in (self.eigenvalue, self.overdamped, self.shape,
                                                            self.energy_fraction, self.effective_mass))
        return {"boundary": self.boundary, "reference_point_m": [_num(v) for v in np.asarray(self.reference_point)],
                "modes": [
            {
                "mode": j + 1,
                **{k: _num(v[j]) for k, v in values.items()},
                "eigenvalue": [_num(lam[j].real), _num(lam[j].imag)],
                "overdamped": bool(over[j]),
                "energy_fraction": {k: _num(v) for k, v in zip(self.participants, ef[j])},
                "effective_mass": dict(zip(EFFECTIVE_MASS_NAMES, (_num(v) for v in em[j]))),
                "shape": {
                    "x_B_m": [_num(v) for v in shape[j, :3]],
                    "phi_B_rad": [_num(v) for v in shape[j, 3:6]],
                    "theta_rad": {k: _num(v) for k, v in zip(self.panel_names, shape[j, 6:])},
                },
            }
            for j in range(lam.shape[0])
        ]}


def _modes(sc: Spacecraft, boundary: str, reference_point=None) -> Modes:
    n = sc.panels.count
    dtype = jnp.result_type(sc.hub.mHub)
    ref = jnp.zeros(3, dtype) if reference_point is None else jnp.asarray(reference_point, dtype)
    if n == 0:
        e, e6 = jnp.zeros((0,), dtype), jnp.zeros((0, 6), dtype)
        return Modes(e, e, e, e, jnp.zeros((0,), jnp.complex128), jnp.zeros((0,), bool),
                     e6, jnp.zeros((0, 2), dtype), e6, e6, ref, boundary, **_labels(sc))
    Mr, Cr, Kr = reduced_matrices(sc, boundary)
    L = jnp.linalg.cholesky(Mr)

    def congruence(X):
        Y = jax.scipy.linalg.solve_triangular(L, X, lower=True)
        Y = jax.scipy.linalg.solve_triangular(L, Y.T, lower=True)
        return 0.5 * (Y + Y.T)

    Kt, Ct = congruence(Kr), congruence(Cr)
    lam, undamped, overdamped = damped_poles(Kt, Ct)
    a, b = lam[0::2], lam[1::2]
    wn = safe_sqrt(jnp.real(a * b))
    zeta = jnp.where(wn > 0, -jnp.real(a + b) / (2.0 * jnp.where(wn > 0, wn, 1.0)), jnp.inf) + 0.0
    two_pi = 2.0 * jnp.pi
    # the representative pole: Im >= 0, or the slower real pole
    rep = jnp.where(overdamped, jnp.where(jnp.abs(a) <= jnp.abs(b), a, b), jnp.where(jnp.imag(a) >= 0, a, b))

    w2, psi = jnp.linalg.eigh(Kt)
    w2, psi = w2[undamped], psi[:, undamped]
    phi_t = jax.scipy.linalg.solve_triangular(L.T, psi, lower=False)  # (panels, modes)
    M = mass_matrix(sc)
    phi_h = -jnp.linalg.solve(M[:6, :6], M[:6, 6:] @ phi_t)  # the hub part of zero total momentum
    phi_h = phi_h if boundary == "free" else jnp.zeros((6, n), dtype)
    X = jnp.concatenate([phi_h, phi_t], 0).T  # (modes, dof)
    big = jnp.argmax(jnp.abs(X[:, 6:]), axis=1)
    sign = jnp.sign(jnp.take_along_axis(X[:, 6:], big[:, None], 1))
    X = X * jnp.where(sign == 0, 1.0, sign)

    bj = body_jacobians(sc)
    v = jnp.einsum("bia,ma->mbi", bj.J_v, X)
    w = jnp.einsum("bia,ma->mbi", bj.J_w, X)
    e_trans = 0.5 * bj.mass * jnp.sum(v * v, -1)  # (modes, bodies)
    e_rot = 0.5 * jnp.einsum("mbi,bij,mbj->mb", w, bj.inertia, w)
    parts = jnp.concatenate([e_trans[:, :1], e_rot[:, :1], (e_trans + e_rot)[:, 1:]], 1)
    gamma = X @ M @ rigid_motion(ref, n)
    return Modes(frequency_hz=wn / two_pi, damping_ratio=zeta,
                 damped_frequency_hz=jnp.abs(jnp.imag(rep)) / two_pi,
                 natural_frequency_hz=safe_sqrt(w2) / two_pi, eigenvalue=rep, overdamped=overdamped, shape=X,
                 energy_fraction=parts / jnp.sum(parts, 1, keepdims=True), participation=gamma,
                 effective_mass=gamma**2, reference_point=ref, boundary=boundary, **_labels(sc))


def rigid_motion(reference_point: Float[Array, "3"], n: int) -> Float[Array, "dof 6"]:
    """$R$: the coordinates $(x_B, \\phi_B, \\delta\\theta)$ of a rigid motion of the whole spacecraft (hinges
    locked) by a translation $u_P$ and a small rotation $\\phi$ about `reference_point` P (in B):
    $x_B = u_P + \\phi \\times (0 - r_P)$."""
    eye = jnp.eye(3, dtype=reference_point.dtype)
    return jnp.concatenate([jnp.concatenate([eye, tilde(reference_point)], 1),
                            jnp.concatenate([jnp.zeros_like(eye), eye], 1),
                            jnp.zeros((n, 6), reference_point.dtype)], 0)


_modes_jit = program(_modes)


def modes(model: Scenario | Spacecraft, boundary: str = "free", reference_point=None) -> Modes:
    """Flexible modes of the spacecraft linearised about its rest equilibrium.

    **Arguments:**

    - `model`: a `Scenario` or `Spacecraft` (the initial state, loads, gravity, `motorTorque` and `thetaDotRef`
      do not enter: see the module docstring).
    - `boundary`: `"free"` (hub free, as flown; the 6 rigid-body modes are excluded) or `"clamped"` (hub
      fixed, as on an FEA fixture or a test stand).
    - `reference_point`: where the rotational participation factors and effective masses refer to, in B [m]
      (default: the origin of B).

    **Returns:** `Modes`, N flexible modes in ascending `frequency_hz` (`damp` definitions), with undamped
    natural frequencies, mode shapes and kinetic-energy participation of the hub and of each named panel.

    Compiled once per model structure and boundary; differentiable with `jax.grad` / `jax.jacfwd` with
    respect to every array leaf (frequencies and damping ratios); works under `vmap`. The damped eigen-solve,
    pole pairing and mode matching run inside the program (static shapes; on CPU no host callback).
    """
    check_boundary(boundary)
    sc = _spacecraft_of(model)
    return _relabel(_modes_jit(strip_labels(sc), boundary, _point(reference_point)), sc)


def _relabel(m: Modes, sc: Spacecraft) -> Modes:
    """`Modes` computed on a label-free model, with the model's panel names."""
    return dataclasses.replace(m, **_labels(sc))


def modes_unjitted(model: Scenario | Spacecraft, boundary: str = "free", reference_point=None) -> Modes:
    """`modes` without its `eqx.filter_jit` (to compose inside a caller's own jit/grad)."""
    check_boundary(boundary)
    return _modes(_spacecraft_of(model), boundary, _point(reference_point))


def _point(p):
    return None if p is None else jnp.broadcast_to(jnp.asarray(p, dtype=float), (3,))


@program
def _matrices_jit(sc: Spacecraft, boundary: str):
    return (*reduced_matrices(sc, boundary), mass_matrix(sc))


def complex_mode_state(
    model: Scenario | Spacecraft, mode: int, boundary: str = "free"
) -> tuple[complex, np.ndarray, np.ndarray]:
    """Host helper: the damped (complex) mode `mode` (0-based, in `modes` order) as `(lambda, theta_part,
    u_part)`, with `theta_part` the hinge displacement eigenvector ($N$, complex) and `u_part` the matching
    velocity $\\lambda x$ in all $6+N$ coordinates (the hub part condensed so that the total momentum is zero;
    zero when clamped). Used to start a free response in one mode: $z(0) = \\mathrm{Re}(a\\,v)$."""
    sc = _spacecraft_of(model)
    Mr, Cr, Kr, M = (np.asarray(x) for x in _matrices_jit(strip_labels(sc), boundary))
    n = Mr.shape[0]
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-np.linalg.solve(Mr, Kr), -np.linalg.solve(Mr, Cr)]])
    lam, vec = np.linalg.eig(A)
    target = complex(np.asarray(modes(sc, boundary).eigenvalue)[mode])
    i = int(np.argmin(np.abs(lam - target)))
    x = vec[:n, i] / vec[:n, i][np.argmax(np.abs(vec[:n, i]))]
    xdot = lam[i] * x
    hdot = -np.linalg.solve(M[:6, :6], M[:6, 6:] @ xdot) if boundary == "free" else np.zeros(6, dtype=complex)
    return complex(lam[i]), x, np.concatenate([hdot, xdot])


# ------------------------------------------------------------------------------------------------------------
# Independent check: free responses of the nonlinear model
# ------------------------------------------------------------------------------------------------------------

CLAMP_FACTOR = 1e9  # "clamped" is simulated as a hub this much heavier (mass and inertia)
_CHECK_INTEGRATOR = "dopri8"


class ModeMeasurement(eqx.Module):
    """Frequencies and damping ratios measured from nonlinear free responses (one per mode), beside the linear
    model's values. NaN where a mode could not be measured (overdamped, fewer than 4 zero crossings).

    - `frequency_hz`, `damping_ratio`, `damped_frequency_hz`: measured ($|\\lambda| = \\sqrt{\\sigma^2 +
      \\omega_d^2}$, $\\zeta = \\sigma/|\\lambda|$ from the measured decay rate $\\sigma$ and oscillation $\\omega_d$).
    - `model_frequency_hz`, `model_damping_ratio`: the linear model (`modes`).
    - `crossings`: zero crossings used per mode; `panel`: the hinge whose angle was analysed (largest in the
      mode); `amplitude_rad`: the initial hinge amplitude; `t_end`, `save_dt` [s]; `success`: every run finished.
    - `t` (modes, T) [s] and `theta` (modes, T, panels) [rad]: the free responses, hinge angles relative to
      `thetaRef` (run j started in mode j).
    """

    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    damped_frequency_hz: np.ndarray
    model_frequency_hz: np.ndarray
    model_damping_ratio: np.ndarray
    crossings: np.ndarray
    panel: tuple[str, ...]
    amplitude_rad: float
    t_end: float
    save_dt: float
    success: bool
    boundary: str
    t: np.ndarray
    theta: np.ndarray

    def as_dict(self) -> dict:
        """JSON-ready: one entry per mode plus the run settings (without the time histories)."""
        values = {"measured_frequency_hz": self.frequency_hz, "measured_damping_ratio": self.damping_ratio,
                  "measured_damped_frequency_hz": self.damped_frequency_hz,
                  "model_frequency_hz": self.model_frequency_hz,
                  "model_damping_ratio": self.model_damping_ratio}
        rows = [{"mode": j + 1, **{k: _num(v[j]) for k, v in values.items()},
                 "zero_crossings": int(self.crossings[j]), "panel": self.panel[j]}
                for j in range(len(self.panel))]
        return {
            "method": (
                "each mode started alone (initial state = real part of its damped eigenvector, hinge amplitude "
                f"{self.amplitude_rad:g} rad, zero total momentum) and the nonlinear model integrated (dopri8, "
                "rtol 1e-11); zero crossings of the largest hinge angle located by cubic interpolation give the "
                "oscillation frequency, the decay of the slopes at the crossings gives the decay rate"
                + ("; clamped = hub mass and inertia x 1e9" if self.boundary == "clamped" else "")
            ),
            "t_end_s": self.t_end,
            "save_dt_s": self.save_dt,
            "success": self.success,
            "modes": rows,
        }


@program
def _simulate_batch(scenario: Scenario, initials):
    def one(ini):
        traj = simulate_unjitted(Scenario(scenario.spacecraft, ini, scenario.loads, scenario.simulation))
        return traj.t, traj.theta, traj.success

    return jax.lax.map(one, initials)


def _crossings(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero crossings of a sampled signal (cubic through 4 samples) and the slope there."""
    idx = np.nonzero(np.signbit(x[:-1]) != np.signbit(x[1:]))[0]
    idx = idx[(idx >= 1) & (idx + 2 < len(x))]
    tc, sc = [], []
    for k in idx:
        coef = np.polyfit(t[k - 1 : k + 3] - t[k], x[k - 1 : k + 3], 3)
        h = t[k + 1] - t[k]
        roots = np.roots(coef)
        good = [r.real for r in roots if abs(r.imag) < 1e-9 * h and -1e-9 * h <= r.real <= h * (1 + 1e-9)]
        if not good:
            continue
        r = min(good, key=lambda r: abs(r - h / 2))
        tc.append(t[k] + r)
        sc.append(np.polyval(np.polyder(coef), r))
    return np.asarray(tc), np.asarray(sc)


def measure_modes(
    model: Scenario | Spacecraft,
    boundary: str = "free",
    *,
    periods: float = 30.0,
    samples_per_period: int = 64,
    amplitude: float = 1e-4,
) -> ModeMeasurement:
    """Measure each flexible mode's frequency and damping from free responses of the **nonlinear** model.

    Each mode is started alone: hinge angles $\\theta_{ref} + a\\,\\mathrm{Re}(x)$, rates $a\\,\\mathrm{Re}(\\lambda
    x)$ (its damped eigenvector $x$, scaled so the largest hinge amplitude is `amplitude` [rad]) and the hub
    rate that makes the total momentum zero. The modes are integrated one after another in one program (`lax.map`:
    each with its own adaptive steps, traced once; `dopri8`, rtol
    1e-11, atol 1e-14 x amplitude) for `periods` periods of the slowest mode, sampled `samples_per_period` times
    per period of the fastest. The largest hinge angle's zero crossings (cubic interpolation through 4 samples)
    give the oscillation period by least squares; the slopes at the crossings decay as $e^{-\\sigma t}$, which
    gives $\\sigma$. Then $|\\lambda| = \\sqrt{\\sigma^2 + \\omega_d^2}$ and $\\zeta = \\sigma/|\\lambda|$ are compared
    with the linear model. Clamped: the hub is made `1e9` times heavier (mass and inertia), which changes the
    frequencies by about `1e-9` relative. Gravity, loads and motor torques are removed, as in `modes`.

    Accuracy (tests): relative frequency error ~1e-9 for a 1e-4 rad amplitude, set by the nonlinearity
    ($\\propto a^2$) and the interpolation, far below an FFT's resolution $1/(\\text{periods})$.

    **Returns:** a `ModeMeasurement` (NumPy arrays; host function, not differentiable).
    """
    check_boundary(boundary)
    sc = _rest_spacecraft(_spacecraft_of(model))
    m = modes(sc, boundary)
    n = sc.panels.count
    f_model, z_model = np.asarray(m.frequency_hz), np.asarray(m.damping_ratio)
    thetaRef = np.asarray(sc.panels.thetaRef)
    states = [complex_mode_state(sc, j, boundary) for j in range(n)]  # (lambda, x, u), scaled below
    osc = np.array([abs(lam.imag) for lam, _, _ in states])
    panel_idx = [int(np.argmax(np.abs(x))) for _, x, _ in states]
    panels = tuple(sc.panels.labels[i] for i in panel_idx)
    f_meas, z_meas, fd_meas = np.full((3, n), np.nan)
    count = np.zeros(n, int)
    oscillating = osc > 0
    if not np.any(oscillating):  # also no panel at all
        return ModeMeasurement(f_meas, z_meas, fd_meas, f_model, z_model, count, panels, float(amplitude),
                               0.0, 0.0, True, boundary, np.zeros((n, 0)), np.zeros((n, 0, n)))
    w_min, w_max = osc[oscillating].min(), osc[oscillating].max()
    save_dt = float(2 * np.pi / w_max / samples_per_period)
    t_end = save_dt * math.ceil(float(periods * 2 * np.pi / w_min) / save_dt)
    cfg = SimulationConfig(t_end=t_end, save_dt=save_dt, integrator=_CHECK_INTEGRATOR, dt=save_dt / 4, rtol=1e-11,
                           atol=1e-14 * amplitude, max_steps=max(100_000, int(200 * t_end / save_dt)))
    z3 = np.zeros((n, 3))
    initials = InitialState(z3, z3, z3, np.array([(amplitude * u)[3:6].real for *_, u in states]),
                            np.array([thetaRef + (amplitude * x).real for _, x, _ in states]),
                            np.array([(amplitude * u)[6:].real for *_, u in states]))
    f = CLAMP_FACTOR if boundary == "clamped" else 1.0  # clamped: a hub f times heavier
    hub = type(sc.hub)(sc.hub.mHub * f, sc.hub.IHubPntBc_B * f, sc.hub.r_BcB_B)
    scen = Scenario(Spacecraft(hub, sc.panels, None),
                    InitialState(z3[0], z3[0], z3[0], z3[0], thetaRef, np.zeros(n)), Loads(), cfg)
    check_memory(cfg, n, n, field="periods", value=periods)
    t, theta, ok = (np.asarray(x) for x in _simulate_batch(compile_key(scen), initials))
    for j in np.nonzero(oscillating)[0]:
        keep = t[j] <= periods * 2 * np.pi / osc[j] + 2 * save_dt
        tc, slope = _crossings(t[j][keep], theta[j][keep, panel_idx[j]] - thetaRef[panel_idx[j]])
        count[j] = len(tc)
        if len(tc) < 4:
            continue
        wd = np.pi / np.polyfit(np.arange(len(tc)), tc, 1)[0]  # pi / half period
        sigma = -np.polyfit(tc, np.log(np.abs(slope)), 1)[0]
        wn = math.hypot(sigma, wd)
        f_meas[j], z_meas[j], fd_meas[j] = wn / (2 * np.pi), sigma / wn, wd / (2 * np.pi)
    return ModeMeasurement(f_meas, z_meas, fd_meas, f_model, z_model, count, panels, float(amplitude), t_end,
                           save_dt, bool(np.all(ok)), boundary, t, theta - thetaRef)
