r"""The parameter registry: one name, unit, kind, scale and component convention for every field, used by every
file format and API (dispersions and sweeps, sensitivities, modal fits, telemetry fits).

**Names.** `"<panel name>.<field>"` (any panel, single or in a chain, e.g. `"p0.k"`, `"wing_2.c"`),
`"<wheel name>.<field>"` (a reaction wheel: `"rw1.Js"`, `"rw1.Omega"` (initial speed), `"rw1.u"`, `"rw1.u_max"`,
`"rw1.cViscous"`, `"rw1.fCoulomb"`), `"control.<field>"` (the attitude controller: `"control.K"`, `"control.P"`,
`"control.Ki"`, `"control.integralLimit"`, `"control.control_dt"`, `"control.ISCPntB_B"`, `"control.sigma_R0N"`,
`"control.knownTorquePntB_B"`), `"inputs.<column>.gain"` and `"inputs.time_offset"` (recorded inputs:
`"inputs.u_rw1.gain"` scales the column `u_rw1`, `"inputs.time_offset"` delays the whole record) and
`"hub.<field>"` (hub parameters and the initial conditions, e.g. `"hub.mHub"`, `"hub.omega_BN_BInit"`, as in
the scenario file). A 3-vector field names one component with a **1-based** index, `"hub.omega_BN_BInit[3]"`
(about $\hat b_3$; as the telemetry columns `omega_BN_B_1..3`); the bare name stands for all three.

**Kinds** (`Field.kind`), and what a value means:

- `scalar`: the value itself (`mass`, `d`, `l`, `k`, `c`, `thetaRef`, ..., `hub.mHub`);
- `vector`: the 3 components (`r_HB_B`, `hub.r_BcB_B`, `hub.r_CN_NInit`, ...);
- `inertia`: 3 positive scale factors $s$ (nominal 1) applied as $I' = DID$, $D = \mathrm{diag}(\sqrt s)$: the
  diagonal entries (principal values of a diagonal inertia) are multiplied by $s$ and $I'$ stays symmetric
  positive definite (`IPntS_S`, `hub.IHubPntBc_B`);
- `rotation`: a small rotation vector $\phi$ [rad] (nominal 0) in the hinge frame, $[H'B] = \exp(-[\tilde\phi])[HB]$
  (`dcm_HB`).

`Field.positive` marks quantities that must be > 0 when fitted (they are fitted as log-ratios); `minimum` is
the smallest value a dispersion or fit may give (`> minimum`, or `>=` when `inclusive`); `scale` is the typical
size of a change, the unit of a fit's linear coordinate. `r_HB_B` and `dcm_HB` of a chain belong to its root
panel (every panel of a chain shares the root's hinge frame).
"""

import dataclasses
import re
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._errors import ParameterError
from .._format import did_you_mean as _did_you_mean
from .._format import fmt_value as _fmt_value
from .._math import rotation_dcm
from ._scenario import Scenario
from ._schema import SCHEMA, Field

