r"""The schema: every field of the hub, panels, chains, wheels, controller, gravity and recorded inputs, declared
once.

A `Field` says what a field is (name, shape, unit, description, Basilisk's name), what it may be (its `rule`,
its default or that it is required), where it lives (the scenario-file tables that hold it, the model pytree and
attribute that carry it) and how it is fitted (`fit`: in log, linearly in units of `scale`, as inertia scale
factors or as a small rotation). Everything else reads these declarations:

- the model pytrees (`Hub`, `Panels`, `Wheels`, `InitialState`, `Control`, `PointMassGravity`) take their array
  leaves, defaults and constructor arguments from `leaves(model)`;
- the scenario-file checker, builder and writer (`jaxhinge._io`) loop over `in_table(table)`;
- the parameter registry (`jaxhinge._model._params`) registers every field with a `fit`;
- the physical rules (`jaxhinge._model._rules`) check each field's `rule`;
- the field table of docs/parameters.md is `markdown_table()`.

Adding a field is one declaration here, plus its physics (the code that reads `panels.<name>`).

**Rules** (`Field.rule`, checked by `jaxhinge._model._rules`): `"finite"` (any finite value), `"positive"` (> 0),
`"nonnegative"` (>= 0), `"unit"` (a unit vector; within `UNIT_NOTE_TOL` of unit it is normalised with a note),
`"rotation"` (a proper rotation matrix), `"spd"` (a symmetric positive-definite inertia), `"principal"` (a
diagonal inertia with a positive diagonal), `"mrp"` (an MRP of finite norm), `"axes"` (1 to 3 non-zero rows),
`"hinge_lever"` (> 0 where a panel hangs from this one, absent (0) on the last panel of a chain), `"choice"` (one
of `choices`).
"""

import dataclasses
from typing import Any

import numpy as np

from ._actuators import ACTUATORS  # the actuators' file names (`control.actuator`'s choices)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # `Field.default` of a key a file must give
COMPUTED: Any = type("_Computed", (), {"__repr__": lambda self: "COMPUTED"})()  # a default the builder computes

RULE_WORDS = {
    "finite": "any",
    "positive": "> 0",
    "nonnegative": ">= 0",
    "unit": "unit vector",
    "rotation": "proper rotation",
    "spd": "symmetric positive definite",
    "principal": "diagonal, diagonal > 0",
    "mrp": "finite norm",
    "axes": "1 to 3 non-zero rows",
    "hinge_lever": "> 0 where a panel hangs",
    "choice": "one of the choices",
    "path": "a file name, relative to the scenario file",
}


