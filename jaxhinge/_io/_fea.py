"""Modal results of a finite-element analysis (FEA), read from the solver's output files (`read_fea`).

Every reader returns a `FeaModes` (`jaxhinge._analysis._fitting._pairing`), what the modal fit pairs and fits against: SI
units, the axes of the FEA model taken to be the hub body frame B (or turned into it by `dcm_BF`), rotations
(participation factors and effective masses) about `reference_point`. Readers: CalculiX `.dat` of a `*FREQUENCY` step (eigenvalues, participation factors,
effective modal masses, total effective mass) and NASTRAN SOL 103 `.f06` (the REAL EIGENVALUES table; the modal
participation factors and effective masses of MEFFMASS/MPFACTOR output as MYSTRAN writes them, with its total model
mass; MSC/NX's differently laid out MEFFMASS tables are not read: no sample to test against). `.op2` is refused
with a message: its reader, pyNastran 1.4.1, requires numpy < 2, which JAX cannot use. Mode shapes at printed
nodes: CalculiX `*NODE PRINT` (the `.dat`) and `*NODE FILE` (the ASCII `.frd`), NASTRAN EIGENVECTOR tables
(`DISP(PRINT)`, MYSTRAN's and MSC's layouts). FEA axes rotated from B: `dcm_BF` turns every vector into B.
"""

import dataclasses
import math
import os
import re

import numpy as np

from .._errors import FeaError
from .._format import fmt_value as _fmt
from .._model._boundary import AbstractBoundary, FreeFree, HubClamped, as_boundary
from .._model._fea_modes import FeaModes
from .._model._rules import rotation_problem

# metres and kilograms per length and mass unit of the FEA model (time in seconds in every system)
UNIT_SYSTEMS = {"m-kg-s": (1.0, 1.0), "mm-t-s": (1e-3, 1e3), "mm-kg-s": (1e-3, 1.0), "in-lbf-s": (0.0254, 175.126835)}
FORMATS = {".dat": "calculix", ".f06": "nastran-f06", ".op2": "nastran-op2"}
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[EeDd][-+]?\d+)?"


def _fail(path, msg: str, line: int | None = None) -> FeaError:
    return FeaError(f"{path}: {'' if line is None else f'line {line}: '}{msg}", source=str(path))


def _rows(path, lines: list[str], start: int, width: int, lead: str = r"\d+") -> tuple[list[list[float]], int]:
    """Consecutive table rows `lead` + `width` numbers from line `start` on (blank lines before the first row and
    page headers between rows skipped); returns the rows and the index after the table."""
    pat = re.compile(rf"^\s*({lead})" + rf"\s+({_NUM})" * width + r"\s*$")
    row_like = re.compile(rf"^\s+({lead})\s+\S")  # page headers start in column 0
    out, i = [], start
    while i < len(lines):
        m = pat.match(lines[i])
        if m:
            vals = [float(g.replace("D", "E").replace("d", "e")) for g in m.groups()[1:]]
            if not all(math.isfinite(v) for v in vals):
                raise _fail(path, f"a number that is not finite in {lines[i].strip()!r}", i + 1)
            out.append([float(m.group(1)) if m.group(1)[0].isdigit() else math.nan, *vals])
        elif row_like.match(lines[i]):
            raise _fail(path, f"cannot read this table row: {lines[i].strip()!r} (expected {width} numbers after "
                        "the mode number)", i + 1)
        elif out and (not lines[i].startswith(("1", "0")) if lines[i].strip()  # text: the table ended
                      else i + 1 < len(lines) and not pat.match(lines[i + 1])):  # blank, no row after it
            break
        i += 1
    return out, i


def _find(lines: list[str], title: str, start: int = 0) -> int | None:
    return next((i for i in range(start, len(lines)) if title in lines[i]), None)


