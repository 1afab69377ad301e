"""FEA modal result readers (`jaxhinge._io._fea.read_fea`), on real solver output: the CalculiX 2.20 runs of the
test spacecraft (tests/data/fea, made by make_spacecraft.py), a NASTRAN SOL 103 .f06 from pyNastran's examples and a
MYSTRAN 18.0 SOL 103 .f06 with MEFFMASS/MPFACTOR output (tests/data/fea/mystran, made by make_hinged_panels.py).
Values are checked against the numbers printed in the files, against each other (participation factor squared =
effective mass, the modes' sum = the printed total) and against the geometry (the effective mass of the clamped
wings is their mass; their rotational effective mass about the origin is their inertia about the origin)."""

import json
import math
import os

import numpy as np
import pytest

from jaxhinge._io._fea import UNIT_SYSTEMS, read_fea
from jaxhinge._errors import FeaError

DATA = os.path.join(os.path.dirname(__file__), "data", "fea")
CLAMPED = os.path.join(DATA, "spacecraft_clamped.dat")
FREE = os.path.join(DATA, "spacecraft_free.dat")
F06 = os.path.join(DATA, "nastran", "beam_modes.f06")
MYSTRAN = os.path.join(DATA, "mystran", "hinged_panels.F06")


def _table_row(path, title, mode):
    """The numbers of one row of a table, as printed (parsed here independently of the reader)."""
    lines = open(path).read().splitlines()
    start = next(i for i, s in enumerate(lines) if title in s)
    for s in lines[start:]:
        parts = s.split()
        if parts and parts[0] == str(mode):
            return [float(x) for x in parts[1:]]
    raise AssertionError((title, mode))


def test_calculix_clamped_values_as_printed():
    m = read_fea(CLAMPED, units="m-kg-s")
    assert m.boundary == "clamped" and m.source == CLAMPED
    assert list(m.mode_numbers) == list(range(1, 21))
    eig = _table_row(CLAMPED, "E I G E N V A L U E   O U T P U T", 3)
    assert m.frequencies[2] == eig[2] == 18.80375
    for k in range(20):  # frequency = sqrt(eigenvalue) / 2 pi, to the 7 printed digits
        lam = _table_row(CLAMPED, "E I G E N V A L U E   O U T P U T", k + 1)[0]
        assert m.frequencies[k] == pytest.approx(math.sqrt(lam) / (2 * math.pi), rel=5e-7)
    assert m.effective_mass[0, 2] == 15.35269 and m.effective_mass[0, 3] == 62.50039
    assert m.participation[4].tolist() == _table_row(CLAMPED, "P A R T I C I P A T I O N", 5)
    # mass-normalised modes: effective mass = participation factor squared (where printed to 7 digits)
    big = m.effective_mass > 1e-6
    np.testing.assert_allclose(m.participation[big] ** 2, m.effective_mass[big], rtol=2e-6)
    # the modes' sum is the TOTAL row of the table; 20 modes hold all but < 0.1 % of the total effective mass
    total_row = next(s for s in open(CLAMPED) if s.startswith("TOTAL"))
    np.testing.assert_allclose(m.effective_mass.sum(axis=0), [float(x) for x in total_row.split()[1:]], rtol=1e-5)
    assert m.total_mass.tolist() == [36.03111] * 3 + [103.8949, 3.003794, 106.8963]
    assert np.all(m.effective_mass.sum(axis=0) <= m.total_mass * (1 + 1e-6))
    assert np.all(m.effective_mass.sum(axis=0)[[0, 1, 2, 3, 5]] >= 0.999 * m.total_mass[[0, 1, 2, 3, 5]])


def test_calculix_totals_are_the_wings_mass_and_inertia_about_the_origin():
    """Hub clamped: the total effective mass is the mass that moves relative to the hub (the wings, less the share
    of the strip nodes on the hub face), and the rotational totals are the wings' inertia about the origin: the
    rotations refer to the FEA's origin, as the reader says."""
    m = read_fea(CLAMPED, units="m-kg-s")
    props = json.load(open(os.path.join(DATA, "mass_properties.json")))["wings"]
    mass = sum(w["panel_mass"] + w["hinge_strip_mass"] for w in props.values())
    assert m.total_mass[0] == pytest.approx(mass, rel=1e-3)
    inertia = np.zeros(3)
    for w in props.values():
        c = np.array(w["panel_com"])
        inertia += np.array(w["inertia_about_com_box_axes"]) + w["panel_mass"] * (c @ c - c**2)  # parallel axes
    np.testing.assert_allclose(m.total_mass[3:], inertia, rtol=2e-3)


