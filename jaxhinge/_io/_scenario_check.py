"""The scenario file's checks: every key, type, shape and rule of a scenario TOML file (or dict), in plain
Python/NumPy, before anything is built; `check(data, source)` returns the validated values (`Parsed`) or raises
a one-line `ScenarioError` naming the field (dotted path, panels by index and name), the value and the rule.
Schema: docs/scenario-files.md. The physical rules themselves (a rigid body's inertia, a proper rotation, ...)
are `jaxhinge._model._rules`, shared with models built in code, sweeps and batches.
"""

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._errors import ConfigError
from .._format import did_you_mean
from .._format import fmt_float as _fmt_float
from .._format import fmt_value as _fmt
from .._format import kind as _kind
from .._format import toml_str as _toml_str
from .._format import unwrap as _unwrap
from .._model._control import ACTUATORS
from .._model._loads import HOLDS, input_columns, rk4_silent_pulse
from .._model._rules import (
    UNIT_TOL,
    inertia_problem,
    panel_inertia_problem,
    rigid_body_problem,
    rotation_problem,
)
from .._model._scenario import TICK_RTOL, SimulationConfig
from ._checker import Checker as _Checker
from ._inputs_file import read_inputs, relative_to

# ------------------------------------------------------------------------------------------------------------
# Schema
# ------------------------------------------------------------------------------------------------------------

_TOP_KEYS = ("hub", "panels", "gravity", "loads", "simulation", "chains", "wheels", "inputs", "control")
_CONTROL_KEYS = ("sigma_R0N", "K", "P", "Ki", "integralLimit", "control_dt", "actuator", "controlAxes_B", "ISCPntB_B",
                 "knownTorquePntB_B")
_INPUTS_KEYS = ("csv", "hold", "gain", "time_offset")
_WHEEL_KEYS = ("name", "gsHat_B", "Js", "Omega", "u", "u_max", "cViscous", "fCoulomb")
_WHEEL_REQUIRED = ("gsHat_B", "Js")
_CHAIN_KEYS = ("name", "r_HB_B", "dcm_HB", "panels")
_CHAIN_REQUIRED = ("r_HB_B", "dcm_HB", "panels")
_CHAIN_PANEL_KEYS = (
    "name",
    "mass",
    "IPntS_S",
    "d",
    "l",
    "k",
    "c",
    "thetaInit",
    "thetaDotInit",
    "thetaRef",
    "thetaDotRef",
    "motorTorque",
)
_CHAIN_PANEL_REQUIRED = ("mass", "IPntS_S", "d", "k")
_HUB_KEYS = ("mHub", "IHubPntBc_B", "r_BcB_B", "r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit")
_HUB_REQUIRED = ("mHub", "IHubPntBc_B")
_PANEL_KEYS = (
    "name",
    "mass",
    "IPntS_S",
    "d",
    "k",
    "c",
    "r_HB_B",
    "dcm_HB",
    "thetaInit",
    "thetaDotInit",
    "thetaRef",
    "thetaDotRef",
    "motorTorque",
)
_PANEL_REQUIRED = ("mass", "IPntS_S", "d", "k", "r_HB_B", "dcm_HB")
_GRAVITY_KEYS = ("mu",)
_LOAD_VECTORS = ("extForce_B", "extForce_N", "extTorquePntB_B")
_LOADS_KEYS = (*_LOAD_VECTORS, "pulses")
_PULSE_KEYS = ("t_start", "t_end", *_LOAD_VECTORS)
_PULSE_REQUIRED = ("t_start", "t_end")
_SIM_FLOATS = ("t_end", "save_dt", "dt", "rtol", "atol")
_SIM_KEYS = ("t_end", "save_dt", "integrator", "dt", "rtol", "atol", "max_steps")

# What each key means, for "missing required key" messages.
_DESCRIPTION = {
    "mHub": "hub mass, kg, > 0",
    "IHubPntBc_B": "hub inertia about its CoM, 3x3 symmetric positive definite, kg m^2",
    "mass": "panel mass, kg, > 0",
    "IPntS_S": "panel inertia about its CoM S in frame S, 3x3 diagonal, kg m^2",
    "d": "hinge H to panel CoM distance, m, > 0",
    "k": "hinge spring stiffness, N m/rad, >= 0",
    "r_HB_B": "hinge point relative to B, B frame, 3 numbers, m",
    "dcm_HB": "[HB], rows h1 h2 h3 in B components, 3x3 proper rotation",
    "l": "hinge to next hinge distance, m, > 0 (required on every chain panel but the last, refused there)",
    "panels": "the chain's panels, [[chains.panels]], root first, at least one",
    "mu": "gravitational parameter, m^3/s^2, > 0",
    "t_start": "pulse start time, s, >= 0",
    "t_end": "pulse end time, s, > t_start",
}