def _calculix(path, lines: list[str]) -> dict:
    head = _find(lines, "E I G E N V A L U E   O U T P U T")
    if head is None:
        raise _fail(path, "no eigenvalue table (E I G E N V A L U E   O U T P U T): not the .dat of a CalculiX "
                    "*FREQUENCY step")
    if _find(lines, "E I G E N V A L U E   O U T P U T", head + 1) is not None:
        raise _fail(path, "several *FREQUENCY steps: give the .dat of one modal analysis")
    rows, end = _rows(path, lines, head + 1, 4)
    if not rows:
        raise _fail(path, "the eigenvalue table has no rows (truncated file?)", head + 1)
    n, out = len(rows), {"mode_numbers": [int(r[0]) for r in rows], "frequencies": [r[3] for r in rows]}
    for key, title in (("participation", "P A R T I C I P A T I O N   F A C T O R S"),
                       ("effective_mass", "E F F E C T I V E   M O D A L   M A S S")):
        i = _find(lines, title, end)
        if i is None:
            continue
        tab, end = _rows(path, lines, i + 1, 6)
        if len(tab) != n:
            raise _fail(path, f"the {title.replace(' ', '').lower()} table has {len(tab)} of {n} modes "
                        "(truncated file?)", i + 1)
        out[key] = [r[1:] for r in tab]
    i = _find(lines, "T O T A L   E F F E C T I V E   M A S S", end)
    if i is not None:
        tab, _ = _rows(path, lines, i + 1, 5, lead=_NUM)
        if len(tab) != 1:
            raise _fail(path, "the total effective mass line is missing (truncated file?)", i + 1)
        out["total_mass"] = tab[0]
    elif "effective_mass" in out:
        raise _fail(path, "the total effective mass table is missing (truncated file?)")
    return out


def _nastran_f06(path, lines: list[str]) -> dict:
    heads = [i for i, s in enumerate(lines) if "R E A L   E I G E N V A L U E S" in s]
    if not heads:
        raise _fail(path, "no REAL EIGENVALUES table: not the .f06 of a NASTRAN SOL 103 (normal modes) run")
    rows: dict[int, list[float]] = {}
    for h in heads:  # the table continues on later pages under a repeated header
        tab, _ = _rows(path, lines, h + 1, 6)
        if not tab:
            raise _fail(path, "a REAL EIGENVALUES table without rows (truncated file?)", h + 1)
        rows.update({int(r[0]): r for r in tab})
    modes = sorted(rows)
    out = {"mode_numbers": modes, "frequencies": [rows[m][4] for m in modes]}
    # MEFFMASS / MPFACTOR output as MYSTRAN prints it: mode, cycles, then T1 T2 T3 R1 R2 R3 in the basic system,
    # rotations about the PARAM GRDPNT grid (the basic origin without it)
    for key, title in (("participation", "M O D A L   P A R T I C I P A T I O N   F A C T O R S"),
                       ("effective_mass", "E F F E C T I V E   M O D A L   M A S S E S")):
        i = _find(lines, title)
        if i is None:
            continue
        tab, end = _rows(path, lines, i + 1, 7)
        got = {int(r[0]): r[2:] for r in tab}
        if sorted(got) != modes:
            raise _fail(path, f"the {key.replace('_', ' ')} table has modes {sorted(got)}, the eigenvalue table "
                        f"{modes} (truncated file?)", i + 1)
        out[key] = [got[m] for m in modes]
        grid = next((re.search(r"PARAM GRDPNT grid:\s*(\d+)", s) for s in lines[i:i + 6] if "GRDPNT" in s), None)
        out["grdpnt"] = int(grid.group(1)) if grid else 0
        if key == "effective_mass":
            total = next((s for s in lines[end:end + 6] if "Total model mass:" in s), None)
            if total is None:
                raise _fail(path, "the effective-mass table has no 'Total model mass' line (truncated file?)", end + 1)
            out["total_mass"] = [float(x.replace("D", "E")) for x in total.split(":", 1)[1].split()]
    if "effective_mass" not in out and any("MODAL EFFECTIVE MASS" in s for s in lines):
        out["unread"] = ("its MSC/NX-style MODAL EFFECTIVE MASS tables are not read (only MYSTRAN's layout, "
                         "'E F F E C T I V E   M O D A L   M A S S E S', is tested)")
    return out


_SHAPE_ROW = re.compile(r"^\s*(\d+)\s+(G|S|\d+)" + rf"\s+({_NUM})" * 6 + r"\s*$")
_VECTOR_HEADS = (re.compile(r"OUTPUT FOR EIGENVECTOR\s+(\d+)"),  # MYSTRAN
                 re.compile(r"R E A L   E I G E N V E C T O R   N O \.\s+(\d+)"))  # MSC/NX


