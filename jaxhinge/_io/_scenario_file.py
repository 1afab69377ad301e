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
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._dynamics._energy import total_inertia_B
from .._errors import ScenarioError
from .._format import fmt_shape as _fmt_shape
from .._model._control import Control
from .._model._loads import Inputs, Loads, Pulses
from .._model._scenario import Scenario
from .._model._spacecraft import Hub, InitialState, Panels, PointMassGravity, Spacecraft, Wheels
from ._checker import Checker as _Checker
from ._scenario_check import _CHAIN_PANEL_KEYS, _LOAD_VECTORS, _PANEL_KEYS, _PULSE_KEYS, Parsed, check
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


def _build(p: Parsed) -> Scenario:
    """One `Panels` tree: the single panels in file order, then the chains, chain by chain, root first."""
    hub = Hub(mHub=p.hub["mHub"], IHubPntBc_B=p.hub["IHubPntBc_B"], r_BcB_B=p.hub["r_BcB_B"])
    singles = Panels(
        **{k: p.panels[k] for k in _PANEL_KEYS if k not in ("name", "thetaInit", "thetaDotInit")},
        names=p.names,
    )
    chains = [
        Panels.chain_of(
            cname, a["r_HB_B"], a["dcm_HB"],
            **{k: a[k] for k in _CHAIN_PANEL_KEYS[1:] if k not in ("thetaInit", "thetaDotInit")},
            names=pnames,
        )
        for cname, pnames, a in p.chains
    ]
    panels = Panels.concat(singles, *chains) if chains else singles
    gravity = None if p.mu is None else PointMassGravity(mu=p.mu)
    wheels = None if p.wheels is None else Wheels(
        **{k: p.wheels[k] for k in ("gsHat_B", "Js", "u", "u_max", "cViscous", "fCoulomb")}, names=p.wheels["names"])
    initial = InitialState(
        r_CN_NInit=p.hub["r_CN_NInit"],
        v_CN_NInit=p.hub["v_CN_NInit"],
        sigma_BNInit=p.hub["sigma_BNInit"],
        omega_BN_BInit=p.hub["omega_BN_BInit"],
        thetaInit=np.concatenate([p.panels["thetaInit"], *[a["thetaInit"] for _, _, a in p.chains]]),
        thetaDotInit=np.concatenate([p.panels["thetaDotInit"], *[a["thetaDotInit"] for _, _, a in p.chains]]),
        OmegaInit=None if p.wheels is None else p.wheels["Omega"],
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
        c = dict(p.control)
        if c["ISCPntB_B"] is None:  # the spacecraft's total inertia about B, hinges at their initial angles
            c["ISCPntB_B"] = total_inertia_B(spacecraft, initial.thetaInit)
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
    return _build(check(data, source))


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


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The inverse of `scenario_from_dict`: plain Python floats, lists and strings, every key written out.

    **Arguments:**

    - `scenario`: a single (unbatched) `Scenario` without function loads (`Loads.*_fn`).

    **Returns:** a dict in the TOML schema; `scenario_from_dict(scenario_to_dict(s))` has identical leaves.
    Panels with no names get the default names `p<index>`.
    """
    sc, ini, loads = scenario.spacecraft, scenario.initial, scenario.loads
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
    hub = {
        "mHub": _host(sc.hub.mHub, (), "hub.mHub"),
        "IHubPntBc_B": _host(sc.hub.IHubPntBc_B, (3, 3), "hub.IHubPntBc_B"),
        "r_BcB_B": _host(sc.hub.r_BcB_B, (3,), "hub.r_BcB_B"),
        "r_CN_NInit": _host(ini.r_CN_NInit, (3,), "initial.r_CN_NInit"),
        "v_CN_NInit": _host(ini.v_CN_NInit, (3,), "initial.v_CN_NInit"),
        "sigma_BNInit": _host(ini.sigma_BNInit, (3,), "initial.sigma_BNInit"),
        "omega_BN_BInit": _host(ini.omega_BN_BInit, (3,), "initial.omega_BN_BInit"),
    }
    columns = {
        k: _host(getattr(pan, k), (n_all, *({"IPntS_S": (3, 3), "dcm_HB": (3, 3), "r_HB_B": (3,)}.get(k, ()))),
                 f"panels.{k}")
        for k in (*_PANEL_KEYS[1:], "l") if k not in ("thetaInit", "thetaDotInit")
    }
    columns["thetaInit"] = _host(ini.thetaInit, (n_all,), "initial.thetaInit")
    columns["thetaDotInit"] = _host(ini.thetaDotInit, (n_all,), "initial.thetaDotInit")
    panels, chains = [], []
    for i in range(n_all):
        if not pan.chain[i]:  # a single panel
            if pan.parent[i] >= 0 or chains:
                raise ScenarioError(f"<scenario>: panel {names[i]!r}: a scenario file lists the single panels "
                                    "(hinged to the hub, chain label \"\") first, then the chains",
                                    source="<scenario>")
            panels.append({"name": names[i], **{k: columns[k][i] for k in _PANEL_KEYS[1:]}})
            continue
        if pan.parent[i] < 0:  # the root of a new chain
            chains.append({"name": pan.chain[i], "r_HB_B": columns["r_HB_B"][i], "dcm_HB": columns["dcm_HB"][i],
                           "panels": []})
        elif pan.parent[i] != i - 1 or pan.chain[i - 1] != pan.chain[i]:
            raise ScenarioError(f"<scenario>: panel {names[i]!r} is not hinged to the panel before it; a scenario "
                                "file holds chains (each panel hinged to the previous one)", source="<scenario>")
        last = i + 1 == n_all or pan.parent[i + 1] != i
        row: dict[str, Any] = {"name": names[i]}
        for k in _CHAIN_PANEL_KEYS[1:]:
            if k == "l" and last:
                continue  # l places the next panel: unused (and refused) on the last
            row[k] = columns[k][i]
        chains[-1]["panels"].append(row)

    out: dict[str, Any] = {"hub": hub}
    if panels:
        out["panels"] = panels
    if chains:
        out["chains"] = chains
    if sc.gravity is not None:
        out["gravity"] = {"mu": _host(sc.gravity.mu, (), "gravity.mu")}
    if sc.wheels is not None:
        w, W = sc.wheels, sc.wheels.count
        cols = {k: _host(getattr(w, k), (W, 3) if k == "gsHat_B" else (W,), f"wheels.{k}")
                for k in ("gsHat_B", "Js", "u", "u_max", "cViscous", "fCoulomb")}
        cols["Omega"] = _host(ini.OmegaInit if ini.OmegaInit is not None else np.zeros(W), (W,), "initial.OmegaInit")
        out["wheels"] = [{"name": nm, **{k: cols[k][j] for k in ("gsHat_B", "Js", "Omega", "u", "u_max", "cViscous",
                                                                  "fCoulomb")}}
                         for j, nm in enumerate(w.labels)]
    load_table: dict[str, Any] = {k: _host(getattr(loads, k), (3,), f"loads.{k}") for k in _LOAD_VECTORS}
    if loads.pulses is not None:
        pl = loads.pulses
        m = int(np.shape(pl.t_start)[0]) if np.ndim(pl.t_start) == 1 else -1
        if m < 0:
            raise ScenarioError(
                "<scenario>: loads.pulses.t_start must have shape (pulses,)", source="<scenario>"
            )
        cols = {
            k: _host(getattr(pl, k), (m, 3) if k in _LOAD_VECTORS else (m,), f"loads.pulses.{k}")
            for k in _PULSE_KEYS
        }
        if m:
            load_table["pulses"] = [{k: cols[k][j] for k in _PULSE_KEYS} for j in range(m)]
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
        c = scenario.control
        out["control"] = {k: np.asarray(getattr(c, k), dtype=float).tolist() for k in
                          ("sigma_R0N", "K", "P", "Ki", "integralLimit", "control_dt", "controlAxes_B", "ISCPntB_B",
                           "knownTorquePntB_B")}
        out["control"]["actuator"] = c.actuator
    sim = scenario.simulation
    out["simulation"] = {
        "t_end": float(sim.t_end),
        "save_dt": float(sim.save_dt),
        "integrator": sim.integrator,
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
