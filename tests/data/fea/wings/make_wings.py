"""Write (and with --run, solve) a CalculiX modal model of a rigid hub with two flexible wings on pinned, spring-loaded
hinges: the FE twin of the jaxhinge rigid-panel scenario `wings.toml`. SI units (m, kg, s, N).

    python tests/data/fea/wings/make_wings.py --run    # needs CalculiX `ccx` (Debian: apt-get install calculix-ccx)

Geometry (frame B, origin at the hub's centre):
- hub: a 1.2 m cube of C3D8 bricks (2 x 2 x 2), density 694.44 kg/m^3 (1200 kg), made one `*RIGID BODY` with its
  REF node at the centre and its ROT node (both extra nodes, in no element);
- wing_pY: a plate x in [-0.5, 0.5], y in [0.65, 2.65], z in [-0.02, 0.02] (C3D20R, 4 x 16 x 1), hinge line
  parallel to x through (0, 0.65, 0) (the plate's root edge, mid-thickness); wing_mY: the same with y in
  [-2.25, -0.65] (1.6 m, 4 x 16 x 1), hinge line through (0, -0.65, 0). The 0.05 m gap between the hub face (0.6)
  and each wing root holds nothing. Wing material: a honeycomb-sandwich stand-in, E = 7e10 Pa, nu = 0.3,
  density 250 kg/m^3 (20 kg and 16 kg wings); the first wing torsion and bending modes (119 Hz and up) are more
  than 150 times the hinge modes (0.67 and 0.77 Hz free-free), so the hinge modes match the rigid-panel model to
  about 2e-4 (the FE ones lower: wing flexibility, in proportion to 1/E).

Each hinge: the wing's root face (its nodes at y = +-0.65) is a `*RIGID BODY` with REF node W at the hinge point
and ROT node R_w. The hub's rigid body holds an extra node H at the same point; `*EQUATION`s make u_W = u_H (the
pin) and make R_w's rotation components along the two axes normal to the hinge axis a equal to the hub ROT node's
(only the rotation about a is free). The torsion spring (k = 420 N m/rad +Y, 260 N m/rad -Y) is a SPRINGA element
from the hub ROT node to R_w, placed at hub ROT + a so that it measures (theta_w - theta_hub) . a: a ROT node's
translations are its body's rotation vector. No massless node adds mass: W, H, R_w and the hub's REF and ROT nodes
are in no element.

Writes into this folder (every variant its own deck; the .dat/.frd after --run):
- `wings_free.inp`: free-free (six rigid-body modes at ~0 Hz, then the hinge and wing modes);
- `wings_clamped.inp`: the hub's REF and ROT nodes fixed;
- `wings_free_rot.inp`: `wings_free` with every coordinate in FEA axes F, x_F = C_FB x_B, C_FB the 3-2-1 rotation
  (30 deg, -20 deg, 45 deg): node positions, hinge axes, equation coefficients and spring placement rotated; the
  same FE model, so the same frequencies;
- `wings_clamped_rot.inp`: `wings_clamped` written in F like `wings_free_rot` (hub REF and ROT nodes fixed);
- `wings_soft_free.inp`, `wings_soft_free_rot.inp`: `wings_free` and `wings_free_rot` with the wings' E divided by
  SOFT_WING_E_DIVISOR (100): soft wings, for the rotated-axes check: ccx's round-off between the aligned and rotated
  runs scales with the wings' stiffness;
- `model.json`: the hub's and wings' mass properties (B), hinge points and axes, d and k, the printed nodes (roles,
  B and F coordinates), C_FB and dcm_BF = C_BF, the ccx version.
Output per mode: `*NODE PRINT` (U, .dat) and `*NODE FILE` (U, .frd) on the small node set OUT only (ccx writes no
node in no element into the .frd, so the hub REF node's motion is in the .dat only).

Notes: ccx reads at most 20 characters a number (longer ones are misread), hence `_fmt`. The rotated decks'
frequencies equal the unrotated ones to ccx's noise floor, ~2e-6 for the hinge modes, free or clamped (a 1e-7 degree
rotation moves them as much; double-precision roundoff of the stiff wings against the soft hinge springs: it scales
with the wing's E, and no *FREQUENCY option or hub stiffness changes it) and all 7 printed digits for the wing modes. ccx's participation factors and effective masses are not
those of the structure here: its rigid-body vectors also move the ROT nodes' DOFs (rotations) as translations, so
the free-free total translational "mass" is 1524 kg (1236 kg + the hub's 288 kg m^2) and the elastic modes carry
effective mass.
"""

