"""The scenario file's checks: every key, type, shape and rule of a scenario TOML file (or dict), in plain
Python/NumPy, before anything is built; `check(data, source)` returns the validated values (`Parsed`) or raises
a one-line `ScenarioError` naming the field (dotted path, panels by index and name), the value and the rule.
Schema: docs/scenario-files.md. The physical rules themselves (a rigid body's inertia, a proper rotation, ...)
are `jaxhinge._model._rules`, shared with models built in code, sweeps and batches.
"""

import dataclasses
import os
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
from .._model._actuators import actuator_named
from .._model._integrators import TICK_RTOL
from .._model._loads import HOLDS, input_columns, rk4_silent_pulse
from .._model._rules import UNIT_NOTE_TOL, UNIT_TOL, rigid_body_problem, value_problem
from .._model._scenario import SimulationConfig
from .._model._schema import (
    ACTUATOR,
    BODIES,
    COMPUTED,
    CONTROL_AXES,
    CONTROL_DT,
    CONTROL_INERTIA,
    SCHEMA,
    SPIN_AXIS,
    Field,
    field,
    in_table,
)
from ._checker import Checker as _Checker
from ._inputs_file import read_inputs, relative_to

# ------------------------------------------------------------------------------------------------------------
# Keys (the fields themselves: `jaxhinge._model._schema`)
# ------------------------------------------------------------------------------------------------------------

_TOP_KEYS = ("hub", "panels", "gravity", "loads", "simulation", "chains", "wheels", "inputs", "control")
CHAIN_PANELS = "panels"  # the key of a chain's member tables ([[chains.panels]])
LOAD_VECTORS = ("extForce_B", "extForce_N", "extTorquePntB_B")
_LOADS_KEYS = (*LOAD_VECTORS, "pulses")
PULSE_KEYS = ("t_start", "t_end", *LOAD_VECTORS)
_PULSE_REQUIRED = ("t_start", "t_end")
_SIM_FLOATS = ("t_end", "save_dt", "dt", "rtol", "atol")
_SIM_KEYS = ("t_end", "save_dt", "integrator", "dt", "rtol", "atol", "max_steps")


def table_keys(table: str) -> tuple[str, ...]:
    """The keys a scenario-file table allows: `name` for tables of named things, then its schema fields."""
    named = ("name",) if table in ("panels", "chains", "chains.panels", "wheels") else ()
    extra = (CHAIN_PANELS,) if table == "chains" else ()
    return (*named, *(f.name for f in in_table(table)), *extra)


def _required(table: str) -> tuple[str, ...]:
    return tuple(f.name for f in in_table(table) if f.required) + ((CHAIN_PANELS,) if table == "chains" else ())


def _aliases(table: str) -> dict[str, str]:
    return {a: f.name for f in in_table(table) for a in f.aliases}


# What each key means, for "missing required key" messages (the schema's fields, and the structural keys).
_DESCRIPTION = {
    **{f.name: f.words() for f in SCHEMA if f.tables},
    CHAIN_PANELS: "the chain's panels, [[chains.panels]], root first, at least one",
    "t_start": "pulse start time, s, >= 0",
    "t_end": "pulse end time, s, > t_start",
}

# Common misnamings that difflib cannot guess (keys are lower-case), of the tables outside the schema.
_ALIASES = {
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
}

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# ------------------------------------------------------------------------------------------------------------
# Validation (pure Python / NumPy; nothing is built until everything has passed)
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Parsed:
    """The validated scenario as plain NumPy arrays / Python values, keyed by the schema's field names."""

    hub: dict[str, Any]
    panels: dict[str, Any]
    names: tuple[str, ...]
    gravity: dict[str, Any] | None
    loads: dict[str, Any] | None
    pulses: dict[str, Any] | None
    simulation: SimulationConfig
    chains: list = dataclasses.field(default_factory=list)  # [(chain name, panel names, {key: array})]
    wheels: dict[str, Any] | None = None  # {key: stacked array}, "names": tuple
    inputs: dict[str, Any] | None = None  # {"t", "values", "columns", "hold", "csv"}
    control: dict[str, Any] | None = None  # the [control] keys (ISCPntB_B None: the spacecraft's inertia)
    notes: list = dataclasses.field(default_factory=list)  # values the checker adjusted, in words


