"""Generate the Basilisk chain references in tests/data/bsk/ (chain_*.toml + .npz).

Requires Basilisk (`pip install bsk`, tested with bsk 2.12.1); jaxhinge's tests only read the files.

    python tests/data/bsk/make_chain_references.py [OUT_DIR]

Cases:

- `chain_nhinged_noGravity`: Basilisk's `test_nHingedRigidBodyStateEffector.py`
  (basilisk.md 3.8): hub 750 kg, diag(900, 800, 600); a 4-panel chain at r_HB_B = [0.5, 0, 1],
  dcm_HB = diag(-1, -1, 1) and a 3-panel chain at [-0.5, 0, 1], dcm_HB = I; every panel 50 kg,
  diag(50, 25, 25), d = 0.75 (hinge-to-hinge 2d = 1.5), k = 500, c = 0; only the first panel of chain 1
  starts at 5 deg; r/v/omega of basilisk.md 3.2; dt = 1e-4 s, 1 s, saved every 0.01 s (`nhinged(True)`: the
  Gravity variant, orbit of basilisk.md 3.1, also agrees to ~1e-14; not committed, to keep the suite short).
  Run with `nHingedRigidBodyStateEffector`.
- `chain_dual_mixed`: two non-identical two-panel chains (`dualHingedRigidBodyStateEffector`: mass1 != mass2,
  d1 != d2, l1, k1 != k2, damping, rotated hinge frames, one with motor torques) plus one single hinged panel,
  tumbling hub, no gravity; dt = 1e-3 s, 2 s.
- `chain_dual_gravity`: one non-identical two-panel chain, orbit of basilisk.md 3.1, dt = 1e-3 s, 2 s.
"""

import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import bsk_run

HUB = {"mHub": 750.0, "IHubPntBc_B": [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]]}
FREE_IC = {"r_CN_NInit": [0.1, -0.4, 0.3], "v_CN_NInit": [-0.2, 0.5, 0.1], "omega_BN_BInit": [0.1, -0.1, 0.1]}
ORBIT_IC = {
    "r_CN_NInit": [-4020338.690396649, 7490566.741852513, 5248299.211589362],
    "v_CN_NInit": [-5199.77710904224, -3436.681645356935, 1041.576797498721],
    "omega_BN_BInit": [0.1, -0.1, 0.1],
}
MU = 0.3986004415e15
DIAG_M = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]
EYE = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def _nh_panel(theta=0.0, last=False):
    p = {
        "mass": 50.0,
        "IPntS_S": [[50.0, 0.0, 0.0], [0.0, 25.0, 0.0], [0.0, 0.0, 25.0]],
        "d": 0.75,
        "k": 500.0,
        "c": 0.0,
        "thetaInit": theta,
        "thetaDotInit": 0.0,
    }
    if not last:
        p["l"] = 1.5
    return p


def nhinged(gravity):
    ic = ORBIT_IC if gravity else FREE_IC
    scen = {
        "hub": {**HUB, "r_BcB_B": [0.0, 0.0, 0.0], **ic, "sigma_BNInit": [0.0, 0.0, 0.0]},
        "chains": [
            {
                "name": "wingA",
                "r_HB_B": [0.5, 0.0, 1.0],
                "dcm_HB": DIAG_M,
                "panels": [_nh_panel(5.0 * math.pi / 180.0)]
                + [_nh_panel() for _ in range(2)]
                + [_nh_panel(last=True)],
            },
            {
                "name": "wingB",
                "r_HB_B": [-0.5, 0.0, 1.0],
                "dcm_HB": EYE,
                "panels": [_nh_panel() for _ in range(2)] + [_nh_panel(last=True)],
            },
        ],
        "simulation": {"t_end": 1.0, "save_dt": 0.01, "integrator": "rk4", "dt": 1e-4},
    }
    if gravity:
        scen["gravity"] = {"mu": MU}
    return scen


def _rot(axis, ang):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    R = np.eye(3) + math.sin(ang) * K + (1 - math.cos(ang)) * K @ K
    return R.tolist()


def _pair(m1, m2, I1, I2, d1, d2, l1, k1, k2, c1, c2, th, thd, u=(0.0, 0.0)):
    p1 = {
        "mass": m1,
        "IPntS_S": np.diag(I1).tolist(),
        "d": d1,
        "l": l1,
        "k": k1,
        "c": c1,
        "thetaInit": th[0],
        "thetaDotInit": thd[0],
    }
    p2 = {
        "mass": m2,
        "IPntS_S": np.diag(I2).tolist(),
        "d": d2,
        "k": k2,
        "c": c2,
        "thetaInit": th[1],
        "thetaDotInit": thd[1],
    }
    if u[0]:
        p1["motorTorque"] = u[0]
    if u[1]:
        p2["motorTorque"] = u[1]
    return [p1, p2]


