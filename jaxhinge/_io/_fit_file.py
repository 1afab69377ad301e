"""Modal FIT.toml files (a FIT.toml with `[modes]`): fit model parameters (hinge k, c, masses, inertias, ...) to
target modes (frequencies, damping ratios, or the modes of an FEA file), read and checked as a file (`read_fit`:
its keys and values, the FEA file and its mode shapes' nodes, the simulation check's options, the output folder)
into plain values (`FitFile`). The fit job (`_jobs._fit`) loads the scenario, maps the settings to `fit`'s objects
and checks them, runs the fit and its simulation check and writes the results.

The schema and the outputs: docs/modes-and-fea.md. Errors are `FitError`s naming the file, the field, the value and
the rule, before any compute; `fit`'s own errors (in its argument names) are restated in the file's fields
(`FILE_FIELDS`; `fit_checker` names the job's).
"""

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import FitError
from .._format import kind as _kind
from .._model._boundary import BOUNDARIES
from .._model._fea_modes import ShapeMap
from ._checker import Checker as _Checker
from ._fea import FORMATS, UNIT_SYSTEMS, dcm_problem, read_fea

__all__ = ["FILE_FIELDS", "OUTPUT_FILES", "FitFile", "fit_checker", "read_fit"]

_TOP = ("scenario", "modes", "fit", "check", "output")
_MODES = ("boundary", "targets_hz", "damping_ratios", "mode_numbers", "frequency_sigma", "damping_sigma", "fea",
          "fea_format", "fea_units", "fea_modes", "rigid_hz", "reference_point", "effective_mass_sigma",
          "fea_damping_ratios", "loop", "fea_dcm_BF", "fea_shapes", "shapes")
_FIT = ("free", "solver", "max_steps", "rtol", "atol", "learning_rate", "reach_rtol", "ident_rtol", "warn_rtol",
        "starts", "bounds")
_SHAPES = ("hub", "hub_point", "hub_rotation", "sigma", "mac_min", "panels")
_SHAPE_PANEL = ("rotation", "node", "distance")
_CHECK = ("simulate", "periods", "amplitude_rad")
_OUTPUT = ("dir", "plot")
_ALIASES = {
    "targets": "targets_hz",
    "frequencies": "targets_hz",
    "frequencies_hz": "targets_hz",
    "damping": "damping_ratios",
    "zeta": "damping_ratios",
    "parameters": "free",
    "tie": "free",
    "method": "solver",
    "iterations": "max_steps",
    "out": "dir",
    "modes": "mode_numbers",
}
_DESCRIPTION = {
    "scenario": "the model's scenario TOML file, relative to this file",
    "targets_hz": "target frequencies in Hz, ascending",
    "free": 'e.g. free = ["p0.k", "p0.c"]',
}
OUTPUT_FILES = ("result.json", "fitted_scenario.toml")  # and the plot, when there is one
# `fit`'s arguments -> the FIT.toml fields they come from (its errors are restated in the file's terms)
FILE_FIELDS = {**{k: f"modes.{k}" for k in _MODES if k not in ("fea_format", "fea_units", "rigid_hz", "fea_dcm_BF",
                                                                 "fea_shapes")},
               "fea": "modes.fea", **{k: f"fit.{k}" for k in _FIT}}


@dataclasses.dataclass(frozen=True)
class FitFile:
    """A modal FIT.toml as read (`read_fit`): its `path`, the `scenario_path` (and its name as written,
    `scenario_name`), `targets_hz` (None: from the FEA modes), the settings by the file's names (`fit_kwargs`:
    values checked, the FEA modes read), the `loop` name and whether it is `closed`, the simulation
    check's options (`check`; None: no check) and its table as written (`check_table`), the output folder and the
    plot's file name (None: none)."""

    path: str
    scenario_path: str
    scenario_name: str
    targets_hz: Any
    fit_kwargs: dict[str, Any]
    loop: str
    closed: bool
    check: dict[str, Any] | None
    check_table: dict[str, Any]
    out_dir: str
    plot: str | None