def test_calculix_free_free_drops_the_six_rigid_body_modes():
    m = read_fea(FREE, units="m-kg-s")
    assert m.boundary == "free" and list(m.mode_numbers) == list(range(7, 21))
    assert m.frequencies[0] == 0.6632776 and m.frequencies[1] == 1.003218
    hub = json.load(open(os.path.join(DATA, "mass_properties.json")))["hub"]["mass"]
    assert m.total_mass[0] == pytest.approx(hub + 20.02 + 16.02, rel=1e-6)  # the whole spacecraft
    # elastic modes of a free-free body carry no effective mass (orthogonal to the rigid-body modes)
    assert np.all(m.effective_mass < 1e-8 * m.total_mass)


def test_units_convert_to_si():
    si = read_fea(CLAMPED, units="m-kg-s")
    L, M = UNIT_SYSTEMS["mm-t-s"]
    mm = read_fea(CLAMPED, units="mm-t-s", reference_point=[10.0, 0.0, 0.0])
    np.testing.assert_allclose(mm.effective_mass[:, :3], si.effective_mass[:, :3] * M)
    np.testing.assert_allclose(mm.effective_mass[:, 3:], si.effective_mass[:, 3:] * M * L**2)
    np.testing.assert_allclose(mm.participation[:, 3:], si.participation[:, 3:] * math.sqrt(M) * L)
    np.testing.assert_allclose(mm.reference_point, [0.01, 0.0, 0.0])
    np.testing.assert_array_equal(mm.frequencies, si.frequencies)


def test_nastran_f06_eigenvalue_table():
    m = read_fea(F06)
    assert m.boundary == "clamped" and list(m.mode_numbers) == list(range(1, 11))
    assert m.frequencies[2] == 2674.588 and m.effective_mass is None and m.participation is None
    for k in range(10):
        row = _table_row(F06, "R E A L   E I G E N V A L U E S", k + 1)  # order, eigenvalue, radians, cycles, ...
        assert m.frequencies[k] == row[3]
        assert row[3] == pytest.approx(math.sqrt(row[1]) / (2 * math.pi), rel=1e-6)


def _mystran_deck():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_hinged_panels",
                                                  os.path.join(DATA, "mystran", "make_hinged_panels.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mystran_f06_effective_masses_as_printed():
    """MEFFMASS and MPFACTOR tables of a real MYSTRAN SOL 103 run: every value as printed, the printed sum over the
    modes, the total model mass; rotations refer to the PARAM GRDPNT grid, whose position the reader asks for."""
    ref = _mystran_deck().HUB_GRID
    m = read_fea(MYSTRAN, units="m-kg-s", reference_point=ref)
    assert m.boundary == "clamped" and list(m.mode_numbers) == [1, 2, 3] and m.reference_grid is None
    np.testing.assert_array_equal(m.reference_point, ref)
    for k in range(3):
        eig = _table_row(MYSTRAN, "R E A L   E I G E N V A L U E S", k + 1)
        assert m.frequencies[k] == eig[3]
        assert m.effective_mass[k].tolist() == _table_row(MYSTRAN, "E F F E C T I V E   M O D A L", k + 1)[1:]
        assert m.participation[k].tolist() == _table_row(MYSTRAN, "P A R T I C I P A T I O N", k + 1)[1:]
    text = open(MYSTRAN).read().splitlines()
    total = [float(x) for x in next(s for s in text if "Sum all modes:" in s).split(":")[1].split()]
    np.testing.assert_allclose(m.effective_mass.sum(axis=0), total, rtol=2e-6)
    assert m.total_mass[:3].tolist() == [220.0] * 3  # the three panels' mass (the clamped hub grid has none)
    np.testing.assert_allclose(m.participation ** 2, m.effective_mass, rtol=2e-6, atol=1e-12)
    assert read_fea(MYSTRAN, units="m-kg-s").reference_grid == 1


def test_mystran_modes_and_effective_masses_equal_jaxhinge_clamped_modes():
    """The MYSTRAN deck is the jaxhinge model of three rigid panels on torsion springs written as finite elements
    (RBE2 ties, CELAS2 springs, CONM2 masses, one hinge axis along no basic axis): its frequencies, effective
    masses and participation factors (up to the mode shape's sign) equal jaxhinge's clamped modes about the same
    point to the 7 printed digits. An independent solver, formulation and code."""
    import jaxhinge as jh
    from jaxhinge._model._spacecraft import Hub, Panels, Spacecraft

    mk = _mystran_deck()
    P = mk.PANELS
    panels = Panels(mass=[p["mass"] for p in P], IPntS_S=[np.diag(p["I"]) for p in P], d=[p["d"] for p in P],
                    k=[p["k"] for p in P], c=[0.0] * 3, r_HB_B=[p["r_HB_B"] for p in P],
                    dcm_HB=[p["dcm_HB"] for p in P], names=[p["name"] for p in P])
    sc = Spacecraft(Hub(500.0, np.diag([300.0, 200.0, 250.0]), np.zeros(3)), panels)  # clamped: hub mass unused
    model = jh.modes(sc, "clamped", reference_point=mk.HUB_GRID)
    fea = read_fea(MYSTRAN, units="m-kg-s", reference_point=mk.HUB_GRID)
    np.testing.assert_allclose(np.asarray(model.frequency_hz), fea.frequencies, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model.effective_mass), fea.effective_mass, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.abs(np.asarray(model.participation)), np.abs(fea.participation), rtol=1e-6,
                               atol=1e-6)