import argparse
import json
import os
import re
import shutil
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HUB_SIZE = 1.2
HUB_MASS = 1200.0
T = 0.04  # wing thickness [m]
MATERIALS = {  # E [Pa], nu, density [kg/m^3]
    "HUB": (7.0e10, 0.3, HUB_MASS / HUB_SIZE ** 3),
    "WING": (7.0e10, 0.3, 250.0),
}
X_WING = np.linspace(-0.5, 0.5, 5)
Y_HINGE = 0.65
WINGS = {  # name: (sign of y, length [m], elements along it, k [N m/rad])
    "wing_pY": (1.0, 2.0, 16, 420.0),
    "wing_mY": (-1.0, 1.6, 16, 260.0),
}
SOFT_WING_E_DIVISOR = 100.0  # the wings_soft_* variants: the wings' E divided by this
EULER_321_DEG = (30.0, -20.0, 45.0)  # C_FB = R1(45) R2(-20) R3(30)
ROOT_NODE_DISTANCE = 0.5  # the printed panel node near the root: this far from the hinge line [m]


def euler321_to_dcm(yaw, pitch, roll):
    """C_FB of a 3-2-1 (yaw, pitch, roll) rotation [rad] from B to F (Basilisk's euler3212C)."""
    c1, s1 = np.cos(yaw), np.sin(yaw)
    c2, s2 = np.cos(pitch), np.sin(pitch)
    c3, s3 = np.cos(roll), np.sin(roll)
    return np.array([[c2 * c1, c2 * s1, -s2],
                     [s3 * s2 * c1 - c3 * s1, s3 * s2 * s1 + c3 * c1, s3 * c2],
                     [c3 * s2 * c1 + s3 * s1, c3 * s2 * s1 - s3 * c1, c3 * c2]])


C_FB = euler321_to_dcm(*np.radians(EULER_321_DEG))


def panel_axes(s):
    """Rows s1, s2, s3 in B (Basilisk): s1 from the panel's CoM toward the hinge, s2 the hinge axis, s3 = s1 x s2."""
    s1 = np.array([0.0, -s, 0.0])
    s2 = np.array([s, 0.0, 0.0])
    return np.array([s1, s2, np.cross(s1, s2)])


class Mesh:
    """Nodes merged by coordinates (frame B); 8- and 20-node bricks on tensor grids; extra nodes in no element."""

    def __init__(self):
        self.nodes: dict[tuple, int] = {}
        self.elements: dict[str, tuple[str, list[list[int]]]] = {}
        self.extra: dict[str, tuple[int, np.ndarray]] = {}

    def node(self, p) -> int:
        key = tuple(round(float(c), 9) for c in p)
        return self.nodes.setdefault(key, len(self.nodes) + 1)

    def at(self, p) -> int:
        return self.nodes[tuple(round(float(c), 9) for c in p)]

    def add_extra(self, name: str, p) -> int:
        n = len(self.nodes) + len(self.extra) + 1
        self.extra[name] = (n, np.asarray(p, float))
        return n

    def block(self, elset: str, etype: str, xs, ys, zs) -> None:
        out = self.elements.setdefault(elset, (etype, []))[1]
        for i in range(len(xs) - 1):
            for j in range(len(ys) - 1):
                for k in range(len(zs) - 1):
                    x0, x1, y0, y1, z0, z1 = xs[i], xs[i + 1], ys[j], ys[j + 1], zs[k], zs[k + 1]
                    c = [(x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0),
                         (x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1)]
                    if etype == "C3D8":
                        out.append([self.node(p) for p in c])
                        continue
                    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4),
                             (0, 4), (1, 5), (2, 6), (3, 7)]
                    mids = [tuple((np.array(c[a]) + np.array(c[b])) / 2) for a, b in edges]
                    out.append([self.node(p) for p in c + mids])

    def element_nodes(self, elset: str) -> list[int]:
        return sorted({n for e in self.elements[elset][1] for n in e})

    def coords(self) -> dict[int, np.ndarray]:
        out = {i: np.array(p) for p, i in self.nodes.items()}
        out.update({n: p for n, p in self.extra.values()})
        return out