# Common misnamings that difflib cannot guess (keys are lower-case).
_ALIASES = {
    "hub": {"mass": "mHub", "m": "mHub", "inertia": "IHubPntBc_B", "i": "IHubPntBc_B"},
    "panel": {
        "damping": "c",
        "damper": "c",
        "stiffness": "k",
        "spring": "k",
        "inertia": "IPntS_S",
        "i": "IPntS_S",
        "m": "mass",
        "theta": "thetaInit",
        "theta0": "thetaInit",
        "thetadot": "thetaDotInit",
        "thetadot0": "thetaDotInit",
        "torque": "motorTorque",
        "u": "motorTorque",
    },
    "load": {
        "extforce": "extForce_B",
        "exttorque": "extTorquePntB_B",
        "force": "extForce_B",
        "force_b": "extForce_B",
        "force_n": "extForce_N",
        "torque": "extTorquePntB_B",
    },
    "simulation": {
        "integrator_dt": "dt",
        "step": "dt",
        "log_dt": "save_dt",
        "tf": "t_end",
        "stop_time": "t_end",
    },
    "gravity": {"gm": "mu"},
    "wheel": {"axis": "gsHat_B", "gshat": "gsHat_B", "gs": "gsHat_B", "j": "Js", "inertia": "Js", "omega": "Omega",
              "speed": "Omega", "torque": "u", "umax": "u_max", "max_torque": "u_max", "viscous": "cViscous",
              "coulomb": "fCoulomb"},
}

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# ------------------------------------------------------------------------------------------------------------
# Validation (pure Python / NumPy; nothing is built until everything has passed)
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Parsed:
    """The validated scenario as plain NumPy arrays / Python values."""

    hub: dict[str, Any]
    panels: dict[str, Any]
    names: tuple[str, ...]
    mu: float | None
    loads: dict[str, Any] | None
    pulses: dict[str, Any] | None
    simulation: SimulationConfig
    chains: list = dataclasses.field(default_factory=list)  # [(chain name, panel names, {key: array})]
    wheels: dict[str, Any] | None = None  # {key: stacked array}, "names": tuple
    inputs: dict[str, Any] | None = None  # {"t", "values", "columns", "hold", "csv"}
    control: dict[str, Any] | None = None  # the [control] keys (ISCPntB_B None: the spacecraft's inertia)


def _check_hub(ck: _Checker, hub: Mapping) -> dict[str, Any]:
    ck.keys(hub, "hub", _HUB_KEYS, _HUB_REQUIRED, _ALIASES["hub"])
    out: dict[str, Any] = {}
    out["mHub"] = ck.positive(hub["mHub"], "hub.mHub", "kg")

    field = "hub.IHubPntBc_B"
    inertia = ck.array(hub["IHubPntBc_B"], field, (3, 3))
    problem = inertia_problem(inertia)
    if problem:
        raise ck.bad(field, hub["IHubPntBc_B"], problem)
    out["IHubPntBc_B"] = inertia

    for key in ("r_BcB_B", "r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit"):
        out[key] = ck.array(hub[key], f"hub.{key}", (3,)) if key in hub else np.zeros(3)
    s2 = float(np.dot(out["sigma_BNInit"], out["sigma_BNInit"]))
    if not math.isfinite(s2):
        raise ck.bad(
            "hub.sigma_BNInit",
            hub["sigma_BNInit"],
            "|sigma_BNInit|^2 overflows; the MRP must have a finite norm",
        )
    return out


def _check_name(ck: _Checker, table: Mapping, where: str, default_name: str, taken: dict, what: str) -> str:
    """The `name` of a panel or chain (or its default), checked for syntax and uniqueness in `taken`
    (name -> where it was first used)."""
    if "name" in table:
        name = table["name"]
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            rule = "must be a non-empty string matching [A-Za-z_][A-Za-z0-9_]*"
            if not isinstance(name, str):
                rule += f", got {_kind(name)}"
            raise ck.bad(f"{where}.name", name, rule)
        default = ""
    else:
        name = default_name
        default = " (the default name)"
    if name in taken:
        raise ck.bad(
            f"{where}.name",
            name,
            f"duplicate {what} name{default}, already used by {taken[name]}; {what} names must be unique",
        )
    taken[name] = where
    return name