def _cut(tmp_path, src, keep):
    lines = open(src).read().splitlines(keepends=True)
    p = tmp_path / ("cut" + os.path.splitext(src)[1])
    p.write_text("".join(keep(lines)))
    return str(p)


@pytest.mark.parametrize("make, kwargs, words", [
    (lambda t: _cut(t, CLAMPED, lambda ls: ls[:40]), {"units": "m-kg-s"}, "participationfactors table has 8 of 20"),
    (lambda t: _cut(t, CLAMPED, lambda ls: ls[:next(i for i, s in enumerate(ls) if "T O T A L" in s)]),
     {"units": "m-kg-s"}, "total effective mass table is missing"),
    (lambda t: _cut(t, CLAMPED, lambda ls: ls[:5]), {}, "eigenvalue table has no rows"),
    (lambda t: _cut(t, CLAMPED, lambda ls: ls[20:]), {}, "no eigenvalue table"),
    (lambda t: _cut(t, CLAMPED, lambda ls: ls + ls), {"units": "m-kg-s"}, "several *FREQUENCY steps"),
    (lambda t: _cut(t, CLAMPED, lambda ls: ls[:8] + [ls[8].replace("0.2385578E+02", "NaN")] + ls[9:]),
     {"units": "m-kg-s"}, "line 9: cannot read this table row: '2   NaN"),
    (lambda t: CLAMPED, {}, "does not state its units: give units"),
    (lambda t: CLAMPED, {"units": "furlongs"}, 'units = "furlongs": must be one of m-kg-s'),
    (lambda t: CLAMPED, {"units": "m-kg-s", "boundary": "free"}, "0 modes below rigid_hz"),
    (lambda t: FREE, {"units": "m-kg-s", "boundary": "clamped"}, "mode 1 at 0.0 Hz is a rigid-body mode"),
    (lambda t: CLAMPED, {"fea_format": "abaqus"}, 'fea_format = "abaqus": must be one of calculix, nastran-f06'),
    (lambda t: str(t / "none.dat"), {}, "cannot read it"),
    (lambda t: _cut(t, F06, lambda ls: ls[:200]), {}, "no REAL EIGENVALUES table"),
    (lambda t: _cut(t, F06, lambda ls: ls[:next(i for i, s in enumerate(ls) if "R E A L   E I G" in s) + 3]), {},
     "REAL EIGENVALUES table without rows"),
    (lambda t: str(t / "model.op2"), {}, "NASTRAN .op2 files are not read"),
    (lambda t: _cut(t, MYSTRAN, lambda ls: ls[:next(i for i, s in enumerate(ls) if "E F F E C T I V E" in s) + 8]),
     {"units": "m-kg-s"}, "the effective mass table has modes [1], the eigenvalue table [1, 2, 3]"),
    (lambda t: _cut(t, MYSTRAN, lambda ls: [s for s in ls if "Total model mass" not in s]), {"units": "m-kg-s"},
     "no 'Total model mass' line"),
    (lambda t: MYSTRAN, {}, "does not state its units: give units"),
])
def test_refusals_are_one_line(tmp_path, make, kwargs, words):
    path = make(tmp_path)
    with pytest.raises(FeaError) as e:
        read_fea(path, **kwargs)
    msg = str(e.value)
    assert words in msg and "\n" not in msg and msg.startswith(path), msg
