"""How closely jaxhinge's trajectories must match Basilisk's (bsk 2.12.1): one tolerance per quantity, used by the
comparisons with tests/data/bsk/*.npz (test_basilisk_reference.py) and tests/data/basilisk_csv/*.csv
(test_basilisk_seed.py).

Both codes integrate the same equations with the same fixed-step RK4 at the same step in float64, so they agree
to round-off: only the order of the floating-point operations differs (Eigen in Basilisk, XLA here), and the
rounding differences random-walk over the 100-10 000 steps of a run. The "measured" figures below are the largest
|jaxhinge - Basilisk| over all 16 .npz cases and the 3 CSVs (2026-11, x86-64 CPU, jax 0.10.2); each tolerance
is about 10x that, so other CPUs and XLA versions (other fusions, FMA) still pass, while any modelling
difference fails (a wrong term changes a trajectory far above 1e-12).

Positions and velocities are compared absolutely, in m and m/s, never relative to an orbit radius: the allowed
error is the tolerance plus ULPS float64 spacings of the vector's length at that sample. The spacing term matters
only in orbit, where it is the finest two stored coordinates can agree: at |r| = 7e6 m one spacing is 9.3e-10 m,
at |v| = 7.5e3 m/s 9.1e-13 m/s (measured: 1 spacing in position, 2 in velocity; off orbit it is ~1e-16).
"""

import numpy as np

ULPS = 8  # float64 spacings of |r|, |v|, t allowed on top of ABS (measured at most 2)

# quantity: (absolute tolerance, unit, measured largest error off orbit)
ABS = {
    "t": (0.0, "s", "1 spacing of t: k save_dt rounded vs Basilisk's integer ns x 1e-9"),
    # positions: 1.0e-13 m (r_BN_N 9.9e-14, panel_r_SN_N 1.01e-13) in the closed-loop control_torque case (60 s,
    # 60 000 rk4 steps, the hub translating under the controller's torque), ~7e-15 m in the open-loop cases
    "r_BN_N": (1e-12, "m", "9.9e-14 m (control_torque) off orbit, 1 spacing of |r| in orbit"),
    "r_CN_N": (1e-12, "m", "6.2e-15 m off orbit, 1 spacing of |r| in orbit"),
    "panel_r_SN_N": (1e-12, "m", "1.01e-13 m (control_torque) off orbit, 1 spacing of |r| in orbit"),
    "v_BN_N": (5e-14, "m/s", "1.0e-15 m/s off orbit, 2 spacings of |v| in orbit"),
    "v_CN_N": (5e-14, "m/s", "8.3e-16 m/s off orbit, 2 spacings of |v| in orbit"),
    "panel_v_SN_N": (5e-14, "m/s", "3.9e-15 m/s off orbit, 2 spacings of |v| in orbit"),
    "sigma_BN": (2e-14, "(MRP)", "1.6e-15 (MRP ~ rotation angle / 4)"),
    "panel_sigma_SN": (2e-14, "(MRP)", "2.2e-15"),
    "omega_BN_B": (2e-14, "rad/s", "1.5e-15 rad/s"),
    "panel_omega_SN_S": (1e-13, "rad/s", "6.9e-15 rad/s"),
    "theta": (3e-14, "rad", "2.6e-15 rad"),
    "thetaDot": (1e-13, "rad/s", "8.1e-15 rad/s"),
    "Omega": (1e-10, "rad/s", "9.1e-12 rad/s (control_wheels: wheels driven by the controller for 60 s, |Omega| ~ "
              "500 rad/s; 5.7e-13 in the open-loop wheels_mixed)"),
    # with a controller in the loop ([control], control_*.npz): attTrackingError's and mrpFeedback's outputs
    "sigma_BR": (2e-14, "(MRP)", "1.6e-15"),
    "omega_BR_B": (2e-14, "rad/s", "3.1e-16 rad/s"),
    "Lr": (5e-12, "N m", "6.6e-13 N m of ~3 N m (K sigma_BR, K = 20 N m)"),
}
VECTOR = {"r_BN_N", "r_CN_N", "panel_r_SN_N", "v_BN_N", "v_CN_N", "panel_v_SN_N"}  # spacing of |vector|

# Energies and momenta: relative to the quantity's largest |value| over the run (all components), or to FLOOR
# where that is smaller. Floors: in the motor-torque case the system's orbital energy and both momenta are
# physically 0 (the motor torque is internal, the CoM stays at rest) and Basilisk prints round-off (1e-16 J,
# 1e-28 and 1e-13 N m s; the rotational one is the cancellation of the hub's and the driven panel's ~30 N m s), so
# there the comparison is absolute, tolerance x floor.
# quantity: (relative tolerance, floor, unit, measured largest relative error)
REL = {
    "totOrbEnergy": (1e-13, 1.0, "J", "5.1e-14 (control_wheels: 60 000 steps; 2.2e-15 in the shorter open-loop cases)"),
    "totRotEnergy": (3e-14, 1.0, "J", "3.6e-15"),
    # r_C x m v_C: the product of position and velocity round-off, relative to a vector that can be much
    # shorter than m |r_C| |v_C| (random3d_04: 4e-12 N m s of 67 N m s)
    "totOrbAngMomPntN_N": (5e-13, 1.0, "N m s", "6.0e-14"),
    "totRotAngMomPntC_N": (1e-13, 10.0, "N m s", "6.8e-15 (motor-torque CSV, 6.8e-14 N m s on the 10 N m s floor)"),
}
CONTROL_KEYS = ("sigma_BR", "omega_BR_B", "Lr")
KEYS = tuple(k for k in ABS if k != "Omega" and k not in CONTROL_KEYS) + tuple(REL)  # every case; "Omega": with
# wheels; CONTROL_KEYS: with a controller


def allowed(key, want):
    """Allowed |jaxhinge - Basilisk| for `key`, elementwise (broadcast against Basilisk's values `want`)."""
    want = np.asarray(want, dtype=float)
    if key in REL:
        tol, floor, _, _ = REL[key]
        return tol * max(float(np.abs(want).max(initial=0.0)), floor)
    atol = ABS[key][0]
    if key in VECTOR:
        return atol + ULPS * np.spacing(np.linalg.norm(want, axis=-1, keepdims=True))
    if key == "t":
        return atol + ULPS * np.spacing(np.abs(want))
    return atol


def worst(got, want):
    """{key: largest |got - want| / allowed} over the keys of `want` (dicts of arrays); every value must be <= 1."""
    out = {}
    for key, w in want.items():
        g, w = np.asarray(got[key], dtype=float), np.asarray(w, dtype=float)
        assert g.shape == w.shape, (key, g.shape, w.shape)
        out[key] = float((np.abs(g - w) / allowed(key, w)).max(initial=0.0))
    return out