@dataclasses.dataclass(frozen=True)
class Field:
    """One field (module docstring).

    - `name`: the key in files and the parameter name's field (`"k"`: `p0.k`); `owner`: the parameter owner
      (`"hub"`, `"panel"`, `"wheel"`, `"control"`, `"gravity"`, `"input"`, `"sensor"`, `"record"`).
    - `shape`: one element's shape (per panel / per wheel where the owner has many; `(None, 3)`: rows).
    - `unit`, `description`; `basilisk`: Basilisk's name where it differs (docs).
    - `rule`, `choices`: the allowed values; `default`: `REQUIRED`, `COMPUTED` or the value.
    - `tables`: the scenario-file tables holding the key (`"hub"`, `"panels"`, `"chains"`, `"chains.panels"`,
      `"wheels"`, `"control"`, `"gravity"`, `"inputs"`); `model`, `attr`: the pytree carrying it (`"hub"`,
      `"panels"`, `"initial"`, `"wheels"`, `"control"`, `"gravity"`, `"inputs"`) and its attribute there (default
      `name`); `static`: a static (non-array) attribute.
    - `fit`: `"log"`, `"linear"`, `"factors"` (3 inertia scale factors), `"rotation"` (a small rotation vector) or
      None (not a parameter); `scale`: the typical size of a change (a fit's linear unit).
    - `root_only`: a hinge-frame field a chain's members share with its root.
    - `aliases`: common misnamings in files (lower case) that the "did you mean" hints cannot guess.
    - `optional`: a per-element leaf that is None where its elements are absent (a wheel's initial speed in a
      scenario without wheels); `hint`: what a file's error about the field adds (how to do without it).
    """

    name: str
    owner: str
    shape: tuple = ()
    unit: str = "1"
    description: str = ""
    rule: str = "finite"
    default: Any = 0.0
    tables: tuple[str, ...] = ()
    model: str | None = None
    attr: str | None = None
    fit: str | None = "linear"
    scale: float = 1.0
    basilisk: str = ""
    choices: tuple = ()
    static: bool = False
    root_only: bool = False
    aliases: tuple[str, ...] = ()
    optional: bool = False
    hint: str = ""

    @property
    def attribute(self) -> str:
        """The attribute of the model pytree that carries the field."""
        return self.attr or self.name

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    # -- the parameter registry's view (`jaxhinge._model._params`)

    @property
    def kind(self) -> str:
        """`"scalar"`, `"vector"`, `"inertia"` (scale factors) or `"rotation"` (small rotation vector)."""
        if self.fit == "factors":
            return "inertia"
        if self.fit == "rotation":
            return "rotation"
        return "scalar" if self.shape == () else "vector"

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter's value: () for a scalar, (3,) otherwise."""
        return () if self.kind == "scalar" else (3,)

    @property
    def param_unit(self) -> str:
        """The unit of the parameter's value (inertia factors and rotation vectors have their own)."""
        return {"inertia": "1 (inertia scale factor)", "rotation": "rad (rotation vector)"}.get(self.kind, self.unit)

    @property
    def positive(self) -> bool:
        """Fitted as a log-ratio (the value must stay > 0)."""
        return self.fit in ("log", "factors")

    @property
    def initial(self) -> bool:
        """An initial condition (`InitialState`)."""
        return self.model == "initial"

    @property
    def minimum(self) -> float | None:
        return 0.0 if self.rule in ("positive", "nonnegative", "hinge_lever", "spd", "principal") else None

    @property
    def inclusive(self) -> bool:
        return self.rule == "nonnegative"

    def allowed(self) -> str:
        """The value rule in words, e.g. `"must be > 0"`."""
        if self.minimum is None:
            return "any finite value"
        return f"must be {'>=' if self.inclusive else '>'} {self.minimum:g}"

    def admits(self, x) -> np.ndarray | np.bool_:
        """Element-wise: the values `x` are allowed for this field as a parameter (finite, above the minimum)."""
        x = np.asarray(x, dtype=float)
        ok = np.isfinite(x)
        if self.minimum is not None:
            ok &= (x >= self.minimum) if self.inclusive else (x > self.minimum)
        return ok

    def words(self) -> str:
        """What the file key means, for messages: `"hub mass, kg, > 0"`."""
        rule = ", ".join(self.choices) if self.rule == "choice" else RULE_WORDS[self.rule]
        return ", ".join(x for x in (self.description, self.unit if self.unit != "1" else "", rule)
                         if x and x != "any")


def _f(name, owner, shape=(), unit="1", description="", **kw) -> Field:
    return Field(name, owner, tuple(shape), unit, description, **kw)


_P = ("panels", "chains.panels")  # a panel field: single panels and chain members alike
Z3 = (0.0, 0.0, 0.0)
I3 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

