"""What a modal fit aims at (`fit_targets`): target frequencies and damping ratios, given as numbers or taken from
FEA modes paired with the model's (automatically, by hand or by mode shapes), the model mode of each target, the
FEA effective masses and participation vectors, each checked and refused with a `FitError` that names the
argument."""

import dataclasses
import itertools
import math

import numpy as np

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from .._linear._modes import modes
from ._pairing import (
    FeaModes,
    ShapeMap,
    fea_shape_vectors,
    model_shape_matrix,
    pair_modes,
    pairs_by_hand,
    total_effective_mass,
    unclean_free_modes,
    unit_participation,
)


def number_list(value, field: str, *, positive: bool) -> np.ndarray:
    """`value` as a float array: a non-empty list of finite numbers (> 0 with `positive`), else a `FitError`
    naming `field` (and the index of the bad entry)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise FitError(f"{field} = {_fmt(value)}: must be a list of numbers", field=field)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise FitError(f"{field}[{i}] = {_fmt(v)}: must be a number", field=field)
        x = float(v)
        if not math.isfinite(x) or (positive and not x > 0):
            raise FitError(f"{field}[{i}] = {_fmt(v)}: must be a finite number > 0", field=field)
        out.append(x)
    if not out:
        raise FitError(f"{field} = []: give at least one value", field=field)
    return np.asarray(out)


@dataclasses.dataclass(frozen=True)
class Targets:
    """What the fit aims at: frequency and damping targets `ft`, `zt`, the model mode index of each, the FEA
    effective masses fitted (`em_t`), the FEA pairing at the start (`pairs0`, `by_hand`), the tracked FEA
    participation vectors (`track`, `track_scale`) and the reference point `ref` [m, B]."""

    ft: np.ndarray
    zt: np.ndarray
    idx: tuple[int, ...]
    em_t: np.ndarray
    pairs0: tuple | None
    by_hand: bool
    track: np.ndarray
    track_scale: np.ndarray
    ref: np.ndarray
    fea: FeaModes | None
    warnings: tuple[str, ...] = ()
    shape_map: ShapeMap | None = None  # panels by index
    shape_fe: np.ndarray | None = None  # (FEA modes, c) the FEA modes in the shape coordinates


def fit_targets(scenario, boundary, *, targets_hz=None, damping_ratios=None, mode_numbers=None, fea=None,
                fea_modes=None, reference_point=None, effective_mass_sigma=None, shapes=None) -> Targets:
    """The targets of a fit of `scenario`'s modes at `boundary`, checked: `targets_hz` (numbers), or the FEA
    modes `fea` paired with the model's automatically, by hand (`mode_numbers`, `fea_modes`) or by their shapes
    (`shapes`); `damping_ratios`, `reference_point` and `effective_mass_sigma` as `fit` takes them (None: not
    given)."""
    sc = scenario.spacecraft
    names = sc.panels.labels
    n = len(names)
    ref = np.zeros(3) if fea is None else np.asarray(fea.reference_point, float)
    if reference_point is not None:
        ref = number_list(reference_point, "reference_point", positive=False)
        if ref.shape != (3,):
            raise FitError(f"reference_point = {_fmt(reference_point)}: must be 3 numbers [m] in B",
                           field="reference_point")
    if shapes is not None and fea is None:
        raise FitError("shapes (a mode-shape map) need FEA modes with their shapes: give fea", field="shapes")
    elif fea is not None and fea.reference_grid and fea.effective_mass is not None and reference_point is None:
        raise FitError(f"{fea.source}: its effective masses refer to grid {fea.reference_grid} (PARAM GRDPNT), whose "
                       "coordinates are not in the file: give reference_point (that grid's position in B [m])",
                       field="reference_point")
    em_t, pairs0, track, track_scale, by_hand = np.zeros((0, 6)), None, np.zeros((0, 6)), np.ones(6), False
    smap = fe_vecs = None
    warnings: tuple[str, ...] = ()
    if fea is not None and boundary.hub_free:
        if effective_mass_sigma is not None:
            raise FitError("effective_mass_sigma with free-free FEA modes: free-free elastic modes carry no "
                           "effective mass (the model's are zero), so there is nothing to fit; it applies to "
                           "clamped modes", field="effective_mass_sigma")
        unclean = unclean_free_modes(fea)
        warnings = () if unclean is None else (unclean,)
    if fea is not None:
        if fea.boundary is not None and fea.boundary != boundary.name:
            raise FitError(f"boundary = {_fmt(boundary.name)} but the FEA modes ({fea.source}) are {fea.boundary}: "
                           "fit the model with the FEA's boundary condition", field="boundary")
        if targets_hz is not None:
            raise FitError("give either targets_hz or FEA modes (fea), not both", field="targets_hz")
        by_hand = mode_numbers is not None or fea_modes is not None
        if shapes is not None:
            smap, fe_vecs = _shape_setup(scenario, fea, shapes)
        fi, idx_f = pairs_by_hand(fea, n, mode_numbers, fea_modes) if by_hand else \
            pair_modes(fea, modes(scenario, boundary, ref), shapes=None if shapes is None else (
                fe_vecs, model_shape_matrix(sc, smap)))[:2]
        pairs0 = (fi, idx_f)
        targets_hz, mode_numbers = fea.frequencies[fi], [j + 1 for j in idx_f]
        if fea.damping is not None:
            if damping_ratios is not None:
                raise FitError("give damping ratios either with the FEA modes (FeaModes.damping, "
                               "fea_damping_ratios) or as damping_ratios, not both", field="damping_ratios")
            damping_ratios = np.asarray(fea.damping, float)[fi]
        if effective_mass_sigma is not None:
            if fea.effective_mass is None:
                why = "" if fea.unread is None else f" ({fea.unread})"
                raise FitError(f"effective_mass_sigma is given but {fea.source} has no effective masses{why}",
                               field="effective_mass_sigma")
            em_t = np.asarray(fea.effective_mass, float)[fi]
        vec = unit_participation(fea, modes(scenario, boundary, ref))
        if vec is not None and not by_hand and shapes is None:  # tracked by participation; by hand: fixed
            track, track_scale = vec[0][fi], np.sqrt(total_effective_mass(fea))
    ft = number_list(targets_hz, "targets_hz", positive=True)
    if fea is None and np.any(np.diff(ft) < 0):
        raise FitError(f"targets_hz = {_fmt(ft)}: must be in ascending order (they are matched to the modes "
                       "in ascending frequency)", field="targets_hz")
    zt = np.zeros(0)
    if damping_ratios is not None:
        zt = number_list(damping_ratios, "damping_ratios", positive=True)
        if len(zt) != len(ft):
            raise FitError(f"damping_ratios has {len(zt)} values but targets_hz has {len(ft)}: give one "
                           "damping ratio per target frequency", field="damping_ratios")
        if np.any(zt >= 1):
            raise FitError(f"damping_ratios = {_fmt(zt)}: each must be < 1 (an oscillating mode)",
                           field="damping_ratios")
    if n == 0:
        raise FitError("the scenario has no panels, hence no flexible modes to fit", field="scenario")
    if len(ft) > n:
        raise FitError(f"{len(ft)} target frequencies but the model has only {n} flexible mode(s) (one per panel; "
                       f"the {boundary.name} hub adds none): no parameter values can produce the extra ones",
                       field="targets_hz")
    if mode_numbers is None:
        idx = tuple(range(len(ft)))
    else:
        mn = list(mode_numbers)
        if len(mn) != len(ft) or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in mn):
            raise FitError(f"mode_numbers = {_fmt(mn)}: must be {len(ft)} integers (one per target)",
                           field="mode_numbers")
        if any(x < 1 or x > n for x in mn) or (fea is None and any(b <= a for a, b in itertools.pairwise(mn))):
            raise FitError(f"mode_numbers = {_fmt(mn)}: must be strictly increasing, between 1 and {n}",
                           field="mode_numbers")
        idx = tuple(int(x) - 1 for x in mn)

    return Targets(ft, zt, idx, em_t, pairs0, by_hand, track, track_scale, ref, fea, warnings, smap, fe_vecs)


def _shape_setup(scenario, fea: FeaModes, shapes: ShapeMap):
    """The shape map with panels by index, checked against the FEA file and the model, and the FEA modes in its
    coordinates (`fea_shape_vectors`)."""
    sc = scenario.spacecraft
    if not isinstance(shapes, ShapeMap):
        raise FitError(f"shapes: expected a ShapeMap, got {type(shapes).__name__}", field="shapes")
    if fea.shapes is None:
        raise FitError(f"shapes: {fea.source} has no mode shapes (CalculiX: *NODE PRINT or *NODE FILE of U in the "
                       "*FREQUENCY step, the .dat or the .frd; NASTRAN: DISP(PRINT) = <set>): docs/modes-and-fea.md",
                       field="shapes")
    known = [int(x) for x in fea.shape_nodes]
    for what, node in (("hub", shapes.hub), ("hub_rotation", shapes.hub_rotation),
                       *((f"panels.{p}", nd) for p, nd, _ in shapes.panels)):
        if node is not None and node not in known:
            raise FitError(f"shapes.{what} = {_fmt(node)}: not a node with mode shapes in "
                           f"{fea.shapes_source or fea.source} (nodes: "
                           f"{', '.join(map(str, known))})", field="shapes")
    if shapes.hub is None and shapes.hub_rotation is not None:
        raise FitError("shapes.hub_rotation is given without shapes.hub", field="shapes")
    if not shapes.panels:
        raise FitError("shapes.panels: map at least one panel to a node", field="shapes")
    labels = list(sc.panels.labels)
    panels = []
    for name, node, dist in shapes.panels:
        if name not in labels:
            raise FitError(f"shapes.panels.{name}: not a panel of the model (panels: {', '.join(labels)})",
                           field="shapes")
        j = labels.index(name)
        if sc.panels.parent[j] != -1:
            raise FitError(f"shapes.panels.{name}: a panel of a chain; mode shapes map panels hinged to the hub "
                           "only", field="shapes")
        if dist is not None and not (isinstance(dist, (int, float)) and math.isfinite(dist) and dist > 0):
            raise FitError(f"shapes.panels.{name}.distance = {_fmt(dist)}: must be a distance > 0 [m] from the "
                           "hinge line", field="shapes")
        panels.append((j, int(node), None if dist is None else float(dist)))
    smap = dataclasses.replace(shapes, panels=tuple(panels))
    if shapes.hub is not None and shapes.hub_rotation is None and not np.all(np.isfinite(
            fea.shapes[:, known.index(shapes.hub), 3:])):
        raise FitError(f"shapes.hub = {shapes.hub}: the file has no rotations at this node (CalculiX writes none): "
                       "give hub_rotation, a node whose displacements are the hub's rotation (a *RIGID BODY ROT "
                       "NODE)", field="shapes")
    vecs = fea_shape_vectors(fea, smap, sc)
    if not np.all(np.isfinite(vecs)):
        raise FitError(f"shapes: {fea.source} lacks values of the mapped nodes' shapes (NaN)", field="shapes")
    if shapes.sigma is not None and not (math.isfinite(shapes.sigma) and shapes.sigma > 0):
        raise FitError(f"shapes.sigma = {_fmt(shapes.sigma)}: must be a finite number > 0", field="shapes")
    if not 0 <= shapes.mac_min <= 1:
        raise FitError(f"shapes.mac_min = {_fmt(shapes.mac_min)}: must be in [0, 1]", field="shapes")
    return smap, vecs
