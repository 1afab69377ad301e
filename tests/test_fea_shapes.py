"""Fits that know when the answer is not unique (issue 31): the multi-start search and its `solutions`, FEA mode
shapes (readers, MAC pairing, tracking, shape residuals), free-free pairing robust to unclean rigid-body modes,
and FEA models in rotated axes (`dcm_BF`).

References: real FE runs, committed with their generators - CalculiX 2.20 (tests/data/fea/wings: a rigid hub as
`*RIGID BODY`, two flexible plate wings on pinned torsion springs of 420 and 260 N m/rad, free-free, clamped and
in rotated axes) and MYSTRAN 18.0 (tests/data/fea/mystran: three rigid panels on CELAS2 springs, with
eigenvector output, aligned and rotated); the solutions are re-checked with `jh.modes` (an evaluation that
shares nothing with the solver), the recovered springs against the FE model's own constants.

The two-wing fits share one compiled multi-start program (two free stiffnesses, two targets; with and without a
shape map), so most of them cost a solve, not a compilation."""

import dataclasses
import itertools
import json
import os
import re

import numpy as np
import pytest

import jaxhinge as jh
from jaxhinge._errors import FeaError, FitError
from jaxhinge._io._fea import read_fea
from jaxhinge._model._fea_modes import ShapeMap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINGS = os.path.join(ROOT, "tests", "data", "fea", "wings")
MYSTRAN = os.path.join(ROOT, "tests", "data", "fea", "mystran")
FIT_TOML = os.path.join(ROOT, "fits", "fea", "wings", "FIT.toml")
FE_SPRINGS = (420.0, 260.0)  # the SPRINGA constants of tests/data/fea/wings/make_wings.py
FREE = ["wing_pY.k", "wing_mY.k"]
# the CalculiX model's output nodes (tests/data/fea/wings/model.json): hub REF / ROT, wing ROT nodes
HINGE_MAP = ShapeMap(hub=1130, hub_point=(0.0, 0.0, 0.0), hub_rotation=1131,
                     panels=(("wing_pY", 1134, None), ("wing_mY", 1137, None)))