SCHEMA: tuple[Field, ...] = (
    # -- the hub ([hub]; Basilisk `HubEffector` and the spacecraft's initial conditions, given for the system CoM)
    _f("mHub", "hub", (), "kg", "hub mass", rule="positive", default=REQUIRED, tables=("hub",), model="hub",
       fit="log", aliases=("mass", "m")),
    _f("IHubPntBc_B", "hub", (3, 3), "kg m^2", "hub inertia about its CoM Bc, B frame", rule="spd",
       default=REQUIRED, tables=("hub",), model="hub", fit="factors", aliases=("inertia", "i")),
    _f("r_BcB_B", "hub", (3,), "m", "hub CoM relative to B, B frame", default=Z3, tables=("hub",), model="hub",
       scale=0.1),
    _f("r_CN_NInit", "hub", (3,), "m", "initial system CoM position, N frame", default=Z3, tables=("hub",),
       model="initial", scale=1.0),
    _f("v_CN_NInit", "hub", (3,), "m/s", "initial system CoM velocity, N frame", default=Z3, tables=("hub",),
       model="initial", scale=0.1),
    _f("sigma_BNInit", "hub", (3,), "1 (MRP)", "initial attitude of B relative to N", rule="mrp", default=Z3,
       tables=("hub",), model="initial", scale=0.1),
    _f("omega_BN_BInit", "hub", (3,), "rad/s", "initial hub rate, B frame", default=Z3, tables=("hub",),
       model="initial", scale=0.01),
    # -- panels ([[panels]] and [[chains.panels]]; Basilisk `hingedRigidBodyStateEffector` / `nHingedRigidBody...`)
    _f("mass", "panel", (), "kg", "panel mass", rule="positive", default=REQUIRED, tables=_P, model="panels",
       fit="log", aliases=("m",)),
    _f("IPntS_S", "panel", (3, 3), "kg m^2", "panel inertia about its CoM S, S frame (principal)",
       rule="principal", default=REQUIRED, tables=_P, model="panels", fit="factors", aliases=("inertia", "i")),
    _f("d", "panel", (), "m", "hinge H to panel CoM distance", rule="positive", default=REQUIRED, tables=_P,
       model="panels", fit="log"),
    _f("k", "panel", (), "N m/rad", "hinge spring stiffness", rule="nonnegative", default=REQUIRED, tables=_P,
       model="panels", fit="log", aliases=("stiffness", "spring")),
    _f("c", "panel", (), "N m s/rad", "hinge damping", rule="nonnegative", tables=_P, model="panels", fit="log", aliases=("damping", "damper")),
    _f("r_HB_B", "panel", (3,), "m", "hinge point H relative to B, B frame (chain: its root's)", default=REQUIRED,
       tables=("panels", "chains"), model="panels", scale=0.1, root_only=True),
    _f("dcm_HB", "panel", (3, 3), "1", "[HB], rows h1 h2 h3 in B components (chain: its root's)",
       rule="rotation", default=REQUIRED, tables=("panels", "chains"), model="panels", fit="rotation",
       scale=0.01, root_only=True),
    _f("thetaInit", "panel", (), "rad", "initial hinge angle", tables=_P, model="initial", scale=0.1, aliases=("theta", "theta0")),
    _f("thetaDotInit", "panel", (), "rad/s", "initial hinge rate", tables=_P, model="initial", scale=0.1, aliases=("thetadot", "thetadot0")),
    _f("thetaRef", "panel", (), "rad", "spring reference angle", tables=_P, model="panels", scale=0.1),
    _f("thetaDotRef", "panel", (), "rad/s", "damper reference rate", tables=_P, model="panels", scale=0.1),
    _f("motorTorque", "panel", (), "N m", "hinge motor torque", tables=_P, model="panels", scale=1.0, aliases=("torque", "u")),
    _f("l", "panel", (), "m", "hinge to next hinge distance (chains)", rule="hinge_lever", default=0.0,
       tables=("chains.panels",), model="panels", fit="log"),
    # -- reaction wheels ([[wheels]]; Basilisk `reactionWheelStateEffector`, BalancedWheels)
    _f("gsHat_B", "wheel", (3,), "1", "spin axis, B frame", rule="unit", default=REQUIRED, tables=("wheels",),
       model="wheels", fit=None, aliases=("axis", "gshat", "gs")),
    _f("Js", "wheel", (), "kg m^2", "wheel spin-axis inertia", rule="positive", default=REQUIRED,
       tables=("wheels",), model="wheels", fit="log", aliases=("j", "inertia")),
    _f("Omega", "wheel", (), "rad/s", "initial wheel speed relative to the hub", tables=("wheels",),
       model="initial", attr="OmegaInit", scale=10.0, basilisk="Omega", aliases=("omega", "speed"), optional=True),
    _f("u", "wheel", (), "N m", "wheel motor torque command (constant part)", tables=("wheels",), model="wheels",
       scale=0.01, basilisk="u_current", aliases=("torque",)),
    _f("u_max", "wheel", (), "N m", "wheel motor torque limit (<= 0: none)", tables=("wheels",), model="wheels",
       scale=0.01, aliases=("umax", "max_torque")),
    _f("cViscous", "wheel", (), "N m s", "wheel viscous friction", rule="nonnegative", tables=("wheels",),
       model="wheels", fit="log", aliases=("viscous",)),
    _f("fCoulomb", "wheel", (), "N m", "wheel Coulomb friction", rule="nonnegative", tables=("wheels",),
       model="wheels", fit="log", aliases=("coulomb",)),
    _f("omegaLimitCycle", "wheel", (), "rad/s", "friction linear below this speed", rule="positive",
       default=1e-4, model="wheels", fit=None),
    # -- the attitude controller ([control]; Basilisk inertial3D, attTrackingError, mrpFeedback, rwMotorTorque)
    _f("sigma_R0N", "control", (3,), "1 (MRP)", "reference attitude", rule="mrp", default=Z3, tables=("control",),
       model="control", scale=0.1),
    _f("K", "control", (), "N m", "MRP feedback gain", rule="nonnegative", default=REQUIRED, tables=("control",),
       model="control", fit="log"),
    _f("P", "control", (), "N m s", "rate feedback gain", rule="nonnegative", default=REQUIRED,
       tables=("control",), model="control", fit="log"),
    _f("Ki", "control", (), "1/s", "integral gain (<= 0: no integral term)", default=-1.0, tables=("control",),
       model="control", scale=1e-3),
    _f("integralLimit", "control", (), "1", "clip of each integral component", rule="nonnegative",
       tables=("control",), model="control", scale=0.01),
    _f("ISCPntB_B", "control", (3, 3), "kg m^2", "the controller's inertia model (default: the spacecraft's "
       "about B at the initial hinge angles)", rule="spd", default=COMPUTED, tables=("control",), model="control",
       fit="factors"),
    _f("knownTorquePntB_B", "control", (3,), "N m", "known external torque fed forward", default=Z3,
       tables=("control",), model="control", scale=0.01),
    _f("controlAxes_B", "control", (None, 3), "1", "the axes rwMotorTorque controls (rows, B frame)", rule="axes",
       default=I3, tables=("control",), model="control", fit=None),
    _f("control_dt", "control", (), "s", "flight-software period (a whole multiple of the rk4 dt)",
       rule="positive", default=REQUIRED, tables=("control",), model="control", fit="log"),
    _f("actuator", "control", (), "", "what realises the torque: the wheels or a hub torque", rule="choice",
       default="wheels", choices=tuple(ACTUATORS), tables=("control",), model="control", static=True, fit=None, basilisk="-"),
    # -- gravity ([gravity]; Basilisk's point-mass gravity, applied at the system CoM)
    _f("mu", "gravity", (), "m^3/s^2", "gravitational parameter", rule="positive", default=REQUIRED,
       tables=("gravity",), model="gravity", fit=None, aliases=("gm",),
       hint="omit the [gravity] table for no gravity"),
    # -- recorded inputs ([inputs]; applied input = gain * record(t - time_offset))
    _f("csv", "input", (), "", "the CSV file of the record, relative to the scenario file", rule="path", static=True,
       default=REQUIRED, tables=("inputs",), fit=None, aliases=("file", "path"), basilisk="-"),
    _f("hold", "input", (), "", "between samples: zero-order hold or linear", rule="choice", default="zoh",
       choices=("zoh", "linear"), tables=("inputs",), fit=None, aliases=("interpolation",), basilisk="-"),
    _f("gain", "input", (), "1", "gain of a recorded input column (applied = gain x recorded)", default=1.0,
       tables=("inputs",), model="inputs", scale=1e-2, basilisk="-"),
    _f("time_offset", "input", (), "s", "delay of the recorded inputs (applied at t: recorded at t - offset)",
       tables=("inputs",), model="inputs", scale=1e-2, basilisk="-"),
    # -- sensor models of the telemetry fit (`"<column>.bias"`, `"<column>.scale"`, `"time_offset"`): a column is
    # measured as (1 + scale) * model(t + time_offset) + bias; bias is fitted in units of the column's sigma
    _f("bias", "sensor", (), "the column's unit", "sensor bias of a telemetry column", scale=1.0, basilisk="-"),
    _f("scale", "sensor", (), "1", "scale-factor error of a telemetry column", scale=1e-3, basilisk="-"),
    _f("time_offset", "record", (), "s", "time offset of a telemetry record (model at t + offset)", scale=1e-3, basilisk="-"),
)