def _check_panel(ck: _Checker, panel: Mapping, i: int, taken: dict[str, str]) -> tuple[str, dict[str, Any]]:
    # The name first: it labels every other message about this panel.
    name = _check_name(ck, panel, f"panels[{i}]", f"p{i}", taken, "panel")

    label = f"panels[{i}] ({_toml_str(name)})"
    ck.keys(panel, label, _PANEL_KEYS, _PANEL_REQUIRED, _ALIASES["panel"])
    out: dict[str, Any] = {}
    out["mass"] = ck.positive(panel["mass"], f"{label}.mass", "kg")
    out["IPntS_S"] = _check_panel_inertia(ck, panel, label)
    out["d"] = ck.positive(panel["d"], f"{label}.d", "m")
    out["k"] = ck.nonnegative(panel["k"], f"{label}.k", "N m/rad")
    out["c"] = ck.nonnegative(panel["c"], f"{label}.c", "N m s/rad") if "c" in panel else 0.0
    out["r_HB_B"] = ck.array(panel["r_HB_B"], f"{label}.r_HB_B", (3,))
    out["dcm_HB"] = _check_dcm(ck, panel["dcm_HB"], f"{label}.dcm_HB")
    for key in ("thetaInit", "thetaDotInit", "thetaRef", "thetaDotRef", "motorTorque"):
        out[key] = ck.number(panel[key], f"{label}.{key}") if key in panel else 0.0
    return name, out


def _check_chain(ck: _Checker, chain: Mapping, i: int, taken: dict, chain_taken: dict):
    """One `[[chains]]` entry -> (chain name, panel names, {key: stacked array})."""
    name = _check_name(ck, chain, f"chains[{i}]", f"chain{i}", chain_taken, "chain")
    label = f"chains[{i}] ({_toml_str(name)})"
    ck.keys(chain, label, _CHAIN_KEYS, _CHAIN_REQUIRED, {"panel": "panels"})
    r_HB_B = ck.array(chain["r_HB_B"], f"{label}.r_HB_B", (3,))
    dcm_HB = _check_dcm(ck, chain["dcm_HB"], f"{label}.dcm_HB")
    raw = _unwrap(chain["panels"])
    if not isinstance(raw, list) or not raw:
        raise ck.bad(
            f"{label}.panels",
            raw,
            "must be a non-empty array of tables ([[chains.panels]] in TOML, root panel first), "
            f"got {_kind(raw) if isinstance(raw, list) is False else 'an empty array'}",
        )
    L = len(raw)
    names, rows = [], []
    for j, panel in enumerate(raw):
        where = f"{label}.panels[{j}]"
        panel = ck.table(panel, where, "[[chains.panels]]")
        pname = _check_name(ck, panel, where, f"{name}_{j + 1}", taken, "panel")
        plabel = f"{where} ({_toml_str(pname)})"
        ck.keys(panel, plabel, _CHAIN_PANEL_KEYS, _CHAIN_PANEL_REQUIRED, _ALIASES["panel"])
        out: dict[str, Any] = {}
        out["mass"] = ck.positive(panel["mass"], f"{plabel}.mass", "kg")
        out["IPntS_S"] = _check_panel_inertia(ck, panel, plabel)
        out["d"] = ck.positive(panel["d"], f"{plabel}.d", "m")
        if j < L - 1 and "l" not in panel:
            raise ck.fail(
                plabel,
                f"missing required key 'l' (hinge to next hinge distance, m, > 0): panel {j + 1} of {L} "
                "in the chain needs it (only the last panel may omit it)",
            )
        if j == L - 1 and "l" in panel:
            raise ck.bad(f"{plabel}.l", panel["l"], "not allowed on the last panel of a chain: l places the next "
                         "panel's hinge (as in Basilisk's nHinged effector), and no panel follows; remove it")
        out["l"] = ck.positive(panel["l"], f"{plabel}.l", "m, hinge to next hinge distance") if j < L - 1 else 0.0
        out["k"] = ck.nonnegative(panel["k"], f"{plabel}.k", "N m/rad")
        out["c"] = ck.nonnegative(panel["c"], f"{plabel}.c", "N m s/rad") if "c" in panel else 0.0
        for key in ("thetaInit", "thetaDotInit", "thetaRef", "thetaDotRef", "motorTorque"):
            out[key] = ck.number(panel[key], f"{plabel}.{key}") if key in panel else 0.0
        names.append(pname)
        rows.append(out)
    arrays = {
        key: np.array([r[key] for r in rows], dtype=float).reshape((L, 3, 3) if key == "IPntS_S" else (L,))
        for key in _CHAIN_PANEL_KEYS
        if key != "name"
    }
    arrays["r_HB_B"] = r_HB_B
    arrays["dcm_HB"] = dcm_HB
    return name, tuple(names), arrays