def _nastran_shapes(path, lines: list[str]) -> dict | None:
    """The EIGENVECTOR tables of a NASTRAN .f06 (`DISP(PRINT) = set` in a SOL 103 run): per mode number, per grid,
    T1 T2 T3 R1 R2 R3 as printed; grids printed in a displacement coordinate system other than the basic one
    (COORD SYS / TYPE column not 0 / G) are left out. None without such tables."""
    out: dict[int, dict[int, list[float]]] = {}
    for i, line in enumerate(lines):
        m = next((h.search(line) for h in _VECTOR_HEADS if h.search(line)), None)
        if m is None:
            continue
        mode, j, started = int(m.group(1)), i + 1, False
        rows = out.setdefault(mode, {})
        while j < len(lines):
            r = _SHAPE_ROW.match(lines[j])
            if r:
                started = True
                vals = [float(g.replace("D", "E")) for g in r.groups()[2:]]
                if not all(math.isfinite(v) for v in vals):
                    raise _fail(path, f"a number that is not finite in eigenvector {mode}", j + 1)
                if r.group(2) in ("G", "0"):
                    rows[int(r.group(1))] = vals
            elif started and lines[j].strip():
                break
            j += 1
    return {"modes": out} if out else None


def _shape_array(path, data: dict, mode_numbers) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, shapes (n, g, 6)) of every mode in `mode_numbers` (NaN where a value is missing)."""
    per_mode = data["modes"]
    missing = [m for m in mode_numbers if m not in per_mode]
    if missing:
        raise _fail(path, f"mode shapes of modes {missing} are missing (the file has shapes of modes "
                    f"{sorted(per_mode)}): print them for every mode read (truncated file?)")
    nodes = sorted({n for m in mode_numbers for n in per_mode[m]})
    out = np.full((len(mode_numbers), len(nodes), 6), np.nan)
    for a, m in enumerate(mode_numbers):
        for g, n in enumerate(nodes):
            v = per_mode[m].get(n)
            if v is not None:
                out[a, g, :len(v)] = v
    return np.asarray(nodes, dtype=int), out


ROTATION_RULE = "must be a proper rotation matrix [BF] (3 x 3, rows: B's axes in FEA components, orthonormal to " \
    "1e-9, determinant +1)"


def dcm_problem(C) -> str | None:
    """What is wrong with `C` as the direction cosines `dcm_BF` (`ROTATION_RULE`), or None: 3 x 3 and finite, then
    the model's one rotation check (`_model._rules.rotation_problem`: orthonormal, determinant +1)."""
    C = np.asarray(C, dtype=float)
    if C.shape != (3, 3) or not np.all(np.isfinite(C)) or rotation_problem(C) is not None:
        return ROTATION_RULE
    return None


def _rotate(fea: FeaModes, C: np.ndarray) -> FeaModes:
    """The FEA modes with every vector quantity turned from the FEA axes F into B by $C = [BF]$: participation
    factors (their translation and rotation triples), effective masses (squares of the rotated participation
    factors), reference point, mode shapes; the total effective mass: translations unchanged, rotations
    $C^2$ (elementwise) times the FEA's (exact for an inertia diagonal in F; it only scales weights)."""
    blk = lambda a: None if a is None else np.concatenate([a[..., :3] @ C.T, a[..., 3:] @ C.T], axis=-1)
    part = blk(fea.participation)
    em = None if fea.effective_mass is None else part**2
    tot = None if fea.total_mass is None else np.concatenate([fea.total_mass[:3], (C**2) @ fea.total_mass[3:]])
    return dataclasses.replace(fea, participation=part, effective_mass=em, total_mass=tot,
                               reference_point=C @ fea.reference_point, shapes=blk(fea.shapes))


