"""The model: a rigid hub with N hinged rigid panels, as immutable pytrees.

**One hinge model.** Every panel - a single panel hinged to the hub or a member of a chain of panels hinged edge
to edge (a folding array) - is one row of one stacked `Panels` tree, with a static topology: `parent[j]` is the
panel that panel j is hinged to, `-1` for the hub (as MJX's `body_parentid`). A single panel is a chain of
length 1; the dynamics, diagnostics, linearisation and every analysis go through one code path for any mix.

Every physical parameter is an array leaf (fit it, `vmap` over it, differentiate with respect to it). Names and
other labels are static metadata that the compiled programs never see (`strip_labels`). Field names, frames and
units are Basilisk's (`hingedRigidBodyStateEffector`, `nHingedRigidBodyStateEffector`, `HubEffector`): SI
units, radians.
"""

import dataclasses
import functools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._errors import ScenarioError
from .._math import lead_apply
from ._rules import hub_problems, panels_problems, wheels_problems
from ._schema import COMPUTED, Field, of_model


def _concrete(*leaves) -> bool:
    """Whether every leaf holds values (not a tracer inside jit/vmap/grad): the rules are checked on those."""
    return not any(isinstance(x, jax.core.Tracer) for x in leaves)


def _refuse(owner: str, problem) -> None:
    if problem is not None:
        field, value, rule = problem
        raise ScenarioError.bad(owner, field, value, rule)


def _f64_or_none(x):
    return None if x is None else f64(x)


def f64(x):
    """Every model leaf as float64. JAX computes in float32 unless `jax_enable_x64` is on, which entry points
    (the CLI, notebooks, the caller's script) set; without it the model refuses to be built rather than silently
    compute in float32 (1e-6 instead of 1e-13 against Basilisk)."""
    if not jax.config.jax_enable_x64:
        raise ValueError("jaxhinge computes in float64 (Basilisk-level accuracy) but jax_enable_x64 is off (JAX's "
                         "default): call jax.config.update('jax_enable_x64', True) before building a model")
    return jnp.asarray(x, dtype=float)


_AXIS = {"panel": "panels", "wheel": "wheels"}  # a field owned by a panel or wheel: one element per panel/wheel


def _annotation(f: Field):
    """The jaxtyping annotation of a schema field's leaf: the element axis (`panels`, `wheels`), then its shape."""
    dims = [_AXIS.get(f.owner, "")] + ["axes" if d is None else str(d) for d in f.shape]
    ann = Float[Array, " ".join(d for d in dims if d)]
    return ann | None if f.optional else ann


def schema_leaves(model: str) -> tuple[dict, dict]:
    """`(annotations, fields)` of a model pytree's leaves, one per schema field of `model` (`_schema.of_model`):
    float64 array leaves (`f64`), static values for `static` fields. A model class's body takes them:
    `__annotations__, _ = schema_leaves("hub")`, `locals().update(_)`."""
    ann, fields = {}, {}
    for f in of_model(model):
        if f.static:
            ann[f.attribute] = str
            fields[f.attribute] = eqx.field(static=True, default=f.default)
        else:
            ann[f.attribute] = _annotation(f)
            fields[f.attribute] = eqx.field(converter=_f64_or_none if f.optional else f64)
    return ann, fields


def fill_leaves(module, model: str, args: tuple, kwargs: dict) -> None:
    """Set a model pytree's leaves from constructor arguments: positional in schema order, then by name. A field
    not given takes its schema default, one per element where it is a panel's or a wheel's (as many as the given
    fields of that owner have; an `optional` field with none given is None: no wheels). A required field not given,
    an unknown or repeated argument: TypeError."""
    fields = of_model(model)
    cls = type(module).__name__
    names = tuple(f.attribute for f in fields)
    if len(args) > len(fields):
        raise TypeError(f"{cls}() takes {len(fields)} positional arguments ({', '.join(names)}) but {len(args)} "
                        "were given")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise TypeError(f"{cls}() got multiple values for argument {k!r}")
        if k not in names:
            raise TypeError(f"{cls}() got an unexpected keyword argument {k!r}; its fields: {', '.join(names)}")
        given[k] = v
    count: dict[str, int] = {}
    for f in fields:  # elements per owner: the trailing element axis of a given field
        v = given.get(f.attribute)
        if v is not None and f.owner in _AXIS and f.owner not in count and np.ndim(v) > len(f.shape):
            count[f.owner] = int(np.shape(v)[-1 - len(f.shape)])
    for f in fields:
        v = given.get(f.attribute)
        if v is None:
            unknown_count = f.owner in _AXIS and f.owner not in count
            if f.required or f.default is COMPUTED or (unknown_count and not f.optional):
                raise TypeError(f"{cls}() missing required argument {f.attribute!r} ({f.words()})")
            if unknown_count:
                v = None
            elif f.owner in _AXIS:
                v = np.broadcast_to(np.asarray(f.default, dtype=float), (count[f.owner], *f.shape))
            else:
                v = f.default
        setattr(module, f.attribute, v)