def dual_mixed():
    return {
        "hub": {
            **HUB,
            "r_BcB_B": [0.05, -0.02, 0.3],
            "r_CN_NInit": [0.1, -0.4, 0.3],
            "v_CN_NInit": [-0.2, 0.5, 0.1],
            "sigma_BNInit": [0.1, -0.2, 0.05],
            "omega_BN_BInit": [0.15, -0.1, 0.2],
        },
        "panels": [
            {
                "name": "boom",
                "mass": 20.0,
                "IPntS_S": [[8.0, 0.0, 0.0], [0.0, 6.0, 0.0], [0.0, 0.0, 4.0]],
                "d": 0.9,
                "k": 80.0,
                "c": 1.5,
                "r_HB_B": [0.0, 0.8, -0.6],
                "dcm_HB": _rot([1, 2, 3], 0.7),
                "thetaInit": 0.05,
                "thetaDotInit": -0.02,
            }
        ],
        "chains": [
            {
                "name": "wingA",
                "r_HB_B": [0.6, 0.1, 0.9],
                "dcm_HB": _rot([0.3, -0.2, 1.0], 2.9),
                "panels": _pair(
                    60.0,
                    35.0,
                    [60.0, 30.0, 35.0],
                    [30.0, 18.0, 20.0],
                    0.8,
                    0.6,
                    1.7,
                    250.0,
                    180.0,
                    3.0,
                    2.0,
                    (0.08, -0.05),
                    (0.01, 0.03),
                ),
            },
            {
                "name": "wingB",
                "r_HB_B": [-0.6, -0.1, 0.9],
                "dcm_HB": _rot([0.1, 0.4, -1.0], 0.4),
                "panels": _pair(
                    45.0,
                    70.0,
                    [40.0, 22.0, 25.0],
                    [75.0, 40.0, 45.0],
                    0.7,
                    1.1,
                    1.5,
                    300.0,
                    120.0,
                    5.0,
                    1.0,
                    (-0.06, 0.1),
                    (0.0, -0.02),
                    u=(1.5, -0.8),
                ),
            },
        ],
        "simulation": {"t_end": 2.0, "save_dt": 0.02, "integrator": "rk4", "dt": 1e-3},
    }


def dual_gravity():
    return {
        "hub": {**HUB, "r_BcB_B": [0.0, 0.0, 1.0], **ORBIT_IC, "sigma_BNInit": [0.0, 0.0, 0.0]},
        "chains": [
            {
                "name": "wing",
                "r_HB_B": [0.5, 0.0, 1.0],
                "dcm_HB": DIAG_M,
                "panels": _pair(
                    80.0,
                    40.0,
                    [80.0, 40.0, 45.0],
                    [40.0, 20.0, 25.0],
                    1.0,
                    0.6,
                    2.1,
                    150.0,
                    90.0,
                    2.0,
                    4.0,
                    (0.0872664626, 0.04),
                    (0.0, 0.0),
                ),
            },
        ],
        "gravity": {"mu": MU},
        "simulation": {"t_end": 2.0, "save_dt": 0.02, "integrator": "rk4", "dt": 1e-3},
    }


CASES = {
    "chain_nhinged_noGravity": (
        lambda: nhinged(False),
        "Basilisk test_nHingedRigidBodyStateEffector NoGravity (4 + 3 identical panels)",
    ),
    # Basilisk's Gravity variant, `nhinged(True)`, also agrees (~1e-14); left out of the committed set to keep the
    # test suite short (gravity on chains is covered by chain_dual_gravity).
    "chain_dual_mixed": (
        dual_mixed,
        "two non-identical dualHinged chains (damping, motor torques) + a single panel",
    ),
    "chain_dual_gravity": (dual_gravity, "one non-identical dualHinged chain with damping, LEO gravity"),
}


def main(argv):
    out_dir = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).parents[3] / "tests/data/bsk")
    sys.path.insert(0, str(pathlib.Path(__file__).parents[3] / "tests"))
    import jax

    jax.config.update("jax_enable_x64", True)
    from jaxhinge import dump_scenario, scenario_from_dict

    for name, (make, desc) in CASES.items():
        data = make()
        toml = out_dir / f"{name}.toml"
        dump_scenario(scenario_from_dict(data, name), toml)
        text = toml.read_text()
        toml.write_text(
            f"# {name}: {desc}.\n# Generated by tests/data/bsk/make_chain_references.py; Basilisk reference: "
            f"the .npz of the same name.\n" + text
        )
        out = bsk_run.run(bsk_run.load_scenario(toml))
        bsk_run.save(out, out_dir / f"{name}.npz")
        print(
            f"{name}: {len(out['t'])} samples, theta {out['theta'].shape}, wall {float(out['wall_s']):.2f} s"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