def _value(ck: _Checker, f: Field, raw: Any, where: str, notes: list) -> Any:
    """One key's value: its type and shape (`f.shape`), then its rule (`_model._rules.value_problem`); a spin
    axis within `UNIT_NOTE_TOL` of unit is normalised, with a note."""
    if f.rule == "choice":
        return ck.choice(_unwrap(raw), where, f.choices)
    if f.shape == ():
        x = ck.number(raw, where)
    elif f.shape[0] is None:  # rows
        rows = _unwrap(raw)
        if not isinstance(rows, list) or not 1 <= len(rows) <= 3:
            raise ck.bad(where, rows, f"must be 1 to 3 rows of {f.shape[1]} numbers")
        x = ck.array(rows, where, (len(rows), *f.shape[1:]))
    else:
        x = ck.array(raw, where, f.shape)
    if f.rule == "unit":
        norm = float(np.linalg.norm(x))
        if UNIT_TOL < abs(norm - 1.0) <= UNIT_NOTE_TOL:
            notes.append(f"{ck.source}: {where} = {_fmt(raw)} has norm {norm:.12g}: normalised to unit length "
                         f"(as Basilisk does; within {UNIT_NOTE_TOL:g} of unit)")
            x = x / norm
    problem = value_problem(f, x)
    if problem is not None:
        suffix, value, rule = problem
        if f.hint:
            rule += f"; {f.hint}"
        raise ck.bad(where + suffix, raw if not suffix else value, rule)
    return x


def _fields(ck: _Checker, table: Mapping, label: str, fields: tuple[Field, ...], notes: list,
            hangs: bool | None = None) -> dict[str, Any]:
    """The values of a table's schema `fields` (keys already checked), defaults where absent (`COMPUTED`: None).
    `hangs`: for a chain member, whether a panel hangs from it (its `l` is then required, else refused)."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.rule == "hinge_lever" and hangs is not None:
            if hangs and f.name not in table:
                raise ck.fail(label, f"missing required key {f.name!r} ({f.words()}): every panel of a chain needs "
                              "it (only the last panel may omit it)")
            if not hangs and f.name in table:
                raise ck.bad(f"{label}.{f.name}", table[f.name], "not allowed on the last panel of a chain: l places "
                             "the next panel's hinge (as in Basilisk's nHinged effector), and no panel follows; "
                             "remove it")
            if hangs:
                x = ck.number(table[f.name], f"{label}.{f.name}")
                if not x > 0:
                    raise ck.bad(f"{label}.{f.name}", table[f.name], f"must be > 0 ({f.unit}, {f.description})")
                out[f.name] = x
                continue
        if f.name in table:
            out[f.name] = _value(ck, f, table[f.name], f"{label}.{f.name}", notes)
        elif f.default is COMPUTED:
            out[f.name] = None  # the builder computes it
        else:
            out[f.name] = f.default if isinstance(f.default, str) else np.array(f.default, dtype=float)
    return out


def _stack(rows: list[dict], fields: tuple[Field, ...]) -> dict[str, np.ndarray]:
    """Per-element values (one dict a panel or wheel) as one array a field, elements first."""
    n = len(rows)
    return {f.name: np.array([r[f.name] for r in rows], dtype=float).reshape((n, *f.shape)) for f in fields}


def _check_hub(ck: _Checker, hub: Mapping, notes: list) -> dict[str, Any]:
    ck.keys(hub, "hub", table_keys("hub"), _required("hub"), _aliases("hub"))
    return _fields(ck, hub, "hub", in_table("hub"), notes)


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


def _check_panel(ck: _Checker, panel: Any, where: str, default_name: str, taken: dict[str, str], table: str,
                 notes: list, hangs: bool | None = None) -> tuple[str, dict[str, Any]]:
    """One panel, single (`table` "panels") or a chain's member ("chains.panels"): the same checks."""
    panel = ck.table(panel, where, f"[[{table}]]")
    name = _check_name(ck, panel, where, default_name, taken, "panel")  # first: it labels every other message
    label = f"{where} ({_toml_str(name)})"
    ck.keys(panel, label, table_keys(table), _required(table), _aliases(table))
    return name, _fields(ck, panel, label, in_table(table), notes, hangs)


def _check_chain(ck: _Checker, chain: Mapping, i: int, taken: dict, chain_taken: dict, notes: list):
    """One `[[chains]]` entry -> (chain name, panel names, {key: stacked array})."""
    name = _check_name(ck, chain, f"chains[{i}]", f"chain{i}", chain_taken, "chain")
    label = f"chains[{i}] ({_toml_str(name)})"
    ck.keys(chain, label, table_keys("chains"), _required("chains"), {"panel": CHAIN_PANELS})
    shared = _fields(ck, chain, label, in_table("chains"), notes)
    raw = _unwrap(chain[CHAIN_PANELS])
    if not isinstance(raw, list) or not raw:
        raise ck.bad(
            f"{label}.{CHAIN_PANELS}",
            raw,
            "must be a non-empty array of tables ([[chains.panels]] in TOML, root panel first), "
            f"got {_kind(raw) if isinstance(raw, list) is False else 'an empty array'}",
        )
    L = len(raw)
    checked = [_check_panel(ck, panel, f"{label}.{CHAIN_PANELS}[{j}]", f"{name}_{j + 1}", taken, "chains.panels",
                            notes, hangs=j < L - 1) for j, panel in enumerate(raw)]
    arrays = _stack([values for _, values in checked], in_table("chains.panels"))
    return name, tuple(pname for pname, _ in checked), {**arrays, **shared}


