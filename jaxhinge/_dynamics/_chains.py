r"""Chains of hinged panels (folding arrays): the N-hinged back-substitution model, non-identical panels.

A chain is $L$ rigid panels hinged edge to edge; panel 1 is hinged to the hub at $H_1$ (`r_HB_B`, `dcm_HB`),
panel $j+1$ to panel $j$ at $H_{j+1} = H_j - l_j \hat s_{j,1}$. All hinge axes are parallel to $\hat h_2$
(as in Basilisk's `nHingedRigidBodyStateEffector` and `dualHingedRigidBodyStateEffector`). Angles are
**relative** (Basilisk's convention): $\theta_j$ is panel $j$'s rotation from panel $j-1$ (from the hinge
frame H for $j=1$), so the absolute panel angle is $\phi_j = \sum_{k\le j}\theta_k$ and

$$[S_jB] = M_2(\phi_j)[HB],\qquad r_{S_j/B} = r_{H/B} - \sum_{k<j} l_k \hat s_{k,1} - d_j \hat s_{j,1}
= r_{H/B} - \sum_k a_{jk}\hat s_{k,1},$$

with the lever matrix $a_{jk} = l_k$ ($k<j$), $d_j$ ($k=j$), $0$ ($k>j$). With $w = \dot\phi = T\dot\theta$
($T$ the lower-triangular matrix of ones): $r'_{S_j} = \sum_k a_{jk} w_k \hat s_{k,3}$ and
$r''_{S_j} = \sum_k a_{jk}(\dot w_k \hat s_{k,3} + w_k^2 \hat s_{k,1})$.

**Panel equations** (Kane, speeds $w$; partial velocity of $S_i$ w.r.t. $w_j$ is $a_{ij}\hat s_{j,3}$, partial
angular velocity $\delta_{ij}\hat h_2$), then projected on the relative speeds with $T^T$:

$$[T^T M_w T]\,\ddot\theta = -[T^T F]\,\ddot r_{B} - [T^T G]\,\dot\omega + Q_\theta - T^T v_w,$$

- $M_{w,jk} = \sum_i m_i a_{ij} a_{ik}\,\hat s_{j,3}\cdot\hat s_{k,3} + \delta_{jk} I_{s_j,2}$,
- $F_j = (\sum_i m_i a_{ij})\,\hat s_{j,3}$, $G_j = \sum_i m_i a_{ij}\, r_{S_i/B}\times\hat s_{j,3} + I_{s_j,2}\hat s_{j,2}$,
- $v_{w,j} = \sum_i m_i a_{ij}\,\hat s_{j,3}\cdot(\omega\times\omega\times r_{S_i} + 2\omega\times r'_{S_i}
  + \textstyle\sum_k a_{ik} w_k^2 \hat s_{k,1} - g) + (I_{s_j,1} - I_{s_j,3})\,\omega_{s_j,1}\omega_{s_j,3}$,
- $Q_{\theta,j} = u_j - k_j(\theta_j - \theta_{ref,j}) - c_j(\dot\theta_j - \dot\theta_{ref,j})$.

So $\ddot\theta = a_\theta \ddot r_B + b_\theta\dot\omega + c_\theta$ (the seed's $E^{-1}(F, G, v)$, for any
panels). **Hub contributions** (in addition to the chain's mass terms in $m_{sc}, c, I_{sc}, I'_{sc}$):

$$A \mathrel{+}= F^T T a_\theta,\ B \mathrel{+}= F^T T b_\theta,\ C \mathrel{+}= G^T T a_\theta,\
D \mathrel{+}= G^T T b_\theta,$$
$$v_{trans} \mathrel{-}= F^T T c_\theta + \sum_i m_i r''_{S_i,w^2},\quad
v_{rot} \mathrel{-}= G^T T c_\theta + \sum_i \left[\omega\times(w_i I_{s_i,2}\hat s_{i,2}) + m_i\,\omega\times
(r_{S_i}\times r'_{S_i}) + m_i\, r_{S_i}\times r''_{S_i,w^2}\right].$$

Everything is vectorised over the panels of a chain; chains are a tuple (a Python loop over chains, whose
number and lengths are static).
"""

from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._math import m2, tilde
from .._model._spacecraft import _f64


