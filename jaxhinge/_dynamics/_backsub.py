"""The back-substitution vector field (Allard, Schaub & Piggott; Basilisk `hingedRigidBodyStateEffector`).

Stages, in the order of Basilisk's `Spacecraft::equationsOfMotion`:
panel geometry -> mass properties -> panel back-substitution contributions (a_theta, b_theta, c_theta and
A, B, C, D, v_trans, v_rot) -> hub 6x6 solve through the Schur complement (two 3x3 solves) ->
theta_ddot -> kinematics. Every stage is vectorised over the leading `panels` axis (no Python loop).
"""

from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, Float

from . import _chains
from .._math import m2, mrp_bmat, mrp_to_dcm, tilde
from .._model._spacecraft import Panels, Spacecraft, State

# Small 3-vector/3x3 algebra written out in components. XLA on CPU compiles every dot/reduction as its own
# kernel (tens of ms of compile time each, and a per-call cost at run time); written elementwise, a whole
# stage fuses into one loop. Leading axes broadcast.


def _dot(a, b):
    """$a \\cdot b$ over the last axis."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _mv(M, x):
    """$M x$ for 3x3 `M`."""
    return M[..., :, 0] * x[..., None, 0] + M[..., :, 1] * x[..., None, 1] + M[..., :, 2] * x[..., None, 2]


def _mtv(M, x):
    """$M^T x$ for 3x3 `M`."""
    return M[..., 0, :] * x[..., 0, None] + M[..., 1, :] * x[..., 1, None] + M[..., 2, :] * x[..., 2, None]


def _mm(A, B):
    """$A B$ for 3x3 matrices."""
    return (
        A[..., :, 0, None] * B[..., None, 0, :]
        + A[..., :, 1, None] * B[..., None, 1, :]
        + A[..., :, 2, None] * B[..., None, 2, :]
    )


def _outer(a, b):
    return a[..., :, None] * b[..., None, :]


class PanelGeometry(NamedTuple):
    """Panel frames and positions in B: $[SB] = M_2(\\theta)[HB]$, $\\hat s_i$ its rows, $r_{S/B} = r_{H/B} - d\\hat s_1$."""

    dcm_SB: Float[Array, "panels 3 3"]
    s1: Float[Array, "panels 3"]
    s2: Float[Array, "panels 3"]
    s3: Float[Array, "panels 3"]
    r_SB_B: Float[Array, "panels 3"]


class MassProps(NamedTuple):
    """System mass properties about B in B (Basilisk `updateSCMassProps`)."""

    m_sc: Float[Array, ""]
    c_B: Float[Array, "3"]  # system CoM relative to B
    cPrime_B: Float[Array, "3"]  # body-frame derivative of c
    ISCPntB_B: Float[Array, "3 3"]
    ISCPrimePntB_B: Float[Array, "3 3"]
    IPntS_B: Float[Array, "panels 3 3"]  # panel inertia about S, B frame
    rPrime_SB_B: Float[Array, "panels 3"]  # body-frame derivative of r_S/B


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


def panel_inertia_diag(panels: Panels) -> Float[Array, "panels 3"]:
    """$(I_{s1}, I_{s2}, I_{s3})$: the diagonal of `IPntS_S` (Basilisk assumes it diagonal)."""
    return jnp.diagonal(panels.IPntS_S, axis1=-2, axis2=-1)


def panel_geometry(panels: Panels, theta: Float[Array, " panels"]) -> PanelGeometry:
    dcm_SB = _mm(m2(theta), panels.dcm_HB)
    s1, s2, s3 = dcm_SB[:, 0, :], dcm_SB[:, 1, :], dcm_SB[:, 2, :]
    r_SB_B = panels.r_HB_B - panels.d[:, None] * s1
    return PanelGeometry(dcm_SB, s1, s2, s3, r_SB_B)


def _rrT(r):
    """$\\tilde r \\tilde r^T = |r|^2 I - r r^T$ (batched)."""
    eye = jnp.eye(3, dtype=r.dtype)
    return _dot(r, r)[..., None, None] * eye - r[..., :, None] * r[..., None, :]


def mass_properties(
    spacecraft: Spacecraft, geom: PanelGeometry, thetaDot: Float[Array, " panels"]
) -> MassProps:
    hub, p = spacecraft.hub, spacecraft.panels
    Is = panel_inertia_diag(p)
    m_sc = hub.mHub + jnp.sum(p.mass)
    c_B = (hub.mHub * hub.r_BcB_B + jnp.sum(p.mass[:, None] * geom.r_SB_B, 0)) / m_sc
    rPrime_SB_B = (p.d * thetaDot)[:, None] * geom.s3
    cPrime_B = jnp.sum(p.mass[:, None] * rPrime_SB_B, 0) / m_sc
    # [BS] diag(I) [SB] = sum_i I_i s_i s_i^T
    IPntS_B = (
        Is[:, 0, None, None] * _outer(geom.s1, geom.s1)
        + Is[:, 1, None, None] * _outer(geom.s2, geom.s2)
        + Is[:, 2, None, None] * _outer(geom.s3, geom.s3)
    )
    ISC = (
        hub.IHubPntBc_B
        + hub.mHub * _rrT(hub.r_BcB_B)
        + jnp.sum(IPntS_B + p.mass[:, None, None] * _rrT(geom.r_SB_B), 0)
    )
    s13 = _outer(geom.s1, geom.s3)
    # tilde(r')tilde(r) + tilde(r)tilde(r') = r r'^T + r' r^T - 2 (r . r') I
    r, rp = geom.r_SB_B, rPrime_SB_B
    rpt_rt = _outer(r, rp) + _outer(rp, r) - 2.0 * _dot(r, rp)[:, None, None] * jnp.eye(3, dtype=r.dtype)
    ISCPrime = jnp.sum(
        (thetaDot * (Is[:, 2] - Is[:, 0]))[:, None, None] * (s13 + jnp.swapaxes(s13, -1, -2))
        - p.mass[:, None, None] * rpt_rt,
        0,
    )
    return MassProps(m_sc, c_B, cPrime_B, ISC, ISCPrime, IPntS_B, rPrime_SB_B)


def gravity_B(spacecraft: Spacecraft, state: State, dcm_BN, c_B) -> Float[Array, "3"]:
    """Uniform gravity acceleration in B, evaluated at the system CoM (Basilisk's convention)."""
    if spacecraft.gravity is None:
        return jnp.zeros(3, dtype=c_B.dtype)
    r_CN_N = state.r_BN_N + _mtv(dcm_BN, c_B)
    r2 = _dot(r_CN_N, r_CN_N)
    return _mv(dcm_BN, -spacecraft.gravity.mu * r_CN_N / (r2 * jnp.sqrt(r2)))


def panel_contributions(
    spacecraft: Spacecraft,
    state: State,
    geom: PanelGeometry,
    g_B: Float[Array, "3"],
    u: Float[Array, " panels"],
) -> BackSub:
    """Per-panel $a_\\theta, b_\\theta, c_\\theta$ and their summed contributions to A, B, C, D, v_trans, v_rot."""
    p = spacecraft.panels
    omega = state.omega_BN_B
    Is = panel_inertia_diag(p)
    md = p.mass * p.d
    Itheta = Is[:, 1] + md * p.d
    aTheta = -(md / Itheta)[:, None] * geom.s3
    bTheta = -(Itheta[:, None] * geom.s2 + md[:, None] * jnp.cross(p.r_HB_B, geom.s3)) / Itheta[:, None]
    omega_S = _mv(geom.dcm_SB, omega)  # (panels, 3)
    gravTorquePntH = -p.d[:, None] * jnp.cross(geom.s1, p.mass[:, None] * g_B)
    w_x_w_x_rH = jnp.cross(omega, jnp.cross(omega, p.r_HB_B))
    cTheta = (
        u
        - p.k * (state.theta - p.thetaRef)
        - p.c * (state.thetaDot - p.thetaDotRef)
        + _dot(geom.s2, gravTorquePntH)
        + (Is[:, 2] - Is[:, 0] + md * p.d) * omega_S[:, 2] * omega_S[:, 0]
        - md * _dot(geom.s3, w_x_w_x_rH)
    ) / Itheta
    f = Is[:, 1:2] * geom.s2 + md[:, None] * jnp.cross(geom.r_SB_B, geom.s3)  # rotThetaFactor
    mds3 = md[:, None] * geom.s3
    td2 = state.thetaDot**2
    A = jnp.sum(_outer(mds3, aTheta), 0)
    B = jnp.sum(_outer(mds3, bTheta), 0)
    C = jnp.sum(_outer(f, aTheta), 0)
    D = jnp.sum(_outer(f, bTheta), 0)
    v_trans = -jnp.sum((md * td2)[:, None] * geom.s1 + (md * cTheta)[:, None] * geom.s3, 0)
    v_rot = -jnp.sum(
        state.thetaDot[:, None] * jnp.cross(omega, f)
        + cTheta[:, None] * f
        + (md * td2)[:, None] * jnp.cross(geom.r_SB_B, geom.s1),
        0,
    )
    return BackSub(A, B, C, D, v_trans, v_rot, aTheta, bTheta, cTheta)


def _cofactors(M: Float[Array, "3 3"]) -> tuple[Float[Array, "3 3"], Float[Array, ""]]:
    """Adjugate and determinant of a 3x3 matrix, closed form (as Eigen's fixed-size `inverse()` used by
    Basilisk): `M^{-1} = adj / det`. No LAPACK call: it fuses with the surrounding elementwise work."""
    a, b, c = M[0], M[1], M[2]
    adj_T = jnp.stack([jnp.cross(b, c), jnp.cross(c, a), jnp.cross(a, b)])  # rows: cofactor rows
    det = _dot(a, adj_T[0])
    return adj_T.T, det


def _solve3(M: Float[Array, "3 3"], rhs: Float[Array, "3 ..."]) -> Float[Array, "3 ..."]:
    """$M^{-1}$ rhs for a 3x3 `M`, closed form (`rhs` a vector or a 3xk matrix)."""
    adj, det = _cofactors(M)
    return (_mv(adj, rhs) if rhs.ndim == 1 else _mm(adj, rhs)) / det


def hub_solve(bs: BackSub) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
    """Solve $[A\\ B; C\\ D][\\ddot r_B; \\dot\\omega] = [v_{trans}; v_{rot}]$ through the Schur complement,
    with closed-form 3x3 inverses (Basilisk: `omegaDot = (D - C A^{-1} B)^{-1} (v_rot - C A^{-1} v_trans)`).

    Returns $\\ddot r_{B/N}$ in **B** components and $\\dot\\omega_{BN}$ in B."""
    adjA, detA = _cofactors(bs.A)
    Ainv_vt = _mv(adjA, bs.v_trans) / detA
    Ainv_B = _mm(adjA, bs.B) / detA
    omegaDot = _solve3(bs.D - _mm(bs.C, Ainv_B), bs.v_rot - _mv(bs.C, Ainv_vt))
    rDDot_B = Ainv_vt - _mv(Ainv_B, omegaDot)
    return rDDot_B, omegaDot


def accelerations(
    spacecraft: Spacecraft,
    state: State,
    extForce_B: Float[Array, "3"],
    extForce_N: Float[Array, "3"],
    extTorquePntB_B: Float[Array, "3"],
    u_extra: Float[Array, " panels"] | float = 0.0,
) -> tuple[Float[Array, "3"], Float[Array, "3"], Float[Array, " panels"]]:
    """Back-substitution accelerations of one configuration.

    **Arguments:**

    - `spacecraft`: the model; `state`: the current `State`.
    - `extForce_B` [N, B frame], `extForce_N` [N, N frame]: external force through B;
      `extTorquePntB_B` [N m]: external torque about B, B frame.
    - `u_extra` [N m]: hinge motor torque added to `panels.motorTorque`.

    **Returns:** `(rDDot_BN_N, omegaDot_BN_B, thetaDDot)`: hub point acceleration (N frame), hub angular
    acceleration (B frame), hinge angular accelerations.
    """
    dcm_BN = mrp_to_dcm(state.sigma_BN)
    chains = spacecraft.chains
    if chains:  # chain hook (static): single panels first in the hinge vectors, then chain panels
        nS = spacecraft.panels.count
        full_state, theta_c, thetaDot_c = state, state.theta[nS:], state.thetaDot[nS:]
        state = State(state.r_BN_N, state.v_BN_N, state.sigma_BN, state.omega_BN_B,
                      state.theta[:nS], state.thetaDot[:nS])
        u_extra = jnp.broadcast_to(jnp.asarray(u_extra, dtype=float), full_state.theta.shape)
        u_extra, u_c = u_extra[:nS], u_extra[nS:]
        cgeoms = _chains.chain_geometries(chains, theta_c, thetaDot_c)
    geom = panel_geometry(spacecraft.panels, state.theta)
    mp = mass_properties(spacecraft, geom, state.thetaDot)
    if chains:
        mp = _chains.add_chain_mass(mp, _chains.chain_mass(chains, cgeoms))
    g_B = gravity_B(spacecraft, state, dcm_BN, mp.c_B)
    u = spacecraft.panels.motorTorque + u_extra
    bs = panel_contributions(spacecraft, state, geom, g_B, u)
    if chains:
        bs, ccoeffs = _chains.chain_contributions(
            chains, cgeoms, theta_c, thetaDot_c, state.omega_BN_B, g_B, u_c, bs
        )
    omega = state.omega_BN_B
    m_sc, c_B, cP = mp.m_sc, mp.c_B, mp.cPrime_B
    ct = tilde(c_B)
    F_B = m_sc * g_B + _mv(dcm_BN, extForce_N) + extForce_B
    eye = jnp.eye(3, dtype=c_B.dtype)
    bs = bs._replace(
        A=bs.A + m_sc * eye,
        B=bs.B - m_sc * ct,
        C=bs.C + m_sc * ct,
        D=bs.D + mp.ISCPntB_B,
        v_trans=bs.v_trans
        - 2.0 * m_sc * jnp.cross(omega, cP)
        - m_sc * jnp.cross(omega, jnp.cross(omega, c_B))
        + F_B,
        v_rot=bs.v_rot
        - jnp.cross(omega, _mv(mp.ISCPntB_B, omega))
        - _mv(mp.ISCPrimePntB_B, omega)
        + jnp.cross(c_B, m_sc * g_B)
        + extTorquePntB_B,
    )
    rDDot_B, omegaDot = hub_solve(bs)
    thetaDDot = _dot(bs.aTheta, rDDot_B) + _dot(bs.bTheta, omegaDot) + bs.cTheta
    if chains:
        thetaDDot = jnp.concatenate([thetaDDot, _chains.chain_thetaDDot(ccoeffs, rDDot_B, omegaDot)])
    return _mtv(dcm_BN, rDDot_B), omegaDot, thetaDDot


def state_derivative(t, state: State, args) -> State:
    """The diffrax vector field. `args = (spacecraft, loads, t_hold)`; loads are evaluated at `t_hold`
    (zero-order hold over an rk4 step, set by `MRPSwitch`) when it is not `None`, else at `t`."""
    spacecraft, loads, t_hold = args
    t_load = t if t_hold is None else t_hold
    f_b, f_n, tq, u = loads.at(t_load)
    return state_derivative_held(spacecraft, state, f_b, f_n, tq, u)


def state_derivative_held(spacecraft: Spacecraft, state: State, f_b, f_n, tq, u) -> State:
    """$\\dot y$ for given loads `(extForce_B, extForce_N, extTorquePntB_B, u_extra)` (see `accelerations`)."""
    rDDot_N, omegaDot, thetaDDot = accelerations(spacecraft, state, f_b, f_n, tq, u)
    return State(
        r_BN_N=state.v_BN_N,
        v_BN_N=rDDot_N,
        sigma_BN=0.25 * _mv(mrp_bmat(state.sigma_BN), state.omega_BN_B),
        omega_BN_B=omegaDot,
        theta=state.thetaDot,
        thetaDot=thetaDDot,
    )