def read_fea(path: str | os.PathLike, fea_format: str | None = None, *, units: str | None = None,
             reference_point=None, boundary: AbstractBoundary | str | None = None, rigid_hz: float = 0.01, dcm_BF=None,
             shapes_path: str | os.PathLike | None = None) -> FeaModes:
    r"""The modes of an FEA modal analysis file, in SI units.

    `fea_format`: "calculix" (.dat), "nastran-f06" (.f06); default from the extension (.op2 is refused).
    `units`: the FEA model's unit system, one of `UNIT_SYSTEMS` ("m-kg-s", "mm-t-s", "mm-kg-s", "in-lbf-s"; time
    always in s); needed where the file has effective masses, which carry mass and length units (neither solver
    writes its units into these files). `reference_point`: the point the rotational components refer to, FEA
    coordinates in the FEA's length unit (CalculiX: the origin). `boundary`: `HubClamped()` or `FreeFree()` (or "clamped", "free"); by default
    "free" when the file has rigid-body modes (below `rigid_hz`), else "clamped". Rigid-body modes of a free-free
    run (exactly six below `rigid_hz`) are dropped. `dcm_BF`: the direction cosines $[BF]$ from the FEA axes F to
    the body frame B (rows: B's axes in F components; a vector $v_B = [BF]\,v_F$; default: F = B): participation
    factors, effective masses, the reference point and mode shapes are turned into B (effective masses need the
    participation factors). Mode shapes are read from the file itself where it prints them (CalculiX `*NODE PRINT`
    of U in the `.dat`; NASTRAN EIGENVECTOR tables of `DISP(PRINT)`), or from `shapes_path` (a CalculiX `.frd` of
    `*NODE FILE`, or another `.dat`/`.f06` of the same run). **Raises:** `FeaError` (one line: file, line,
    problem).
    """
    path = os.fspath(path)
    fmt = fea_format or FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt not in FORMATS.values():
        raise _fail(path, f"fea_format = {_fmt(fmt)}: must be one of {', '.join(FORMATS.values())} (or a file "
                    f"ending in {', '.join(FORMATS)})")
    if units is not None and units not in UNIT_SYSTEMS:
        raise _fail(path, f"units = {_fmt(units)}: must be one of {', '.join(UNIT_SYSTEMS)}")
    try:  # the boundary kind (`FreeFree`, `HubClamped`, or their names), once
        kind = None if boundary is None else as_boundary(boundary)
    except ValueError:
        raise _fail(path, f"boundary = {_fmt(boundary)}: must be \"clamped\" or \"free\"") from None
    if fmt == "nastran-op2":  # pyNastran 1.4.1 pins numpy < 2; JAX needs numpy >= 2
        raise _fail(path, "NASTRAN .op2 files are not read (their reader, pyNastran, cannot be installed next to "
                    "JAX: it needs numpy < 2): give the .f06 of the same run")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise _fail(path, f"cannot read it ({e.strerror or e})")
    data = (_calculix if fmt == "calculix" else _nastran_f06)(path, lines)
    C = None
    if dcm_BF is not None:
        C = np.asarray(dcm_BF, dtype=float)
        if (problem := dcm_problem(C)) is not None:
            raise _fail(path, f"dcm_BF = {_fmt(np.asarray(dcm_BF).tolist())}: {problem}")
        if "effective_mass" in data and "participation" not in data:
            raise _fail(path, "dcm_BF: the file has effective masses but no participation factors, whose signs "
                        "rotating them needs (CalculiX prints both; NASTRAN: MPFACTOR = ALL)")
    shp, shp_path = _shapes_of(path, lines, fmt), path
    if shapes_path is not None:
        shp_path = os.fspath(shapes_path)
        try:
            with open(shp_path, encoding="utf-8", errors="replace") as fh:
                slines = fh.read().splitlines()
        except OSError as e:
            raise _fail(shp_path, f"cannot read it ({e.strerror or e})")
        sfmt = "calculix-frd" if shp_path.lower().endswith(".frd") else FORMATS.get(
            os.path.splitext(shp_path)[1].lower())
        shp = _shapes_of(shp_path, slines, sfmt)
        if shp is None:
            raise _fail(shp_path, "no mode shapes in it (CalculiX .frd: *NODE FILE with U; .dat: *NODE PRINT "
                        "with U; NASTRAN .f06: DISP(PRINT))")
    f = np.asarray(data["frequencies"], dtype=float)
    rigid = f < rigid_hz
    if kind is None:
        kind = FreeFree() if rigid.any() else HubClamped()
    if kind.hub_free and rigid.sum() != kind.rigid_body_modes:
        raise _fail(path, f"{int(rigid.sum())} modes below rigid_hz = {_fmt(rigid_hz)} Hz: a free-free analysis "
                    "has exactly 6 rigid-body modes (set rigid_hz, or boundary = \"clamped\")")
    if not kind.hub_free and rigid.any():
        raise _fail(path, f"mode {data['mode_numbers'][int(np.argmax(rigid))]} at {_fmt(float(f[rigid][0]))} Hz "
                    "is a rigid-body mode, but the analysis is said to be clamped")
    keep = ~rigid
    has_mass = "effective_mass" in data or "participation" in data
    if has_mass and units is None:
        raise _fail(path, f"the file has effective masses but does not state its units: give units (one of "
                    f"{', '.join(UNIT_SYSTEMS)})")
    L, M = UNIT_SYSTEMS[units or "m-kg-s"]
    scale = lambda key, a, b: None if key not in data else np.asarray(data[key], float)[keep if a else slice(None)] * (
        np.array([b] * 3 + [b * L * L if key != "participation" else b * L] * 3))
    ref = np.zeros(3) if reference_point is None else np.asarray(reference_point, dtype=float) * L
    nodes = vectors = None
    if shp is not None:
        nodes, vectors = _shape_array(shp_path, shp, [m for m, k in zip(data["mode_numbers"], keep) if k])
        vectors = vectors * np.array([L] * 3 + [1.0] * 3)
    fea = FeaModes(
        frequencies=f[keep], mode_numbers=np.asarray(data["mode_numbers"], dtype=int)[keep],
        effective_mass=scale("effective_mass", True, M), participation=scale("participation", True, math.sqrt(M)),
        reference_point=ref, boundary=kind.name, total_mass=scale("total_mass", False, M), source=path,
        reference_grid=data.get("grdpnt") or None if reference_point is None else None, unread=data.get("unread"),
        shape_nodes=nodes, shapes=vectors, shapes_source=shp_path if shp is not None else "")
    return fea if C is None else _rotate(fea, C)