class Chain(eqx.Module):
    """One chain of $L$ hinged panels (panel arrays stacked along the leading axis, root first).

    - `mass` [kg], `IPntS_S` (L,3,3) [kg m^2] (diagonal used), `d` [m]: as `Panels`, hinge $H_j$ to CoM $S_j$
      along $-\\hat s_{j,1}$.
    - `l` [m]: hinge $H_j$ to the next hinge $H_{j+1}$ along $-\\hat s_{j,1}$; the last entry is unused.
    - `k`, `c`, `thetaRef`, `thetaDotRef`, `motorTorque`: per hinge, acting on the **relative** angle.
    - `r_HB_B` (3,), `dcm_HB` (3,3): the first hinge on the hub; axis $\\hat h_2$ is every hinge's axis.
    - `name` (static): the chain name; `names` (static): its panel names.
    """

    mass: Float[Array, " L"] = eqx.field(converter=_f64)
    IPntS_S: Float[Array, "L 3 3"] = eqx.field(converter=_f64)
    d: Float[Array, " L"] = eqx.field(converter=_f64)
    l: Float[Array, " L"] = eqx.field(converter=_f64)
    k: Float[Array, " L"] = eqx.field(converter=_f64)
    c: Float[Array, " L"] = eqx.field(converter=_f64)
    r_HB_B: Float[Array, "3"] = eqx.field(converter=_f64)
    dcm_HB: Float[Array, "3 3"] = eqx.field(converter=_f64)
    thetaRef: Float[Array, " L"] = eqx.field(converter=_f64)
    thetaDotRef: Float[Array, " L"] = eqx.field(converter=_f64)
    motorTorque: Float[Array, " L"] = eqx.field(converter=_f64)
    name: str = eqx.field(static=True, default="chain")
    names: tuple[str, ...] = eqx.field(static=True, default=())

    @property
    def count(self) -> int:
        return self.mass.shape[-1]


def chain_count(chains) -> int:
    """Total number of chain panels (static)."""
    return sum(ch.count for ch in chains)


def split(chains, x):
    """Split the chain part of a per-panel vector `x` (chain panels only, chain by chain) into per-chain pieces."""
    out, i = [], 0
    for ch in chains:
        out.append(x[..., i : i + ch.count])
        i += ch.count
    return out


class ChainGeometry(NamedTuple):
    """Configuration and velocity-level kinematics of one chain, B frame."""

    dcm_SB: Float[Array, "L 3 3"]
    s1: Float[Array, "L 3"]
    s2: Float[Array, "L 3"]
    s3: Float[Array, "L 3"]
    a: Float[Array, "L L"]  # lever matrix
    w: Float[Array, " L"]  # absolute panel rates (relative to B)
    r_SB_B: Float[Array, "L 3"]
    rPrime_SB_B: Float[Array, "L 3"]
    rDDot_w2: Float[Array, "L 3"]  # the w^2 part of r''_S/B
    r_HB_B: Float[Array, "L 3"]  # each panel's hinge point
    rPrime_HB_B: Float[Array, "L 3"]


def chain_geometry(ch: Chain, theta: Float[Array, " L"], thetaDot: Float[Array, " L"]) -> ChainGeometry:
    L = ch.count
    phi = jnp.cumsum(theta)
    w = jnp.cumsum(thetaDot)
    dcm_SB = m2(phi) @ ch.dcm_HB
    s1, s2, s3 = dcm_SB[:, 0, :], dcm_SB[:, 1, :], dcm_SB[:, 2, :]
    lower = jnp.tril(jnp.ones((L, L), dtype=ch.l.dtype), -1)
    a = lower * ch.l[None, :] + jnp.diag(ch.d)
    r_SB_B = ch.r_HB_B - a @ s1
    rPrime = a @ (w[:, None] * s3)
    rDDot_w2 = a @ ((w * w)[:, None] * s1)
    r_HB_B = ch.r_HB_B - lower * ch.l[None, :] @ s1
    rPrime_HB_B = (lower * ch.l[None, :]) @ (w[:, None] * s3)
    return ChainGeometry(dcm_SB, s1, s2, s3, a, w, r_SB_B, rPrime, rDDot_w2, r_HB_B, rPrime_HB_B)