class Hub(eqx.Module):
    """Rigid hub (Basilisk `HubEffector`); its leaves are the schema's `hub` fields (`jaxhinge._model._schema`):

    - `mHub`: hub mass [kg].
    - `IHubPntBc_B`: hub inertia about its own CoM $B_c$, B-frame components [kg m^2] (symmetric 3x3).
    - `r_BcB_B`: hub CoM relative to the body point B, B frame [m] (default 0).
    """

    __annotations__, _leaves = schema_leaves("hub")
    locals().update(_leaves)
    del _leaves

    def __init__(self, *args, **kwargs):
        fill_leaves(self, "hub", args, kwargs)

    def __check_init__(self):
        """Built with values (not traced), one hub: the rules of a scenario file (`_model._rules`), refused with a
        `ScenarioError` naming the field, the value and the rule."""
        if _concrete(self.mHub, self.IHubPntBc_B) and jnp.ndim(self.mHub) == 0:
            _refuse("Hub", hub_problems(self))


@dataclasses.dataclass(frozen=True)
class Topology:
    """Static structure of the hinge tree, derived from `parent` (NumPy, never traced).

    - `parent[j]`: the panel panel j is hinged to, -1 for the hub; parents come before their children.
    - `root[j]`: the panel of j's subtree that is hinged to the hub (j itself for a single panel).
    - `T[j, k] = 1` when k is j or an ancestor of j (absolute angle $\\phi = T\\theta$ from relative angles).
    - `strict = T - I`; `trivial`: every panel is hinged to the hub (T = I, no chain).
    - `blocks`: the panels of each subtree hinged to the hub, in panel order (the diagonal blocks of the hinge
      mass matrix; a single panel is a block of one).
    """

    parent: tuple[int, ...]
    root: np.ndarray
    T: np.ndarray
    strict: np.ndarray
    trivial: bool
    blocks: tuple[tuple[int, ...], ...]

    @property
    def count(self) -> int:
        return len(self.parent)

    def ancestors(self, x):
        """$T x$ over the leading axis: the sum over each panel and its ancestors (relative -> absolute)."""
        return x if self.trivial else lead_apply(self.T, x)

    def descendants(self, x):
        """$T^T x$ over the leading axis: the sum over each panel and its descendants."""
        return x if self.trivial else lead_apply(self.T.T, x)

    def lever(self, d, l, x):
        r"""$a x$ over the leading axis, with the lever matrix $a_{jk} = l_k$ (k a strict ancestor of j), $d_j$
        ($k = j$), 0 otherwise: $\sum_k a_{jk} x_k$ is the CoM offset of panel j along the panels' $-\hat s_1$."""
        shape = d.shape + (1,) * (x.ndim - 1)
        out = d.reshape(shape) * x
        if self.trivial:
            return out
        return out + lead_apply(self.strict, l.reshape(shape) * x)

    def lever_T(self, d, l, x):
        """$a^T x$ over the leading axis (see `lever`)."""
        shape = d.shape + (1,) * (x.ndim - 1)
        out = d.reshape(shape) * x
        if self.trivial:
            return out
        return out + l.reshape(shape) * lead_apply(self.strict.T, x)

    def project(self, M):
        """$T^T M T$: a matrix in absolute panel rates projected on the relative hinge rates."""
        if self.trivial:
            return M
        TtM = lead_apply(self.T.T, M)
        return jnp.swapaxes(lead_apply(self.T.T, jnp.swapaxes(TtM, 0, 1)), 0, 1)

    def of_root(self, x):
        """`x[root]`: each panel's value of its subtree root (hinge point and frame of a chain)."""
        return x if self.trivial else lead_apply(np.eye(self.count)[self.root], x)


