"""Write (and with --run, solve) a small CalculiX model of a spacecraft: a stiff hub block and two solar-array wings
joined to it through compliant hinge strips, meshed with 20-node bricks (C3D20R). SI units (m, kg, s, N).

    python tests/data/fea/make_spacecraft.py --run      # needs CalculiX `ccx` (Debian: apt-get install calculix-ccx)

Writes into this folder:
- `spacecraft_clamped.inp` / `.dat`: hub nodes fixed (the usual appendage deliverable): the wing modes with their
  participation factors and effective masses for base motion of the hub;
- `spacecraft_free.inp` / `.dat`: free-free (the first six modes are rigid-body modes at ~0 Hz);
- `mass_properties.json`: what a jaxhinge scenario of the same spacecraft needs, computed from the geometry and
  densities (every part is a box): hub mass and inertia about its CoM, each wing panel's mass, CoM, inertia about its
  CoM in panel axes, hinge line (the middle of the compliant strip) and the distance d from it to the panel's CoM.

Geometry (frame B = the FEA's axes, origin at the hub's centre): hub cube 1.2 m; wing +Y: strip y in [0.6, 0.7],
panel 2.0 m x 1.0 m x 0.02 m beyond it; wing -Y: strip y in [-0.7, -0.6], panel 1.6 m long. Both wings lie in the
plane z = 0 and bend about x (their hinge axes). The strip's bending stiffness E I / w sets the hinge stiffness.
"""

import argparse
import json
import os
import shutil
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
T = 0.02  # wing thickness [m]
MATERIALS = {  # E [Pa], nu, density [kg/m^3]
    "HUB": (2.0e11, 0.3, 200.0),
    "HINGE": (4.0e7, 0.3, 10.0),
    "PANEL": (7.0e10, 0.3, 500.0),
}
X_WING = np.linspace(-0.5, 0.5, 9)
Z_WING = np.array([-T / 2, T / 2])
HUB_GRID = (np.concatenate([[-0.6], X_WING, [0.6]]), np.linspace(-0.6, 0.6, 5),
            np.array([-0.6, -0.3, -T / 2, T / 2, 0.3, 0.6]))
WINGS = {  # name: (sign of y, panel length [m], elements along it)
    "wing_pY": (1.0, 2.0, 16),
    "wing_mY": (-1.0, 1.6, 12),
}
STRIP = 0.1  # hinge strip width [m]


class Mesh:
    """Nodes merged by coordinates; 20-node bricks on tensor grids."""

    def __init__(self):
        self.nodes: dict[tuple, int] = {}
        self.elements: dict[str, list[list[int]]] = {}

    def node(self, p) -> int:
        key = tuple(round(float(c), 9) for c in p)
        return self.nodes.setdefault(key, len(self.nodes) + 1)

    def block(self, elset: str, xs, ys, zs) -> None:
        out = self.elements.setdefault(elset, [])
        for i in range(len(xs) - 1):
            for j in range(len(ys) - 1):
                for k in range(len(zs) - 1):
                    x0, x1, y0, y1, z0, z1 = xs[i], xs[i + 1], ys[j], ys[j + 1], zs[k], zs[k + 1]
                    c = [(x0, y0, z0), (x1, y0, z0), (x1, y1, z0), (x0, y1, z0),
                         (x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1)]
                    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4),
                             (0, 4), (1, 5), (2, 6), (3, 7)]
                    mids = [tuple((np.array(c[a]) + np.array(c[b])) / 2) for a, b in edges]
                    out.append([self.node(p) for p in c + mids])


def build() -> Mesh:
    m = Mesh()
    m.block("HUB", *HUB_GRID)
    for name, (s, length, n) in WINGS.items():
        strip = s * np.array([0.6, 0.6 + STRIP])
        panel = s * np.linspace(0.6 + STRIP, 0.6 + STRIP + length, n + 1)
        m.block(f"{name}_HINGE", X_WING, np.sort(strip), Z_WING)
        m.block(f"{name}_PANEL", X_WING, np.sort(panel), Z_WING)
    return m


