"""Parameter names shared by dispersions (`_batch`), sensitivities and telemetry fits (`_identify`): one resolver.

Names are `"<panel name>.<field>"` (e.g. `"p0.k"`, `"p0.thetaInit"`) or `"hub.<field>"` (e.g. `"hub.mHub"`,
`"hub.omega_BN_BInit"`; the hub's initial conditions are `hub.` fields, as in the scenario file). What a value
means per field kind (`scalar`, `vector` (3,), `inertia` (3 scale factors), `rotation` (rotation vector)) is
documented in `jaxhinge._batch`.
"""

from collections.abc import Mapping

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._dynamics import _chains
from ._scenario import Scenario

# field -> (kind, owner); kind: "scalar" | "vector" | "inertia" | "rotation"
_PANEL_FIELDS = {
    "mass": "scalar",
    "d": "scalar",
    "k": "scalar",
    "c": "scalar",
    "thetaRef": "scalar",
    "thetaDotRef": "scalar",
    "motorTorque": "scalar",
    "thetaInit": "scalar",
    "thetaDotInit": "scalar",
    "IPntS_S": "inertia",
    "r_HB_B": "vector",
    "dcm_HB": "rotation",
}
_PANEL_INITIAL = ("thetaInit", "thetaDotInit")
# chain panels ("<chain panel name>.<field>"): per-panel fields; the hinge position/frame belong to the chain
_CHAIN_PANEL_FIELDS = {f: k for f, k in _PANEL_FIELDS.items() if f not in ("r_HB_B", "dcm_HB")} | {"l": "scalar"}
_HUB_FIELDS = {
    "mHub": "scalar",
    "IHubPntBc_B": "inertia",
    "r_BcB_B": "vector",
    "r_CN_NInit": "vector",
    "v_CN_NInit": "vector",
    "sigma_BNInit": "vector",
    "omega_BN_BInit": "vector",
}
_HUB_INITIAL = ("r_CN_NInit", "v_CN_NInit", "sigma_BNInit", "omega_BN_BInit")


def parameter_names(scenario: Scenario) -> tuple[str, ...]:
    """Every name a dispersion may use for this scenario: `hub.<field>` and `<panel name>.<field>`."""
    names = [f"hub.{f}" for f in _HUB_FIELDS]
    for p in scenario.spacecraft.panels.names or _default_names(scenario):
        names += [f"{p}.{f}" for f in _PANEL_FIELDS]
    for p in _chains.chain_panel_names(scenario.spacecraft.chains):
        names += [f"{p}.{f}" for f in _CHAIN_PANEL_FIELDS]
    return tuple(names)


def _default_names(scenario: Scenario) -> tuple[str, ...]:
    return tuple(f"p{i}" for i in range(scenario.spacecraft.panels.count))


def _panel_names(scenario: Scenario) -> tuple[str, ...]:
    return scenario.spacecraft.panels.names or _default_names(scenario)


def _resolve(scenario: Scenario, name: str) -> tuple[str, str, int | None]:
    """`name` -> (kind, field, panel index or None)."""
    owner, _, field = name.partition(".")
    if owner == "hub" and field in _HUB_FIELDS:
        return _HUB_FIELDS[field], field, None
    panels = _panel_names(scenario)
    if owner in panels and field in _PANEL_FIELDS:
        return _PANEL_FIELDS[field], field, panels.index(owner)
    cnames = _chains.chain_panel_names(scenario.spacecraft.chains)
    if owner in cnames and field in _CHAIN_PANEL_FIELDS:  # chain panels: hinge index after the single panels
        return _CHAIN_PANEL_FIELDS[field], field, len(panels) + cnames.index(owner)
    raise ValueError(name)


def _chain_of(scenario: Scenario, i: int) -> tuple[int, int]:
    """Global hinge index `i` of a chain panel -> (chain index, index within the chain)."""
    j = i - scenario.spacecraft.panels.count
    for ci, ch in enumerate(scenario.spacecraft.chains):
        if j < ch.count:
            return ci, j
        j -= ch.count
    raise IndexError(i)