def _check_bodies(ck: _Checker, bodies: list) -> None:
    """Every rigid body, `(mass field, mass, inertia field, inertia)`, is a rigid body's and plausible
    (`jaxhinge._model._rules.rigid_body_problem`)."""
    problem = rigid_body_problem(bodies)
    if problem:
        raise ck.bad(*problem)


def _check_panel_inertia(ck: _Checker, panel: Mapping, label: str) -> np.ndarray:
    field = f"{label}.IPntS_S"
    inertia = ck.array(panel["IPntS_S"], field, (3, 3))
    problem = panel_inertia_problem(inertia)
    if problem:
        (r, c), rule = problem
        raise ck.bad(f"{field}[{r + 1}][{c + 1}]", panel["IPntS_S"][r][c], rule)
    return inertia


def _check_dcm(ck: _Checker, value: Any, field: str) -> np.ndarray:
    dcm = ck.array(value, field, (3, 3))
    problem = rotation_problem(dcm)
    if problem:
        raise ck.bad(field, value, problem)
    return dcm


def _check_load_vectors(ck: _Checker, table: Mapping, where: str) -> dict[str, np.ndarray]:
    return {
        key: ck.array(table[key], f"{where}.{key}", (3,)) if key in table else np.zeros(3)
        for key in _LOAD_VECTORS
    }


def _check_pulse(ck: _Checker, pulse: Any, j: int) -> dict[str, Any]:
    where = f"loads.pulses[{j}]"
    pulse = ck.table(pulse, where, "[[loads.pulses]]")
    ck.keys(pulse, where, _PULSE_KEYS, _PULSE_REQUIRED, _ALIASES["load"])
    t0 = ck.number(pulse["t_start"], f"{where}.t_start")
    if not t0 >= 0:
        raise ck.bad(f"{where}.t_start", pulse["t_start"], "must be >= 0 (s; the run starts at t = 0)")
    t1 = ck.number(pulse["t_end"], f"{where}.t_end")
    if not t1 > t0:
        raise ck.bad(f"{where}.t_end", pulse["t_end"], f"must be > t_start = {_fmt_float(t0)} (s)")
    return {"t_start": t0, "t_end": t1, **_check_load_vectors(ck, pulse, where)}


def _check_simulation(ck: _Checker, sim: Mapping) -> SimulationConfig:
    """The [simulation] table: number types here, the rest (ranges, integrator, ticks) by `SimulationConfig`."""
    ck.keys(sim, "simulation", _SIM_KEYS, (), _ALIASES["simulation"])
    units = {"t_end": "s", "save_dt": "s", "dt": "s", "rtol": "relative tolerance", "atol": "absolute tolerance"}
    kw: dict[str, Any] = {k: ck.positive(sim[k], f"simulation.{k}", units[k]) for k in _SIM_FLOATS if k in sim}
    kw |= {k: _unwrap(sim[k]) for k in ("integrator", "max_steps") if k in sim}
    if isinstance(kw.get("max_steps"), float) and kw["max_steps"].is_integer():
        kw["max_steps"] = int(kw["max_steps"])  # 1000.0 is 1000 steps
    try:
        return SimulationConfig(**kw)
    except ConfigError as e:
        raise ck.bad(e.field, e.value, e.rule) from None


def check(data: Any, source: str) -> Parsed:
    # Huge (finite) inputs may overflow in the checks; the checks then fail, with a message, not a warning.
    with np.errstate(all="ignore"):
        return _check_all(data, _Checker(source, descriptions=_DESCRIPTION))


