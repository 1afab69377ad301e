r"""The fitted coordinates of the least-squares core (`jaxhinge.fit`, `jaxhinge.identify`).

The free list names parameters of the registry (`jaxhinge._model._params`): `"p0.k"`, `"hub.omega_BN_BInit"` (a
vector: its 3 components, `"hub.omega_BN_BInit[1]"` .. `[3]`, 1-based), `"hub.omega_BN_BInit[2]"` (one component),
and ties of one field, `"p0.k = p1.k"` (one fitted number sets every member). Each entry becomes one `Coordinate`
per number. A positive field (`Field.positive`: `k`, `c`, `mass`, `d`, `mHub`, inertia factors, ...) is fitted as
the log-ratio $u = \ln(p/p_0)$; any other linearly, $p = p_0 + s\,u$ with the field's scale $s$ (`Field.scale`).
The initial guess $p_0$ of a tied group is the geometric (log) or arithmetic (linear) mean of its members'
values. `u = 0` is the initial guess.
"""


import dataclasses
from collections.abc import Callable, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._errors import FitError, ParameterError
from ..._model._params import Parameter, anonymous, apply_resolved, expand, nominal
from ..._model._scenario import Scenario

LOG_CLIP = 30.0  # log-ratio coordinates are clipped to [-30, 30] (a factor e^30) before exponentiation


# ------------------------------------------------------------------------------------------------------------
# Coordinates
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Coordinate:
    """One fitted number.

    - `name`: as reported (`"p0.k"`, `"hub.omega_BN_BInit[2]"`, tied: `"p0.k=p1.k"`).
    - `targets`: the registry parameters it sets (several when tied).
    - `log`: fitted as the log-ratio $u = \\ln(p/p_0)$ (positive fields), else linearly $p = p_0 + s\\,u$.
    - `x0`: the initial guess $p_0$ [the field's unit]; `scale`: $s$ [the field's unit] (linear coordinates).
    - `field`, `unit`: the registry field and its unit.
    """

    name: str
    targets: tuple[Parameter, ...]
    log: bool
    x0: float
    scale: float
    field: str
    unit: str

    @property
    def members(self) -> tuple[str, ...]:
        """The parameter names this coordinate sets (one, or the members of a tie)."""
        return tuple(t.name for t in self.targets)

    def value(self, u):
        """The parameter value [unit] at coordinate `u` (traceable)."""
        return self.x0 * jnp.exp(jnp.clip(u, -LOG_CLIP, LOG_CLIP)) if self.log else self.x0 + self.scale * u

    def coordinate(self, value) -> float:
        """The coordinate $u$ of a parameter value [unit] (the inverse of `value`)."""
        return float(np.log(value / self.x0) if self.log else (value - self.x0) / self.scale)

    def label(self) -> str:
        """`"log(p0.k)"` or `"p0.thetaInit"`: the coordinate as it enters the identifiability report."""
        return f"log({self.name})" if self.log else self.name


