"""Scenario files: a TOML description of a spacecraft, its initial state, loads and simulation settings.

`load_scenario(path)` / `scenario_from_dict(data)` validate **everything** (`_scenario_check`) before building a
single array and refuse bad input with a one-line `ScenarioError` that names the field (dotted path, panels by
index and name: `panels[1] ("p1").dcm_HB`), the value given and what is allowed. `dump_scenario` /
`scenario_to_dict` write the inverse: a file that loads back to an identical scenario (floats are written
exactly, so every bit survives).

The schema (Basilisk's field names, frames and units): docs/scenario-files.md.
"""

import os
import pathlib
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._dynamics._energy import total_inertia_B
from .._errors import JaxhingeNote, ScenarioError
from .._format import fmt_shape as _fmt_shape
from .._model._control import Control
from .._model._loads import Inputs, Loads, Pulses
from .._model._scenario import Scenario
from .._model._schema import CONTROL_INERTIA, Field, in_table
from .._model._spacecraft import Hub, InitialState, Panels, PointMassGravity, Spacecraft, Wheels
from ._checker import Checker as _Checker
from ._scenario_check import CHAIN_PANELS, LOAD_VECTORS, PULSE_KEYS, Parsed, check
from ._writers import atomic_write, toml_text

__all__ = [
    "ScenarioError",
    "dump_scenario",
    "example_path",
    "load_scenario",
    "scenario_from_dict",
    "scenario_to_dict",
    "scenario_toml",
]


def _of(values: dict, model: str, table: str) -> dict:
    """The arguments of a model pytree (`_schema.of_model`) from a checked table's values."""
    return {f.attribute: values[f.name] for f in in_table(table) if f.model == model}


def _build(p: Parsed) -> Scenario:
    """One `Panels` tree: the single panels in file order, then the chains, chain by chain, root first. Every
    model pytree takes its fields from the tables that hold them (`_schema`)."""
    hub = Hub(**_of(p.hub, "hub", "hub"))
    singles = Panels(**_of(p.panels, "panels", "panels"), names=p.names)
    chains = [Panels.chain_of(cname, names=pnames, **_of(a, "panels", "chains.panels"), **_of(a, "panels", "chains"))
              for cname, pnames, a in p.chains]
    panels = Panels.concat(singles, *chains) if chains else singles
    gravity = None if p.gravity is None else PointMassGravity(**_of(p.gravity, "gravity", "gravity"))
    wheels = None if p.wheels is None else Wheels(**_of(p.wheels, "wheels", "wheels"), names=p.wheels["names"])
    initial = InitialState(
        **_of(p.hub, "initial", "hub"),
        **{f.attribute: np.concatenate([p.panels[f.name], *[a[f.name] for _, _, a in p.chains]])
           for f in in_table("panels") if f.initial},
        **({} if p.wheels is None else _of(p.wheels, "initial", "wheels")),
    )
    inputs = None
    if p.inputs is not None:
        inputs = Inputs.of(p.inputs["t"], p.inputs["values"], p.inputs["columns"], p.inputs["hold"], panels.labels,
                           () if wheels is None else wheels.labels, source=p.inputs["csv"], gain=p.inputs["gain"],
                           time_offset=p.inputs["time_offset"])
    if p.loads is None:
        loads = Loads(inputs=inputs)
    else:
        pulses = None if p.pulses is None else Pulses(**p.pulses)
        loads = Loads(**p.loads, pulses=pulses, inputs=inputs)
    spacecraft = Spacecraft(hub=hub, panels=panels, gravity=gravity, wheels=wheels)
    control = None
    if p.control is not None:
        c = _of(p.control, "control", "control")
        if c[CONTROL_INERTIA] is None:  # the spacecraft's total inertia about B, hinges at their initial angles
            c[CONTROL_INERTIA] = total_inertia_B(spacecraft, initial.thetaInit)
        control = Control(**c)
    return Scenario(spacecraft=spacecraft, initial=initial, loads=loads, simulation=p.simulation, control=control)


# ------------------------------------------------------------------------------------------------------------
# Public API: reading
# ------------------------------------------------------------------------------------------------------------