def deck(m: Mesh, clamped: bool, modes: int) -> str:
    lines = ["** jaxhinge test spacecraft (tests/data/fea/make_spacecraft.py); SI units", "*NODE"]
    lines += [f"{i},{x:.9g},{y:.9g},{z:.9g}" for (x, y, z), i in m.nodes.items()]
    eid = 0
    for elset, els in m.elements.items():
        lines.append(f"*ELEMENT,TYPE=C3D20R,ELSET={elset}")
        for e in els:
            eid += 1
            ids = [eid, *e]
            lines.append(",".join(map(str, ids[:16])) + ",")
            lines.append(",".join(map(str, ids[16:])))
    hub_nodes = sorted({n for e in m.elements["HUB"] for n in e})
    lines.append("*NSET,NSET=HUBNODES")
    lines += [",".join(map(str, hub_nodes[i:i + 16])) for i in range(0, len(hub_nodes), 16)]
    for name, (E, nu, rho) in MATERIALS.items():
        lines += [f"*MATERIAL,NAME={name}", "*ELASTIC", f"{E:.9g},{nu}", "*DENSITY", f"{rho:.9g}"]
    for elset in m.elements:
        mat = "HUB" if elset == "HUB" else elset.rsplit("_", 1)[1]
        lines.append(f"*SOLID SECTION,ELSET={elset},MATERIAL={mat}")
    if clamped:
        lines += ["*BOUNDARY", "HUBNODES,1,3"]
    lines += ["*STEP", "*FREQUENCY", str(modes), "*END STEP"]
    return "\n".join(lines) + "\n"


def box(rho, lo, hi):
    """Mass, CoM and inertia about the CoM (principal, box axes) of a homogeneous box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    a = hi - lo
    mass = rho * float(np.prod(a))
    inertia = mass / 12 * np.array([a[1] ** 2 + a[2] ** 2, a[0] ** 2 + a[2] ** 2, a[0] ** 2 + a[1] ** 2])
    return mass, (lo + hi) / 2, inertia


def mass_properties() -> dict:
    hub_m, hub_c, hub_i = box(MATERIALS["HUB"][2], [-0.6] * 3, [0.6] * 3)
    out = {"units": "SI (m, kg)", "frame": "B = FEA axes, origin at the hub centre",
           "hub": {"mass": hub_m, "com": hub_c.tolist(), "inertia_about_com": np.diag(hub_i).tolist()}, "wings": {}}
    for name, (s, length, _) in WINGS.items():
        y0 = 0.6 + STRIP
        m_p, c_p, i_p = box(MATERIALS["PANEL"][2], [-0.5, min(s * y0, s * (y0 + length)), -T / 2],
                            [0.5, max(s * y0, s * (y0 + length)), T / 2])
        m_h, _, _ = box(MATERIALS["HINGE"][2], [-0.5, 0.6, -T / 2], [0.5, 0.6 + STRIP, T / 2])
        hinge = np.array([0.0, s * (0.6 + STRIP / 2), 0.0])
        # panel axes S (Basilisk): s1 from the CoM towards the hinge, s2 the hinge axis, s3 = s1 x s2
        out["wings"][name] = {
            "panel_mass": m_p, "panel_com": c_p.tolist(), "hinge_strip_mass": m_h,
            "hinge_point": hinge.tolist(), "hinge_axis": [1.0, 0.0, 0.0],
            "d": float(np.linalg.norm(c_p - hinge)),
            "inertia_about_com_box_axes": i_p.tolist(),
            "hinge_stiffness_beam_theory": MATERIALS["HINGE"][0] * (1.0 * T ** 3 / 12) / STRIP,
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="solve the decks with ccx")
    ap.add_argument("--modes", type=int, default=20)
    args = ap.parse_args()
    m = build()
    for kind in ("clamped", "free"):
        with open(os.path.join(HERE, f"spacecraft_{kind}.inp"), "w") as f:
            f.write(deck(m, kind == "clamped", args.modes))
    with open(os.path.join(HERE, "mass_properties.json"), "w") as f:
        json.dump(mass_properties(), f, indent=1)
    print(f"{len(m.nodes)} nodes, {sum(map(len, m.elements.values()))} elements")
    if args.run:
        ccx = shutil.which("ccx")
        if ccx is None:
            raise SystemExit("ccx (CalculiX) not found: apt-get install calculix-ccx")
        for kind in ("clamped", "free"):
            subprocess.run([ccx, f"spacecraft_{kind}"], cwd=HERE, check=True, stdout=subprocess.DEVNULL)
            for ext in (".frd", ".sta", ".cvg", ".12d"):  # large or run-log files: not committed
                p = os.path.join(HERE, f"spacecraft_{kind}{ext}")
                if os.path.exists(p):
                    os.remove(p)


if __name__ == "__main__":
    main()