def _check_all(data: Any, ck: _Checker) -> Parsed:
    if not isinstance(data, Mapping):
        raise ck.fail(None, f"a scenario must be a table (dict), got {_kind(data)}")
    ck.keys(data, None, _TOP_KEYS, ("hub",), {"panel": "panels"})

    hub = _check_hub(ck, ck.table(data["hub"], "hub", "[hub]"))

    raw_panels = data.get("panels", [])
    raw_panels = _unwrap(raw_panels)
    if not isinstance(raw_panels, list):
        raise ck.bad(
            "panels", raw_panels, f"must be an array of tables ([[panels]] in TOML), got {_kind(raw_panels)}"
        )
    taken: dict[str, str] = {}
    names, per_panel = [], []
    for i, panel in enumerate(raw_panels):
        panel = ck.table(panel, f"panels[{i}]", "[[panels]]")
        name, values = _check_panel(ck, panel, i, taken)
        names.append(name)
        per_panel.append(values)
    n = len(per_panel)
    shapes = {"IPntS_S": (3, 3), "dcm_HB": (3, 3), "r_HB_B": (3,)}
    panels = {
        key: np.array([p[key] for p in per_panel], dtype=float).reshape((n, *shapes.get(key, ())))
        for key in _PANEL_KEYS
        if key != "name"
    }

    raw_chains = _unwrap(data.get("chains", []))
    if not isinstance(raw_chains, list):
        raise ck.bad(
            "chains", raw_chains, f"must be an array of tables ([[chains]] in TOML), got {_kind(raw_chains)}"
        )
    chain_taken: dict[str, str] = {}
    chains = [
        _check_chain(ck, ck.table(ch, f"chains[{i}]", "[[chains]]"), i, taken, chain_taken)
        for i, ch in enumerate(raw_chains)
    ]
    where = [(f"panels[{i}] ({_toml_str(nm)})", p["mass"], p["IPntS_S"]) for i, (nm, p) in enumerate(zip(names, per_panel))]
    where += [(f"chains[{i}] ({_toml_str(cn)}).panels[{j}] ({_toml_str(pn)})", a["mass"][j], a["IPntS_S"][j])
              for i, (cn, pns, a) in enumerate(chains) for j, pn in enumerate(pns)]
    _check_bodies(ck, [("hub.mHub", hub["mHub"], "hub.IHubPntBc_B", hub["IHubPntBc_B"]),
                       *((f"{w}.mass", m, f"{w}.IPntS_S", inertia) for w, m, inertia in where)])

    mu = None
    if "gravity" in data:
        grav = ck.table(data["gravity"], "gravity", "[gravity]")
        ck.keys(grav, "gravity", _GRAVITY_KEYS, (), _ALIASES["gravity"])
        if "mu" not in grav:
            raise ck.fail(
                "gravity", "missing required key 'mu' (m^3/s^2, > 0); omit the [gravity] table for no gravity"
            )
        mu = ck.number(grav["mu"], "gravity.mu")
        if not mu > 0:
            raise ck.bad(
                "gravity.mu", grav["mu"], "must be > 0 (m^3/s^2); omit the [gravity] table for no gravity"
            )

    loads = pulses = None
    if "loads" in data:
        lt = ck.table(data["loads"], "loads", "[loads]")
        ck.keys(lt, "loads", _LOADS_KEYS, (), _ALIASES["load"])
        loads = _check_load_vectors(ck, lt, "loads")
        raw_pulses = _unwrap(lt.get("pulses", []))
        if not isinstance(raw_pulses, list):
            raise ck.bad(
                "loads.pulses",
                raw_pulses,
                f"must be an array of tables ([[loads.pulses]] in TOML), got {_kind(raw_pulses)}",
            )
        checked = [_check_pulse(ck, p, j) for j, p in enumerate(raw_pulses)]
        if checked:
            m = len(checked)
            pulses = {
                key: np.array([p[key] for p in checked], dtype=float).reshape(
                    (m, 3) if key in _LOAD_VECTORS else (m,)
                )
                for key in _PULSE_KEYS
            }

    sim = (
        _check_simulation(ck, ck.table(data["simulation"], "simulation", "[simulation]"))
        if "simulation" in data
        else SimulationConfig()
    )
    silent = None if pulses is None or sim.integrator != "rk4" else rk4_silent_pulse(pulses["t_start"], pulses["t_end"], sim.dt)
    if silent is not None:
        raise ck.bad(f"loads.pulses[{silent}]", {"t_start": pulses["t_start"][silent], "t_end": pulses["t_end"][silent]},
                     f"never acts: with integrator \"rk4\" loads are sampled at the start of each step (t = k dt, dt = "
                     f"{_fmt(sim.dt)} s) and this pulse contains none; make it at least one step long or put its "
                     "start on a step")
    late = np.flatnonzero(pulses["t_start"] >= sim.t_end) if pulses is not None else []
    if len(late):
        raise ck.bad(f"loads.pulses[{late[0]}].t_start", pulses["t_start"][late[0]], f"must be < simulation.t_end = "
                     f"{_fmt(sim.t_end)} s: a pulse that starts when the run has ended never acts")
    raw_wheels = _unwrap(data.get("wheels", []))
    if not isinstance(raw_wheels, list):
        raise ck.bad("wheels", raw_wheels, f"must be an array of tables ([[wheels]] in TOML), got {_kind(raw_wheels)}")
    wheels = _check_wheels(ck, raw_wheels, taken) if raw_wheels else None
    inputs = None
    if "inputs" in data:
        table = ck.table(data["inputs"], "inputs", "[inputs]")
        ck.keys(table, "inputs", _INPUTS_KEYS, ("csv",), {"file": "csv", "path": "csv", "interpolation": "hold"})
        csv_path = ck.string(table["csv"], "inputs.csv", "a CSV file name (a string, relative to this file)")
        hold = ck.choice(table.get("hold", "zoh"), "inputs.hold", HOLDS)
        panel_names = tuple(names) + tuple(pn for _, pns, _ in chains for pn in pns)
        allowed = input_columns(panel_names, () if wheels is None else wheels["names"])
        t, values, columns = read_inputs(relative_to(ck.source, csv_path), allowed, sim.t_end)
        gains = ck.table(table.get("gain", {}), "inputs.gain", "[inputs.gain]")
        for c in gains:
            if c not in columns:
                raise ck.fail(f"inputs.gain.{c}", f"not a column of {csv_path}{did_you_mean(c, columns)}; columns: "
                              f"{', '.join(columns)}")
        gain = np.array([ck.number(gains.get(c, 1.0), f"inputs.gain.{c}") for c in columns])
        inputs = {"t": t, "values": values, "columns": columns, "hold": hold, "csv": relative_to(ck.source, csv_path),
                  "gain": gain, "time_offset": ck.number(table.get("time_offset", 0.0), "inputs.time_offset")}
    control = _check_control(ck, data["control"], sim, wheels, inputs) if "control" in data else None
    return Parsed(hub, panels, tuple(names), mu, loads, pulses, sim, chains, wheels, inputs, control)