def parse_free(
    scenario: Scenario,
    free: Sequence[str],
    *,
    seed: Callable[[Parameter], float | None] | None = None,
) -> tuple[Coordinate, ...]:
    """The fitted coordinates of a `free` list (syntax: module docstring; names resolved by the registry).

    **Arguments:**

    - `scenario`: the model; its values of the free parameters are the initial guesses.
    - `free`: the list of names and ties (`fit.free` in errors).
    - `seed`: called for a member of a positive field whose value is not > 0 (it cannot start a log-ratio);
      returns its initial guess, or `None` to refuse it.

    **Returns:** one `Coordinate` per fitted number, in the order of `free` (vectors component by component).

    **Raises:** `FitError`, one line naming the entry, the value and the rule.
    """
    if isinstance(free, str) or not isinstance(free, (list, tuple)) or not free:
        raise FitError(f"free = {free!r}: must be a non-empty list of names like \"p0.k\", "
                       "\"hub.omega_BN_BInit\" or \"p0.k = p1.k\"", field="free")
    seen: dict[tuple[str, int | None], int] = {}
    out: list[Coordinate] = []
    for i, entry in enumerate(free):
        where = f"free[{i}]"
        if not isinstance(entry, str):
            raise FitError(f"{where} = {entry!r}: must be a string like \"p0.k\" or \"p0.k = p1.k\"", field=where)
        members = []
        for part in entry.split("="):
            try:
                members.append(expand(scenario, part.strip()))
            except ParameterError as e:  # its text starts with the name: drop it when that is the entry
                why = str(e).removeprefix(f"{part.strip()!r}: ") if part.strip() == entry.strip() else str(e)
                raise FitError(f"{where} = {entry!r}: {why}", field=where) from None
        if len(members) > 1 and (len({m[0].field.name for m in members}) != 1 or any(len(m) != 1 for m in members)):
            what = " to ".join(f"{m[0].name if len(m) == 1 else m[0].base} [{m[0].unit}]" for m in members)
            raise FitError(f"{where} = {entry!r}: cannot tie {what}: only the same field (one number each) can be "
                           "tied, e.g. \"p0.k = p1.k\"", field=where)
        if any(m[0].base == "inputs.time_offset" for m in members) and scenario.loads.inputs.hold == "zoh":
            raise FitError(f"{where} = {entry!r}: the recorded inputs are held (hold = \"zoh\"), so a time shift "
                           "changes them in steps, with zero derivative between: a gradient fit cannot move it; "
                           "give them hold = \"linear\" to fit inputs.time_offset", field=where)
        for j in range(len(members[0])):
            targets = [m[j] for m in members]
            for t in targets:
                key = (t.base, t.component)
                clash = [seen[k] for k in seen if k == key or k == (t.base, None)
                         or (t.component is None and k[0] == t.base)]
                if clash:
                    raise FitError(f"{where} = {entry!r}: {t.name} is already free in free[{clash[0]}] "
                                   "(each parameter may appear once)", field=where)
                seen[key] = i
            fld = targets[0].field
            x0s = [float(nominal(scenario, t)) for t in targets]
            if fld.positive:
                for k, (t, x) in enumerate(zip(targets, x0s)):
                    if not x > 0:
                        s = seed(t) if seed is not None else None
                        if s is None or not s > 0:
                            raise FitError(f"{where} = {entry!r}: {t.name} = {x:g} must start > 0 (it is fitted in "
                                           "log space); give a positive initial guess in the scenario", field=where)
                        x0s[k] = float(s)
                x0 = x0s[0] if all(x == x0s[0] for x in x0s) else float(np.exp(np.mean(np.log(x0s))))
            else:
                x0 = float(np.mean(x0s))
            out.append(Coordinate(name="=".join(t.name for t in targets), targets=tuple(targets), log=fld.positive,
                                  x0=x0, scale=fld.scale, field=fld.name, unit=fld.param_unit))
    return tuple(out)


class Coordinates(eqx.Module):
    """The coordinates as the compiled programs see them: the initial guesses `x0` and scales `scale` (P,) are
    array leaves; which parameters each sets (`parameters`, without names: `anonymous`) and whether it is a
    log-ratio (`log`) are static, so fits of one model structure share one program."""

    x0: Float[Array, " P"]
    scale: Float[Array, " P"]
    parameters: tuple[tuple[Parameter, ...], ...] = eqx.field(static=True)
    log: tuple[bool, ...] = eqx.field(static=True)

    def __init__(self, coords: Sequence[Coordinate]):
        self.x0 = jnp.asarray([c.x0 for c in coords], dtype=float).reshape(len(coords))
        self.scale = jnp.asarray([c.scale for c in coords], dtype=float).reshape(len(coords))
        self.parameters = tuple(anonymous(c.targets) for c in coords)
        self.log = tuple(c.log for c in coords)

    def values(self, u: Float[Array, " P"]) -> Float[Array, " P"]:
        """The parameter values [their units] at the coordinates `u`."""
        lin = self.x0 + self.scale * u
        if not any(self.log):
            return lin
        return jnp.where(np.asarray(self.log), self.x0 * jnp.exp(jnp.clip(u, -LOG_CLIP, LOG_CLIP)), lin)

    def apply(self, scenario: Scenario, u: Float[Array, " P"]) -> Scenario:
        """`scenario` with the coordinates `u` applied (traceable)."""
        v = self.values(u)
        pars = [t for ts in self.parameters for t in ts]
        vals = [v[j] for j, ts in enumerate(self.parameters) for _ in ts]
        return apply_resolved(scenario, pars, vals)


def apply_coordinates(scenario: Scenario, coords: Sequence[Coordinate], u: Float[ArrayLike, " P"]) -> Scenario:
    """The scenario with the coordinates `u` (P,) applied: every member of coordinate $j$ set to
    `coords[j].value(u[j])` (traceable)."""
    return Coordinates(coords).apply(scenario, jnp.asarray(u, dtype=float))