def _shapes_of(path, lines: list[str], fmt: str | None) -> dict | None:
    """The mode shapes in a file's lines, by format (None: the file prints none)."""
    if fmt == "nastran-f06":
        return _nastran_shapes(path, lines)
    if fmt == "calculix":
        return _calculix_shapes(path, lines)
    if fmt == "calculix-frd":
        return _frd_shapes(path, lines)
    raise _fail(path, "mode shapes are read from CalculiX .dat and .frd and NASTRAN .f06 files")


_CCX_MODE = re.compile(r"E I G E N V A L U E\s+N U M B E R\s+(\d+)")


def _calculix_shapes(path, lines: list[str]) -> dict | None:
    """The displacements of a CalculiX `*NODE PRINT, NSET=...` (U) in a `*FREQUENCY` step's .dat: per mode
    ("E I G E N V A L U E   N U M B E R  n"), per node, vx vy vz (every set printed). None without them."""
    out: dict[int, dict[int, list[float]]] = {}
    mode = None
    i = 0
    while i < len(lines):
        m = _CCX_MODE.search(lines[i])
        if m:
            mode = int(m.group(1))
        elif mode is not None and lines[i].lstrip().startswith("displacements (vx,vy,vz)"):
            tab, i = _rows(path, lines, i + 1, 3)
            rows = out.setdefault(mode, {})
            for r in tab:
                rows[int(r[0])] = r[1:] + [math.nan] * 3
            continue
        i += 1
    return {"modes": out} if out else None


def _frd_shapes(path, lines: list[str]) -> dict | None:
    """The DISP blocks of a CalculiX ASCII `.frd` (`*NODE FILE` of U in a `*FREQUENCY` step): per mode (the
    `1PMODE` parameter before each block), per node, D1 D2 D3 (fixed columns: the node in 3-12, values 12 wide)."""
    out: dict[int, dict[int, list[float]]] = {}
    mode = block = None
    for i, line in enumerate(lines):
        if line.startswith("    1PMODE"):
            mode = int(line.split()[1])
        elif line.startswith(" -4"):
            block = line.split()[1] if len(line.split()) > 1 else None
            if block == "DISP" and mode is None:
                raise _fail(path, "a DISP block without a mode number (1PMODE): not the .frd of a *FREQUENCY step",
                            i + 1)
        elif line.startswith(" -3"):
            block = None
        elif block == "DISP" and line.startswith(" -1"):
            try:
                node, vals = int(line[3:13]), [float(line[13 + 12 * k:25 + 12 * k]) for k in range(3)]
            except ValueError:
                raise _fail(path, f"cannot read this DISP row: {line.strip()!r}", i + 1) from None
            if not all(math.isfinite(v) for v in vals):
                raise _fail(path, f"a number that is not finite in {line.strip()!r}", i + 1)
            out.setdefault(mode, {})[node] = vals + [math.nan] * 3
    return {"modes": out} if out else None