def _rrT(r):
    eye = jnp.eye(3, dtype=r.dtype)
    return jnp.sum(r * r, -1)[..., None, None] * eye - r[..., :, None] * r[..., None, :]


class ChainMass(NamedTuple):
    """Additive mass terms of the chains about B, B frame."""

    m: Float[Array, ""]
    m_r: Float[Array, "3"]  # first moment sum m r_S/B
    m_rPrime: Float[Array, "3"]  # sum m r'_S/B
    I_B: Float[Array, "3 3"]  # inertia about B
    IPrime_B: Float[Array, "3 3"]  # body-frame derivative of I_B


def chain_mass(chains, geoms) -> ChainMass:
    """Mass, first moment, inertia about B and their body-frame derivatives, summed over all chains."""
    m = m_r = m_rp = I = Ip = 0.0
    for ch, g in zip(chains, geoms):
        Is = jnp.diagonal(ch.IPntS_S, axis1=-2, axis2=-1)
        IPntS_B = jnp.einsum("nia,ni,nib->nab", g.dcm_SB, Is, g.dcm_SB)
        s13 = g.s1[:, :, None] * g.s3[:, None, :]
        rt, rpt = tilde(g.r_SB_B), tilde(g.rPrime_SB_B)
        m = m + jnp.sum(ch.mass)
        m_r = m_r + ch.mass @ g.r_SB_B
        m_rp = m_rp + ch.mass @ g.rPrime_SB_B
        I = I + jnp.sum(IPntS_B + ch.mass[:, None, None] * _rrT(g.r_SB_B), 0)
        Ip = Ip + jnp.sum(
            (g.w * (Is[:, 2] - Is[:, 0]))[:, None, None] * (s13 + jnp.swapaxes(s13, -1, -2))
            - ch.mass[:, None, None] * (rpt @ rt + rt @ rpt),
            0,
        )
    return ChainMass(m, m_r, m_rp, I, Ip)


def add_chain_mass(mp, cm: ChainMass):
    """`MassProps` of the hub + single panels with the chains' terms added (other fields unchanged)."""
    m_sc = mp.m_sc + cm.m
    c_B = (mp.m_sc * mp.c_B + cm.m_r) / m_sc
    cPrime_B = (mp.m_sc * mp.cPrime_B + cm.m_rPrime) / m_sc
    return mp._replace(
        m_sc=m_sc,
        c_B=c_B,
        cPrime_B=cPrime_B,
        ISCPntB_B=mp.ISCPntB_B + cm.I_B,
        ISCPrimePntB_B=mp.ISCPrimePntB_B + cm.IPrime_B,
    )


class ChainCoeffs(NamedTuple):
    """Back-substitution coefficients of one chain: $\\ddot\\theta = a_\\theta\\ddot r_B + b_\\theta\\dot\\omega + c_\\theta$."""

    aTheta: Float[Array, "L 3"]
    bTheta: Float[Array, "L 3"]
    cTheta: Float[Array, " L"]