def _check_control(ck: _Checker, raw, sim: SimulationConfig, wheels, inputs) -> dict[str, Any]:
    """The `[control]` table (`jaxhinge._model._control`): gains K, P >= 0, `control_dt` a whole multiple of the
    rk4 `dt`, an actuator that exists, wheel axes that span the control axes."""
    table = ck.table(raw, "control", "[control]")
    ck.keys(table, "control", _CONTROL_KEYS, ("K", "P", "control_dt"), {})
    out: dict[str, Any] = {}
    out["sigma_R0N"] = ck.array(table.get("sigma_R0N", [0.0, 0.0, 0.0]), "control.sigma_R0N", (3,))
    out["K"] = ck.nonnegative(table["K"], "control.K", "N m, MRP feedback gain")
    out["P"] = ck.nonnegative(table["P"], "control.P", "N m s, rate feedback gain")
    out["Ki"] = ck.number(table.get("Ki", -1.0), "control.Ki")
    out["integralLimit"] = ck.nonnegative(table.get("integralLimit", 0.0), "control.integralLimit", "the clip of each integral component")
    out["knownTorquePntB_B"] = ck.array(table.get("knownTorquePntB_B", [0.0, 0.0, 0.0]), "control.knownTorquePntB_B",
                                        (3,))
    out["ISCPntB_B"] = None
    if "ISCPntB_B" in table:
        inertia = ck.array(table["ISCPntB_B"], "control.ISCPntB_B", (3, 3))
        problem = inertia_problem(inertia)
        if problem:
            raise ck.bad("control.ISCPntB_B", table["ISCPntB_B"], problem)
        out["ISCPntB_B"] = inertia
    cdt = ck.positive(table["control_dt"], "control.control_dt", "s")
    n = round(cdt / sim.dt)
    if sim.integrator != "rk4":  # adaptive: each control period is one solve, the samples its boundaries
        if cdt > sim.t_end:
            raise ck.bad("control.control_dt", table["control_dt"], f"must be <= simulation.t_end = "
                         f"{_fmt(sim.t_end)} s (the flight software runs every control_dt from t = 0)")
    elif n < 1 or abs(cdt - n * sim.dt) > TICK_RTOL * cdt:
        raise ck.bad("control.control_dt", table["control_dt"], f"must be a whole multiple of simulation.dt = "
                     f"{_fmt(sim.dt)} s (the flight software runs at the start of an rk4 step)")
    out["control_dt"] = cdt
    out["actuator"] = ck.choice(table.get("actuator", "wheels"), "control.actuator", ACTUATORS)
    raw_axes = table.get("controlAxes_B", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    if not isinstance(raw_axes, list) or not 1 <= len(raw_axes) <= 3:
        raise ck.bad("control.controlAxes_B", raw_axes, "must be 1 to 3 axes (rows of 3 numbers)")
    axes = ck.array(raw_axes, "control.controlAxes_B", (len(raw_axes), 3))
    for i, a in enumerate(axes):
        if not np.linalg.norm(a) > 0:
            raise ck.bad(f"control.controlAxes_B[{i + 1}]", raw_axes[i], "must not be zero")
    out["controlAxes_B"] = axes
    if out["actuator"] == "wheels":
        if wheels is None:
            raise ck.bad("control.actuator", "wheels", "the spacecraft has no [[wheels]]; use actuator = \"torque\" "
                         "(a hub torque) or add wheels")
        cg = axes @ wheels["gsHat_B"].T
        sv = np.linalg.svd(cg, compute_uv=False)
        if sv.size < len(axes) or sv[-1] <= 1e-9 * max(sv[0], 1e-300):
            raise ck.bad("control.controlAxes_B", raw_axes, f"the wheels' spin axes do not span these {len(axes)} "
                         "control axes (rwMotorTorque could not realise a torque about each)")
        if inputs is not None and any(c.startswith("u_") for c in inputs["columns"]):
            raise ck.fail("control.actuator", "the controller commands the wheels; recorded wheel commands "
                          "(u_<wheel> columns in [inputs]) would be added to its command")
    return out


def _check_wheels(ck: _Checker, raw: list, panels: Mapping[str, str]) -> dict[str, Any]:
    """The `[[wheels]]` tables (Basilisk `BalancedWheels`): names unique (default `rw<index+1>`), a unit spin axis,
    `Js` > 0, friction >= 0; `Omega` (initial speed), `u`, `u_max` any finite number."""
    taken: dict[str, str] = {}
    rows, names = [], []
    for i, table in enumerate(raw):
        where = f"wheels[{i}]"
        table = ck.table(table, where, "[[wheels]]")
        name = _check_name(ck, table, where, f"rw{i + 1}", taken, "wheel")
        if name in panels:
            raise ck.bad(f"{where}.name", name, f"already the name of {panels[name]}; parameter names (\"{name}.Js\") "
                         "need wheel and panel names to differ")
        label = f"{where} ({_toml_str(name)})"
        ck.keys(table, label, _WHEEL_KEYS, _WHEEL_REQUIRED, _ALIASES["wheel"])
        gs = ck.array(table["gsHat_B"], f"{label}.gsHat_B", (3,))
        norm = float(np.linalg.norm(gs))
        if not abs(norm - 1.0) <= UNIT_TOL:
            raise ck.bad(f"{label}.gsHat_B", table["gsHat_B"], f"must be a unit vector (the spin axis in B); its norm "
                         f"is {norm:.12g}")
        row = {"gsHat_B": gs, "Js": ck.positive(table["Js"], f"{label}.Js", "kg m^2, spin-axis inertia")}
        for key in ("Omega", "u", "u_max"):
            row[key] = ck.number(table[key], f"{label}.{key}") if key in table else 0.0
        row["cViscous"] = ck.nonnegative(table["cViscous"], f"{label}.cViscous", "N m s") if "cViscous" in table else 0.0
        row["fCoulomb"] = ck.nonnegative(table["fCoulomb"], f"{label}.fCoulomb", "N m") if "fCoulomb" in table else 0.0
        rows.append(row)
        names.append(name)
    out = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}
    out["names"] = tuple(names)
    return out