def build() -> tuple[Mesh, dict]:
    """The mesh and the node numbers the deck and model.json need."""
    m = Mesh()
    h = HUB_SIZE / 2
    m.block("HUB", "C3D8", *(np.linspace(-h, h, 3),) * 3)
    info = {"wings": {}}
    for name, (s, length, n, _) in WINGS.items():
        ys = s * np.linspace(Y_HINGE, Y_HINGE + length, n + 1)
        m.block(name.upper(), "C3D20R", X_WING, np.sort(ys), np.array([-T / 2, T / 2]))
    info["hub_ref"] = m.add_extra("hub_ref", [0.0, 0.0, 0.0])
    info["hub_rot"] = m.add_extra("hub_rot", [0.0, 0.0, 0.0])
    for name, (s, length, _, _) in WINGS.items():
        hinge = np.array([0.0, s * Y_HINGE, 0.0])
        axis = panel_axes(s)[1]
        w = {"hub_pin": m.add_extra(f"{name}_hub_pin", hinge), "ref": m.add_extra(f"{name}_ref", hinge),
             "rot": m.add_extra(f"{name}_rot", m.extra["hub_rot"][1] + axis)}
        w["root_face"] = sorted(i for p, i in m.nodes.items() if abs(p[1] - s * Y_HINGE) < 1e-9)
        w["root_node"] = m.at([0.0, s * (Y_HINGE + ROOT_NODE_DISTANCE), 0.0])
        w["tip_node"] = m.at([0.5, s * (Y_HINGE + length), 0.0])
        info["wings"][name] = w
    return m, info


def _ids(nodes) -> list[str]:
    nodes = list(nodes)
    return [",".join(map(str, nodes[i:i + 16])) for i in range(0, len(nodes), 16)]


def _fmt(c: float) -> str:
    """The most digits (at most 17) that fit ccx's 20-character fields (it misreads longer ones)."""
    return next(t for t in (f"{c:.{p}g}" for p in range(17, 6, -1)) if len(t) <= 20)


def _equation(terms) -> list[str]:
    """*EQUATION lines for sum coef * u(node, dof) = 0 (exact zeros dropped; the first term is the dependent one)."""
    terms = [t for t in terms if t[2] != 0.0]
    out = ["*EQUATION", str(len(terms))]
    flat = [f"{n},{d},{_fmt(c)}" for n, d, c in terms]
    out += [",".join(flat[i:i + 4]) for i in range(0, len(flat), 4)]
    return out


def _normal_rows(e1, e2) -> list[tuple[int, np.ndarray]]:
    """The constraint rows e1 . v = 0, e2 . v = 0 recombined so that each has its own dependent DOF (0-based) with
    coefficient 1, absent from the other row (no chained equations): the best-conditioned pair of DOFs."""
    e = np.array([e1, e2])
    d1, d2 = max(((i, j) for i in range(3) for j in range(3) if i != j),
                 key=lambda ij: abs(np.linalg.det(e[:, list(ij)])))
    rows = np.linalg.solve(e[:, [d1, d2]], e)
    rows[np.abs(rows) < 1e-15] = 0.0
    rows[0, [d1, d2]], rows[1, [d1, d2]] = (1.0, 0.0), (0.0, 1.0)
    return [(d1, rows[0]), (d2, rows[1])]