def scenario_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Scenario:
    """Validate a scenario given as a dict (the parsed TOML schema of this module) and build it.

    **Arguments:**

    - `data`: `{"hub": {...}, "panels": [{...}, ...], "gravity": {...}, "loads": {...}, "simulation": {...}}`;
      numbers may be Python or NumPy scalars, vectors and matrices nested lists or arrays.
    - `source`: a name for error messages (the file name when called by `load_scenario`).

    **Returns:** a `Scenario` (float64 leaves when `jax_enable_x64` is on; panels stacked, `N = 0` allowed).

    **Raises:** `ScenarioError` (a `ValueError`) on the first problem found, before anything is built.
    """
    parsed = check(data, source)
    for note in parsed.notes:
        warnings.warn(note, JaxhingeNote, stacklevel=2)
    return _build(parsed)


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read, validate and build a scenario TOML file (schema: docs/scenario-files.md).

    **Arguments:**

    - `path`: the `.toml` file.

    **Returns:** a `Scenario`.

    **Raises:** `ScenarioError` for an unreadable file, a TOML syntax error (`file:line:column: ...`) or any
    invalid value (`file: field = value: what is allowed`).
    """
    source = os.fspath(path)
    data = _Checker(source).read_toml("scenario file")
    return scenario_from_dict(data, source=source)


def scenario_files(scenario: Scenario, path: str | os.PathLike) -> tuple[str, ...]:
    """Every file `load_scenario(path)` read to build `scenario`: the scenario file and each file it references
    (the `[inputs]` CSV), as absolute paths. The one list of a scenario's files: a campaign's resume compares
    their SHA-256 (a file kind a scenario comes to reference is added here)."""
    files = [os.path.abspath(os.fspath(path))]
    inputs = scenario.loads.inputs
    if inputs is not None and inputs.source:
        files.append(os.path.abspath(inputs.source))
    return tuple(files)


def is_bundled(path: str | os.PathLike) -> bool:
    """Whether `path` is a file of the bundled examples folder (whose outputs go to the working directory)."""
    folder = pathlib.Path(__file__).parent.parent / "examples"
    return pathlib.Path(path).resolve().parent == folder.resolve()


def example_path(name: str) -> pathlib.Path:
    """Path of a bundled example: a scenario by name, e.g. `example_path("two_panel")` (`.toml` optional), or
    one of its data files by file name, e.g. `example_path("wheels_slew_record.csv")` (a telemetry record)."""
    folder = pathlib.Path(__file__).parent.parent / "examples"
    path = folder / name
    if not (pathlib.Path(name).suffix and name == path.name and path.is_file()):
        path = folder / f"{name.removesuffix('.toml')}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.toml")))
        known += "; data files: " + ", ".join(sorted(p.name for p in folder.glob("*.csv")))
        raise ScenarioError(f"no bundled example {name!r}; available: {known}", source="<examples>")
    return path


# ------------------------------------------------------------------------------------------------------------
# Public API: writing
# ------------------------------------------------------------------------------------------------------------


def _host(x: Any, shape: tuple[int, ...], field: str) -> Any:
    a = np.asarray(x, dtype=float)
    if a.shape != shape:
        raise ScenarioError(
            f"<scenario>: {field} has shape {_fmt_shape(a.shape)}, expected {_fmt_shape(shape)}: "
            "a scenario file "
            "holds one configuration (write batched scenarios one at a time)",
            source="<scenario>",
            field=field,
        )
    return a.tolist()


def _value(scenario: Scenario, f: Field, count: int | None, where: str) -> Any:
    """A field's value as a file holds it (plain lists and floats, one element a panel or wheel: `count`), from
    the pytree that carries it (`Scenario.part`); a per-wheel initial condition not set (None) is 0."""
    x = getattr(scenario.part(f.model), f.attribute)
    if f.static:  # a strategy object (the controller's actuator): the file holds its name
        return x.name
    if x is None:
        x = np.zeros((count, *f.shape))
    rank = np.ndim(x) - len(f.shape)
    shape = tuple(np.shape(x)[rank + i] if d is None else d for i, d in enumerate(f.shape))
    return _host(x, shape if count is None else (count, *shape), where)


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The inverse of `scenario_from_dict`: plain Python floats, lists and strings, every key written out.

    **Arguments:**

    - `scenario`: a single (unbatched) `Scenario` without function loads (`Loads.*_fn`).

    **Returns:** a dict in the TOML schema; `scenario_from_dict(scenario_to_dict(s))` has identical leaves.
    Panels with no names get the default names `p<index>`.
    """
    sc, loads = scenario.spacecraft, scenario.loads
    for fn in ("extForce_B_fn", "extForce_N_fn", "extTorquePntB_B_fn", "motorTorque_fn"):
        if getattr(loads, fn) is not None:
            raise ScenarioError(
                f"<scenario>: loads.{fn} is a Python function, which a scenario file cannot hold; "
                "use constant loads and [[loads.pulses]]",
                source="<scenario>",
                field=f"loads.{fn}",
            )
    pan = sc.panels
    n_all = pan.count
    names = pan.labels
    hub = {f.name: _value(scenario, f, None, f"hub.{f.name}") for f in in_table("hub")}
    panel_fields = {f.name: f for t in ("panels", "chains", "chains.panels") for f in in_table(t)}
    columns = {k: _value(scenario, f, n_all, f"panels.{k}") for k, f in panel_fields.items()}
    panels, chains = [], []
    for i in range(n_all):
        if not pan.chain[i]:  # a single panel
            if pan.parent[i] >= 0 or chains:
                raise ScenarioError(f"<scenario>: panel {names[i]!r}: a scenario file lists the single panels "
                                    "(hinged to the hub, chain label \"\") first, then the chains",
                                    source="<scenario>")
            panels.append({"name": names[i], **{f.name: columns[f.name][i] for f in in_table("panels")}})
            continue
        if pan.parent[i] < 0:  # the root of a new chain
            chains.append({"name": pan.chain[i], **{f.name: columns[f.name][i] for f in in_table("chains")},
                           CHAIN_PANELS: []})
        elif pan.parent[i] != i - 1 or pan.chain[i - 1] != pan.chain[i]:
            raise ScenarioError(f"<scenario>: panel {names[i]!r} is not hinged to the panel before it; a scenario "
                                "file holds chains (each panel hinged to the previous one)", source="<scenario>")
        last = i + 1 == n_all or pan.parent[i + 1] != i
        row: dict[str, Any] = {"name": names[i]}
        for f in in_table("chains.panels"):
            if f.rule == "hinge_lever" and last:
                continue  # l places the next panel: unused (and refused) on the last
            row[f.name] = columns[f.name][i]
        chains[-1][CHAIN_PANELS].append(row)

    out: dict[str, Any] = {"hub": hub}
    if panels:
        out["panels"] = panels
    if chains:
        out["chains"] = chains
    if sc.gravity is not None:
        out["gravity"] = {f.name: _value(scenario, f, None, f"gravity.{f.name}") for f in in_table("gravity")}
    if sc.wheels is not None:
        W = sc.wheels.count
        cols = {f.name: _value(scenario, f, W, f"wheels.{f.name}") for f in in_table("wheels")}
        out["wheels"] = [{"name": nm, **{k: v[j] for k, v in cols.items()}} for j, nm in enumerate(sc.wheels.labels)]
    load_table: dict[str, Any] = {k: _host(getattr(loads, k), (3,), f"loads.{k}") for k in LOAD_VECTORS}
    if loads.pulses is not None:
        pl = loads.pulses
        m = int(np.shape(pl.t_start)[0]) if np.ndim(pl.t_start) == 1 else -1
        if m < 0:
            raise ScenarioError(
                "<scenario>: loads.pulses.t_start must have shape (pulses,)", source="<scenario>"
            )
        cols = {
            k: _host(getattr(pl, k), (m, 3) if k in LOAD_VECTORS else (m,), f"loads.pulses.{k}")
            for k in PULSE_KEYS
        }
        if m:
            load_table["pulses"] = [{k: cols[k][j] for k in PULSE_KEYS} for j in range(m)]
    out["loads"] = load_table
    if loads.inputs is not None:
        if not loads.inputs.source:
            raise ScenarioError("<scenario>: loads.inputs were given as arrays; a scenario file refers to a CSV file: "
                                "write one (`write_inputs`) and give it as Inputs.of(..., source=path)",
                                source="<scenario>", field="loads.inputs")
        out["inputs"] = {"csv": loads.inputs.source, "hold": loads.inputs.hold}
        gain = np.asarray(loads.inputs.gain, dtype=float)
        if np.any(gain != 1.0):
            out["inputs"]["gain"] = {c: float(g) for c, g in zip(loads.inputs.columns, gain)}
        if float(loads.inputs.time_offset) != 0.0:
            out["inputs"]["time_offset"] = float(loads.inputs.time_offset)
    if scenario.control is not None:
        out["control"] = {f.name: _value(scenario, f, None, f"control.{f.name}") for f in in_table("control")}
    sim = scenario.simulation
    out["simulation"] = {
        "t_end": float(sim.t_end),
        "save_dt": float(sim.save_dt),
        "integrator": sim.integrator.name,
        "dt": float(sim.dt),
        "rtol": float(sim.rtol),
        "atol": float(sim.atol),
        "max_steps": int(sim.max_steps),
    }
    return out


def scenario_toml(scenario: Scenario, source: str = "<scenario>") -> str:
    """The text of the scenario file `dump_scenario` writes (validated first: an invalid scenario raises
    `ScenarioError` naming `source`)."""
    data = scenario_to_dict(scenario)
    check(data, source)  # never write a file that would not load
    return toml_text(data, header="# jaxhinge scenario (SI units, radians; Basilisk names and frames)")


def dump_scenario(scenario: Scenario, path: str | os.PathLike) -> None:
    """Write `scenario` as a TOML scenario file that `load_scenario` reads back to identical leaves.

    The scenario is validated first (an invalid one raises `ScenarioError` and leaves `path` untouched); the
    file is written to a temporary file in the same folder and moved into place with `os.replace`
    (`jaxhinge._io._writers.atomic_write`).

    **Arguments:**

    - `scenario`: a single `Scenario` without function loads.
    - `path`: the `.toml` file to (over)write.
    """
    text = scenario_toml(scenario, os.fspath(path))
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
