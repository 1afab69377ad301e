"""Scenario files: a TOML description of a spacecraft, its initial state, loads and simulation settings.

`load_scenario(path)` / `scenario_from_dict(data)` validate **everything** before building a single array and
refuse bad input with a one-line `ScenarioError` that names the field (dotted path, panels by index and
name: `panels[1] ("p1").dcm_HB`), the value given and what is allowed. `dump_scenario` /
`scenario_to_dict` write the inverse: a file that loads back to an identical scenario (floats are written
with `repr`, so every bit survives).

The schema (field names, frames and units are Basilisk's; SI units, radians):

```toml
[hub]                   # required
mHub = 750.0            # required, kg, > 0 (every mass >= 1e-9 x the total: `_check_bodies`)
IHubPntBc_B = [[900.0, 0.0, 0.0], [0.0, 800.0, 0.0], [0.0, 0.0, 600.0]]   # required, kg m^2, SPD, a rigid body's
r_BcB_B = [0.0, 0.0, 1.0]             # m, default 0
r_CN_NInit = [0.1, -0.4, 0.3]         # m, system CoM C, default 0
v_CN_NInit = [-0.2, 0.5, 0.1]         # m/s, default 0
sigma_BNInit = [0.0, 0.0, 0.0]        # MRP, default 0
omega_BN_BInit = [0.1, -0.1, 0.1]     # rad/s, default 0

[[panels]]              # zero or more
name = "p0"             # optional, default "p<index>"; unique, [A-Za-z_][A-Za-z0-9_]*
mass = 100.0            # required, kg, > 0
IPntS_S = [[100.0, 0.0, 0.0], [0.0, 50.0, 0.0], [0.0, 0.0, 50.0]]   # required, kg m^2, diagonal, > 0
d = 1.5                 # required, m, > 0
k = 100.0               # required, N m/rad, >= 0
c = 0.0                 # N m s/rad, >= 0, default 0
r_HB_B = [0.5, 0.0, 1.0]                                            # required, m
dcm_HB = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]      # required, proper rotation
thetaInit = 0.0         # rad, default 0
thetaDotInit = 0.0      # rad/s, default 0
thetaRef = 0.0          # rad, default 0
thetaDotRef = 0.0       # rad/s, default 0
motorTorque = 0.0       # N m, default 0

[[chains]]              # zero or more: chains of panels hinged edge to edge (folding arrays)
name = "wing"           # optional, default "chain<index>"; unique, [A-Za-z_][A-Za-z0-9_]*
r_HB_B = [0.5, 0.0, 1.0]                                            # required: first hinge, on the hub, m
dcm_HB = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]      # required; every hinge axis is h2

[[chains.panels]]       # one or more, root (hinged to the hub) first
name = "wing_1"         # optional, default "<chain name>_<1-based position>"; unique among ALL panels
mass = 60.0             # required, kg, > 0
IPntS_S = [[60.0, 0.0, 0.0], [0.0, 30.0, 0.0], [0.0, 0.0, 35.0]]    # required, kg m^2, diagonal, > 0
d = 0.8                 # required, m, > 0: this panel's hinge to its CoM, along -s1
l = 1.7                 # m, > 0: this panel's hinge to the next one, along -s1 (required; not on the last panel)
k = 250.0               # required, N m/rad, >= 0
c = 3.0                 # N m s/rad, >= 0, default 0
thetaInit = 0.08        # rad, default 0: RELATIVE to the previous panel (to the hinge frame H for the root)
thetaDotInit = 0.0      # rad/s, default 0 (relative)
thetaRef = 0.0          # rad, default 0 (relative)
thetaDotRef = 0.0       # rad/s, default 0 (relative)
motorTorque = 0.0       # N m, default 0 (between this panel and the previous one)

[gravity]               # optional; absent = no gravity
mu = 3.986004415e14     # m^3/s^2, > 0

[loads]                 # optional; constant loads, default 0
extForce_B = [0.0, 1.0, 0.0]          # N, B frame
extForce_N = [0.0, 0.0, 0.0]          # N, N frame
extTorquePntB_B = [0.0, 0.0, 0.0]     # N m about B, B frame

[[loads.pulses]]        # optional; acts on t_start <= t < t_end
t_start = 0.0           # s, >= 0, < simulation.t_end
t_end = 5.0             # s, > t_start
extForce_B = [0.2, 0.7, 0.0]          # same keys as [loads], default 0

[simulation]            # optional; defaults from `SimulationConfig`
t_end = 2.5
save_dt = 0.01
integrator = "rk4"      # "rk4", "tsit5" or "dopri8"
dt = 0.001
rtol = 1e-10
atol = 1e-12
max_steps = 1000000
```
"""