def _nominal(scenario: Scenario, kind: str, field: str, i: int | None) -> np.ndarray:
    """The nominal value of a sample (the value itself; 1 for inertia factors; 0 for rotations)."""
    if kind == "inertia":
        return np.ones(3)
    if kind == "rotation":
        return np.zeros(3)
    sc, init = scenario.spacecraft, scenario.initial
    if i is None:
        src = init if field in _HUB_INITIAL else sc.hub
        return np.asarray(getattr(src, field), dtype=float)
    if field not in _PANEL_INITIAL and i >= sc.panels.count:
        ci, j = _chain_of(scenario, i)
        return np.asarray(np.asarray(getattr(sc.chains[ci], field), dtype=float)[j])
    src = init if field in _PANEL_INITIAL else sc.panels
    return np.asarray(np.asarray(getattr(src, field), dtype=float)[i])


def _shape(kind: str) -> tuple[int, ...]:
    return () if kind == "scalar" else (3,)


def _rotation(phi: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """DCM $\\exp(-[\\tilde\\phi])$ of a frame rotated by the rotation vector $\\phi$ (Rodrigues; exact at 0)."""
    angle2 = jnp.sum(phi**2)
    safe = jnp.where(angle2 > 0, angle2, 1.0)
    angle = jnp.sqrt(safe)
    small = angle2 < 1e-12
    s = jnp.where(small, 1.0 - angle2 / 6.0, jnp.sin(angle) / angle)
    c1 = jnp.where(small, 0.5 - angle2 / 24.0, (1.0 - jnp.cos(angle)) / safe)
    x, y, z = phi
    tilde = jnp.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return jnp.eye(3) - s * tilde + c1 * tilde @ tilde


def apply_parameters(scenario: Scenario, params: Mapping[str, ArrayLike]) -> Scenario:
    """One member's scenario: the nominal `scenario` with the sampled values of `params` (one member, no
    batch axis; names and meanings as in `sample_dispersions`). Pure and traceable: `vmap` it over a batch."""
    for name, value in params.items():
        kind, field, i = _resolve(scenario, name)
        value = jnp.asarray(value)
        sc = scenario.spacecraft
        if i is None:
            if field in _HUB_INITIAL:
                scenario = eqx.tree_at(lambda s, f=field: getattr(s.initial, f), scenario, value)
            elif kind == "inertia":
                d = jnp.sqrt(value)
                scenario = eqx.tree_at(
                    lambda s: s.spacecraft.hub.IHubPntBc_B,
                    scenario,
                    sc.hub.IHubPntBc_B * d[:, None] * d[None, :],
                )
            else:
                scenario = eqx.tree_at(lambda s, f=field: getattr(s.spacecraft.hub, f), scenario, value)
            continue
        if field in _PANEL_INITIAL:
            old = getattr(scenario.initial, field)
            scenario = eqx.tree_at(lambda s, f=field: getattr(s.initial, f), scenario, old.at[i].set(value))
            continue
        if i >= sc.panels.count:  # a chain panel
            ci, j = _chain_of(scenario, i)
            old = getattr(sc.chains[ci], field)
            if kind == "inertia":
                d = jnp.sqrt(value)
                value = old[j] * d[:, None] * d[None, :]
            scenario = eqx.tree_at(
                lambda s, f=field, ci=ci: getattr(s.spacecraft.chains[ci], f), scenario, old.at[j].set(value)
            )
            continue
        old = getattr(sc.panels, field)
        if kind == "inertia":
            d = jnp.sqrt(value)
            new = old[i] * d[:, None] * d[None, :]
        elif kind == "rotation":
            new = _rotation(value) @ old[i]
        else:
            new = value
        scenario = eqx.tree_at(
            lambda s, f=field: getattr(s.spacecraft.panels, f), scenario, old.at[i].set(new)
        )
    return scenario


def current_value(scenario: Scenario, name: str):
    """The value of parameter `name` in `scenario` as a JAX array (traceable): the field itself for scalars and
    vectors, 1 (3,) for inertia factors, 0 (3,) for rotation vectors (the `apply_parameters` nominal)."""
    kind, field, i = _resolve(scenario, name)
    if kind == "inertia":
        return jnp.ones(3)
    if kind == "rotation":
        return jnp.zeros(3)
    if i is None:
        src = scenario.initial if field in _HUB_INITIAL else scenario.spacecraft.hub
        return jnp.asarray(getattr(src, field), dtype=float)
    if field not in _PANEL_INITIAL and i >= scenario.spacecraft.panels.count:
        ci, j = _chain_of(scenario, i)
        return jnp.asarray(getattr(scenario.spacecraft.chains[ci], field), dtype=float)[j]
    src = scenario.initial if field in _PANEL_INITIAL else scenario.spacecraft.panels
    return jnp.asarray(getattr(src, field), dtype=float)[i]