def _check_bodies(ck: _Checker, bodies: list) -> None:
    """Every rigid body, `(mass field, mass, inertia field, inertia)`, is a rigid body's and plausible
    (`jaxhinge._model._rules.rigid_body_problem`)."""
    problem = rigid_body_problem(bodies)
    if problem:
        raise ck.bad(*problem)


def _check_load_vectors(ck: _Checker, table: Mapping, where: str) -> dict[str, np.ndarray]:
    return {
        key: ck.array(table[key], f"{where}.{key}", (3,)) if key in table else np.zeros(3)
        for key in LOAD_VECTORS
    }


def _check_pulse(ck: _Checker, pulse: Any, j: int) -> dict[str, Any]:
    where = f"loads.pulses[{j}]"
    pulse = ck.table(pulse, where, "[[loads.pulses]]")
    ck.keys(pulse, where, PULSE_KEYS, _PULSE_REQUIRED, _ALIASES["load"])
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

    notes: list[str] = []
    hub = _check_hub(ck, ck.table(data["hub"], "hub", "[hub]"), notes)

    raw_panels = data.get("panels", [])
    raw_panels = _unwrap(raw_panels)
    if not isinstance(raw_panels, list):
        raise ck.bad(
            "panels", raw_panels, f"must be an array of tables ([[panels]] in TOML), got {_kind(raw_panels)}"
        )
    taken: dict[str, str] = {}
    singles = [_check_panel(ck, panel, f"panels[{i}]", f"p{i}", taken, "panels", notes)
               for i, panel in enumerate(raw_panels)]
    names = [name for name, _ in singles]
    panels = _stack([values for _, values in singles], in_table("panels"))

    raw_chains = _unwrap(data.get("chains", []))
    if not isinstance(raw_chains, list):
        raise ck.bad(
            "chains", raw_chains, f"must be an array of tables ([[chains]] in TOML), got {_kind(raw_chains)}"
        )
    chain_taken: dict[str, str] = {}
    chains = [
        _check_chain(ck, ck.table(ch, f"chains[{i}]", "[[chains]]"), i, taken, chain_taken, notes)
        for i, ch in enumerate(raw_chains)
    ]
    (_, hm, hI), (_, pm, pI) = BODIES
    where = [(f"panels[{i}] ({_toml_str(nm)})", p[pm], p[pI]) for i, (nm, p) in enumerate(singles)]
    where += [(f"chains[{i}] ({_toml_str(cn)}).panels[{j}] ({_toml_str(pn)})", a[pm][j], a[pI][j])
              for i, (cn, pns, a) in enumerate(chains) for j, pn in enumerate(pns)]
    _check_bodies(ck, [(f"hub.{hm}", hub[hm], f"hub.{hI}", hub[hI]),
                       *((f"{w}.{pm}", m, f"{w}.{pI}", I) for w, m, I in where)])

    gravity = None
    if "gravity" in data:
        grav = ck.table(data["gravity"], "gravity", "[gravity]")
        ck.keys(grav, "gravity", table_keys("gravity"), (), _aliases("gravity"))
        missing = [f for f in in_table("gravity") if f.required and f.name not in grav]
        if missing:
            f = missing[0]
            raise ck.fail("gravity", f"missing required key {f.name!r} ({f.words()}){f'; {f.hint}' if f.hint else ''}")
        gravity = _fields(ck, grav, "gravity", in_table("gravity"), notes)

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
                    (m, 3) if key in LOAD_VECTORS else (m,)
                )
                for key in PULSE_KEYS
            }

    sim = (
        _check_simulation(ck, ck.table(data["simulation"], "simulation", "[simulation]"))
        if "simulation" in data
        else SimulationConfig()
    )
    silent = None if pulses is None or not sim.integrator.fixed_step else rk4_silent_pulse(pulses["t_start"], pulses["t_end"], sim.dt)
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
    wheels = _check_wheels(ck, raw_wheels, taken, notes) if raw_wheels else None
    inputs = None
    if "inputs" in data:
        table = ck.table(data["inputs"], "inputs", "[inputs]")
        ck.keys(table, "inputs", table_keys("inputs"), _required("inputs"), _aliases("inputs"))
        csv_path = ck.string(table["csv"], "inputs.csv", "a CSV file name (a string, relative to this file)")
        hold = ck.choice(table.get("hold", field("input", "hold").default), "inputs.hold", HOLDS)
        panel_names = tuple(names) + tuple(pn for _, pns, _ in chains for pn in pns)
        allowed = input_columns(panel_names, () if wheels is None else wheels["names"])
        if not os.path.isfile(relative_to(ck.source, csv_path)):
            raise ck.bad("inputs.csv", csv_path, f"no such file: {relative_to(ck.source, csv_path)} (paths are "
                         "relative to this file)")
        offset = ck.number(table.get("time_offset", 0.0), "inputs.time_offset")
        t, values, columns = read_inputs(relative_to(ck.source, csv_path), allowed, sim.t_end,
                                         sim.dt if sim.integrator.fixed_step else None, hold, notes, offset)
        gains = ck.table(table.get("gain", {}), "inputs.gain", "[inputs.gain]")
        for c in gains:
            if c not in columns:
                raise ck.fail(f"inputs.gain.{c}", f"not a column of {csv_path}{did_you_mean(c, columns)}; columns: "
                              f"{', '.join(columns)}")
        gain = np.array([ck.number(gains.get(c, 1.0), f"inputs.gain.{c}") for c in columns])
        inputs = {"t": t, "values": values, "columns": columns, "hold": hold, "csv": relative_to(ck.source, csv_path),
                  "gain": gain, "time_offset": offset}
    control = _check_control(ck, data["control"], sim, wheels, inputs, notes) if "control" in data else None
    return Parsed(hub, panels, tuple(names), gravity, loads, pulses, sim, chains, wheels, inputs, control, notes)