def deck(m: Mesh, info: dict, variant: str, modes: int) -> str:
    rot = C_FB if variant.endswith("_rot") else np.eye(3)
    lines = [f"** jaxhinge wings test model {variant} (tests/data/fea/wings/make_wings.py); SI units (m, kg, s, N)",
             "** frame: " + ("F, x_F = C_FB x_B, C_FB = 3-2-1 rotation (30, -20, 45) deg" if variant.endswith("_rot")
                            else "B (origin at the hub centre)"),
             "*NODE"]
    for n, p in sorted(m.coords().items()):
        lines.append(f"{n}," + ",".join(_fmt(c) for c in rot @ p))
    eid = 0
    for elset, (etype, els) in m.elements.items():
        lines.append(f"*ELEMENT,TYPE={etype},ELSET={elset}")
        for e in els:
            eid += 1
            ids = [eid, *e]
            lines.append(",".join(map(str, ids[:16])) + ("," if len(ids) > 16 else ""))
            if len(ids) > 16:
                lines.append(",".join(map(str, ids[16:])))
    for name, w in info["wings"].items():
        eid += 1
        lines += [f"*ELEMENT,TYPE=SPRINGA,ELSET={name.upper()}_SPRING", f"{eid},{info['hub_rot']},{w['rot']}"]
    hub = m.element_nodes("HUB") + [w["hub_pin"] for w in info["wings"].values()]
    lines += ["*NSET,NSET=HUB_RIGID", *_ids(hub)]
    for name, w in info["wings"].items():
        lines += [f"*NSET,NSET={name.upper()}_ROOT", *_ids(w["root_face"])]
    out = [info["hub_ref"], info["hub_rot"]]
    for w in info["wings"].values():
        out += [w["rot"], w["root_node"], w["tip_node"]]
    lines += ["*NSET,NSET=OUT", *_ids(out)]
    for name, (E, nu, rho) in MATERIALS.items():
        if name == "WING" and variant.startswith("wings_soft"):
            E = E / SOFT_WING_E_DIVISOR
        lines += [f"*MATERIAL,NAME={name}", "*ELASTIC", f"{E:.9g},{nu}", "*DENSITY", _fmt(rho)]
    lines += ["*SOLID SECTION,ELSET=HUB,MATERIAL=HUB"]
    for name in info["wings"]:
        lines += [f"*SOLID SECTION,ELSET={name.upper()},MATERIAL=WING"]
    for name, (_, _, _, k) in WINGS.items():
        lines += [f"*SPRING,ELSET={name.upper()}_SPRING", f"{k:.1f}"]  # SPRINGA: no DOF line; a decimal point
    lines += [f"*RIGID BODY,NSET=HUB_RIGID,REF NODE={info['hub_ref']},ROT NODE={info['hub_rot']}"]
    for name, (s, _, _, _) in WINGS.items():
        w = info["wings"][name]
        lines += [f"*RIGID BODY,NSET={name.upper()}_ROOT,REF NODE={w['ref']},ROT NODE={w['rot']}"]
        lines += [f"** {name} pin: u(ref {w['ref']}) = u(hub node {w['hub_pin']})"]
        for d in range(1, 4):
            lines += _equation([(w["ref"], d, 1.0), (w["hub_pin"], d, -1.0)])
        s1, _, s3 = panel_axes(s) @ rot.T  # rows: s1, s2, s3 in the deck's frame
        lines.append(f"** {name} hinge: rotations about s1 and s3 of ROT node {w['rot']} = the hub's "
                     f"(ROT node {info['hub_rot']})")
        for d, e in _normal_rows(s1, s3):
            order = [d] + [j for j in range(3) if j != d]
            lines += _equation([(w["rot"], j + 1, e[j]) for j in order]
                               + [(info["hub_rot"], j + 1, -e[j]) for j in order])
    if variant.startswith("wings_clamped"):
        lines += ["*BOUNDARY", f"{info['hub_ref']},1,3", f"{info['hub_rot']},1,3"]
    lines += ["*STEP", "*FREQUENCY", str(modes), "*NODE PRINT,NSET=OUT", "U", "*NODE FILE,NSET=OUT", "U",
              "*END STEP"]
    return "\n".join(lines) + "\n"


def box(rho, lo, hi):
    """Mass, CoM and inertia about the CoM (principal, box axes x, y, z) of a homogeneous box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    a = hi - lo
    mass = rho * float(np.prod(a))
    inertia = mass / 12 * np.array([a[1] ** 2 + a[2] ** 2, a[0] ** 2 + a[2] ** 2, a[0] ** 2 + a[1] ** 2])
    return mass, (lo + hi) / 2, inertia


def ccx_version(ccx: str | None) -> str | None:
    if ccx is None:
        return None
    out = subprocess.run([ccx, "-v"], capture_output=True, text=True, check=False).stdout
    v = re.search(r"Version\s+(\S+)", out)
    return v.group(1) if v else None


def _clean(x):
    """Round the mass-property numbers to 12 digits (1200.0000000000002 -> 1200.0, -0.0 -> 0.0)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return float(f"{x:.12g}") + 0.0 if isinstance(x, float) else x