FIELDS: dict[str, Field] = {f.name: f for f in SCHEMA if f.fit is not None and f.owner != "input"}
# recorded inputs (`"inputs.<column>.gain"`, `"inputs.time_offset"`): applied input = gain * record(t - offset)
INPUT_FIELDS: dict[str, Field] = {f.name: f for f in SCHEMA if f.fit is not None and f.owner == "input"}
HUB_FIELDS = tuple(n for n, f in FIELDS.items() if f.owner == "hub")
PANEL_FIELDS = tuple(n for n, f in FIELDS.items() if f.owner == "panel")
WHEEL_FIELDS = tuple(n for n, f in FIELDS.items() if f.owner == "wheel")
CONTROL_FIELDS = tuple(n for n, f in FIELDS.items() if f.owner == "control")
_INPUT_NAME = re.compile(r"^\s*inputs\.(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\s*$")
_NAME = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*(-?\d+)\s*\])?\s*$")


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A resolved name: `base` (`"<owner>.<field>"`), `field` (`Field`), `panel` (the panel's or wheel's index, None for the hub) and
    `component` (0-based index into a 3-vector, None for the whole field or a scalar). `name` is the canonical
    spelling (1-based component)."""

    base: str
    field: Field
    panel: int | None
    component: int | None

    @property
    def name(self) -> str:
        return self.base if self.component is None else f"{self.base}[{self.component + 1}]"

    @property
    def unit(self) -> str:
        return self.field.param_unit

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.component is not None else self.field.param_shape


def parameter_names(scenario: Scenario) -> tuple[str, ...]:
    """Every base name of this scenario: `hub.<field>` and `<panel>.<field>` (chain hinge frames: roots only)."""
    p, w = scenario.spacecraft.panels, scenario.spacecraft.wheels
    names = [f"hub.{f}" for f in HUB_FIELDS]
    for i, nm in enumerate(p.labels):
        names += [f"{nm}.{f}" for f in PANEL_FIELDS
                  if (not FIELDS[f].root_only or p.parent[i] < 0) and (FIELDS[f].rule != "hinge_lever" or i in p.parent)]
    for nm in (() if w is None else w.labels):
        names += [f"{nm}.{f}" for f in WHEEL_FIELDS]
    if scenario.loads.inputs is not None:
        names += [f"inputs.{c}.gain" for c in scenario.loads.inputs.columns] + ["inputs.time_offset"]
    if scenario.control is not None:
        names += [f"control.{f}" for f in CONTROL_FIELDS]
    return tuple(names)


def _resolve_input(scenario: Scenario, name: str) -> Parameter:
    """`inputs.<column>.gain` / `inputs.time_offset` (the scenario's recorded inputs)."""
    inputs = scenario.loads.inputs
    if inputs is None:
        raise ParameterError(f"{name!r}: the scenario has no recorded inputs ([inputs] in the scenario file)")
    m = _INPUT_NAME.match(name)
    names = [f"inputs.{c}.gain" for c in inputs.columns] + ["inputs.time_offset"]
    if not m or (m.group(1) is None) != (m.group(2) == "time_offset") or m.group(2) not in INPUT_FIELDS:
        raise ParameterError(f"{name!r}: not a recorded-input parameter{_did_you_mean(name.strip(), names)}; they "
                             f"are {', '.join(names)}")
    col, fld = m.group(1), m.group(2)
    if col is not None and col not in inputs.columns:
        raise ParameterError(f"{name!r}: {col!r} is not a column of the recorded inputs"
                             f"{_did_you_mean(col, inputs.columns)}; columns: {', '.join(inputs.columns)}")
    base = "inputs.time_offset" if col is None else f"inputs.{col}.gain"
    return Parameter(base, INPUT_FIELDS[fld], None if col is None else inputs.columns.index(col), None)


def resolve(scenario: Scenario, name: str) -> Parameter:
    """Resolve `name` (module docstring). **Raises:** `ParameterError` naming what is wrong and the right form."""
    if not isinstance(name, str):
        raise ParameterError(f"{name!r}: a parameter name must be a string such as \"p0.k\" or \"hub.mHub\"")
    if name.strip().startswith("inputs."):
        return _resolve_input(scenario, name)
    m = _NAME.match(name)
    p = scenario.spacecraft.panels
    labels = p.labels
    wheel_labels = () if scenario.spacecraft.wheels is None else scenario.spacecraft.wheels.labels
    if not m:
        raise ParameterError(f"{name!r}: not a parameter name; names are \"<panel>.<field>\" or \"hub.<field>\", "
                             "with \"[j]\" (j = 1, 2, 3) for one component of a vector")
    owner, fld, comp = m.group(1), m.group(2), m.group(3)
    if owner == "hub":
        fields, panel = HUB_FIELDS, None
    elif owner == "control" and scenario.control is not None:
        fields, panel = CONTROL_FIELDS, None
    elif owner in labels:
        fields, panel = PANEL_FIELDS, labels.index(owner)
    elif owner in wheel_labels:
        fields, panel = WHEEL_FIELDS, wheel_labels.index(owner)
    elif owner == "control":
        raise ParameterError(f"{name!r}: the scenario has no attitude controller ([control] in the scenario file)")
    else:
        wheels = f" or a wheel name ({', '.join(wheel_labels)})" if wheel_labels else ""
        raise ParameterError(f"{name!r}: unknown owner {owner!r}{_did_you_mean(owner, ('hub', *labels, *wheel_labels))}"
                             f"; the prefix must be 'hub' or a panel name ({', '.join(labels) or 'none'}){wheels}")
    if fld not in fields:
        raise ParameterError(f"{name!r}: unknown field {fld!r}{_did_you_mean(fld, fields)}; {owner} fields are "
                             f"{', '.join(fields)}")
    field = FIELDS[fld]
    if fields is PANEL_FIELDS and field.root_only and p.parent[panel] >= 0:
        root = labels[int(p.topology.root[panel])]
        raise ParameterError(f"{name!r}: panel {owner!r} is hinged to panel {labels[p.parent[panel]]!r}; every "
                             f"panel of a chain shares its root's hinge frame: use \"{root}.{fld}\"")
    if fields is PANEL_FIELDS and field.rule == "hinge_lever" and panel not in p.parent:
        raise ParameterError(f"{name!r}: no panel is hinged to panel {owner!r}; l places the next panel's hinge (as "
                             "in Basilisk's nHinged effector), so it exists only where a next panel hangs")
    component = None
    if comp is not None:
        if field.kind == "scalar":
            raise ParameterError(f"{name!r}: {owner}.{fld} is a scalar; drop the [{comp}]")
        j = int(comp)
        if not 1 <= j <= 3:
            hint = f" ({owner}.{fld}[1] is the first)" if j == 0 else ""
            raise ParameterError(f"{name!r}: component [{comp}] out of range; components are numbered 1, 2, 3 "
                                 f"(b1, b2, b3 axes, as the telemetry columns _1.._3){hint}")
        component = j - 1
    return Parameter(f"{owner}.{fld}", field, panel, component)


def expand(scenario: Scenario, name: str) -> tuple[Parameter, ...]:
    """`name` as scalar parameters: a bare vector name gives its 3 components."""
    par = resolve(scenario, name)
    if par.component is None and par.field.kind != "scalar":
        return tuple(dataclasses.replace(par, component=c) for c in range(3))
    return (par,)


def nominal(scenario: Scenario, par: Parameter | str) -> np.ndarray:
    """The nominal value of a parameter (NumPy): the field's value; 1s for inertia factors, 0s for rotations;
    one component when `par` names one."""
    par = resolve(scenario, par) if isinstance(par, str) else par
    return np.asarray(current_value(scenario, par), dtype=float)


def _base_value(scenario: Scenario, par: Parameter):
    f = par.field
    if f.kind == "inertia":
        return jnp.ones(3)
    if f.kind == "rotation":
        return jnp.zeros(3)
    v = jnp.asarray(getattr(scenario.part(f.model), f.attribute), dtype=float)
    return v if par.panel is None else v[par.panel]


def current_value(scenario: Scenario, par: Parameter | str) -> Float[Array, "..."]:
    """The value of a parameter in `scenario` (traceable; the `apply_parameters` nominal for inertia factors (1)
    and rotations (0))."""
    par = resolve(scenario, par) if isinstance(par, str) else par
    v = _base_value(scenario, par)
    return v if par.component is None else v[par.component]


def _set(scenario: Scenario, par: Parameter, value) -> Scenario:
    """`scenario` with the base field of `par` set to `value` (the whole field's value, in registry meaning)."""
    f, i = par.field, par.panel
    value = jnp.asarray(value, dtype=float)
    get = lambda s: getattr(s.part(f.model), f.attribute)
    old = get(scenario)
    if f.root_only:  # the whole subtree shares its root's hinge frame
        new = rotation_dcm(value) @ old[i] if f.kind == "rotation" else value
        members = np.flatnonzero(scenario.spacecraft.panels.topology.root == i)
        return eqx.tree_at(get, scenario, old.at[members].set(new))
    if f.kind == "inertia":
        d = jnp.sqrt(value)
        old_i = old if i is None else old[i]
        value = old_i * d[:, None] * d[None, :]
    return eqx.tree_at(get, scenario, value if i is None else old.at[i].set(value))


def apply_parameters(scenario: Scenario, params: Mapping[str, ArrayLike | Sequence[float]]) -> Scenario:
    """One member's scenario: the nominal `scenario` with the values of `params` (names as in the module
    docstring; a bare name takes the field's whole value (3 numbers for vectors, inertia factors and rotations),
    a component name one number). Pure and traceable: `vmap` it over a batch. **Raises:** `ParameterError`."""
    if not isinstance(scenario, Scenario):
        raise TypeError(f"apply_parameters: scenario must be a jaxhinge Scenario, got {type(scenario).__name__}")
    pars = tuple(resolve(scenario, n) for n in params)
    for par, value in zip(pars, params.values()):  # a value given (not traced) of the wrong shape: say so
        if not isinstance(value, jax.core.Tracer) and np.shape(value) != par.shape:
            what = {"inertia": "3 scale factors of the inertia (I' = D I D, D = diag(sqrt(s)))",
                    "rotation": "a rotation vector of 3 numbers"}.get(par.field.kind, f"shape {par.shape}")
            raise ParameterError(f"{par.name} = {_fmt_value(value)}: must be {what}, got shape {np.shape(value)}")
    return apply_resolved(scenario, pars, tuple(params.values()))


def anonymous(pars: Sequence[Parameter]) -> tuple[Parameter, ...]:
    """`pars` without their names (field, panel index and component only): a compile key that does not
    depend on panel names."""
    return tuple(dataclasses.replace(p, base=f"{p.field.owner}[{p.panel}].{p.field.name}") for p in pars)


def apply_resolved(
    scenario: Scenario, pars: Sequence[Parameter], values: Sequence[ArrayLike | Sequence[float]]
) -> Scenario:
    """`apply_parameters` with names already resolved (`resolve`), e.g. inside a compiled batch or fit."""
    whole: dict[str, tuple[Parameter, object]] = {}
    for par, value in zip(pars, values):
        if par.component is None:
            whole[par.base] = (par, value)
            continue
        base_par = dataclasses.replace(par, component=None)
        cur = whole[par.base][1] if par.base in whole else _base_value(scenario, base_par)
        whole[par.base] = (base_par, jnp.asarray(cur, dtype=float).at[par.component].set(value))
    for par, value in whole.values():
        scenario = _set(scenario, par, value)
    return scenario