# the fields that rules across fields refer to (the rigid-body check, the controller's checks)
BODIES = (("hub", "mHub", "IHubPntBc_B"), ("panel", "mass", "IPntS_S"))  # (owner, mass field, inertia field)
SPIN_AXIS = "gsHat_B"  # a wheel's
CONTROL_DT, ACTUATOR, CONTROL_AXES, CONTROL_INERTIA = "control_dt", "actuator", "controlAxes_B", "ISCPntB_B"


def in_table(table: str, schema: tuple[Field, ...] | None = None) -> tuple[Field, ...]:
    """The fields a scenario-file table holds, in declaration order (`"hub"`, `"panels"`, `"chains"`,
    `"chains.panels"`, `"wheels"`, `"control"`, `"gravity"`, `"inputs"`)."""
    return tuple(f for f in (SCHEMA if schema is None else schema) if table in f.tables)


def of_model(model: str, schema: tuple[Field, ...] | None = None) -> tuple[Field, ...]:
    """The fields a model pytree carries, in declaration order (its constructor's argument order)."""
    return tuple(f for f in (SCHEMA if schema is None else schema) if f.model == model)


def field(owner: str, name: str) -> Field:
    """The declaration of `owner`'s field `name`."""
    for f in SCHEMA:
        if f.owner == owner and f.name == name:
            return f
    raise KeyError(f"{owner}.{name}")