def fit_checker(source: str) -> _Checker:
    """The checker of a modal FIT.toml: its errors are `FitError`s in the file's terms."""
    return _Checker(source, error=FitError, descriptions=_DESCRIPTION, aliases=_ALIASES)


def read_fit(path: str | os.PathLike, data: Mapping | None = None, *, out_dir: str | None = None,
             loops: Mapping[str, bool], solvers: Sequence[str]) -> FitFile:
    """Read a modal FIT.toml file and check it as a file (schema: docs/modes-and-fea.md), its FEA file read.

    **Arguments:** `path` (the FIT.toml; relative paths are relative to its folder), `data` (its parsed content,
    when already read), `out_dir` (an output folder that replaces `[output] dir`, checked instead of it), and the
    names the file may give, from the fit's tables: `loops` (`modes.loop` name -> whether that loop is closed)
    and `solvers` (`fit.solver`).

    **Raises:** `FitError` (`file: field = value: rule`; `FeaError` for the FEA file).
    """
    source = os.fspath(path)
    ck = fit_checker(source)
    if data is None:
        data = ck.read_toml("fit file")
    if "data" in data:
        raise ck.fail(None, "a FIT.toml with a [data] table is a telemetry fit: read it with jaxhinge.load_fit")
    ck.keys(data, None, _TOP, ("scenario",))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")

    modes_t = ck.section(data, "modes", _MODES, required=True)
    fit_t = ck.section(data, "fit", _FIT, required=True)
    check_t = ck.section(data, "check", _CHECK)
    out_t = ck.section(data, "output", _OUTPUT)

    kw: dict[str, Any] = {}
    kw["boundary"] = ck.choice(modes_t.get("boundary", "free"), "modes.boundary", BOUNDARIES)
    loop = ck.choice(modes_t.get("loop", "open"), "modes.loop", loops)
    if "loop" in modes_t:
        kw["loop"] = loop
    closed = loops[loop]
    has_fea = "fea" in modes_t
    if closed and has_fea:
        raise ck.bad("modes.loop", "closed", "FEA modes are the open structure's: fit them with loop = \"open\", "
                     "then the controller to closed-loop targets (targets_hz, damping_ratios)")
    if closed and not BOUNDARIES[kw["boundary"]].hub_free:
        raise ck.bad("modes.loop", "closed", f"the closed loop flies free; boundary = \"{kw['boundary']}\" is "
                     "for the open structure")
    ck.keys(modes_t, "modes", _MODES, () if has_fea else ("targets_hz",))
    targets = modes_t.get("targets_hz")
    if has_fea and targets is not None:
        raise ck.bad("modes.targets_hz", targets, "give either targets_hz or fea (the targets then come from the "
                     "FEA file), not both")
    if not has_fea and not isinstance(targets, list):
        raise ck.bad("modes.targets_hz", targets, f"must be a list of numbers, got {_kind(targets)}")
    for key in ("fea_format", "fea_units", "fea_modes", "rigid_hz", "reference_point", "effective_mass_sigma",
                "fea_damping_ratios", "fea_dcm_BF", "fea_shapes", "shapes"):
        if key in modes_t and not has_fea:
            raise ck.bad(f"modes.{key}", modes_t[key], "applies to FEA modes only: give modes.fea too")
    if has_fea:
        fea_path = ck.path(modes_t["fea"], "modes.fea", "an FEA result file (.dat CalculiX, .f06 NASTRAN)")
        fmt = ck.choice(modes_t["fea_format"], "modes.fea_format", FORMATS.values()) if "fea_format" in modes_t \
            else None
        units = ck.choice(modes_t["fea_units"], "modes.fea_units", UNIT_SYSTEMS) if "fea_units" in modes_t else None
        rigid = ck.finite_positive(modes_t["rigid_hz"], "modes.rigid_hz") if "rigid_hz" in modes_t else 0.01
        dcm = ck.array(modes_t["fea_dcm_BF"], "modes.fea_dcm_BF", (3, 3)) if "fea_dcm_BF" in modes_t else None
        if dcm is not None and (problem := dcm_problem(dcm)) is not None:
            raise ck.bad("modes.fea_dcm_BF", modes_t["fea_dcm_BF"], problem)
        shapes_file = ck.path(modes_t["fea_shapes"], "modes.fea_shapes", "a mode-shape file (.frd, .dat, .f06)") \
            if "fea_shapes" in modes_t else None
        kw["fea"] = read_fea(fea_path, fmt, units=units, boundary=kw["boundary"], rigid_hz=rigid, dcm_BF=dcm,
                             shapes_path=shapes_file)
        if "shapes" in modes_t:
            kw["shapes"] = _shape_map(ck, modes_t["shapes"], units, dcm)
        if "fea_damping_ratios" in modes_t:  # one per FEA mode read (rigid-body modes dropped), as in the file
            z, nf = modes_t["fea_damping_ratios"], len(kw["fea"].frequencies)
            if not isinstance(z, list) or len(z) != nf:
                raise ck.bad("modes.fea_damping_ratios", z, f"must be a list of {nf} damping ratios, one per FEA "
                             f"mode of {fea_path} (modes {', '.join(map(str, kw['fea'].mode_numbers))})")
            z = ck.array(z, "modes.fea_damping_ratios", (nf,))
            if np.any(z <= 0) or np.any(z >= 1):
                raise ck.bad("modes.fea_damping_ratios", modes_t["fea_damping_ratios"], "each must be in (0, 1)")
            kw["fea"] = dataclasses.replace(kw["fea"], damping=z)
        if "reference_point" in modes_t:
            kw["reference_point"] = ck.array(modes_t["reference_point"], "modes.reference_point", (3,)).tolist()
        if "effective_mass_sigma" in modes_t:
            kw["effective_mass_sigma"] = ck.finite_positive(modes_t["effective_mass_sigma"],
                                                            "modes.effective_mass_sigma")
        if "fea_modes" in modes_t:
            fm, known = modes_t["fea_modes"], [int(x) for x in kw["fea"].mode_numbers]
            if not isinstance(fm, list) or len(set(map(str, fm))) != len(fm) or any(x not in known for x in fm):
                raise ck.bad("modes.fea_modes", fm, f"must be distinct mode numbers of {fea_path} ({known[0]}.."
                             f"{known[-1]})")
            if not isinstance(modes_t.get("mode_numbers"), list) or len(modes_t["mode_numbers"]) != len(fm):
                raise ck.bad("modes.fea_modes", fm, "pairs by hand: give modes.mode_numbers too, one model mode "
                             "per FEA mode")
            kw["fea_modes"] = fm
    for key in ("damping_ratios", "mode_numbers"):
        if key in modes_t:
            if not isinstance(modes_t[key], list):
                raise ck.bad(f"modes.{key}", modes_t[key], f"must be a list, got {_kind(modes_t[key])}")
            kw[key] = modes_t[key]
    for key in ("frequency_sigma", "damping_sigma"):
        if key in modes_t:
            kw[key] = ck.finite_positive(modes_t[key], f"modes.{key}")
    ck.keys(fit_t, "fit", _FIT, ("free",))
    kw["free"] = fit_t["free"]
    if "solver" in fit_t:
        kw["solver"] = ck.choice(fit_t["solver"], "fit.solver", solvers)
    if "max_steps" in fit_t:
        kw["max_steps"] = ck.integer(fit_t["max_steps"], "fit.max_steps")
    for key in ("rtol", "atol", "learning_rate", "reach_rtol", "ident_rtol", "warn_rtol"):
        if key in fit_t:
            kw[key] = ck.finite_positive(fit_t[key], f"fit.{key}")
    if "starts" in fit_t:  # its range and solver: `fit` (restated in the file's terms)
        kw["starts"] = ck.integer(fit_t["starts"], "fit.starts")
    if "bounds" in fit_t:  # names and values: `fit`, before any compute
        kw["bounds"] = dict(ck.table(fit_t["bounds"], "fit.bounds", 'e.g. bounds = {"p0.k" = [100.0, 1000.0]}'))

    check: dict[str, Any] | None = {}
    simulate = ck.boolean(check_t.get("simulate", True), "check.simulate")
    if "periods" in check_t:
        check["periods"] = ck.finite_positive(check_t["periods"], "check.periods")
        if check["periods"] < 3:
            raise ck.bad("check.periods", check_t["periods"], "must be >= 3 (zero crossings are counted)")
    if "amplitude_rad" in check_t:
        check["amplitude"] = ck.finite_positive(check_t["amplitude_rad"], "check.amplitude_rad")
    if not simulate:
        check = None

    plot = out_t.get("plot", "fit.png")
    if plot is False:
        plot = None
    elif not isinstance(plot, str) or not plot.lower().endswith((".png", ".pdf", ".svg")) or os.sep in plot:
        raise ck.bad("output.plot", plot, "must be a file name ending in .png, .pdf or .svg, or false")
    files = OUTPUT_FILES + ((plot,) if plot else ())
    out_dir = ck.output_folder(out_t, "out", files, out_dir)

    return FitFile(path=source, scenario_path=scen_path, scenario_name=data["scenario"], targets_hz=targets,
                   fit_kwargs=kw, loop=loop, closed=closed, check=check, check_table=dict(check_t), out_dir=out_dir,
                   plot=plot)