@functools.lru_cache(maxsize=256)
def topology(parent: tuple[int, ...]) -> Topology:
    """The `Topology` of a parent tuple (cached: one per model structure)."""
    n = len(parent)
    T = np.eye(n)
    root = np.arange(n)
    for j, p in enumerate(parent):
        if not (p == -1 or 0 <= p < j):
            raise ValueError(f"parent[{j}] = {p}: must be -1 (the hub) or the index of an earlier panel")
        if p >= 0:
            T[j] = T[p]
            T[j, j] = 1.0
            root[j] = root[p]
    blocks = tuple(tuple(int(j) for j in np.flatnonzero(root == r)) for r in sorted(set(root.tolist())))
    return Topology(tuple(parent), root, T, T - np.eye(n), bool(all(p == -1 for p in parent)), blocks)


class Panels(eqx.Module):
    """Every hinged rigid panel, stacked along a leading axis (single panels and chain panels alike).

    Basilisk `HingedRigidBodyStateEffector` per panel; chains as `nHingedRigidBodyStateEffector` /
    `dualHingedRigidBodyStateEffector`, generalised to non-identical panels.

    - `mass`: panel mass [kg].
    - `IPntS_S`: inertia about the panel CoM S in the panel frame S [kg m^2]; only its diagonal
      $(I_{s1}, I_{s2}, I_{s3})$ is used, as in Basilisk.
    - `d`: hinge point H to panel CoM S distance [m]; the CoM lies at $r_{H/B} - d\\,\\hat s_1$.
    - `l`: hinge point H to the hinge point of the panels hinged to this one, along $-\\hat s_1$ [m] (0 when
      nothing is hinged to it).
    - `k`: torsional spring stiffness [N m/rad]; `c`: torsional damping [N m s/rad].
    - `r_HB_B`: hinge point H relative to B, B frame [m]; `dcm_HB`: $[HB]$, rows $\\hat h_1, \\hat h_2, \\hat h_3$ in
      B components, hinge axis $\\hat h_2$. Used for panels hinged to the hub; a panel hinged to another panel
      takes its subtree root's frame (all axes of a chain are parallel) and sits at its parent's hinge point
      minus $l\\,\\hat s_1$ of the parent (its own entries hold copies of the root's).
    - `thetaRef`, `thetaDotRef`: spring and damper reference angle [rad] and rate [rad/s]; `motorTorque`: constant
      hinge motor torque $u$ about $\\hat h_2$ [N m]. Angles are **relative** to the parent (Basilisk):
      $[S_jB] = M_2(\\phi_j)[HB]$ with $\\phi_j$ the sum of $\\theta$ over j and its ancestors.
    - `parent` (static): per panel, the index of the panel it is hinged to, -1 for the hub.
    - `names`, `chain` (static labels, not part of the compiled programs): panel names, and per panel the name
      of its chain (`""` for a single panel), used by files, outputs and parameter names.

    Order: single panels in file order, then chain panels chain by chain, root first.
    """

    __annotations__, _leaves = schema_leaves("panels")
    locals().update(_leaves)
    del _leaves
    parent: tuple[int, ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    chain: tuple[str, ...] = eqx.field(static=True)

    def __init__(
        self,
        *args,
        parent: Sequence[int] | None = None,
        names: Sequence[str] = (),
        chain: Sequence[str] | None = None,
        **fields,
    ):
        """Leaves by name (or positionally in the schema's order: `mass, IPntS_S, d, k, c, r_HB_B, dcm_HB,
        thetaRef, thetaDotRef, motorTorque, l`); `c`, `thetaRef`, `thetaDotRef`, `motorTorque`, `l` default to 0."""
        fill_leaves(self, "panels", args, fields)
        n = int(np.shape(self.mass)[-1]) if np.ndim(self.mass) else 0
        self.parent = tuple(int(p) for p in parent) if parent is not None else (-1,) * n
        self.names = tuple(names)
        self.chain = tuple(chain) if chain is not None else ("",) * len(self.parent)
        topology(self.parent)  # validates the parent tuple
        if len(self.chain) != len(self.parent) or (self.names and len(self.names) != len(self.parent)):
            raise ValueError(f"Panels: {len(self.parent)} panels but {len(self.names)} names and "
                             f"{len(self.chain)} chain labels")

    def __check_init__(self):
        """Built with values (not traced), one model (no member axis): the rules of a scenario file
        (`_model._rules`: masses, `d`, `l` where a panel hangs, `k`, `c`, inertias, hinge frames), refused with a
        `ScenarioError` naming `<panel>.<field>`, the value and the rule."""
        leaves = (self.mass, self.IPntS_S, self.d, self.l, self.k, self.c, self.dcm_HB)
        if _concrete(*leaves) and jnp.ndim(self.mass) == 1 and jnp.shape(self.IPntS_S) == (self.count, 3, 3):
            _refuse("Panels", panels_problems(self))

    @property
    def count(self) -> int:
        return len(self.parent)

    @property
    def topology(self) -> Topology:
        return topology(self.parent)

    @property
    def labels(self) -> tuple[str, ...]:
        """Panel names: `names`, or the defaults `p0, p1, ...`."""
        return self.names if len(self.names) == self.count else tuple(f"p{i}" for i in range(self.count))

    @staticmethod
    def chain_of(name: str, names: Sequence[str] | None = None, **fields) -> "Panels":
        r"""A chain of L panels hinged edge to edge, the first (root) hinged to the hub. `fields`: the hinge frame of
        the root, `r_HB_B` (3,) and `dcm_HB` (3, 3) (every hinge axis of the chain is its $\hat h_2$), and the
        per-panel leaves, L values each (`mass`, `IPntS_S`, `d`, `l`, `k`, `c`, ...); `l[j]`: hinge j to hinge j+1
        along $-\hat s_{j,1}$ (the last entry is unused and set to 0). Names default to `<name>_1 .. <name>_L`."""
        shared = {f.attribute: f for f in of_model("panels") if f.root_only}
        L = next(int(np.shape(v)[0]) for k, v in fields.items() if k not in shared)
        for k, f in shared.items():
            fields[k] = jnp.broadcast_to(f64(fields[k]), (L, *f.shape))
        for f in of_model("panels"):  # l places the next panel's hinge: none follows the last
            if f.rule == "hinge_lever" and fields.get(f.attribute) is not None:
                fields[f.attribute] = f64(fields[f.attribute]).at[-1].set(0.0)
        return Panels(
            **fields, parent=(-1, *range(L - 1)),
            names=tuple(names) if names is not None else tuple(f"{name}_{j + 1}" for j in range(L)),
            chain=(name,) * L,
        )

    @staticmethod
    def concat(*parts: "Panels") -> "Panels":
        """Several `Panels` (e.g. single panels and chains) as one, in the given order."""
        parent: list[int] = []
        for p in parts:
            off = len(parent)
            parent += [q if q < 0 else q + off for q in p.parent]
        names = [nm for p in parts for nm in p.labels] if any(p.names for p in parts) else []
        leaves = {f.attribute: jnp.concatenate([getattr(p, f.attribute) for p in parts]) if parts else
                  jnp.zeros((0, *f.shape)) for f in of_model("panels")}
        return Panels(**leaves, parent=parent, names=names, chain=[ch for p in parts for ch in p.chain])


class PointMassGravity(eqx.Module):
    """Point-mass gravity applied as Basilisk does: a uniform field evaluated at the system CoM C,
    plus each panel's gravity torque about its hinge. `mu` is the gravitational parameter [m^3/s^2]."""

    __annotations__, _leaves = schema_leaves("gravity")
    locals().update(_leaves)
    del _leaves

    def __init__(self, *args, **kwargs):
        fill_leaves(self, "gravity", args, kwargs)


class Wheels(eqx.Module):
    r"""Reaction wheels, stacked along a leading axis: Basilisk's `reactionWheelStateEffector` with the
    `BalancedWheels` model (Stribeck friction off). Each wheel spins about `gsHat_B` relative to the hub; its mass
    and transverse inertia (and its spin inertia about the hub's axes) are in the hub's, as in Basilisk.

    - `gsHat_B`: spin axis, unit vector in B; `Js`: spin-axis inertia [kg m^2].
    - `u`: constant motor torque command [N m] (added to any recorded or function input); `u_max`: torque limit
      [N m], the command clipped to +-`u_max` where `u_max` > 0 (no limit where <= 0).
    - `cViscous` [N m s], `fCoulomb` [N m]: friction $-(\mathrm{sign}(\Omega) f_C + c_V \Omega)$, linear below
      `omegaLimitCycle` [rad/s] (Basilisk's default 1e-4) to avoid a limit cycle.
    - `names` (static label): wheel names (`rw1`, ...), used by files, outputs and parameter names.

    The motor torque acts on the wheel about `gsHat_B` and on the hub as `-u gsHat_B`.
    """

    __annotations__, _leaves = schema_leaves("wheels")
    locals().update(_leaves)
    del _leaves
    names: tuple[str, ...] = eqx.field(static=True)

    def __init__(self, *args, names: Sequence[str] = (), **kwargs):
        """Leaves by name, or positionally in the schema's order (`gsHat_B, Js, u, u_max, cViscous, fCoulomb,
        omegaLimitCycle`); all but `gsHat_B` and `Js` have defaults (0; `omegaLimitCycle` 1e-4 rad/s)."""
        fill_leaves(self, "wheels", args, kwargs)
        self.names = tuple(names)

    def __check_init__(self):
        """Built with values (not traced), one set of wheels: the rules of a scenario file (`_model._rules`)."""
        if _concrete(self.gsHat_B, self.Js) and jnp.ndim(self.Js) == 1:
            _refuse("Wheels", wheels_problems(self))

    @property
    def count(self) -> int:
        return int(self.Js.shape[-1])

    @property
    def labels(self) -> tuple[str, ...]:
        """Wheel names: `names`, or the defaults `rw1, rw2, ...`."""
        return self.names if len(self.names) == self.count else tuple(f"rw{i + 1}" for i in range(self.count))


class Spacecraft(eqx.Module):
    """Hub + panels (+ optional gravity, + optional reaction wheels). Structure (panel count, parents, gravity
    on/off, wheel count) is static."""

    hub: Hub
    panels: Panels
    gravity: PointMassGravity | None = None
    wheels: Wheels | None = None


class InitialState(eqx.Module):
    """Initial conditions with Basilisk's names. Position and velocity are those of the **system CoM C**
    (`r_CN_NInit`, `v_CN_NInit`, N frame); the hub state is derived from them as Basilisk does.

    - `sigma_BNInit`: MRP attitude of B relative to N; `omega_BN_BInit`: body rate, B frame [rad/s].
    - `thetaInit` [rad], `thetaDotInit` [rad/s]: per panel (relative to its parent).
    - `OmegaInit` [rad/s]: per wheel, its speed relative to the hub (None without wheels).
    """

    __annotations__, _leaves = schema_leaves("initial")
    locals().update(_leaves)
    del _leaves

    def __init__(self, *args, **kwargs):
        fill_leaves(self, "initial", args, kwargs)


class State(eqx.Module):
    """Integrated state (the diffrax `y`): hub point B position/velocity in N, MRP $\\sigma_{BN}$,
    body rate $\\omega_{BN}$ in B, hinge angles and rates (relative to each panel's parent), wheel speeds."""

    r_BN_N: Float[Array, "*batch 3"]  # *batch: none for one state, (T,) for a trajectory's
    v_BN_N: Float[Array, "*batch 3"]
    sigma_BN: Float[Array, "*batch 3"]
    omega_BN_B: Float[Array, "*batch 3"]
    theta: Float[Array, "*batch panels"]
    thetaDot: Float[Array, "*batch panels"]
    Omega: Float[Array, "*batch wheels"] | None = None  # wheel speeds relative to the hub (None without wheels)


def strip_labels(tree):
    """`tree` (a Scenario, Spacecraft or Panels) without its static labels (panel and chain names), so that
    models that differ only by names share one compiled program. Entry points call it before `jit`."""
    if isinstance(tree, Panels):
        if not tree.names and not any(tree.chain):
            return tree
        out = object.__new__(Panels)
        for f in dataclasses.fields(Panels):
            object.__setattr__(out, f.name, getattr(tree, f.name))
        object.__setattr__(out, "names", ())
        object.__setattr__(out, "chain", ("",) * len(tree.parent))
        return out
    if isinstance(tree, Wheels):
        if not tree.names:
            return tree
        out = object.__new__(Wheels)
        for f in dataclasses.fields(Wheels):
            object.__setattr__(out, f.name, getattr(tree, f.name))
        object.__setattr__(out, "names", ())
        return out
    if isinstance(tree, Spacecraft):
        return Spacecraft(tree.hub, strip_labels(tree.panels), tree.gravity,
                          None if tree.wheels is None else strip_labels(tree.wheels))
    if hasattr(tree, "spacecraft"):  # a Scenario (and the file name of its recorded inputs)
        tree = eqx.tree_at(lambda s: s.spacecraft, tree, strip_labels(tree.spacecraft))
        inputs = tree.loads.inputs
        if inputs is not None and inputs.source:
            tree = dataclasses.replace(tree, loads=dataclasses.replace(
                tree.loads, inputs=dataclasses.replace(inputs, source="")))
        return tree
    return tree