_OWNER_WORDS = {"panel": "panel", "hub": "hub", "wheel": "wheel", "control": "control", "gravity": "gravity",
                "input": "inputs", "sensor": "telemetry column", "record": "telemetry record"}
_ARRAYS = ("panels", "chains", "chains.panels", "wheels")  # tables written [[...]] in TOML


def _default_words(f: Field) -> str:
    if f.required:
        return "required"
    if f.default is COMPUTED:
        return "computed"
    if f.static or isinstance(f.default, str):
        return f'"{f.default}"'
    d = np.asarray(f.default, dtype=float)
    if d.ndim and np.array_equal(d, np.eye(3)):
        return "identity"
    return f"{float(d.flat[0]):g}" if np.all(d == d.flat[0]) else str(d.tolist())


def markdown_table(schema: tuple[Field, ...] | None = None) -> str:
    """The field table of docs/parameters.md: every field, what it is, what it may be, how it is fitted."""
    rows = ["| field | owner | shape | unit | default | allowed | fitted as | file table | Basilisk |",
            "|---|---|---|---|---|---|---|---|---|"]
    for f in (SCHEMA if schema is None else schema):
        fitted = {"log": "log-ratio", "linear": f"linear, scale {f.scale:g}", "factors": "3 scale factors (log)",
                  "rotation": f"rotation vector, scale {f.scale:g}", None: "not a parameter"}[f.fit]
        tables = ", ".join(f"`[[{t}]]`" if t in _ARRAYS else f"`[{t}]`" for t in f.tables) or "(telemetry fits)"
        shape = " x ".join("n" if d is None else str(d) for d in f.shape) or "scalar"
        allowed = " / ".join(f'"{c}"' for c in f.choices) if f.rule == "choice" else RULE_WORDS[f.rule]
        rows.append(f"| `{f.name}` | {_OWNER_WORDS[f.owner]} | {shape} | {f.unit or '-'} | {_default_words(f)} | "
                    f"{allowed} | {fitted} | {tables} | {'-' if f.basilisk == '-' else f'`{f.basilisk or f.name}`'} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # the field table of docs/parameters.md
    print(markdown_table(), end="")
