r"""Independent equations of motion: the full $(6+N)\times(6+N)$ mass-matrix (Kane) form, built by autodiff.

This module is the cross-check of the back-substitution solver (a test reference model, not part of the
package). It shares **no code** with it: it only reads the data containers of `jaxhinge._model._spacecraft` (the
parameter arrays and the `parent` tuple) and derives everything else from the configuration of the bodies.

**Formulation.** Generalized coordinates and speeds (Basilisk's integrated state)

- $q = (r_{B/N}^N,\ \sigma_{BN},\ \theta) \in \mathbb{R}^{6+N}$,
- $u = (v_{B/N}^N,\ \omega_{BN}^B,\ \dot\theta) \in \mathbb{R}^{6+N}$,
- $\dot q = (v_{B/N}^N,\ \tfrac14 B(\sigma)\,\omega_{BN}^B,\ \dot\theta)$.

The system is $N+1$ rigid bodies: body 0 is the hub (CoM $B_c$, inertia `IHubPntBc_B` about $B_c$), body
$i\ge1$ is panel $i$ (CoM $S_i$ at $r_{H_i/B} - d_i \hat s_{1,i}$, $[S_iB] = M_2(\theta_i)[H_iB]$, inertia
$\mathrm{diag}(I_{s1}, I_{s2}, I_{s3})$ about $S_i$ in $S_i$: only the diagonal of `IPntS_S` is used, as in
Basilisk). Only the *configuration* of each body is written by hand: its CoM position $r_b(q)$ in N and its
attitude $[N b](q)$. Velocities follow by forward-mode autodiff along $\dot q(q, u)$:

$$v_b = \frac{\partial r_b}{\partial q}\dot q, \qquad \tilde\omega_b^N = [\dot{Nb}]\,[Nb]^T .$$

Both are linear in $u$, so $J_{v,b} = \partial v_b/\partial u$ and $J_{\omega,b} = \partial\omega_b/\partial u$
(`jax.jacfwd`), and the velocity-product terms $\dot J u$ are a `jax.jvp` of $v_b(q, u)$ along $\dot q$ at fixed
$u$. Then (Kane / projected Newton-Euler)

$$M = \sum_b J_{v,b}^T m_b J_{v,b} + J_{\omega,b}^T I_b^N J_{\omega,b},$$
$$M \dot u = Q - \sum_b \left[J_{v,b}^T m_b\,\dot J_{v,b} u
  + J_{\omega,b}^T\left(I_b^N \dot J_{\omega,b} u + \omega_b \times I_b^N \omega_b\right)\right].$$

**Panels hinged to panels** (chains: `Panels.parent[j] >= 0`) have relative hinge angles: panel $j$'s attitude is
$[S_jB] = M_2(\theta_j + \theta_{parent} + \dots)[HB]$ and its CoM is walked from the hub along the parents
(`_poses`); its hinge torque acts between its parent (the hub for a root) and panel $j$, so it enters the
$\theta_j$ row only.

Generalized forces $Q$ (virtual power):

- hinge torque $\tau_i = u_i - k_i(\theta_i - \theta_{ref,i}) - c_i(\dot\theta_i - \dot\theta_{ref,i})$ acts between
  hub and panel about $\hat h_2$, so it enters the $\theta_i$ row only;
- the external force $F^N = [NB]F^B + F^N$ acts **at point B** (velocity $v_{B/N}$);
- the external torque $[NB]\tau_B$ acts on the hub;
- gravity as Basilisk applies it: a **uniform** field $g = -\mu\, r_C/|r_C|^3$ evaluated at the system CoM $C$,
  acting on every body's CoM.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxhinge._model._spacecraft import Spacecraft, State

# --------------------------------------------------------------------------------------------------------------
# Small rotation helpers (private to this module on purpose: no code shared with the back-substitution).
# --------------------------------------------------------------------------------------------------------------


def _tilde(v: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """Cross-product matrix: `_tilde(a) @ b == cross(a, b)`."""
    zero = jnp.zeros_like(v[0])
    return jnp.stack(
        [
            jnp.stack([zero, -v[2], v[1]]),
            jnp.stack([v[2], zero, -v[0]]),
            jnp.stack([-v[1], v[0], zero]),
        ]
    )


def _dcm_BN_from_mrp(sigma: Float[Array, "3"]) -> Float[Array, "3 3"]:
    r"""$[BN] = C(\sigma) = I + \dfrac{8\tilde\sigma^2 - 4(1-\sigma^2)\tilde\sigma}{(1+\sigma^2)^2}$ (maps N to B)."""
    s2 = sigma @ sigma
    st = _tilde(sigma)
    return jnp.eye(3) + (8.0 * st @ st - 4.0 * (1.0 - s2) * st) / (1.0 + s2) ** 2


def _mrp_B_matrix(sigma: Float[Array, "3"]) -> Float[Array, "3 3"]:
    r"""$B(\sigma) = (1-\sigma^2) I + 2\tilde\sigma + 2\sigma\sigma^T$, with $\dot\sigma = \tfrac14 B(\sigma)\omega$."""
    s2 = sigma @ sigma
    return (1.0 - s2) * jnp.eye(3) + 2.0 * _tilde(sigma) + 2.0 * jnp.outer(sigma, sigma)


def _M2(t: Float[Array, ""]) -> Float[Array, "3 3"]:
    """Principal rotation about axis 2: `[[cos,0,-sin],[0,1,0],[sin,0,cos]]`."""
    c, s = jnp.cos(t), jnp.sin(t)
    zero, one = jnp.zeros_like(t), jnp.ones_like(t)
    return jnp.stack([jnp.stack([c, zero, -s]), jnp.stack([zero, one, zero]), jnp.stack([s, zero, c])])


def _vee_batched(W: Float[Array, "b 3 3"]) -> Float[Array, "b 3"]:
    """Axial vector of the skew part of each matrix."""
    return 0.5 * jnp.stack(
        [W[:, 2, 1] - W[:, 1, 2], W[:, 0, 2] - W[:, 2, 0], W[:, 1, 0] - W[:, 0, 1]], axis=-1
    )


# --------------------------------------------------------------------------------------------------------------
# Generalized coordinates and speeds.
# --------------------------------------------------------------------------------------------------------------


def _q_u(state: State) -> tuple[Float[Array, " dof"], Float[Array, " dof"]]:
    q = jnp.concatenate([state.r_BN_N, state.sigma_BN, state.theta])
    u = jnp.concatenate([state.v_BN_N, state.omega_BN_B, state.thetaDot])
    return q, u


def _qdot(q: Float[Array, " dof"], u: Float[Array, " dof"]) -> Float[Array, " dof"]:
    sigma, omega = q[3:6], u[3:6]
    return jnp.concatenate([u[0:3], 0.25 * _mrp_B_matrix(sigma) @ omega, u[6:]])


# --------------------------------------------------------------------------------------------------------------
# Bodies: configuration by hand, everything else by autodiff.
# --------------------------------------------------------------------------------------------------------------


def _masses(sc: Spacecraft) -> Float[Array, " bodies"]:
    return jnp.concatenate([sc.hub.mHub[None], sc.panels.mass])


def _body_inertias(sc: Spacecraft) -> Float[Array, "bodies 3 3"]:
    """Inertia of each body about its own CoM, in its own body frame (B for the hub, $S_i$ for panel i)."""
    I_panels = jax.vmap(lambda I: jnp.diag(jnp.diag(I)))(sc.panels.IPntS_S)
    return jnp.concatenate([sc.hub.IHubPntBc_B[None], I_panels], axis=0)


def _poses(
    sc: Spacecraft, q: Float[Array, " dof"]
) -> tuple[Float[Array, "bodies 3"], Float[Array, "bodies 3 3"]]:
    r"""CoM position (N frame) and attitude $[N b]$ of every body; body 0 is the hub, body $i$ is panel $i$.

    Panels are walked one by one from the hub along `panels.parent` (-1: hinged to the hub): panel $j$ has
    the absolute angle $\phi_j = \phi_{parent} + \theta_j$ and the frame $[S_jB] = M_2(\phi_j)[HB]$ of its hinge
    frame $[HB]$ (for a panel hinged to a panel: that of the panel at the root of its chain); its hinge point
    is `r_HB_B` (on the hub) or its parent's hinge point minus $l_{parent}\hat s_{parent,1}$; its CoM is its
    hinge point minus $d_j\hat s_{j,1}$."""
    p = sc.panels
    r_BN_N, sigma_BN, theta = q[0:3], q[3:6], q[6:]
    dcm_NB = _dcm_BN_from_mrp(sigma_BN).T
    rs, Rs = [r_BN_N + dcm_NB @ sc.hub.r_BcB_B], [dcm_NB]
    phi, hinge, s1, frame = {}, {}, {}, {}
    for j, par in enumerate(p.parent):
        if par < 0:
            phi[j], hinge[j], frame[j] = theta[j], p.r_HB_B[j], p.dcm_HB[j]
        else:
            phi[j] = phi[par] + theta[j]
            hinge[j] = hinge[par] - p.l[par] * s1[par]
            frame[j] = frame[par]
        dcm_SB = _M2(phi[j]) @ frame[j]
        s1[j] = dcm_SB[0]
        rs.append(r_BN_N + dcm_NB @ (hinge[j] - p.d[j] * s1[j]))
        Rs.append(dcm_NB @ dcm_SB.T)
    return jnp.stack(rs), jnp.stack(Rs)


def _velocities(
    sc: Spacecraft, q: Float[Array, " dof"], u: Float[Array, " dof"]
) -> tuple[Float[Array, "bodies 3"], Float[Array, "bodies 3"]]:
    """Inertial CoM velocity and inertial angular velocity (both N components) of every body."""
    (_, R), (v, Rdot) = jax.jvp(lambda qq: _poses(sc, qq), (q,), (_qdot(q, u),))
    omega = _vee_batched(Rdot @ jnp.swapaxes(R, -1, -2))
    return v, omega


class _Kinematics(NamedTuple):
    """Per-body kinematic quantities at one $(q, u)$; bodies on the leading axis (hub first)."""

    r: Float[Array, "bodies 3"]  # CoM positions, N frame
    R: Float[Array, "bodies 3 3"]  # attitudes [N b]
    v: Float[Array, "bodies 3"]  # CoM velocities, N frame
    w: Float[Array, "bodies 3"]  # angular velocities, N frame
    Jv: Float[Array, "bodies 3 dof"]  # partial velocities dv/du
    Jw: Float[Array, "bodies 3 dof"]  # partial angular velocities dw/du
    Jdv_u: Float[Array, "bodies 3"]  # (dJv/dt) u
    Jdw_u: Float[Array, "bodies 3"]  # (dJw/dt) u
    I_N: Float[Array, "bodies 3 3"]  # inertia about the body CoM, N frame


def _kinematics(sc: Spacecraft, q: Float[Array, " dof"], u: Float[Array, " dof"]) -> _Kinematics:
    r, R = _poses(sc, q)
    v, w = _velocities(sc, q, u)
    # v, w are linear in u: the forward Jacobian is exact at any u.
    Jv, Jw = jax.jacfwd(lambda uu: _velocities(sc, q, uu))(u)
    # (dJ/dt) u = d/dq [J(q) u] . qdot at fixed u.
    _, (Jdv_u, Jdw_u) = jax.jvp(lambda qq: _velocities(sc, qq, u), (q,), (_qdot(q, u),))
    I_N = R @ _body_inertias(sc) @ jnp.swapaxes(R, -1, -2)
    return _Kinematics(r, R, v, w, Jv, Jw, Jdv_u, Jdw_u, I_N)


def _mass_matrix(sc: Spacecraft, kin: _Kinematics) -> Float[Array, "dof dof"]:
    m = _masses(sc)
    M = jnp.einsum("b,bin,bim->nm", m, kin.Jv, kin.Jv) + jnp.einsum(
        "bin,bij,bjm->nm", kin.Jw, kin.I_N, kin.Jw
    )
    return M


def _generalized_forces(
    sc: Spacecraft,
    q: Float[Array, " dof"],
    u: Float[Array, " dof"],
    kin: _Kinematics,
    extForce_B,
    extForce_N,
    extTorquePntB_B,
    u_extra,
) -> Float[Array, " dof"]:
    n = q.shape[0] - 6  # all hinges: single panels, then chain panels
    m = _masses(sc)
    dcm_NB = kin.R[0]

    # Generalized applied forces (virtual power).
    Q = jnp.zeros(6 + n)
    # External force at point B: the velocity of B is u[0:3], so its partial velocity is [I3, 0, 0].
    F_N = dcm_NB @ jnp.asarray(extForce_B, dtype=float) + jnp.asarray(extForce_N, dtype=float)
    Q = Q.at[0:3].add(F_N)
    # External torque about B, applied to the hub body.
    Q = Q + kin.Jw[0].T @ (dcm_NB @ jnp.asarray(extTorquePntB_B, dtype=float))
    # Uniform gravity field evaluated at the system CoM, acting on every body's CoM.
    if sc.gravity is not None:
        r_CN_N = (m @ kin.r) / jnp.sum(m)
        g_N = -sc.gravity.mu * r_CN_N / jnp.linalg.norm(r_CN_N) ** 3
        Q = Q + jnp.einsum("b,bin,i->n", m, kin.Jv, g_N)
    # Hinge torque: an internal pair (+tau s2 on the panel, -tau s2 on the hub), virtual power tau_i thetaDot_i.
    theta, thetaDot = q[6:], u[6:]
    # Chain hinges: theta is the angle of panel j relative to panel j-1 (to the hub for j = 1), so the pair
    # acts between the two neighbours and its virtual power is again tau_j thetaDot_j.
    P = lambda name: getattr(sc.panels, name)
    tau = (
        P("motorTorque")
        + jnp.broadcast_to(jnp.asarray(u_extra, dtype=float), (n,))
        - P("k") * (theta - P("thetaRef"))
        - P("c") * (thetaDot - P("thetaDotRef"))
    )
    Q = Q.at[6:].add(tau)

    # Velocity-product (inertial) terms.
    Iw = jnp.einsum("bij,bj->bi", kin.I_N, kin.w)
    inertial = jnp.einsum("b,bin,bi->n", m, kin.Jv, kin.Jdv_u) + jnp.einsum(
        "bin,bi->n", kin.Jw, jnp.einsum("bij,bj->bi", kin.I_N, kin.Jdw_u) + jnp.cross(kin.w, Iw)
    )
    return Q - inertial


# --------------------------------------------------------------------------------------------------------------
# Public API.
# --------------------------------------------------------------------------------------------------------------


def mass_matrix(spacecraft: Spacecraft, state: State) -> Float[Array, "dof dof"]:
    r"""Mass matrix $M(q)$ of the full system in the speeds $u = (v_{B/N}^N, \omega_{BN}^B, \dot\theta)$.

    **Arguments:**

    - `spacecraft`: the `Spacecraft` (hub, $N$ panels, optional gravity).
    - `state`: the `State`; only the configuration $(r_{B/N}^N, \sigma_{BN}, \theta)$ is used.

    **Returns:**

    The symmetric positive-definite $(6+N)\times(6+N)$ matrix $M = \sum_b J_{v,b}^T m_b J_{v,b} +
    J_{\omega,b}^T I_b^N J_{\omega,b}$ [kg, kg m, kg m^2 blocks].
    """
    q, u = _q_u(state)
    return _mass_matrix(spacecraft, _kinematics(spacecraft, q, u))


def generalized_forces(
    spacecraft: Spacecraft,
    state: State,
    extForce_B: Float[ArrayLike, "3"],
    extForce_N: Float[ArrayLike, "3"],
    extTorquePntB_B: Float[ArrayLike, "3"],
    u_extra: Float[ArrayLike, "..."],
) -> Float[Array, " dof"]:
    r"""Right-hand side $Q - \sum_b [J_{v,b}^T m_b \dot J_{v,b}u + J_{\omega,b}^T(I_b^N\dot J_{\omega,b}u +
    \omega_b\times I_b^N\omega_b)]$ of $M\dot u = \ldots$.

    **Arguments:**

    - `spacecraft`, `state`: as in `mass_matrix`.
    - `extForce_B`: external force, B frame [N], applied at point B.
    - `extForce_N`: external force, N frame [N], applied at point B.
    - `extTorquePntB_B`: external torque about B, B frame [N m].
    - `u_extra`: extra hinge motor torque [N m], scalar or shape `(N,)`, added to `Panels.motorTorque`.

    **Returns:**

    The $(6+N,)$ vector of generalized forces including the velocity-product terms, in the rows
    $(v_{B/N}^N\ [N],\ \omega_{BN}^B\ [N m],\ \dot\theta\ [N m])$.
    """
    q, u = _q_u(state)
    kin = _kinematics(spacecraft, q, u)
    return _generalized_forces(spacecraft, q, u, kin, extForce_B, extForce_N, extTorquePntB_B, u_extra)


def accelerations(
    spacecraft: Spacecraft,
    state: State,
    extForce_B: Float[ArrayLike, "3"],
    extForce_N: Float[ArrayLike, "3"],
    extTorquePntB_B: Float[ArrayLike, "3"],
    u_extra: Float[ArrayLike, "..."],
) -> tuple[Float[Array, "3"], Float[Array, "3"], Float[Array, " panels"]]:
    r"""Accelerations from a dense solve of the full system $M\dot u = Q - \ldots$.

    **Arguments:** as in `generalized_forces`.

    **Returns:**

    `(rDDot_BN_N, omegaDot_BN_B, thetaDDot)`: the inertial acceleration of point B, N frame [m/s^2]; the hub
    angular acceleration, B frame [rad/s^2]; the hinge angular accelerations [rad/s^2], shape `(N,)`.
    """
    q, u = _q_u(state)
    kin = _kinematics(spacecraft, q, u)
    M = _mass_matrix(spacecraft, kin)
    f = _generalized_forces(spacecraft, q, u, kin, extForce_B, extForce_N, extTorquePntB_B, u_extra)
    udot = jnp.linalg.solve(M, f)
    return udot[0:3], udot[3:6], udot[6:]


def kinetic_energy(spacecraft: Spacecraft, state: State) -> Float[Array, ""]:
    r"""Total kinetic energy [J] (orbital plus rotational; no potential), summed body by body:
    $T = \sum_b \tfrac12 m_b |v_b|^2 + \tfrac12 \omega_b^T I_b^N \omega_b$, which equals $\tfrac12 u^T M u$."""
    q, u = _q_u(state)
    v, w = _velocities(spacecraft, q, u)
    _, R = _poses(spacecraft, q)
    I_N = R @ _body_inertias(spacecraft) @ jnp.swapaxes(R, -1, -2)
    return 0.5 * (_masses(spacecraft) @ jnp.sum(v * v, axis=-1) + jnp.einsum("bi,bij,bj->", w, I_N, w))


def linear_momentum_N(spacecraft: Spacecraft, state: State) -> Float[Array, "3"]:
    r"""Total linear momentum $\sum_b m_b v_b$, N frame [kg m/s]."""
    q, u = _q_u(state)
    v, _ = _velocities(spacecraft, q, u)
    return _masses(spacecraft) @ v


def center_of_mass_N(spacecraft: Spacecraft, state: State) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
    r"""System CoM position $r_{C/N}^N$ [m] and velocity $v_{C/N}^N$ [m/s]."""
    q, u = _q_u(state)
    r, _ = _poses(spacecraft, q)
    v, _ = _velocities(spacecraft, q, u)
    m = _masses(spacecraft)
    return (m @ r) / jnp.sum(m), (m @ v) / jnp.sum(m)


def angular_momentum_pntC_N(spacecraft: Spacecraft, state: State) -> Float[Array, "3"]:
    r"""Total angular momentum about the system CoM C, N frame [kg m^2/s]:
    $H_C = \sum_b I_b^N\omega_b + m_b (r_b - r_C)\times v_b$."""
    q, u = _q_u(state)
    r, R = _poses(spacecraft, q)
    v, w = _velocities(spacecraft, q, u)
    m = _masses(spacecraft)
    I_N = R @ _body_inertias(spacecraft) @ jnp.swapaxes(R, -1, -2)
    r_C, v_C = (m @ r) / jnp.sum(m), (m @ v) / jnp.sum(m)
    # sum m (r - r_C) = 0, so subtracting v_C changes nothing but avoids cancellation at orbital speeds.
    return jnp.sum(jnp.einsum("bij,bj->bi", I_N, w) + m[:, None] * jnp.cross(r - r_C, v - v_C), axis=0)


def body_velocities_N(
    spacecraft: Spacecraft, state: State
) -> tuple[Float[Array, "bodies 3"], Float[Array, "bodies 3"]]:
    r"""Inertial CoM velocities and angular velocities (N frame) of the hub (row 0) and panels (rows 1..N)."""
    q, u = _q_u(state)
    return _velocities(spacecraft, q, u)