def _one_chain(ch: Chain, g: ChainGeometry, theta, thetaDot, omega, g_B, u):
    L = ch.count
    m = ch.mass
    Is = jnp.diagonal(ch.IPntS_S, axis1=-2, axis2=-1)
    T = jnp.tril(jnp.ones((L, L), dtype=m.dtype))
    msum = m @ g.a  # (L,): sum_i m_i a_ij
    F = msum[:, None] * g.s3
    rxs3 = jnp.cross(g.r_SB_B[:, None, :], g.s3[None, :, :])  # (i, j, 3): r_Si x s3_j
    G = jnp.einsum("i,ij,ijx->jx", m, g.a, rxs3) + Is[:, 1:2] * g.s2
    Mw = jnp.einsum("i,ij,ik->jk", m, g.a, g.a) * (g.s3 @ g.s3.T) + jnp.diag(Is[:, 1])
    acc = (
        jnp.cross(omega, jnp.cross(omega, g.r_SB_B))
        + 2.0 * jnp.cross(omega, g.rPrime_SB_B)
        + g.rDDot_w2
        - g_B
    )
    omega_S = g.dcm_SB @ omega  # (L, 3); the hinge rate only adds to component 2
    vw = (
        jnp.einsum("i,ij,jx,ix->j", m, g.a, g.s3, acc) + (Is[:, 0] - Is[:, 2]) * omega_S[:, 0] * omega_S[:, 2]
    )
    Q = u - ch.k * (theta - ch.thetaRef) - ch.c * (thetaDot - ch.thetaDotRef)
    Mth = T.T @ Mw @ T
    rhs = jnp.concatenate([-(T.T @ F), -(T.T @ G), (Q - T.T @ vw)[:, None]], 1)
    sol = jnp.linalg.solve(Mth, rhs)
    coeffs = ChainCoeffs(sol[:, 0:3], sol[:, 3:6], sol[:, 6])
    FT = F.T @ T  # (3, L)
    GT = G.T @ T
    dA, dB, dC, dD = FT @ coeffs.aTheta, FT @ coeffs.bTheta, GT @ coeffs.aTheta, GT @ coeffs.bTheta
    dvt = -FT @ coeffs.cTheta - m @ g.rDDot_w2
    dvr = -GT @ coeffs.cTheta - jnp.sum(
        jnp.cross(omega, (g.w * Is[:, 1])[:, None] * g.s2)
        + m[:, None] * jnp.cross(omega, jnp.cross(g.r_SB_B, g.rPrime_SB_B))
        + m[:, None] * jnp.cross(g.r_SB_B, g.rDDot_w2),
        0,
    )
    return coeffs, (dA, dB, dC, dD, dvt, dvr)


def chain_contributions(chains, geoms, theta_c, thetaDot_c, omega, g_B, u_c, bs):
    """Add every chain's contributions to the hub's `BackSub` A..v_rot; return `(bs, [ChainCoeffs, ...])`.

    `theta_c`, `thetaDot_c`, `u_c`: the chain part of the hinge vectors (chain by chain, root first)."""
    coeffs = []
    for ch, g, th, thd, u in zip(
        chains, geoms, split(chains, theta_c), split(chains, thetaDot_c), split(chains, u_c)
    ):
        cf, (dA, dB, dC, dD, dvt, dvr) = _one_chain(ch, g, th, thd, omega, g_B, u + ch.motorTorque)
        coeffs.append(cf)
        bs = bs._replace(
            A=bs.A + dA, B=bs.B + dB, C=bs.C + dC, D=bs.D + dD, v_trans=bs.v_trans + dvt, v_rot=bs.v_rot + dvr
        )
    return bs, coeffs


def chain_thetaDDot(coeffs, rDDot_B, omegaDot):
    """Back-substitute the hub accelerations (B frame) into every chain: the chain part of `thetaDDot`."""
    return jnp.concatenate([cf.aTheta @ rDDot_B + cf.bTheta @ omegaDot + cf.cTheta for cf in coeffs])


def chain_geometries(chains, theta_c, thetaDot_c):
    return [
        chain_geometry(ch, th, thd)
        for ch, th, thd in zip(chains, split(chains, theta_c), split(chains, thetaDot_c))
    ]


def chain_energy_momentum(chains, geoms, theta_c, omega):
    """Rotational kinetic energy + spring energy about B and angular momentum about B (B frame) of the chains,
    relative-to-B velocities included (the caller subtracts the system CoM terms, as for single panels)."""
    H = jnp.zeros(3)
    E = 0.0
    for ch, g, th in zip(chains, geoms, split(chains, theta_c)):
        Is = jnp.diagonal(ch.IPntS_S, axis1=-2, axis2=-1)
        IPntS_B = jnp.einsum("nia,ni,nib->nab", g.dcm_SB, Is, g.dcm_SB)
        omega_SN_B = omega + g.w[:, None] * g.s2
        rDot = g.rPrime_SB_B + jnp.cross(omega, g.r_SB_B)
        Iw = jnp.einsum("nab,nb->na", IPntS_B, omega_SN_B)
        H = H + jnp.sum(Iw + ch.mass[:, None] * jnp.cross(g.r_SB_B, rDot), 0)
        E = E + jnp.sum(
            0.5 * jnp.sum(omega_SN_B * Iw, -1)
            + 0.5 * ch.mass * jnp.sum(rDot * rDot, -1)
            + 0.5 * ch.k * (th - ch.thetaRef) ** 2
        )
    return E, H