def _model_json():
    with open(os.path.join(WINGS, "model.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def wings():
    """The rigid-panel model of the CalculiX wings (FE springs), and the issue's start: 30 % above, 25 % below."""
    sc = jh.load_scenario(os.path.join(WINGS, "wings.toml"))
    return sc, jh.apply_parameters(sc, {"wing_pY.k": 1.3 * FE_SPRINGS[0], "wing_mY.k": 0.75 * FE_SPRINGS[1]})


@pytest.fixture(scope="module")
def free_fea():
    return read_fea(os.path.join(WINGS, "wings_free.dat"), units="m-kg-s")


# ------------------------------------------------------------------------------------------------------------
# Readers and rotated axes (no fits)
# ------------------------------------------------------------------------------------------------------------


def test_calculix_node_print_and_frd_shapes_agree():
    """The same run's mode shapes from the .dat (*NODE PRINT, 7 digits) and the .frd (*NODE FILE, 6 digits) agree
    to the .frd's print precision; the .frd lacks node 1130, which belongs to no element (ccx writes only element
    nodes there); CalculiX prints no rotations (NaN)."""
    dat = read_fea(os.path.join(WINGS, "wings_free.dat"), units="m-kg-s")
    frd = read_fea(os.path.join(WINGS, "wings_free.dat"), units="m-kg-s",
                   shapes_path=os.path.join(WINGS, "wings_free.frd"))
    assert list(dat.mode_numbers) == list(range(7, 25)) and dat.shapes.shape == (18, 8, 6)
    assert set(dat.shape_nodes) - set(frd.shape_nodes) == {1130}
    cols = [list(dat.shape_nodes).index(n) for n in frd.shape_nodes]
    a, b = dat.shapes[:, cols, :3], frd.shapes[:, :, :3]
    assert np.all(np.abs(a - b) <= 5e-6 * np.maximum(np.abs(a), 1e-5) + 1e-10)
    assert np.all(np.isnan(dat.shapes[..., 3:]))


def test_nastran_eigenvector_tables():
    """MYSTRAN's EIGENVECTOR tables (`DISP(PRINT)`): the rigid panels' hinge grids only rotate, about their hinge
    axis, and the grid at distance d from the hinge moves d theta normal to its panel (the deck's geometry,
    hinged_panels_nodes.json), to print precision; each mode moves one panel. MSC-style tables (pyNastran's
    beam_modes.f06: 'R E A L   E I G E N V E C T O R   N O .', TYPE G) are read too."""
    with open(os.path.join(MYSTRAN, "hinged_panels_nodes.json")) as f:
        nodes = json.load(f)
    fea = read_fea(os.path.join(MYSTRAN, "hinged_panels_shapes.F06"), units="m-kg-s")
    g = list(fea.shape_nodes)
    assert g == [1, 104, 105, 204, 205, 304, 305] and fea.shapes.shape == (3, 7, 6)
    for p in nodes["panels"]:
        i = p["mode"] - 1
        hinge, dist = fea.shapes[i, g.index(p["hinge_grid"])], fea.shapes[i, g.index(p["distance_grid"])]
        axis = np.asarray(p["hinge_axis_B"])
        theta = hinge[3:] @ axis
        assert abs(theta) > 1e-2
        np.testing.assert_allclose(hinge[3:], theta * axis, atol=1e-7)  # a rotation about the hinge axis only
        np.testing.assert_allclose(hinge[:3], 0.0, atol=1e-7)
        assert np.linalg.norm(dist[:3]) == pytest.approx(p["d"] * abs(theta), rel=1e-6)
        assert abs(dist[:3] @ axis) < 1e-7
        others = [q for q in nodes["panels"] if q is not p]
        assert all(np.all(fea.shapes[i, g.index(q["hinge_grid"])] == 0.0) for q in others)
    msc = read_fea(os.path.join(ROOT, "tests", "data", "fea", "nastran", "beam_modes.f06"))
    assert msc.shapes is not None and msc.shapes.shape[0] == len(msc.frequencies)
    assert np.all(msc.shapes[:, list(msc.shape_nodes).index(1)] == 0.0)  # the clamped grid
    # mode 1, grid 2 as printed: "2  G  1.500483E-18  -3.315288E-03  1.857573E-02  5.360878E-18  -3.055872E-02 ..."
    np.testing.assert_array_equal(msc.shapes[0, list(msc.shape_nodes).index(2), 1:5],
                                  [-3.315288e-03, 1.857573e-02, 5.360878e-18, -3.055872e-02])


def test_rotated_fea_axes_read_as_the_aligned_run():
    """The same FE model with its axes rotated (x_F = C_FB x_B), read with dcm_BF = [BF]: participation factors,
    effective masses and shapes equal the aligned run's. MYSTRAN: to its print precision (7 digits: measured
    1.7e-7 relative, shapes 3e-8 absolute). CalculiX free-free: the hinge modes' frequencies and
    shapes to ccx's own rotated-vs-aligned noise (frequencies 2e-6; shapes 3.1e-6 of the largest value: 1e-5 here). A matrix that
    is not a rotation is refused."""
    with open(os.path.join(MYSTRAN, "hinged_panels_nodes.json")) as f:
        C = np.asarray(json.load(f)["dcm_BF"])
    a = read_fea(os.path.join(MYSTRAN, "hinged_panels_shapes.F06"), units="m-kg-s")
    b = read_fea(os.path.join(MYSTRAN, "hinged_panels_rotated.F06"), units="m-kg-s", dcm_BF=C)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    np.testing.assert_allclose(b.participation, a.participation, rtol=0, atol=5e-7 * np.abs(a.participation).max())
    np.testing.assert_allclose(b.effective_mass, a.effective_mass, rtol=0, atol=1e-6 * a.effective_mass.max())
    np.testing.assert_allclose(b.shapes, a.shapes, rtol=0, atol=1e-7)
    Cw = np.asarray(_model_json()["dcm_BF"])
    fa = read_fea(os.path.join(WINGS, "wings_free.dat"), units="m-kg-s")
    fb = read_fea(os.path.join(WINGS, "wings_free_rot.dat"), units="m-kg-s", dcm_BF=Cw)
    hinge = slice(0, 2)
    np.testing.assert_allclose(fb.frequencies[hinge], fa.frequencies[hinge], rtol=3e-6)
    s = np.sign(np.nansum(fa.shapes[hinge] * fb.shapes[hinge], axis=(1, 2)))[:, None, None]  # eigenvector signs
    np.testing.assert_allclose(s * fb.shapes[hinge], fa.shapes[hinge], rtol=0, atol=1e-5 * np.nanmax(
        np.abs(fa.shapes[hinge])))
    with pytest.raises(FeaError, match="dcm_BF = .*must be a proper rotation matrix"):
        read_fea(os.path.join(WINGS, "wings_free.dat"), units="m-kg-s", dcm_BF=np.diag([1.0, 1.0, -1.0]))


# ------------------------------------------------------------------------------------------------------------
# Every solution found
# ------------------------------------------------------------------------------------------------------------


def test_two_wing_free_free_frequencies_have_two_exact_solutions_both_reported(wings, free_fea):
    """Free-free frequencies of two coupled wings are reached by two stiffness pairs. From the issue's start, with
    automatic pairing and the FE run's unclean rigid-body modes, the default multi-start search finds both, and
    `jh.modes` of each reproduces the FEA frequencies (1e-9: both are exact solutions, not compromises). The
    reported one is the initial guess's; the status says the data cannot tell them apart; the FEA hinge modes
    (7, 8) are paired, never a wing bending mode (9.. from 118 Hz)."""
    sc, start = wings
    r = jh.fit(start, jh.FeaTargets(free_fea), boundary="free", free=FREE, check=False)
    assert r.converged and r.targets_reached and r.ambiguous, r.message
    assert r.iterations < 10  # (the tracked pairing stalled after 34 steps)
    assert r.message.startswith("targets reached by 2 distinct parameter sets: the data cannot tell them apart")
    assert r.warnings and "free-free elastic modes carry effective mass" in r.warnings[0]
    assert [(p["fea_mode"], p["model_mode"]) for p in r.pairing] == [(7, 1), (8, 2)]
    found = sorted(tuple(d["values"].values()) for d in r.solutions)
    for k in found:
        f = np.asarray(jh.modes(jh.apply_parameters(sc, dict(zip(FREE, k))), "free").frequency_hz)
        np.testing.assert_allclose(f, free_fea.frequencies[:2], rtol=1e-9)
    # the FE springs' basin (0.05 % off: the FE wings are elastic) and the other exact solution
    np.testing.assert_allclose(found[0], FE_SPRINGS, rtol=1e-3)
    assert found[1][0] > 1.1 * FE_SPRINGS[0] and found[1][1] < 0.9 * FE_SPRINGS[1]
    assert r.solutions[0]["start"] == 0 and tuple(r.solutions[0]["values"].values()) == tuple(r.values)
    assert len({d["start"] for d in r.solutions}) == 2


def test_cli_reports_every_solution_with_exit_3(tmp_path, capsys):
    """Without mode shapes the CLI writes both solutions to result.json ("solutions"), prints them, warns and
    exits 3 (docs/errors.md)."""
    with open(FIT_TOML) as f:
        text = f.read()
    cut = text.index("\n[modes.shapes]")
    body = text[:cut] + "\n" + text[text.index("\n[fit]"):]
    body = body.replace('scenario = "wings.toml"', f'scenario = "{os.path.join(ROOT, "fits", "fea", "wings", "wings.toml")}"')
    body = body.replace('"../../../tests/data/fea/wings/wings_free.dat"', f'"{os.path.join(WINGS, "wings_free.dat")}"')
    path = tmp_path / "FIT.toml"
    path.write_text(body)
    rc = jh.main(["fit", str(path), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert rc == 3, out.err
    assert "2 distinct parameter sets reach the targets" in out.out
    assert "the targets are reached by 2 distinct parameter sets" in out.err
    assert "free-free elastic modes carry effective mass" in " ".join(out.err.split())  # (wrapped)
    d = json.loads((tmp_path / "out" / "result.json").read_text())
    assert d["targets_reached"] and len(d["solutions"]) == 2 and d["starts"] == 8
    assert d["status"] == "successful" and d["message"].startswith("targets reached by 2 distinct")
    assert d["solutions"][0]["values"]["wing_pY.k"] == d["parameters"]["wing_pY.k"]["value"]


# ------------------------------------------------------------------------------------------------------------
# Mode shapes
# ------------------------------------------------------------------------------------------------------------


def test_mode_shapes_leave_only_the_fe_springs(tmp_path, capsys):
    """fits/fea/wings/FIT.toml: the same free-free file with the shapes at five nodes. The wrong solution reaches
    the frequencies but not the shapes (MAC 0.84, 0.82 < mac_min 0.9) and is named as rejected; the one left is
    the FE springs to 0.5 % (measured 0.05 %: the FE wings' elasticity); MAC 1 - 3e-8; exit 0 with the unclean
    rigid-body-mode warning. The MAC matrix (result.json) shows why the frequency enters the pairing: wing
    bending modes (FEA 12, 16, 20) look like hinge mode 2 on these few coordinates (MAC 0.83); they are never
    paired."""
    rc = jh.main(["fit", FIT_TOML, "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "free-free elastic modes carry effective mass" in " ".join(out.err.split())  # (wrapped)
    d = json.loads((tmp_path / "out" / "result.json").read_text())
    k = [d["parameters"][n]["value"] for n in FREE]
    np.testing.assert_allclose(k, FE_SPRINGS, rtol=5e-3)
    assert len(d["solutions"]) == 1 and d["targets_reached"]
    assert "rejected by the mode shapes" in d["message"] and "MAC 0.843, 0.822" in d["message"]
    pairs = d["fea"]["pairing"]
    assert [(p["fea_mode"], p["model_mode"]) for p in pairs] == [(7, 1), (8, 2)]
    assert all(p["mac"] > 1 - 1e-6 for p in pairs)
    m = np.asarray(d["mac_matrix"]["mac"])
    rows = d["mac_matrix"]["fea_modes"]
    assert m.shape == (18, 2) and max(m[rows.index(12), 1], m[rows.index(16), 1]) > 0.8
    assert d["fea"]["shapes"]["panels"]["wing_pY"] == {"rotation": 1134}
    assert (tmp_path / "out" / "fit.png").stat().st_size > 10_000


def test_pairing_never_changes_between_iterates(wings, free_fea):
    """The issue's failure: the tracked pairing switched between iterates (participation MAC on the unclean
    free-free effective masses) and the fit stalled after 34 steps at a compromise. Free-free effective masses no
    longer pair (test_two_wing_...: converged in a few steps), and a pairing by mode shapes is decided once, at
    the initial guess (tracking the shape MAC iterate by iterate did switch: at the first iterate from this start
    both FEA modes scored best on model mode 1). Iterate by iterate (max_steps = 1, 2, ..., one start), from the
    issue's start, the pairing stays FEA hinge modes 7, 8 to model modes 1, 2 and the cost never rises, to
    convergence."""
    _, start = wings
    costs = []
    for n in range(1, 9):
        r = jh.fit(start, jh.FeaTargets(free_fea, shapes=HINGE_MAP), boundary="free", free=FREE, check=False, solver=jh.LevenbergMarquardt(max_steps=n), starts=1)
        assert [(p["fea_mode"], p["model_mode"]) for p in r.pairing] == [(7, 1), (8, 2)], n
        costs.append(r.cost)
        if r.converged:
            break
    assert r.converged and r.iterations < 8, r.message
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(costs)), costs


def test_shape_residuals_and_mystran_rotated_fit(wings):
    """Mode-shape residuals (ShapeMap.sigma) on MYSTRAN's rigid-panel deck, which the rigid-panel model matches
    exactly: the hinge stiffnesses and a CoM offset come back as without shapes (7 printed digits), with one
    residual per shape coordinate added; the same deck in rotated axes (dcm_BF) gives the same fit to 1e-6
    (measured 1.5e-7: the rotated file's print rounding)."""
    from test_fea_fit import (  # the deck's model (tests/data/fea/mystran/make_hinged_panels.py)
        _mystran_case,
        _with,
    )

    sc, mk = _mystran_case()
    start = _with(sc, k=[130.0, 110.0, 80.0], d=[1.5, 1.2, 0.65])
    free = ["p0.k", "p1.k", "p2.k", "p2.d"]
    with open(os.path.join(MYSTRAN, "hinged_panels_nodes.json")) as f:
        C = np.asarray(json.load(f)["dcm_BF"])
    smap = ShapeMap(hub=1, hub_point=tuple(mk.HUB_GRID), sigma=0.01,
                    panels=(("p0", 104, None), ("p1", 205, 1.2), ("p2", 304, None)))
    vals = []
    for name, dcm in (("hinged_panels_shapes.F06", None), ("hinged_panels_rotated.F06", C)):
        fea = read_fea(os.path.join(MYSTRAN, name), units="m-kg-s", dcm_BF=dcm)
        r = jh.fit(start, jh.FeaTargets(fea, reference_point=list(mk.HUB_GRID), effective_mass_sigma=0.01, shapes=smap), free=free, boundary="clamped", check=False, starts=1)
        assert r.converged and r.targets_reached, r.message
        assert len(r.residuals) == 3 + 18 + 3 * (6 + 3 + 1 + 3)
        assert all(p["mac"] > 1 - 1e-9 for p in r.pairing)
        vals.append(r.values)
    np.testing.assert_allclose(vals[0], [100.0, 150.0, 60.0, 0.9], rtol=2e-6)
    np.testing.assert_allclose(vals[1], vals[0], rtol=1e-6)


@pytest.mark.parametrize("boundary", ["free", "clamped"])
def test_calculix_rotated_axes_give_the_same_fit(wings, boundary):
    """The CalculiX wings in rotated axes (wings_*_rot, read with dcm_BF) fitted as the aligned run: free-free with
    the shape map (shapes rotated), clamped with effective masses (participation factors rotated). The fits agree
    to 1e-5 (measured 5.4e-6 free, 4.8e-6 clamped), which is ccx's own difference: its rotated runs' hinge
    frequencies differ from the aligned ones by up to 2.4e-6 (double-precision round-off of the stiff wings
    against the soft springs: a 1e-9 degree rotation moves them as much; tests/data/fea/README.md), and k goes as
    f^2. Given the aligned run's eigenvalues, the rotated run's shapes, participation factors and effective masses
    give the aligned fit to 1e-9 (measured: identical)."""
    _, start = wings
    C = np.asarray(_model_json()["dcm_BF"])
    fa = read_fea(os.path.join(WINGS, f"wings_{boundary}.dat"), units="m-kg-s")
    fb = read_fea(os.path.join(WINGS, f"wings_{boundary}_rot.dat"), units="m-kg-s", dcm_BF=C)
    kw = {"shapes": HINGE_MAP} if boundary == "free" else {"effective_mass_sigma": 0.01}
    vals = []
    for fea in (fa, fb, dataclasses.replace(fb, frequencies=fa.frequencies)):
        r = jh.fit(start, jh.FeaTargets(fea, **kw), boundary=boundary, free=FREE, check=False)
        assert r.converged and r.targets_reached and len(r.solutions) == 1, r.message
        vals.append(r.values)
    np.testing.assert_allclose(vals[1], vals[0], rtol=1e-5)
    np.testing.assert_allclose(vals[2], vals[0], rtol=1e-9)
    np.testing.assert_allclose(vals[0], FE_SPRINGS, rtol=5e-3)


def test_calculix_rotated_axes_same_fit_to_1e_6_where_ccx_agrees(wings):
    """The same check on the soft-wing twin (wings_soft_free / _rot: the wings' E / 100, so that ccx's aligned and
    rotated runs agree: hinge modes within 1.5e-7, one unit of the 7th printed digit): the rotated fit, through
    dcm_BF and the shape map, equals the aligned one to 1e-6 (measured 4.6e-7). (Its k are 400 and 254 N m/rad,
    not the springs: a rigid-panel model of wings this soft, first bending mode at 11.9 Hz, is not the FE model.)"""
    _, start = wings
    C = np.asarray(_model_json()["dcm_BF"])
    vals = []
    for name, dcm in (("wings_soft_free.dat", None), ("wings_soft_free_rot.dat", C)):
        fea = read_fea(os.path.join(WINGS, name), units="m-kg-s", dcm_BF=dcm)
        r = jh.fit(start, jh.FeaTargets(fea, shapes=HINGE_MAP), boundary="free", free=FREE, check=False)
        assert r.converged and r.targets_reached and len(r.solutions) == 1, r.message
        assert [(p["fea_mode"], p["model_mode"]) for p in r.pairing] == [(7, 1), (8, 2)]
        vals.append(r.values)
    np.testing.assert_allclose(vals[1], vals[0], rtol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# Refusals
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, words", [
    ({"starts": 0}, "starts = 0: must be an integer between 1 and 1024"),
    ({"starts": 4, "solver": "adam"}, "the multi-start search runs the least-squares solver"),
    ({"bounds": {"wing_pY.c": [1, 2]}}, r"bounds\['wing_pY.c'\]: not a free parameter"),
    ({"bounds": {"wing_pY.k": [500, 100]}}, "must be \\[low, high\\] with low < high"),
    ({"bounds": {"wing_pY.k": [-1, 100]}}, "must be a finite number > 0"),
    ({"shapes": ShapeMap(hub=99, hub_point=(0, 0, 0), panels=(("wing_pY", 1134, None),))},
     "shapes.hub = 99: not a node with mode shapes"),
    ({"shapes": ShapeMap(hub=1130, hub_point=(0, 0, 0), panels=(("wing_pY", 1134, None),))},
     "the file has no rotations at this node .CalculiX writes none.: give hub_rotation"),
    ({"shapes": ShapeMap(hub=None, hub_point=(0, 0, 0), panels=(("boom", 1134, None),))},
     "shapes.panels.boom: not a panel of the model"),
    ({"shapes": ShapeMap(hub=None, hub_point=(0, 0, 0), panels=(("wing_pY", 260, -0.5),))},
     "distance = -0.5: must be a distance > 0"),
])
def test_multi_start_and_shape_settings_refused_in_plain_words(wings, free_fea, kwargs, words):
    _, start = wings
    with pytest.raises(FitError, match=words):
        kwargs = dict(kwargs)
        shapes = kwargs.pop("shapes", None)
        if "bounds" in kwargs:
            kwargs["starts"] = jh.Starts(bounds=kwargs.pop("bounds"))
        jh.fit(start, jh.FeaTargets(free_fea, shapes=shapes), boundary="free", free=FREE, check=False, **kwargs)


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace("rotation = 1137", "rotation = 1137, node = 860"),
     "modes.shapes.panels.wing_mY = .*give either rotation"),
    (lambda s: s.replace("hub = 1130", "hub = 1130\nsigma = -1"), "modes.shapes.sigma = -1"),
    (lambda s: s.replace('fea_units = "m-kg-s"', 'fea_units = "m-kg-s"\nfea_dcm_BF = [[1, 0, 0], [0, 1, 0], [0, 0, 2]]'),
     "modes.fea_dcm_BF = .*must be a proper rotation matrix"),
    (lambda s: s.replace("[fit]", "[fit]\nstarts = 2000"), "fit.starts = 2000"),
    (lambda s: s.replace('fea_units = "m-kg-s"', f'fea_units = "m-kg-s"\nfea_shapes = "{WINGS}/wings_free.frd"'),
     "modes.shapes.hub = 1130: not a node with mode shapes in .*wings_free.frd"),  # ccx leaves it out of the .frd
    (lambda s: s.replace("rotation = 1134", "rot = 1134"),
     "modes.shapes.panels.wing_pY: unknown key 'rot'; allowed keys: rotation, node, distance"),
    (lambda s: s.replace("[fit]", "[fit]\nbounds = {\"wing_pY.k\" = [1, 2, 3]}"),
     r"fit.bounds\['wing_pY.k'\] = \[1, 2, 3\]: must be \[low, high\]"),
])
def test_bad_shape_fit_files_exit_2(tmp_path, capsys, edit, words):
    with open(FIT_TOML) as f:
        text = edit(f.read())
    text = text.replace('scenario = "wings.toml"', f'scenario = "{os.path.join(ROOT, "fits", "fea", "wings", "wings.toml")}"')
    text = text.replace('"../../../tests/data/fea/wings/wings_free.dat"', f'"{os.path.join(WINGS, "wings_free.dat")}"')
    path = tmp_path / "FIT.toml"
    path.write_text(text)
    rc = jh.main(["fit", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert re.search(words, errors[0]), err
    assert not (tmp_path / "out").exists()