def model_json(m: Mesh, info: dict, version: str | None) -> dict:
    h = HUB_SIZE / 2
    hub_m, hub_c, hub_i = box(MATERIALS["HUB"][2], [-h] * 3, [h] * 3)
    coords = m.coords()

    def node(n, role):
        return {"node": n, "role": role, "r_B": _clean(coords[n].tolist()), "r_F": (C_FB @ coords[n]).tolist()}

    out = {
        "description": "CalculiX twin of wings.toml: rigid 1200 kg hub, two flexible wings on pinned torsion-spring "
                       "hinges (tests/data/fea/wings/make_wings.py)",
        "units": "SI (m, kg, s, N)",
        "frame": "B: origin at the hub centre; wings_free/wings_clamped are written in B, wings_free_rot and "
                 "wings_clamped_rot in F",
        "ccx_version": version,
        "C_FB": C_FB.tolist(),
        "dcm_BF": C_FB.T.tolist(),
        "rotation": {"sequence": "3-2-1", "angles_deg": list(EULER_321_DEG),
                     "meaning": "x_F = C_FB x_B; give dcm_BF = C_BF (maps FEA/F components to B) to read "
                                "wings_free_rot and wings_clamped_rot in B"},
        "hub": _clean({"mass": hub_m, "com": hub_c.tolist(), "inertia_about_com": np.diag(hub_i).tolist()}),
        "wings": {},
        "output_nodes": [node(info["hub_ref"], "hub REF node (hub centre): hub translation"),
                         node(info["hub_rot"], "hub ROT node: hub rotation vector (its translations)")],
    }
    for name, (s, length, _, k) in WINGS.items():
        w = info["wings"][name]
        y0, y1 = sorted([s * Y_HINGE, s * (Y_HINGE + length)])
        m_p, c_p, i_box = box(MATERIALS["WING"][2], [-0.5, y0, -T / 2], [0.5, y1, T / 2])
        dcm = panel_axes(s)
        hinge = np.array([0.0, s * Y_HINGE, 0.0])
        i_s = dcm @ np.diag(i_box) @ dcm.T
        out["wings"][name] = _clean({
            "panel_mass": m_p, "panel_com_B": c_p.tolist(), "IPntS_S": i_s.tolist(),
            "r_HB_B": hinge.tolist(), "dcm_HB": dcm.tolist(), "hinge_axis_B": dcm[1].tolist(),
            "d": float(np.linalg.norm(c_p - hinge)), "k": k, "length": length, "width": 1.0, "thickness": T,
            "material": {"E": MATERIALS["WING"][0], "nu": MATERIALS["WING"][1], "density": MATERIALS["WING"][2]},
            "nodes": {"pin_ref": w["ref"], "hub_pin": w["hub_pin"], "rot": w["rot"], "root_face": w["root_face"]},
            "note": "the whole plate is the panel (its root face is the rigid bracket); the pin, REF and ROT nodes "
                    "are massless",
        })
        out["output_nodes"] += [
            node(w["rot"], f"{name} ROT node: wing rotation vector (its translations); minus the hub's, along "
                           "hinge_axis_B, is the hinge angle"),
            node(w["root_node"], f"{name} panel node at x = 0, mid-thickness, {ROOT_NODE_DISTANCE} m from the "
                                 "hinge line"),
            node(w["tip_node"], f"{name} tip node at the corner x = +0.5, mid-thickness, {length} m from the "
                                "hinge line"),
        ]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="solve the decks with ccx")
    ap.add_argument("--modes", type=int, default=24)
    args = ap.parse_args()
    m, info = build()
    variants = ("wings_free", "wings_clamped", "wings_free_rot", "wings_clamped_rot", "wings_soft_free",
                "wings_soft_free_rot")
    for v in variants:
        with open(os.path.join(HERE, f"{v}.inp"), "w") as f:
            f.write(deck(m, info, v, args.modes))
    ccx = shutil.which("ccx")
    with open(os.path.join(HERE, "model.json"), "w") as f:
        json.dump(model_json(m, info, ccx_version(ccx)), f, indent=1)
        f.write("\n")
    print(f"{len(m.nodes) + len(m.extra)} nodes, {sum(len(e) for _, e in m.elements.values())} solid elements")
    if args.run:
        if ccx is None:
            raise SystemExit("ccx (CalculiX) not found: apt-get install calculix-ccx")
        for v in variants:
            subprocess.run([ccx, v], cwd=HERE, check=True, stdout=subprocess.DEVNULL)
            for name in (f"{v}.sta", f"{v}.cvg", f"{v}.12d", "spooles.out"):  # run-log files: not kept
                p = os.path.join(HERE, name)
                if os.path.exists(p):
                    os.remove(p)


if __name__ == "__main__":
    main()