def chain_panel_states(chains, geoms, omega):
    """Per chain panel (concatenated): r_S/B, rDot_S/B (inertial derivative, B frame), [SB], omega_SN_B."""
    r = jnp.concatenate([g.r_SB_B for g in geoms])
    rDot = jnp.concatenate([g.rPrime_SB_B + jnp.cross(omega, g.r_SB_B) for g in geoms])
    dcm = jnp.concatenate([g.dcm_SB for g in geoms])
    w = jnp.concatenate([omega + g.w[:, None] * g.s2 for g in geoms])
    return r, rDot, dcm, w


# ------------------------------------------------------------------------------------------------------------
# Helpers over all hinges (single panels first, then chain panels) for modes, fits and names.
# ------------------------------------------------------------------------------------------------------------


def hinge_param(spacecraft, name: str):
    """Per-hinge parameter `name` over all hinges: `spacecraft.panels.<name>`, then each chain's."""
    return jnp.concatenate(
        [getattr(spacecraft.panels, name), *[getattr(ch, name) for ch in spacecraft.chains]]
    )


def chain_panel_names(chains) -> tuple[str, ...]:
    """Chain panel names, chain by chain, root first (default `<chain name>_<1-based position>`)."""
    out = []
    for ch in chains:
        names = tuple(ch.names)
        out += names if len(names) == ch.count else [f"{ch.name}_{j + 1}" for j in range(ch.count)]
    return tuple(out)


def with_hinge_params(spacecraft, **values):
    """`spacecraft` with per-hinge parameters (full all-hinge vectors) written back to panels and chains."""
    import equinox as eqx

    nS = spacecraft.panels.count
    panels = eqx.tree_at(
        lambda p: tuple(getattr(p, k) for k in values),
        spacecraft.panels,
        tuple(v[:nS] for v in values.values()),
    )
    chains, i = [], nS
    for ch in spacecraft.chains:
        chains.append(
            eqx.tree_at(
                lambda c: tuple(getattr(c, k) for k in values),
                ch,
                tuple(v[i : i + ch.count] for v in values.values()),
            )
        )
        i += ch.count
    return eqx.tree_at(lambda s: (s.panels, s.chains), spacecraft, (panels, tuple(chains)))


def chain_body_jacobians(chains, dof: int, offset: int):
    """Velocity Jacobians of every chain panel at its rest configuration ($\\theta = \\theta_{ref}$), as linear
    maps of $u = (v_B, \\omega, \\dot\\theta_{all})$ with the chain hinges from column `offset`; B = N at
    $\\sigma = 0$. Returns `(J_v, J_w, mass, inertia_B)` stacked over chain panels."""
    Jv, Jw, ms, Is_B = [], [], [], []
    col = offset
    for ch in chains:
        L = ch.count
        z = jnp.zeros(L, dtype=ch.mass.dtype)
        g = chain_geometry(ch, ch.thetaRef, z)
        T = jnp.tril(jnp.ones((L, L), dtype=ch.mass.dtype))
        eye = jnp.eye(3, dtype=ch.mass.dtype)
        # v_Si = v_B - r_Si x omega + sum_k a_ik s3_k (T thetaDot)_k
        dv_dth = jnp.einsum("ik,kx,kj->ixj", g.a, g.s3, T)  # (L, 3, L)
        dw_dth = g.s2[:, :, None] * T[:, None, :]  # (L, 3, L)
        jv = jnp.zeros((L, 3, dof), dtype=ch.mass.dtype)
        jv = jv.at[:, :, 0:3].set(eye).at[:, :, 3:6].set(-tilde(g.r_SB_B)).at[:, :, col : col + L].set(dv_dth)
        jw = jnp.zeros((L, 3, dof), dtype=ch.mass.dtype)
        jw = jw.at[:, :, 3:6].set(eye).at[:, :, col : col + L].set(dw_dth)
        Is = jnp.diagonal(ch.IPntS_S, axis1=-2, axis2=-1)
        Jv.append(jv)
        Jw.append(jw)
        ms.append(ch.mass)
        Is_B.append(jnp.einsum("nia,ni,nib->nab", g.dcm_SB, Is, g.dcm_SB))
        col += L
    return jnp.concatenate(Jv), jnp.concatenate(Jw), jnp.concatenate(ms), jnp.concatenate(Is_B)