def _shape_map(ck, table, units, dcm) -> ShapeMap:
    """`[modes.shapes]`: the FEA nodes that give the model's shape coordinates (docs/modes-and-fea.md)."""
    t = ck.table(table, "modes.shapes", "[modes.shapes]")
    ck.keys(t, "modes.shapes", _SHAPES, ("panels",), aliases={})
    L = UNIT_SYSTEMS[units or "m-kg-s"][0]
    C = np.eye(3) if dcm is None else dcm
    node = lambda v, f: ck.integer(v, f, minimum=0)
    hub = node(t["hub"], "modes.shapes.hub") if "hub" in t else None
    point = ck.array(t["hub_point"], "modes.shapes.hub_point", (3,)) if "hub_point" in t else np.zeros(3)
    rot = node(t["hub_rotation"], "modes.shapes.hub_rotation") if "hub_rotation" in t else None
    sigma = ck.finite_positive(t["sigma"], "modes.shapes.sigma") if "sigma" in t else None
    mac_min = ShapeMap.mac_min
    if "mac_min" in t:
        mac_min = ck.number(t["mac_min"], "modes.shapes.mac_min")
        if not 0 <= mac_min <= 1:
            raise ck.bad("modes.shapes.mac_min", t["mac_min"], "must be between 0 and 1")
    panels = []
    pt = ck.table(t["panels"], "modes.shapes.panels", 'e.g. panels.wing = {rotation = 1003}')
    for name, entry in pt.items():
        f = f"modes.shapes.panels.{name}"
        e = ck.table(entry, f, "{rotation = <node>} or {node = <node>, distance = <m>}")
        ck.keys(e, f, _SHAPE_PANEL, aliases={})
        if ("rotation" in e) == ("node" in e) or ("node" in e) != ("distance" in e):
            raise ck.bad(f, dict(e), "give either rotation = <node> (a node turning with the panel) or node = "
                         "<node> and distance = <m from the hinge line> (its displacement normal to the panel)")
        if "rotation" in e:
            panels.append((name, node(e["rotation"], f"{f}.rotation"), None))
        else:
            panels.append((name, node(e["node"], f"{f}.node"), ck.finite_positive(e["distance"], f"{f}.distance")))
    return ShapeMap(hub=hub, hub_point=tuple((C @ (point * L)).tolist()), hub_rotation=rot, panels=tuple(panels),
                    sigma=sigma, mac_min=mac_min)