import dataclasses
import math
import os
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._model._loads import Loads, Pulses
from .._model._scenario import ConfigError, Scenario, SimulationConfig
from .._model._spacecraft import Hub, InitialState, Panels, PointMassGravity, Spacecraft
from ._files import (  # noqa: F401  (the checker and its helpers live in the file layer, shared by every loader)
    ScenarioError,
    _Checker,
    _fmt,
    _fmt_float,
    _fmt_key,
    _fmt_shape,
    _kind,
    _shape_of,
    _shape_words,
    _suggest,
    _toml_str,
    _unwrap,
    atomic_write,
    toml_text,
)

__all__ = [
    "ScenarioError",
    "dump_scenario",
    "example_path",
    "load_scenario",
    "scenario_from_dict",
    "scenario_to_dict",
    "scenario_toml",
]


# ------------------------------------------------------------------------------------------------------------
# Schema
# ------------------------------------------------------------------------------------------------------------

_TOP_KEYS = ("hub", "panels", "gravity", "loads", "simulation", "chains")
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
}

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_SYM_RTOL = 1e-12  # hub inertia symmetry, relative to max |I_ij|
_REL_FLOOR = 1e-9  # a body's mass or principal moment: at least this fraction of the spacecraft's total / largest
_TRIANGLE_RTOL = 1e-3  # principal moments: largest <= sum of the other two + this fraction of the largest
_DIAG_RTOL = 1e-12  # panel inertia off-diagonals, relative to max |I_ii|
_DCM_TOL = 1e-9  # dcm_HB orthonormality and det


# ------------------------------------------------------------------------------------------------------------
# Validation (pure Python / NumPy; nothing is built until everything has passed)
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Parsed:
    """The validated scenario as plain NumPy arrays / Python values."""

    hub: dict[str, Any]
    panels: dict[str, Any]
    names: tuple[str, ...]
    mu: float | None
    loads: dict[str, Any] | None
    pulses: dict[str, Any] | None
    simulation: SimulationConfig
    chains: list = dataclasses.field(default_factory=list)  # [(chain name, panel names, {key: array})]


def _check_hub(ck: _Checker, hub: Mapping) -> dict[str, Any]:
    ck.keys(hub, "hub", _HUB_KEYS, _HUB_REQUIRED, _ALIASES["hub"])
    out: dict[str, Any] = {}
    out["mHub"] = ck.positive(hub["mHub"], "hub.mHub", "kg")

    field = "hub.IHubPntBc_B"
    inertia = ck.array(hub["IHubPntBc_B"], field, (3, 3))
    scale = np.max(np.abs(inertia))
    asym = np.max(np.abs(inertia - inertia.T))
    if asym > _SYM_RTOL * scale:
        raise ck.bad(
            field,
            hub["IHubPntBc_B"],
            f"not symmetric (max |I - I^T| = {asym:.3g} > {_SYM_RTOL:g} * max |I_ij|); "
            "must be a symmetric positive-definite 3x3 matrix (kg m^2)",
        )
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    if not eig[0] > 0:
        raise ck.bad(
            field,
            hub["IHubPntBc_B"],
            f"not positive definite (smallest eigenvalue {eig[0]:.6g}); "
            "must be a symmetric positive-definite 3x3 matrix (kg m^2)",
        )
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
    """Every rigid body, `(mass field, mass, inertia field, inertia)`, is plausible: its principal moments obey the
    triangle inequality (largest <= sum of the other two, within `_TRIANGLE_RTOL` of the largest for rounded
    values); neither its mass nor a moment is below `_REL_FLOOR` of the spacecraft's total mass or largest moment
    (most likely a unit slip; so light a body leaves the equations of motion ill-conditioned)."""
    moments = [np.linalg.eigvalsh(0.5 * (I + I.T)) for *_, I in bodies]
    total, top = sum(b[1] for b in bodies), max(I[-1] for I in moments)
    for (mass_field, m, field, inertia), (a, b, c) in zip(bodies, moments):
        if c > a + b + _TRIANGLE_RTOL * c:
            raise ck.bad(field, inertia, f"principal moments {a:.6g}, {b:.6g}, {c:.6g} kg m^2 are not a rigid body's: "
                         f"the largest must be <= the sum of the others (within {_TRIANGLE_RTOL:g} of the largest)")
        if m < _REL_FLOOR * total:
            raise ck.bad(mass_field, m, f"implausibly small: must be >= {_REL_FLOOR:g} x the spacecraft's total mass "
                         f"({total:.6g} kg), or the equations of motion are ill-conditioned")
        if a < _REL_FLOOR * top:
            raise ck.bad(field, inertia, f"principal moment {a:.6g} kg m^2 is implausibly small: must be >= "
                         f"{_REL_FLOOR:g} x the spacecraft's largest ({top:.6g}), or the equations are ill-conditioned")


