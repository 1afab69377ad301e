"""Energy, momentum, system CoM and per-panel inertial states, with Basilisk's definitions
(`Spacecraft::computeEnergyMomentum`, `HingedRigidBodyStateEffector::updateEnergyMomContributions`,
the panel config-log message)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._math import cross3, dcm_to_mrp, dot3, mm3, mrp_to_dcm, mtv3, mv3
from .._model._spacecraft import InitialState, Spacecraft, State
from ._backsub import hinge_geometry, mass_properties


class Diagnostics(NamedTuple):
    """Outputs of one state (Basilisk names). Energies [J], momenta [kg m^2/s], positions [m], velocities [m/s]."""

    r_CN_N: Float[Array, "3"]
    v_CN_N: Float[Array, "3"]
    totOrbEnergy: Float[Array, ""]
    totRotEnergy: Float[Array, ""]
    totOrbAngMomPntN_N: Float[Array, "3"]
    totRotAngMomPntC_N: Float[Array, "3"]
    panel_r_SN_N: Float[Array, "panels 3"]
    panel_v_SN_N: Float[Array, "panels 3"]
    panel_sigma_SN: Float[Array, "panels 3"]
    panel_omega_SN_S: Float[Array, "panels 3"]
    panel_r_HN_N: Float[Array, "panels 3"]


# A nested `jit`: JAX traces the function once per model structure and reuses that trace (and its derivatives and
# batched forms) in every program that calls it, instead of re-tracing the same arithmetic for each simulation,
# gradient or Jacobian program (tracing is a large part of those programs' build time); the compiled code is
# unchanged.
@jax.jit
def diagnostics(spacecraft: Spacecraft, state: State) -> Diagnostics:
    r"""Energy and momentum about the system CoM C, CoM state, and panel inertial states, of one state.

    - with wheels, `totRotEnergy` and `totRotAngMomPntC_N` include theirs as Basilisk does:
      $\frac12 J_s\Omega^2 + J_s\Omega\,\hat g_s^T\omega$ and $J_s\Omega\,\hat g_s$.
    - `totRotEnergy` includes the spring energy $\frac12 k(\theta-\theta_{ref})^2$ of every hinge (on its
      relative angle); gravity potential $-\mu m/|r_C|$ is in `totOrbEnergy` (as Basilisk).
    - `panel_*`: Basilisk's `hingedRigidBodyConfigLogOutMsg` read as "body = panel frame S": CoM position
      and velocity in N, $\sigma_{SN}$, $\omega_{SN}$ in S components, one row per panel; `panel_r_HN_N`: each
      panel's hinge point H in N (Basilisk publishes it as `r_HN_N` for effectors attached to the panel).
    """
    hub, p = spacecraft.hub, spacecraft.panels
    dcm_BN = mrp_to_dcm(state.sigma_BN)
    omega = state.omega_BN_B
    geom = hinge_geometry(p, state.theta, state.thetaDot)
    mp = mass_properties(spacecraft, geom)
    m_sc, c_B = mp.m_sc, mp.c_B
    cDot_B = mp.cPrime_B + cross3(omega, c_B)

    # hub about its own CoM, shifted to B (Basilisk computes "about C" contributions relative to B, then
    # subtracts the CoM terms below)
    w_x_rBc = cross3(omega, hub.r_BcB_B)
    Iw_hub = mv3(hub.IHubPntBc_B, omega)
    H_B = Iw_hub + hub.mHub * cross3(hub.r_BcB_B, w_x_rBc)
    E_rot = 0.5 * dot3(omega, Iw_hub) + 0.5 * hub.mHub * dot3(w_x_rBc, w_x_rBc)

    omega_SN_B = omega + geom.w[:, None] * geom.s2
    rDot_SB_B = geom.rPrime_SB_B + cross3(omega, geom.r_SB_B)
    Iw = mv3(mp.IPntS_B, omega_SN_B)
    H_B = H_B + jnp.sum(Iw + p.mass[:, None] * cross3(geom.r_SB_B, rDot_SB_B), 0)
    E_rot = E_rot + jnp.sum(0.5 * dot3(omega_SN_B, Iw) + 0.5 * p.mass * dot3(rDot_SB_B, rDot_SB_B)
                            + 0.5 * p.k * (state.theta - p.thetaRef) ** 2)

    if spacecraft.wheels is not None:  # Basilisk `BalancedWheels`: the 1/2 Js (gs.omega)^2 part is in the hub's
        w = spacecraft.wheels
        JsOmega = w.Js * state.Omega
        H_B = H_B + jnp.sum(JsOmega[:, None] * w.gsHat_B, 0)
        E_rot = E_rot + jnp.sum(0.5 * JsOmega * state.Omega + JsOmega * dot3(w.gsHat_B, omega))

    rDot_B = mv3(dcm_BN, state.v_BN_N)
    r_CN_N = state.r_BN_N + mtv3(dcm_BN, c_B)
    v_CN_N = state.v_BN_N + mtv3(dcm_BN, cDot_B)
    E_orb = 0.5 * m_sc * (dot3(rDot_B, rDot_B) + 2.0 * dot3(rDot_B, cDot_B) + dot3(cDot_B, cDot_B))
    if spacecraft.gravity is not None:
        E_orb = E_orb - m_sc * spacecraft.gravity.mu / jnp.sqrt(dot3(r_CN_N, r_CN_N))
    E_rot = E_rot - 0.5 * m_sc * dot3(cDot_B, cDot_B)
    H_B = H_B - m_sc * cross3(c_B, cDot_B)

    # elementwise 3x3 algebra (`_backsub`'s helpers): no separate matrix-product kernels
    panel_r = state.r_BN_N + mtv3(dcm_BN, geom.r_SB_B)
    panel_v = state.v_BN_N + mtv3(dcm_BN, rDot_SB_B)
    dcm_SN = mm3(geom.dcm_SB, dcm_BN)
    return Diagnostics(
        r_CN_N=r_CN_N, v_CN_N=v_CN_N, totOrbEnergy=E_orb, totRotEnergy=E_rot,
        totOrbAngMomPntN_N=m_sc * cross3(r_CN_N, v_CN_N), totRotAngMomPntC_N=mtv3(dcm_BN, H_B),
        panel_r_SN_N=panel_r, panel_v_SN_N=panel_v, panel_sigma_SN=dcm_to_mrp(dcm_SN),
        panel_omega_SN_S=mv3(geom.dcm_SB, omega_SN_B), panel_r_HN_N=state.r_BN_N + mtv3(dcm_BN, geom.r_HB_B),
    )


def initial_state(spacecraft: Spacecraft, initial: InitialState) -> State:
    """Hub state from the user's system-CoM initial conditions (Basilisk `Spacecraft::initializeDynamics`):
    $r_{B/N} = r_{C/N} - [NB]c$, $v_{B/N} = v_{C/N} - [NB](c' + \\omega\\times c)$ at the initial angles."""
    dcm_NB = mrp_to_dcm(initial.sigma_BNInit).T
    geom = hinge_geometry(spacecraft.panels, initial.thetaInit, initial.thetaDotInit)
    mp = mass_properties(spacecraft, geom)
    cDot_B = mp.cPrime_B + cross3(initial.omega_BN_BInit, mp.c_B)
    return State(
        r_BN_N=initial.r_CN_NInit - dcm_NB @ mp.c_B,
        v_BN_N=initial.v_CN_NInit - dcm_NB @ cDot_B,
        sigma_BN=initial.sigma_BNInit,
        omega_BN_B=initial.omega_BN_BInit,
        theta=initial.thetaInit,
        thetaDot=initial.thetaDotInit,
        Omega=None if spacecraft.wheels is None else (
            initial.OmegaInit if initial.OmegaInit is not None else jnp.zeros_like(spacecraft.wheels.Js)),
    )


def total_inertia_B(spacecraft: Spacecraft, theta) -> Float[Array, "3 3"]:
    """The spacecraft's inertia about B [kg m^2, B frame], hub and panels at hinge angles `theta` (Basilisk's
    `ISCPntB_B`; the wheels' are in the hub's): the default controller inertia model (`Control.ISCPntB_B`)."""
    theta = jnp.asarray(theta, dtype=jnp.result_type(spacecraft.hub.mHub))
    geom = hinge_geometry(spacecraft.panels, theta, jnp.zeros_like(theta))
    return mass_properties(spacecraft, geom).ISCPntB_B
