"""The model: a rigid hub with N hinged rigid panels, as immutable pytrees.

Every physical parameter is an array leaf (fit it, `vmap` over it, differentiate with respect to it).
Panels are stacked along a leading `panels` axis so one vectorised code path serves any N. Field names,
frames and units are Basilisk's (`hingedRigidBodyStateEffector`, `HubEffector`): SI units, radians.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


def _f64(x):
    return jnp.asarray(x, dtype=float)


class Hub(eqx.Module):
    """Rigid hub (Basilisk `HubEffector`).

    - `mHub`: hub mass [kg].
    - `IHubPntBc_B`: hub inertia about its own CoM $B_c$, B-frame components [kg m^2] (symmetric 3x3).
    - `r_BcB_B`: hub CoM relative to the body point B, B frame [m].
    """

    mHub: Float[Array, ""] = eqx.field(converter=_f64)
    IHubPntBc_B: Float[Array, "3 3"] = eqx.field(converter=_f64)
    r_BcB_B: Float[Array, "3"] = eqx.field(converter=_f64)


class Panels(eqx.Module):
    """Hinged rigid panels (Basilisk `HingedRigidBodyStateEffector`), stacked along a leading axis.

    - `mass`: panel mass [kg].
    - `IPntS_S`: inertia about the panel CoM S in the panel frame S [kg m^2]; only its diagonal
      $(I_{s1}, I_{s2}, I_{s3})$ is used, as in Basilisk.
    - `d`: hinge point H to panel CoM S distance [m]; the CoM lies at $r_{H/B} - d\\,\\hat s_1$.
    - `k`: torsional spring stiffness [N m/rad]; `c`: torsional damping [N m s/rad].
    - `r_HB_B`: hinge point H relative to B, B frame [m].
    - `dcm_HB`: $[HB]$, rows are $\\hat h_1, \\hat h_2, \\hat h_3$ in B components; the hinge axis is $\\hat h_2$
      and $[SH] = M_2(\\theta)$.
    - `thetaRef`, `thetaDotRef`: spring and damper reference angle [rad] and rate [rad/s].
    - `motorTorque`: constant hinge motor torque $u$ about $\\hat h_2$ [N m].
    - `names`: panel names (static), used for outputs and fit parameter names.
    """

    mass: Float[Array, " panels"] = eqx.field(converter=_f64)
    IPntS_S: Float[Array, "panels 3 3"] = eqx.field(converter=_f64)
    d: Float[Array, " panels"] = eqx.field(converter=_f64)
    k: Float[Array, " panels"] = eqx.field(converter=_f64)
    c: Float[Array, " panels"] = eqx.field(converter=_f64)
    r_HB_B: Float[Array, "panels 3"] = eqx.field(converter=_f64)
    dcm_HB: Float[Array, "panels 3 3"] = eqx.field(converter=_f64)
    thetaRef: Float[Array, " panels"] = eqx.field(converter=_f64)
    thetaDotRef: Float[Array, " panels"] = eqx.field(converter=_f64)
    motorTorque: Float[Array, " panels"] = eqx.field(converter=_f64)
    names: tuple[str, ...] = eqx.field(static=True, default=())

    @property
    def count(self) -> int:
        return self.mass.shape[-1]


class PointMassGravity(eqx.Module):
    """Point-mass gravity applied as Basilisk does: a uniform field evaluated at the system CoM C,
    plus each panel's gravity torque about its hinge. `mu` is the gravitational parameter [m^3/s^2]."""

    mu: Float[Array, ""] = eqx.field(converter=_f64)


class Spacecraft(eqx.Module):
    """Hub + panels (+ optional gravity) (+ optional chains of panels, a tuple of `_chains.Chain`).
    Structure (number of panels, chain lengths, gravity on/off) is static. Hinge vectors (`State.theta`, ...)
    hold the single panels first, then the chain panels chain by chain, root first."""

    hub: Hub
    panels: Panels
    gravity: PointMassGravity | None = None
    chains: tuple = ()


class InitialState(eqx.Module):
    """Initial conditions with Basilisk's names. Position and velocity are those of the **system CoM C**
    (`r_CN_NInit`, `v_CN_NInit`, N frame); the hub state is derived from them as Basilisk does.

    - `sigma_BNInit`: MRP attitude of B relative to N; `omega_BN_BInit`: body rate, B frame [rad/s].
    - `thetaInit` [rad], `thetaDotInit` [rad/s]: per panel.
    """

    r_CN_NInit: Float[Array, "3"] = eqx.field(converter=_f64)
    v_CN_NInit: Float[Array, "3"] = eqx.field(converter=_f64)
    sigma_BNInit: Float[Array, "3"] = eqx.field(converter=_f64)
    omega_BN_BInit: Float[Array, "3"] = eqx.field(converter=_f64)
    thetaInit: Float[Array, " panels"] = eqx.field(converter=_f64)
    thetaDotInit: Float[Array, " panels"] = eqx.field(converter=_f64)


class State(eqx.Module):
    """Integrated state (the diffrax `y`): hub point B position/velocity in N, MRP $\\sigma_{BN}$,
    body rate $\\omega_{BN}$ in B, hinge angles and rates."""

    r_BN_N: Float[Array, "3"]
    v_BN_N: Float[Array, "3"]
    sigma_BN: Float[Array, "3"]
    omega_BN_B: Float[Array, "3"]
    theta: Float[Array, " panels"]
    thetaDot: Float[Array, " panels"]
