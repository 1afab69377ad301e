"""Modal results of a finite-element analysis (FEA), read from the solver's output files (`read_fea`).

Every reader returns a `FeaModes` (`jaxhinge._analysis._pairing`), what the modal fit pairs and fits against: SI units, the axes of the
FEA model taken to be the hub body frame B, rotations (participation factors and effective masses) about
`reference_point`. Readers: CalculiX `.dat` of a `*FREQUENCY` step (eigenvalues, participation factors,
effective modal masses, total effective mass) and NASTRAN SOL 103 `.f06` (the REAL EIGENVALUES table; the modal
participation factors and effective masses of MEFFMASS/MPFACTOR output as MYSTRAN writes them, with its total model
mass; MSC/NX's differently laid out MEFFMASS tables are not read: no sample to test against). `.op2` is refused
with a message: its reader, pyNastran 1.4.1, requires numpy < 2, which JAX cannot use.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np

from .._analysis._pairing import FeaModes
from .._errors import FeaError
from .._format import fmt_value as _fmt

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


def read_fea(path: str | os.PathLike, fea_format: str | None = None, *, units: str | None = None,
             reference_point=None, boundary: str | None = None, rigid_hz: float = 0.01) -> FeaModes:
    """The modes of an FEA modal analysis file, in SI units.

    `fea_format`: "calculix" (.dat), "nastran-f06" (.f06); default from the extension (.op2 is refused).
    `units`: the FEA model's unit system, one of `UNIT_SYSTEMS` ("m-kg-s", "mm-t-s", "mm-kg-s", "in-lbf-s"; time
    always in s); needed where the file has effective masses, which carry mass and length units (neither solver
    writes its units into these files). `reference_point`: the point the rotational components refer to, FEA
    coordinates in the FEA's length unit (CalculiX: the origin). `boundary`: "clamped" or "free"; by default
    "free" when the file has rigid-body modes (below `rigid_hz`), else "clamped". Rigid-body modes of a free-free
    run (exactly six below `rigid_hz`) are dropped. **Raises:** `ScenarioError` (one line: file, line, problem).
    """
    path = os.fspath(path)
    fmt = fea_format or FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt not in FORMATS.values():
        raise _fail(path, f"fea_format = {_fmt(fmt)}: must be one of {', '.join(FORMATS.values())} (or a file "
                    f"ending in {', '.join(FORMATS)})")
    if units is not None and units not in UNIT_SYSTEMS:
        raise _fail(path, f"units = {_fmt(units)}: must be one of {', '.join(UNIT_SYSTEMS)}")
    if boundary not in (None, "clamped", "free"):
        raise _fail(path, f"boundary = {_fmt(boundary)}: must be \"clamped\" or \"free\"")
    if fmt == "nastran-op2":  # pyNastran 1.4.1 pins numpy < 2; JAX needs numpy >= 2
        raise _fail(path, "NASTRAN .op2 files are not read (their reader, pyNastran, cannot be installed next to "
                    "JAX: it needs numpy < 2): give the .f06 of the same run")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise _fail(path, f"cannot read it ({e.strerror or e})")
    data = (_calculix if fmt == "calculix" else _nastran_f06)(path, lines)
    f = np.asarray(data["frequencies"], dtype=float)
    rigid = f < rigid_hz
    if boundary is None:
        boundary = "free" if rigid.any() else "clamped"
    if boundary == "free" and rigid.sum() != 6:
        raise _fail(path, f"{int(rigid.sum())} modes below rigid_hz = {_fmt(rigid_hz)} Hz: a free-free analysis "
                    "has exactly 6 rigid-body modes (set rigid_hz, or boundary = \"clamped\")")
    if boundary == "clamped" and rigid.any():
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
    return FeaModes(
        frequencies=f[keep], mode_numbers=np.asarray(data["mode_numbers"], dtype=int)[keep],
        effective_mass=scale("effective_mass", True, M), participation=scale("participation", True, math.sqrt(M)),
        reference_point=ref, boundary=boundary, total_mass=scale("total_mass", False, M), source=path,
        reference_grid=data.get("grdpnt") or None if reference_point is None else None, unread=data.get("unread"))
