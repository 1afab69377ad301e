r"""The back-substitution vector field (Allard, Schaub & Piggott; Basilisk `hingedRigidBodyStateEffector`,
`nHingedRigidBodyStateEffector`, `dualHingedRigidBodyStateEffector`), one code path for every panel.

Stages, in the order of Basilisk's `Spacecraft::equationsOfMotion`:
hinge geometry -> mass properties -> hinge back-substitution contributions ($a_\theta, b_\theta, c_\theta$ and
A, B, C, D, v_trans, v_rot) -> hub 6x6 solve through the Schur complement (two 3x3 solves) -> $\ddot\theta$ ->
kinematics. Every stage is vectorised over the leading `panels` axis (no Python loop over panels).

**Geometry.** Panel j has the absolute angle $\phi_j = \sum_{k \preceq j}\theta_k$ (itself and its ancestors:
$\phi = T\theta$, `Topology.T`) and $[S_jB] = M_2(\phi_j)[HB]$ with the frame $[HB]$ of its subtree root (all axes
of a chain are parallel, as in both Basilisk chain models). Its CoM is
$r_{S_j/B} = r_{H/B} - \sum_k a_{jk}\hat s_{k,1}$ with the lever matrix $a_{jk} = l_k$ for a strict ancestor k,
$d_j$ for $k = j$, 0 otherwise ($r_{H/B}$ of the root). With the absolute rates $w = T\dot\theta$:
$r'_{S_j} = \sum_k a_{jk} w_k \hat s_{k,3}$ and $r''_{S_j} = \sum_k a_{jk}(\dot w_k \hat s_{k,3} + w_k^2 \hat s_{k,1})$.
A single panel is the case $T = I$, $a = \mathrm{diag}(d)$.

**Panel equations** (Kane, speeds $w$; partial velocity of $S_i$ w.r.t. $w_j$ is $a_{ij}\hat s_{j,3}$, partial
angular velocity $\delta_{ij}\hat h_2$), projected on the relative speeds with $T^T$:

$$[T^T M_w T]\,\ddot\theta = -[T^T F]\,\ddot r_{B} - [T^T G]\,\dot\omega + Q_\theta - T^T v_w,$$

- $M_{w,jk} = \sum_i m_i a_{ij} a_{ik}\,\hat s_{j,3}\cdot\hat s_{k,3} + \delta_{jk} I_{s_j,2}$,
- $F_j = (\sum_i m_i a_{ij})\,\hat s_{j,3}$, $G_j = (\sum_i m_i a_{ij} r_{S_i/B})\times\hat s_{j,3} + I_{s_j,2}\hat s_{j,2}$,
- $v_{w,j} = \hat s_{j,3}\cdot\sum_i m_i a_{ij}(\omega\times\omega\times r_{S_i} + 2\omega\times r'_{S_i}
  + \textstyle\sum_k a_{ik} w_k^2 \hat s_{k,1} - g) + (I_{s_j,1} - I_{s_j,3})\,\omega_{s_j,1}\omega_{s_j,3}$,
- $Q_{\theta,j} = u_j - k_j(\theta_j - \theta_{ref,j}) - c_j(\dot\theta_j - \dot\theta_{ref,j})$,

so $\ddot\theta = a_\theta \ddot r_B + b_\theta\dot\omega + c_\theta$. For a single panel these are exactly Basilisk's
$a_\theta = -(md/I_\theta)\hat s_3$, $b_\theta$, $c_\theta$ ($I_\theta = I_{s2} + md^2$). **Hub contributions** (besides
the panels' mass terms in $m_{sc}, c, I_{sc}, I'_{sc}$), with $\tilde F = T^T F$, $\tilde G = T^T G$:

$$A \mathrel{+}= \tilde F^T a_\theta,\ B \mathrel{+}= \tilde F^T b_\theta,\ C \mathrel{+}= \tilde G^T a_\theta,\
D \mathrel{+}= \tilde G^T b_\theta,$$
$$v_{trans} \mathrel{-}= \tilde F^T c_\theta + \sum_i m_i r''_{S_i,w^2},\quad
v_{rot} \mathrel{-}= \tilde G^T c_\theta + \sum_i \left[\omega\times(w_i I_{s_i,2}\hat s_{i,2}) + m_i\,\omega\times
(r_{S_i}\times r'_{S_i}) + m_i\, r_{S_i}\times r''_{S_i,w^2}\right].$$

The hinge-space matrix $T^T M_w T$ is diagonal when every panel hangs from the hub (then the solve is a
division, as in Basilisk), block diagonal by chains otherwise (`hinge_solve`: an unrolled $L D L^T$ per chain).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._math import (
    cross3,
    dot3,
    lead_sum,
    m2,
    matrix3,
    mm3,
    mrp_bmat,
    mrp_to_dcm,
    mtv3,
    mv3,
    outer3,
    tilde,
    xyz,
)
from .._model._spacecraft import Panels, Spacecraft, State, Wheels
from ._tree_solve import hinge_solve


class HingeGeometry(NamedTuple):
    """Panel frames, positions and velocity-level kinematics in B, one row per panel."""

    dcm_SB: Float[Array, "panels 3 3"]  # [S_j B]
    s1: Float[Array, "panels 3"]
    s2: Float[Array, "panels 3"]
    s3: Float[Array, "panels 3"]
    w: Float[Array, " panels"]  # absolute panel rates about h2, relative to B
    r_HB_B: Float[Array, "panels 3"]  # each panel's hinge point
    r_SB_B: Float[Array, "panels 3"]  # each panel's CoM
    rPrime_SB_B: Float[Array, "panels 3"]  # body-frame derivative of r_S/B
    rDDot_w2: Float[Array, "panels 3"]  # the w^2 part of r''_S/B


def panel_inertia_diag(panels: Panels) -> Float[Array, "panels 3"]:
    """$(I_{s1}, I_{s2}, I_{s3})$: the diagonal of `IPntS_S` (Basilisk assumes it diagonal)."""
    return jnp.diagonal(panels.IPntS_S, axis1=-2, axis2=-1)


def hinge_geometry(
    panels: Panels, theta: Float[Array, " panels"], thetaDot: Float[Array, " panels"]
) -> HingeGeometry:
    """Frames, hinge points, CoMs and their body-frame rates of every panel (module docstring)."""
    top = panels.topology
    phi, w = top.ancestors(theta), top.ancestors(thetaDot)
    dcm_SB = mm3(m2(phi), top.of_root(panels.dcm_HB))
    s1, s2, s3 = dcm_SB[:, 0, :], dcm_SB[:, 1, :], dcm_SB[:, 2, :]
    r_root = top.of_root(panels.r_HB_B)
    d, l = panels.d, panels.l
    r_HB_B = r_root - top.lever(jnp.zeros_like(d), l, s1)
    r_SB_B = r_root - top.lever(d, l, s1)
    rPrime = top.lever(d, l, w[:, None] * s3)
    rDDot_w2 = top.lever(d, l, (w * w)[:, None] * s1)
    return HingeGeometry(dcm_SB, s1, s2, s3, w, r_HB_B, r_SB_B, rPrime, rDDot_w2)


class MassProps(NamedTuple):
    """System mass properties about B in B (Basilisk `updateSCMassProps`)."""

    m_sc: Float[Array, ""]
    c_B: Float[Array, "3"]  # system CoM relative to B
    cPrime_B: Float[Array, "3"]  # body-frame derivative of c
    ISCPntB_B: Float[Array, "3 3"]
    ISCPrimePntB_B: Float[Array, "3 3"]
    IPntS_B: Float[Array, "panels 3 3"]  # panel inertia about S, B frame


def _rrT(r):
    """$\\tilde r \\tilde r^T = |r|^2 I - r r^T$ (batched)."""
    x = xyz(r)
    r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2]
    return matrix3([r2 - x[i] * x[i] if i == j else -x[i] * x[j] for i in range(3) for j in range(3)])


def mass_properties(spacecraft: Spacecraft, geom: HingeGeometry) -> MassProps:
    hub, p = spacecraft.hub, spacecraft.panels
    Is = panel_inertia_diag(p)
    m_sc = hub.mHub + lead_sum(p.mass)
    c_B = (hub.mHub * hub.r_BcB_B + lead_sum(p.mass[:, None] * geom.r_SB_B)) / m_sc
    cPrime_B = lead_sum(p.mass[:, None] * geom.rPrime_SB_B) / m_sc
    # [BS] diag(I) [SB] = sum_i I_i s_i s_i^T
    IPntS_B = (
        Is[:, 0, None, None] * outer3(geom.s1, geom.s1)
        + Is[:, 1, None, None] * outer3(geom.s2, geom.s2)
        + Is[:, 2, None, None] * outer3(geom.s3, geom.s3)
    )
    ISC = hub.IHubPntBc_B + hub.mHub * _rrT(hub.r_BcB_B)
    ISC = ISC + lead_sum(IPntS_B + p.mass[:, None, None] * _rrT(geom.r_SB_B))
    s13 = outer3(geom.s1, geom.s3)
    # tilde(r')tilde(r) + tilde(r)tilde(r') = r r'^T + r' r^T - 2 (r . r') I
    r, rp = geom.r_SB_B, geom.rPrime_SB_B
    rpt_rt = outer3(r, rp) + outer3(rp, r) - 2.0 * dot3(r, rp)[:, None, None] * jnp.eye(3, dtype=r.dtype)
    ISCPrime = lead_sum((geom.w * (Is[:, 2] - Is[:, 0]))[:, None, None] * (s13 + jnp.swapaxes(s13, -1, -2))
                       - p.mass[:, None, None] * rpt_rt)
    return MassProps(m_sc, c_B, cPrime_B, ISC, ISCPrime, IPntS_B)


def gravity_B(spacecraft: Spacecraft, state: State, dcm_BN, c_B) -> Float[Array, "3"]:
    """Uniform gravity acceleration in B, evaluated at the system CoM (Basilisk's convention)."""
    if spacecraft.gravity is None:
        return jnp.zeros(3, dtype=c_B.dtype)
    r_CN_N = state.r_BN_N + mtv3(dcm_BN, c_B)
    r2 = dot3(r_CN_N, r_CN_N)
    return mv3(dcm_BN, -spacecraft.gravity.mu * r_CN_N / (r2 * jnp.sqrt(r2)))


class BackSub(NamedTuple):
    """Summed back-substitution matrices and the per-panel theta coefficients."""

    A: Float[Array, "3 3"]
    B: Float[Array, "3 3"]
    C: Float[Array, "3 3"]
    D: Float[Array, "3 3"]
    v_trans: Float[Array, "3"]
    v_rot: Float[Array, "3"]
    aTheta: Float[Array, "panels 3"]
    bTheta: Float[Array, "panels 3"]
    cTheta: Float[Array, " panels"]


def hinge_contributions(
    spacecraft: Spacecraft,
    state: State,
    geom: HingeGeometry,
    g_B: Float[Array, "3"],
    u: Float[Array, " panels"],
) -> BackSub:
    """Per-panel $a_\\theta, b_\\theta, c_\\theta$ and their summed contributions to A, B, C, D, v_trans, v_rot
    (module docstring)."""
    p = spacecraft.panels
    top = p.topology
    omega = state.omega_BN_B
    m = p.mass
    Is = panel_inertia_diag(p)
    g = geom
    d, l = p.d, p.l
    F = top.lever_T(d, l, m)[:, None] * g.s3  # (sum_i m_i a_ij) s3_j
    G = cross3(top.lever_T(d, l, m[:, None] * g.r_SB_B), g.s3) + Is[:, 1:2] * g.s2
    acc = cross3(omega, cross3(omega, g.r_SB_B)) + 2.0 * cross3(omega, g.rPrime_SB_B) + g.rDDot_w2 - g_B
    m_acc = m[:, None] * acc
    omega_S = mv3(g.dcm_SB, omega)
    vw = dot3(g.s3, top.lever_T(d, l, m_acc)) + (Is[:, 0] - Is[:, 2]) * omega_S[:, 0] * omega_S[:, 2]
    Q = u - p.k * (state.theta - p.thetaRef) - p.c * (state.thetaDot - p.thetaDotRef)
    Ft, Gt = top.descendants(F), top.descendants(G)
    if top.trivial:  # every panel on the hub: M_w is diagonal, m d^2 |s3|^2 + I_s2 (Basilisk's division)
        Mw = m * d * d * dot3(g.s3, g.s3) + Is[:, 1]
        aTheta, bTheta, cTheta = -Ft / Mw[:, None], -Gt / Mw[:, None], (Q - vw) / Mw
    else:  # M_w = (a^T diag(m) a) o (S3 S3^T) + diag(I_s2); a = lever(d, l, I)
        a = top.lever(d, l, jnp.eye(p.count, dtype=m.dtype))
        S33 = sum(g.s3[:, i, None] * g.s3[None, :, i] for i in range(3))
        Mw = top.lever_T(d, l, m[:, None] * a) * S33 + jnp.diag(Is[:, 1])
        rhs = jnp.concatenate([-Ft, -Gt, (Q - top.descendants(vw))[:, None]], 1)
        sol = hinge_solve(top, top.project(Mw), rhs)
        aTheta, bTheta, cTheta = sol[:, 0:3], sol[:, 3:6], sol[:, 6]
    v_trans = -lead_sum(Ft * cTheta[:, None] + m[:, None] * g.rDDot_w2)
    v_rot = -lead_sum(Gt * cTheta[:, None] + cross3(omega, (g.w * Is[:, 1])[:, None] * g.s2)
                      + m[:, None] * cross3(omega, cross3(g.r_SB_B, g.rPrime_SB_B))
                      + m[:, None] * cross3(g.r_SB_B, g.rDDot_w2))
    A, B = lead_sum(outer3(Ft, aTheta)), lead_sum(outer3(Ft, bTheta))
    C, D = lead_sum(outer3(Gt, aTheta)), lead_sum(outer3(Gt, bTheta))
    return BackSub(A, B, C, D, v_trans, v_rot, aTheta, bTheta, cTheta)


def wheel_torques(wheels: Wheels, Omega: Float[Array, " wheels"], u_extra=0.0) -> tuple[Float[Array, " wheels"],
                                                                                         Float[Array, " wheels"]]:
    r"""`(u_current, frictionTorque)` of each wheel (Basilisk's `ConfigureRWRequests` and friction model): the
    motor torque command (`u` plus `u_extra`, recorded or function inputs) clipped to +-`u_max` where `u_max` > 0,
    and the friction torque
    $-(\mathrm{sign}(\Omega) f_C + c_V \Omega)$, linear below `omegaLimitCycle` (Stribeck off)."""
    u, lim = wheels.u + u_extra, wheels.u_max
    u = jnp.where(lim > 0, jnp.clip(u, -jnp.abs(lim), jnp.abs(lim)), u)
    fc, cv, olc = wheels.fCoulomb, wheels.cViscous, wheels.omegaLimitCycle
    friction = jnp.where(jnp.abs(Omega) < olc, (fc + cv * olc) / olc * Omega, jnp.sign(Omega) * fc + cv * Omega)
    return u, -friction


def wheel_contributions(wheels: Wheels, Omega: Float[Array, " wheels"], omega: Float[Array, "3"], u_extra=0.0):
    r"""The balanced wheels' terms of the hub's rotational equation (Basilisk `BalancedWheels`):
    $D \mathrel{-}= \sum J_s \hat g_s \hat g_s^T$, $v_{rot} \mathrel{-}= \sum \hat g_s (u + f) + J_s\Omega\,
    \omega\times\hat g_s$. **Returns:** `(dD, dv_rot)`."""
    u, friction = wheel_torques(wheels, Omega, u_extra)
    gs, Js = wheels.gsHat_B, wheels.Js
    dD = -lead_sum(Js[:, None, None] * outer3(gs, gs))
    dv = -lead_sum(gs * (u + friction)[:, None] + (Js * Omega)[:, None] * cross3(omega, gs))
    return dD, dv


def _cofactors(M: Float[Array, "3 3"]) -> tuple[Float[Array, "3 3"], Float[Array, ""]]:
    """Adjugate and determinant of a 3x3 matrix, closed form (as Eigen's fixed-size `inverse()` used by
    Basilisk): `M^{-1} = adj / det`. No LAPACK call: it fuses with the surrounding elementwise work."""
    a, b, c = (r[0] for r in jnp.split(M, 3))
    adj_T = jnp.stack([cross3(b, c), cross3(c, a), cross3(a, b)])  # rows: cofactor rows
    det = dot3(a, adj_T[0])
    return adj_T.T, det


def hub_solve(bs: BackSub) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
    """Solve $[A\\ B; C\\ D][\\ddot r_B; \\dot\\omega] = [v_{trans}; v_{rot}]$ through the Schur complement,
    with closed-form 3x3 inverses (Basilisk: `omegaDot = (D - C A^{-1} B)^{-1} (v_rot - C A^{-1} v_trans)`).

    Returns $\\ddot r_{B/N}$ in **B** components and $\\dot\\omega_{BN}$ in B."""
    adjA, detA = _cofactors(bs.A)
    Ainv_vt = mv3(adjA, bs.v_trans) / detA
    Ainv_B = mm3(adjA, bs.B) / detA
    adjS, detS = _cofactors(bs.D - mm3(bs.C, Ainv_B))
    omegaDot = mv3(adjS, bs.v_rot - mv3(bs.C, Ainv_vt)) / detS
    rDDot_B = Ainv_vt - mv3(Ainv_B, omegaDot)
    return rDDot_B, omegaDot


@jax.jit  # traced once per model structure, reused by every program that calls it (see `diagnostics`)
def accelerations(
    spacecraft: Spacecraft,
    state: State,
    extForce_B: Float[Array, "3"],
    extForce_N: Float[Array, "3"],
    extTorquePntB_B: Float[Array, "3"],
    u_extra: Float[Array, " panels"] | Float[ArrayLike, ""] = 0.0,
    u_wheels: Float[Array, " wheels"] | Float[ArrayLike, ""] = 0.0,
) -> tuple[Float[Array, "3"], Float[Array, "3"], Float[Array, " panels"]]:
    """Back-substitution accelerations of one configuration.

    **Arguments:**

    - `spacecraft`: the model; `state`: the current `State`.
    - `extForce_B` [N, B frame], `extForce_N` [N, N frame]: external force through B;
      `extTorquePntB_B` [N m]: external torque about B, B frame.
    - `u_extra` [N m]: hinge motor torque added to `panels.motorTorque`; `u_wheels` [N m]: wheel motor torque
      command added to `wheels.u`.

    **Returns:** `(rDDot_BN_N, omegaDot_BN_B, thetaDDot)`: hub point acceleration (N frame), hub angular
    acceleration (B frame), hinge angular accelerations (relative, as `theta`).
    """
    dcm_BN = mrp_to_dcm(state.sigma_BN)
    geom = hinge_geometry(spacecraft.panels, state.theta, state.thetaDot)
    mp = mass_properties(spacecraft, geom)
    g_B = gravity_B(spacecraft, state, dcm_BN, mp.c_B)
    u = spacecraft.panels.motorTorque + u_extra
    bs = hinge_contributions(spacecraft, state, geom, g_B, u)
    omega = state.omega_BN_B
    m_sc, c_B, cP = mp.m_sc, mp.c_B, mp.cPrime_B
    ct = tilde(c_B)
    F_B = m_sc * g_B + mv3(dcm_BN, extForce_N) + extForce_B
    eye = jnp.eye(3, dtype=c_B.dtype)
    bs = bs._replace(
        A=bs.A + m_sc * eye,
        B=bs.B - m_sc * ct,
        C=bs.C + m_sc * ct,
        D=bs.D + mp.ISCPntB_B,
        v_trans=bs.v_trans - 2.0 * m_sc * cross3(omega, cP) - m_sc * cross3(omega, cross3(omega, c_B)) + F_B,
        v_rot=bs.v_rot - cross3(omega, mv3(mp.ISCPntB_B, omega)) - mv3(mp.ISCPrimePntB_B, omega)
        + cross3(c_B, m_sc * g_B) + extTorquePntB_B,
    )
    if spacecraft.wheels is not None:
        dD, dv = wheel_contributions(spacecraft.wheels, state.Omega, omega, u_wheels)
        bs = bs._replace(D=bs.D + dD, v_rot=bs.v_rot + dv)
    rDDot_B, omegaDot = hub_solve(bs)
    thetaDDot = dot3(bs.aTheta, rDDot_B) + dot3(bs.bTheta, omegaDot) + bs.cTheta
    return mtv3(dcm_BN, rDDot_B), omegaDot, thetaDDot


def state_derivative(t, state: State, args) -> State:
    """The diffrax vector field. `args = (spacecraft, loads)`; loads are evaluated at `t`."""
    spacecraft, loads = args
    return state_derivative_held(spacecraft, state, *loads.at(t))


@jax.jit
def state_derivative_held(spacecraft: Spacecraft, state: State, f_b, f_n, tq, u, u_w=0.0) -> State:
    """$\\dot y$ for given loads `(extForce_B, extForce_N, extTorquePntB_B, u_extra, u_wheels)` (see
    `accelerations`)."""
    rDDot_N, omegaDot, thetaDDot = accelerations(spacecraft, state, f_b, f_n, tq, u, u_w)
    OmegaDot = None
    if spacecraft.wheels is not None:  # Basilisk: OmegaDot = (u_current + frictionTorque) / Js - gsHat^T omegaDot
        w = spacecraft.wheels
        u_now, friction = wheel_torques(w, state.Omega, u_w)
        OmegaDot = (u_now + friction) / w.Js - dot3(w.gsHat_B, omegaDot)
    return State(
        r_BN_N=state.v_BN_N,
        v_BN_N=rDDot_N,
        sigma_BN=0.25 * mv3(mrp_bmat(state.sigma_BN), state.omega_BN_B),
        omega_BN_B=omegaDot,
        theta=state.thetaDot,
        thetaDot=thetaDDot,
        Omega=OmegaDot,
    )
