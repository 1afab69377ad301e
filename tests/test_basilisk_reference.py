"""Whole trajectories against Basilisk (bsk 2.12.1) runs of the same scenario files, RK4 at Basilisk's step:
the seed scenarios and random 3D configurations (non-diagonal hub inertia, rotated hinges, offset hub CoM,
3-6 panels, thetaRef, motor torque, forces in B and N, pulses, gravity, MRP switching).
Data: tests/data/bsk/ (made by tests/data/bsk/make_references.py; see its README). Tolerances: tests/_basilisk.py
(one per quantity, about 10x the round-off measured; positions and velocities absolute, in m and m/s)."""

import glob
import os

import _basilisk
import numpy as np
import pytest
from conftest import DATA

import jaxhinge as jh

CASES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(DATA, "bsk", "*.toml")))
KEYS = _basilisk.KEYS  # t, the hub state, hinge angles and rates, energies and momenta, the panels' config log


def test_reference_set_is_complete():
    assert len([c for c in CASES if c.startswith("random3d")]) >= 6
    assert {"seed_gravity", "seed_noGravity", "seed_damping", "seed_thetaSS", "seed_freqAmp", "seed_lagrange",
            "seed_motorTorque"} <= set(CASES)  # fmt: skip
    # cases where Basilisk's MRP shadow switch happens (sigma would then be ~1 off unless both switch at one step)
    assert sum(int(np.load(os.path.join(DATA, "bsk", c + ".npz"))["mrp_switch_count"]) > 0 for c in CASES) >= 2


@pytest.mark.parametrize("case", CASES)
def test_matches_basilisk(case):
    ref = np.load(os.path.join(DATA, "bsk", case + ".npz"))
    tr = jh.simulate(jh.load_scenario(os.path.join(DATA, "bsk", case + ".toml")))
    assert bool(tr.success)
    # |error| / allowed error per quantity (tests/_basilisk.py: each tolerance, its unit and the error measured)
    worst = _basilisk.worst({key: getattr(tr, key) for key in KEYS}, {key: ref[key] for key in KEYS})
    assert max(worst.values()) <= 1.0, {k: f"{v:.2g}" for k, v in worst.items()}