def _check_control(ck: _Checker, raw, sim: SimulationConfig, wheels, inputs, notes: list) -> dict[str, Any]:
    """The `[control]` table (`jaxhinge._model._control`): each field's rule, then `control_dt` a whole multiple
    of the rk4 `dt`, an actuator that exists, wheel axes that span the control axes."""
    table = ck.table(raw, "control", "[control]")
    ck.keys(table, "control", table_keys("control"), _required("control"), _aliases("control"))
    out = _fields(ck, table, "control", in_table("control"), notes)
    dt_field, act, axes_field = (field("control", n) for n in (CONTROL_DT, ACTUATOR, CONTROL_AXES))
    cdt, where = out[dt_field.name], f"control.{dt_field.name}"
    n = round(cdt / sim.dt)
    if not sim.integrator.fixed_step:  # adaptive: each control period is one solve, the samples its boundaries
        if cdt > sim.t_end:
            raise ck.bad(where, table[dt_field.name], f"must be <= simulation.t_end = {_fmt(sim.t_end)} s (the "
                         f"flight software runs every {dt_field.name} from t = 0)")
    elif n < 1 or abs(cdt - n * sim.dt) > TICK_RTOL * cdt:
        raise ck.bad(where, table[dt_field.name], f"must be a whole multiple of simulation.dt = {_fmt(sim.dt)} s "
                     "(the flight software runs at the start of an rk4 step)")
    if out[CONTROL_INERTIA] is not None:  # the controller's model of the spacecraft: a rigid body's inertia too
        problem = rigid_body_problem([("control.mass", 1.0, f"control.{CONTROL_INERTIA}", out[CONTROL_INERTIA])],
                                     plausible=False)
        if problem:
            raise ck.bad(problem[0], table[CONTROL_INERTIA], problem[2])
    # what the actuator needs of the spacecraft (the wheels it commands, spin axes spanning the control axes)
    need = actuator_named(out[act.name]).problem(None if wheels is None else wheels[SPIN_AXIS],
                                                out[axes_field.name], () if inputs is None else inputs["columns"])
    if need is not None:
        key, words = need
        raise ck.bad(f"control.{key}", table.get(key, field("control", key).default), words)
    return out


def _check_wheels(ck: _Checker, raw: list, panels: Mapping[str, str], notes: list) -> dict[str, Any]:
    """The `[[wheels]]` tables (Basilisk `BalancedWheels`): names unique (default `rw<number>`, counted from 1),
    each field's rule (a unit spin axis, `Js` > 0, friction >= 0, ...)."""
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
        ck.keys(table, label, table_keys("wheels"), _required("wheels"), _aliases("wheels"))
        rows.append(_fields(ck, table, label, in_table("wheels"), notes))
        names.append(name)
    out: dict[str, Any] = _stack(rows, in_table("wheels"))
    out["names"] = tuple(names)
    return out