def _check_panel_inertia(ck: _Checker, panel: Mapping, label: str) -> np.ndarray:

    field = f"{label}.IPntS_S"
    inertia = ck.array(panel["IPntS_S"], field, (3, 3))
    diag = np.diag(inertia)
    for j in range(3):
        if not diag[j] > 0:
            raise ck.bad(
                f"{field}[{j + 1}][{j + 1}]",
                panel["IPntS_S"][j][j],
                "diagonal entries of IPntS_S must be > 0 (kg m^2)",
            )
    scale = np.max(diag)
    for r in range(3):
        for col in range(3):
            if r != col and inertia[r, col] != 0.0 and abs(inertia[r, col]) > _DIAG_RTOL * scale:
                raise ck.bad(
                    f"{field}[{r + 1}][{col + 1}]",
                    panel["IPntS_S"][r][col],
                    "IPntS_S must be diagonal (off-diagonal entries 0, "
                    f"or below {_DIAG_RTOL:g} * max diagonal): "
                    "Basilisk assumes the panel frame S is principal and uses only the diagonal",
                )
    return inertia


def _check_dcm(ck: _Checker, value: Any, field: str) -> np.ndarray:
    dcm = ck.array(value, field, (3, 3))
    ortho = np.max(np.abs(dcm @ dcm.T - np.eye(3)))
    if not ortho <= _DCM_TOL:
        raise ck.bad(
            field,
            value,
            f"not orthonormal (max |[HB][HB]^T - I| = {ortho:.3g} > {_DCM_TOL:g}); "
            "must be a proper rotation matrix (rows h1, h2, h3 in B components)",
        )
    det = float(np.linalg.det(dcm))
    if not abs(det - 1.0) <= _DCM_TOL:
        raise ck.bad(
            field,
            value,
            f"determinant is {det:.6g}, not +1 (a reflection); must be a proper rotation matrix "
            "(rows h1, h2, h3 in B components, h3 = h1 x h2)",
        )
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


def _check(data: Any, source: str) -> _Parsed:
    # Huge (finite) inputs may overflow in the checks; the checks then fail, with a message, not a warning.
    with np.errstate(all="ignore"):
        return _check_all(data, _Checker(source, descriptions=_DESCRIPTION))


def _check_all(data: Any, ck: _Checker) -> _Parsed:
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
    late = np.flatnonzero(pulses["t_start"] >= sim.t_end) if pulses is not None else []
    if len(late):
        raise ck.bad(f"loads.pulses[{late[0]}].t_start", pulses["t_start"][late[0]], f"must be < simulation.t_end = "
                     f"{_fmt(sim.t_end)} s: a pulse that starts when the run has ended never acts")
    return _Parsed(hub, panels, tuple(names), mu, loads, pulses, sim, chains)


def _build(p: _Parsed) -> Scenario:
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
    initial = InitialState(
        r_CN_NInit=p.hub["r_CN_NInit"],
        v_CN_NInit=p.hub["v_CN_NInit"],
        sigma_BNInit=p.hub["sigma_BNInit"],
        omega_BN_BInit=p.hub["omega_BN_BInit"],
        thetaInit=np.concatenate([p.panels["thetaInit"], *[a["thetaInit"] for _, _, a in p.chains]]),
        thetaDotInit=np.concatenate([p.panels["thetaDotInit"], *[a["thetaDotInit"] for _, _, a in p.chains]]),
    )
    if p.loads is None:
        loads = Loads()
    else:
        pulses = None if p.pulses is None else Pulses(**p.pulses)
        loads = Loads(**p.loads, pulses=pulses)
    return Scenario(
        spacecraft=Spacecraft(hub=hub, panels=panels, gravity=gravity),
        initial=initial,
        loads=loads,
        simulation=p.simulation,
    )


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
    return _build(_check(data, source))


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read, validate and build a scenario TOML file (schema: this module's docstring).

    **Arguments:**

    - `path`: the `.toml` file.

    **Returns:** a `Scenario`.

    **Raises:** `ScenarioError` for an unreadable file, a TOML syntax error (`file:line:column: ...`) or any
    invalid value (`file: field = value: what is allowed`).
    """
    source = os.fspath(path)
    data = _Checker(source).read_toml("scenario file")
    return scenario_from_dict(data, source=source)


def example_path(name: str) -> pathlib.Path:
    """Path of a bundled example scenario, e.g. `example_path("two_panel")` (`.toml` optional)."""
    folder = pathlib.Path(__file__).parent.parent / "examples"
    stem = name.removesuffix(".toml")
    path = folder / f"{stem}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.toml")))
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
    _check(data, source)  # never write a file that would not load
    return toml_text(data, header="# jaxhinge scenario (SI units, radians; Basilisk names and frames)")


def dump_scenario(scenario: Scenario, path: str | os.PathLike) -> None:
    """Write `scenario` as a TOML scenario file that `load_scenario` reads back to identical leaves.

    The scenario is validated first (an invalid one raises `ScenarioError` and leaves `path` untouched); the
    file is written to a temporary file in the same folder and moved into place with `os.replace`
    (`jaxhinge._io._files.atomic_write`).

    **Arguments:**

    - `scenario`: a single `Scenario` without function loads.
    - `path`: the `.toml` file to (over)write.
    """
    text = scenario_toml(scenario, os.fspath(path))
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
