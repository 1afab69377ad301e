"""Batched runs: Monte Carlo dispersions, chunked (and sharded) `vmap` of `simulate`, summary statistics.

A *dispersion* is plain data, one dict per dispersed parameter, named like the fit parameters:
`"<panel name>.<field>"` (e.g. `"p0.k"`, `"p0.thetaInit"`) or `"hub.<field>"` (e.g. `"hub.mHub"`,
`"hub.omega_BN_BInit"`; the hub's initial conditions are `hub.` fields, as in the scenario file).

```python
{"param": "p0.k", "dist": "uniform", "low": 80.0, "high": 120.0}
{"param": "p0.c", "dist": "normal", "mean": 2.0, "std": 0.2}     # mean defaults to the nominal value
{"param": "p0.c", "dist": "normal", "rel_std": 0.1}             # std = rel_std * |mean|
{"param": "hub.omega_BN_BInit", "dist": "normal", "std": [0.01, 0.01, 0.0]}
{"param": "p1.k", "dist": "values", "values": [50.0, 100.0, ...]}  # one value per member (grids)
```

What a sample means depends on the field (`PARAMETERS` lists them all):

- scalars (`mass`, `d`, `k`, `c`, `thetaRef`, `thetaDotRef`, `motorTorque`, `thetaInit`, `thetaDotInit`,
  `hub.mHub`) and vectors (`r_HB_B`, `hub.r_BcB_B`, `hub.r_CN_NInit`, `hub.v_CN_NInit`, `hub.sigma_BNInit`,
  `hub.omega_BN_BInit`, shape (3,)): the value itself. `low`/`high`/`mean`/`std` of a vector are a number
  (same for each component) or 3 numbers; components are sampled independently.
- inertias (`IPntS_S`, `hub.IHubPntBc_B`): 3 positive scale factors $s$ (nominal 1) applied as
  $I' = D I D$ with $D = \\mathrm{diag}(\\sqrt{s})$: diagonal entries (the principal values of a diagonal
  inertia) are multiplied by $s$, and $I'$ stays symmetric positive definite.
- hinge orientation (`dcm_HB`): a small rotation vector $\\phi$ [rad] (nominal 0), expressed in the hinge
  frame H: $[H'B] = \\exp(-[\\tilde\\phi])\\,[HB]$.

Sampling takes an explicit `jax.random` key or integer seed; there is no global random state.
"""

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from ..._errors import ConfigError, ParameterError, SweepError
from ..._format import fmt_value as _fmt
from ..._model import _params
from ..._model._params import FIELDS, anonymous, apply_resolved, parameter_names, resolve
from ..._model._params import nominal as _nominal
from ..._model._rules import model_ok, model_problems
from ..._model._scenario import Scenario, compile_key, control_grid
from ..._model._spacecraft import strip_labels
from ..._runtime._programs import program
from ..._simulation._memory import check_memory
from ..._simulation._simulate import simulate_unjitted
from ..._simulation._trajectory import Trajectory, failure_reason
from ._sensitivity import needs_simulation, output_values

DISTRIBUTIONS = ("uniform", "normal", "values")

_SPEC_KEYS = {
    "uniform": ("param", "dist", "low", "high"),
    "normal": ("param", "dist", "mean", "std", "rel_std"),
    "values": ("param", "dist", "values"),
}


def _as_array(ck, v: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise ck(
            f"{where} = {_fmt(v)}: must be a number" + (" or a list of 3 numbers" if shape else "")
        ) from None
    if isinstance(v, bool) or a.dtype == bool:
        raise ck(f"{where} = {_fmt(v)}: must be a number, not a boolean")
    if a.shape not in ((), shape):
        raise ck(f"{where} = {_fmt(v)}: must be a number" + (" or a list of 3 numbers" if shape else ""))
    if not np.all(np.isfinite(a)):
        raise ck(f"{where} = {_fmt(v)}: must be finite")
    return np.broadcast_to(a, shape).copy()


def check_dispersions(
    scenario: Scenario, dispersions: Sequence[Mapping[str, Any]], members: int, source: str = "<dispersions>",
    batch: int | None = None,
) -> None:
    """Validate dispersion specs against a scenario before any sampling or compilation. `batch`: the members
    held in memory at once (a campaign's chunk; default all), whose outputs must fit the memory limit.

    **Raises:** `SweepError` (a `ValueError`) with a one-line message
    `source: dispersions[i].field = value: what is allowed`.
    """

    def ck(msg: str) -> SweepError:
        return SweepError(f"{source}: {msg}", source=source)

    if isinstance(members, bool) or not isinstance(members, int) or members <= 0:
        raise ck(f"members = {_fmt(members)}: must be an integer > 0")
    if isinstance(dispersions, Mapping) or not isinstance(dispersions, Sequence):
        raise ck(f"dispersions = {_fmt(dispersions)}: must be a list of tables")
    try:
        held = members if batch is None else min(batch, members)
        field = "members" if held == members else "chunk_size"
        check_memory(scenario.simulation, scenario.spacecraft.panels.count, held, field=field, value=held)
    except ConfigError as e:
        raise ck(str(e)) from None
    allowed_names = parameter_names(scenario)
    seen: dict[str, int] = {}
    for j, spec in enumerate(dispersions):
        w = f"dispersions[{j}]"
        if not isinstance(spec, Mapping):
            raise ck(f"{w} = {_fmt(spec)}: must be a table with keys param, dist, ...")
        if "param" not in spec:
            raise ck(f"{w}: missing key 'param' (e.g. param = \"p0.k\")")
        name = spec["param"]
        if not isinstance(name, str):
            raise ck(f'{w}.param = {name!r}: must be a string such as "p0.k" or "hub.mHub"')
        try:
            par = resolve(scenario, name)
        except ParameterError as e:
            raise ck(f"{w}.param = {e}") from None
        if par.component is not None:
            raise ck(f"{w}.param = {name!r}: disperse the whole vector {par.base!r} (std or low/high per "
                     "component)")
        field = par.field
        assert name in allowed_names
        if name in seen:
            raise ck(f"{w}.param = {name!r}: already dispersed by dispersions[{seen[name]}]")
        seen[name] = j
        dist = spec.get("dist")
        if dist not in DISTRIBUTIONS:
            raise ck(f"{w}.dist = {dist!r}: allowed values are {', '.join(DISTRIBUTIONS)}")
        for key in spec:
            if key not in _SPEC_KEYS[dist]:
                raise ck(
                    f"{w}: unknown key {key!r} for dist = {dist!r}; allowed keys are {', '.join(_SPEC_KEYS[dist])}"
                )
        shape = field.param_shape
        rule = f"{name} {field.allowed()} ({field.description}, {field.param_unit})"
        if dist == "uniform":
            for key in ("low", "high"):
                if key not in spec:
                    raise ck(f"{w}: missing key {key!r} (uniform needs low and high)")
            low = _as_array(ck, spec["low"], shape, f"{w}.low")
            high = _as_array(ck, spec["high"], shape, f"{w}.high")
            if np.any(low >= high):
                raise ck(f"{w}.low = {_fmt(spec['low'])}: must be < high = {_fmt(spec['high'])}")
            for key, v in (("low", low), ("high", high)):
                if not np.all(field.admits(v)):
                    raise ck(f"{w}.{key} = {_fmt(spec[key])}: {rule}")
        elif dist == "normal":
            if ("std" in spec) == ("rel_std" in spec):
                raise ck(f"{w}: give exactly one of 'std' or 'rel_std' for dist = 'normal'")
            key = "std" if "std" in spec else "rel_std"
            std = _as_array(ck, spec[key], shape, f"{w}.{key}")
            if np.any(std <= 0):
                raise ck(f"{w}.{key} = {_fmt(spec[key])}: must be > 0")
            if "mean" in spec:
                mean = _as_array(ck, spec["mean"], shape, f"{w}.mean")
                if not np.all(field.admits(mean)):
                    raise ck(f"{w}.mean = {_fmt(spec['mean'])}: {rule}")
        else:
            if "values" not in spec:
                raise ck(f"{w}: missing key 'values' (one value per member)")
            try:
                a = np.asarray(spec["values"], dtype=float)
            except (TypeError, ValueError):
                raise ck(f"{w}.values = {_fmt(spec['values'])}: must be an array of numbers") from None
            if a.shape != (members, *shape):
                raise ck(
                    f"{w}.values: shape {a.shape} does not fit; need {(members, *shape)} (members = {members})"
                )
            if not np.all(np.isfinite(a)):
                raise ck(f"{w}.values = {_fmt(spec['values'])}: must be finite")
            bad = np.argwhere(~field.admits(a).reshape(members, -1).all(axis=1))
            if bad.size:
                raise ck(f"{w}.values: member {int(bad[0, 0])} = {_fmt(a[int(bad[0, 0])])}: {rule}")


def sample_dispersions(
    scenario: Scenario,
    dispersions: Sequence[Mapping[str, Any]],
    members: int,
    key: PRNGKeyArray | int,
    indices: Sequence[int] | np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Draw `members` parameter sets, member by member from counter-based keys: member `i`'s draws depend only on
    `(key, i)`, so any part of a campaign is drawn anywhere, in any order, bit for bit (a resumed or distributed
    campaign, a re-run of chosen members).

    **Arguments:**

    - `scenario`: the nominal scenario (gives nominal values and panel names).
    - `dispersions`: specs as in this module's docstring (validated by `check_dispersions`).
    - `members`: number of draws.
    - `key`: a `jax.random` key or an integer seed. Spec `j` draws member `i` from
      `fold_in(fold_in(key, j), i)`, so adding a spec does not change the draws of the others, and a member's
      draws do not depend on how many members there are.
    - `indices`: the member indices to draw (default all, `0 .. members - 1`); each in `[0, members)`.

    **Returns:** `{name: array (members, *shape)}`, shape () for scalars and (3,) otherwise (module
    docstring). Pass it to `simulate_batch` or `apply_parameters`.
    """
    idx = np.arange(members) if indices is None else np.asarray(indices, dtype=np.int64).reshape(-1)
    check_dispersions(scenario, dispersions, members, batch=1)  # (drawing runs nothing: the batch checks its memory)
    if isinstance(key, int):
        key = jax.random.PRNGKey(key)
    if idx.size and (idx.min() < 0 or idx.max() >= members):
        raise ValueError(f"sample_dispersions: indices = {_fmt(idx.tolist())}: each must be in [0, {members})")
    dtype = jnp.float64 if jax.config.jax_enable_x64 else None
    out: dict[str, np.ndarray] = {}
    for j, spec in enumerate(dispersions):
        name = spec["param"]
        field = FIELDS[resolve(scenario, name).field.name]
        shape = (idx.size, *field.param_shape)
        k = jax.random.fold_in(key, j)
        dist = spec["dist"]
        if dist == "values":
            x = np.asarray(spec["values"], dtype=float)[idx]
        elif dist == "uniform":
            low = np.broadcast_to(np.asarray(spec["low"], dtype=float), shape[1:])
            high = np.broadcast_to(np.asarray(spec["high"], dtype=float), shape[1:])
            x = low + (high - low) * _draw(jax.random.uniform, k, idx, shape[1:], dtype)
        else:
            nominal = _nominal(scenario, name)
            mean = np.broadcast_to(np.asarray(spec.get("mean", nominal), dtype=float), shape[1:])
            std = (
                np.asarray(spec["std"], dtype=float)
                if "std" in spec
                else np.asarray(spec["rel_std"], dtype=float) * np.abs(mean)
            )
            z = _draw(jax.random.normal, k, idx, shape[1:], dtype)
            x = mean + np.broadcast_to(std, shape[1:]) * z
            if not np.all(field.admits(x)):
                bad = int(idx[np.argwhere(~field.admits(x).reshape(idx.size, -1).all(axis=1))[0, 0]])
                raise SweepError(
                    f"<dispersions>: dispersions[{j}] ({name}): member {bad} drew {_fmt(x[bad])}; {name} "
                    f"{field.allowed()} (reduce std, or use dist = 'uniform' within the allowed range)",
                    source="<dispersions>",
                )
        out[name] = np.asarray(x, dtype=float).reshape(shape)
    return out


def _draw(sampler, key, indices: np.ndarray, shape: tuple[int, ...], dtype) -> np.ndarray:
    """`sampler(fold_in(key, i), shape)` for every member index `i`, stacked: one member's draw never depends
    on the others'."""
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(indices, dtype=jnp.uint32))
    return np.asarray(jax.vmap(lambda k: sampler(k, shape, dtype=dtype))(keys)).reshape(len(indices), *shape)


def grid_dispersions(grid: Mapping[str, Sequence[Any]]) -> tuple[list[dict[str, Any]], int]:
    """A full-factorial grid as `"values"` specs: `grid_dispersions({"p0.k": [50, 100], "p0.c": [0, 1, 2]})`
    gives 6 members (the last name varies fastest). **Returns:** `(dispersions, members)`."""
    names = list(grid)
    axes = [np.asarray(grid[n], dtype=float) for n in names]
    idx = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    members = int(np.prod([len(a) for a in axes])) if axes else 0
    specs = [
        {"param": n, "dist": "values", "values": a[ix.reshape(-1)]} for n, a, ix in zip(names, axes, idx)
    ]
    return specs, members


@program
def _run_chunk(base, batched, pars) -> Trajectory:
    if pars is None:  # a batched scenario
        return jax.vmap(simulate_unjitted)(batched)
    return jax.vmap(lambda b: simulate_unjitted(apply_resolved(base, pars, b)))(batched)


def _batch_size(batched, names=None) -> int:
    sizes = [int(np.shape(x)[0]) if np.ndim(x) else 0 for x in jax.tree.leaves(batched)]
    if len(set(sizes)) != 1 or not sizes[0]:
        got = ", ".join(f"{n} {s}" for n, s in zip(names, sizes)) if names else sorted(set(sizes))
        raise ValueError(f"simulate_batch: every batched value needs a leading member axis (one entry per member), "
                         f"of one length >= 1 for all; got lengths {got} (0: no member axis, or no member)")
    return sizes[0]


def refuse_invalid_members(scenario: Scenario, params: Mapping[str, Any] | None, who: str = "simulate_batch",
                           first: int = 0, members: int | None = None) -> None:
    """Every member's model passes the physical rules of a scenario file (`_model._rules`), before any compute:
    else a `SweepError` naming the first member that breaks one (`first` + its index in `params`, of `members`),
    the field, its value, the rule and the member's dispersed values."""
    if params is None:
        sc = scenario.spacecraft
    else:
        named = [resolve(scenario, k) for k in params]
        values = (jnp.asarray(v) for v in params.values())  # evaluated here, with values: not the compiled program
        sc = jax.vmap(lambda *b: _params.apply_resolved(scenario, named, b).spacecraft)(*values)
    ok = np.asarray(jax.vmap(model_ok)(sc))
    if ok.all():
        return
    m = int(np.flatnonzero(~ok)[0])
    problem = model_problems(jax.tree.map(lambda x: np.asarray(x)[m], sc), plausible=False)
    field, value, rule = problem[1:] if problem else ("model", None, "breaks a physical rule")
    given = "" if params is None else " (this member's values: " + ", ".join(
        f"{k} = {_fmt(np.asarray(v)[m])}" for k, v in params.items()) + ")"
    raise SweepError.bad(f"{who}: member {first + m} of {ok.size if members is None else members}", field, value,
                         rule + given)


def _prepare(scenario: Scenario, params: Mapping[str, Any] | None, who: str, check: bool = True):
    """`(base, batched, pars, members)` of a batch (`simulate_batch`, `batch_outputs`): the nominal scenario as the
    compiled program sees it, the batched values, the resolved parameters, the member count; every member's
    model checked against the physical rules (not with `check` False: the caller checked them)."""
    if not isinstance(scenario, Scenario):
        raise TypeError(f"{who}: expected a jaxhinge Scenario, got {type(scenario).__name__}")
    if params is None:
        base, batched, pars = None, strip_labels(scenario), None
    else:
        if not isinstance(params, Mapping):
            raise TypeError(f"{who}: params = {_fmt(params)}: must be a mapping {{name: values (members, ...)}}"
                            ", e.g. from sample_dispersions")
        if not params:
            raise ValueError(f"{who}: params is empty; give at least one dispersed parameter")
        try:
            pars = anonymous([resolve(scenario, k) for k in params])
        except ParameterError as e:
            raise ValueError(f"{who}: params: {e}") from None
        base = compile_key(scenario)
        batched = tuple(jnp.asarray(v) for v in params.values())
    if scenario.control is not None and not scenario.simulation.integrator.fixed_step:  # enough control periods for
        # the member with the shortest control_dt
        cdt = [np.ravel(scenario.control.control_dt)] + [np.ravel(v) for k, v in (params or {}).items()
                                                         if k == "control.control_dt"]
        grid = control_grid(np.concatenate(cdt), scenario.simulation)
        if params is None:
            batched = dataclasses.replace(batched, control_grid=grid)
        else:
            base = dataclasses.replace(base, control_grid=grid)
    members = _batch_size(batched, None if params is None else list(params))
    if check:
        refuse_invalid_members(scenario, params, who)
    return base, batched, pars, members


@program
def _run_outputs(base, batched, pars, outputs, simulate: bool):
    def one(b):
        scn = apply_resolved(base, pars, b)
        traj = simulate_unjitted(scn) if simulate else None
        y, status = output_values(base, scn, traj, outputs) if outputs else (jnp.zeros(0), jnp.zeros(0, jnp.int32))
        return traj, y, status

    return jax.vmap(one)(batched)


def batch_outputs(
    scenario: Scenario, params: Mapping[str, Any], outputs: Sequence[Any], *, histories: bool = True,
    check: bool = True,
) -> tuple[Trajectory | None, np.ndarray, np.ndarray]:
    """One compiled program for a batch of members: each member's outputs (`sensitivity`'s names and options,
    `parse_outputs`; no time histories), and its trajectory when `histories` or an output needs one. `check`
    False skips the physical rules' check of every member's model (`refuse_invalid_members`), for a caller that
    checked them already (a campaign checks every member before its first chunk: `check_members`).

    **Returns:** `(trajectory or None, values (members, M) in `output_blocks`' order, status (members, outputs))`;
    the trajectory's arrays are JAX arrays, the program finished (equinox's `filter_jit` waits for it).
    """
    base, batched, pars, members = _prepare(scenario, params, "batch_outputs", check)
    simulate = histories or needs_simulation(outputs)
    if simulate:
        check_memory(scenario.simulation, scenario.spacecraft.panels.count, members, field="members", value=members)
    traj, y, status = _run_outputs(base, batched, pars, tuple(outputs), simulate)
    return traj, np.asarray(y), np.asarray(status)


def simulate_batch(
    scenario: Scenario,
    params: Mapping[str, Any] | None = None,
    *,
    chunk_size: int = 256,
    devices: Sequence[jax.Device] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Trajectory:
    """Simulate many members in one compiled program: `jax.vmap(simulate_unjitted)` in one
    `eqx.filter_jit`, run chunk by chunk.

    **Arguments:**

    - `scenario`: with `params`, the nominal scenario; without, a *batched* scenario whose every array leaf
      has a leading member axis (e.g. from `jax.vmap(lambda k: eqx.tree_at(...))(ks)`).
    - `params`: `{name: array (members, ...)}` from `sample_dispersions` (or built by hand, same names).
    - `chunk_size`: members per compiled call. The last chunk is padded (with member 0) to the same size, so
      one compilation serves all chunks. Memory grows linearly with it.
    - `devices`: shard each chunk's member axis over these devices (`jax.sharding.Mesh` + `NamedSharding`);
      default `None` = all local devices when there are several, else no sharding. `chunk_size` is rounded up
      to a multiple of the device count.
    - `progress`: called as `progress(done, members)` after each chunk.

    **Returns:** a `Trajectory` whose arrays have a leading member axis. Members fail independently
    (`throw=False`): `trajectory.success[m]` is False for a member whose step budget ran out or whose state
    became non-finite, and its `result[m]` holds diffrax's code; other members are unaffected.
    """
    base, batched, pars, members = _prepare(scenario, params, "simulate_batch")
    check_memory(scenario.simulation, scenario.spacecraft.panels.count, members, field="members", value=members)
    if devices is None:
        devices = jax.local_devices()
    devices = list(devices)
    chunk_size = max(1, min(int(chunk_size), members))
    sharding = None
    if len(devices) > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(devices), ("batch",))
        sharding = NamedSharding(mesh, PartitionSpec("batch"))
        chunk_size = math.ceil(chunk_size / len(devices)) * len(devices)
        base = jax.device_put(base, NamedSharding(mesh, PartitionSpec()))
    chunks = []
    for start in range(0, members, chunk_size):
        stop = min(start + chunk_size, members)

        def take(x, start=start, stop=stop):
            x = jnp.asarray(x)[start:stop]
            if stop - start < chunk_size:  # pad with member 0: same shapes, same compiled program
                pad = jnp.broadcast_to(x[:1], (chunk_size - (stop - start), *x.shape[1:]))
                x = jnp.concatenate([x, pad])
            return x

        chunk = jax.tree.map(take, batched)
        if sharding is not None:
            chunk = jax.device_put(chunk, sharding)
        out = _run_chunk(base, chunk, pars)
        chunks.append(jax.tree.map(lambda x, n=stop - start: np.asarray(x)[:n], out))
        if progress is not None:
            progress(stop, members)
    # tree.map rebuilds the Module without re-running __init__ (the per-run shape annotations do not apply)
    return jax.tree.map(lambda *xs: jnp.asarray(np.concatenate(xs)), *chunks)


def failure_reasons(traj: Trajectory, simulation=None) -> list[tuple[int, str]]:
    """`(member index, reason)` for every failed member of a batched `Trajectory` (`failure_reason`)."""
    codes = np.asarray(traj.result)
    return [(int(m), failure_reason(int(codes[m]), simulation)) for m in np.flatnonzero(~np.asarray(traj.success))]


def summarize(
    traj: Trajectory,
    outputs: Sequence[str] = ("omega_BN_B", "theta"),
    percentiles: Sequence[float] = (5.0, 50.0, 95.0),
) -> dict[str, Any]:
    """Per-time statistics of a batched `Trajectory` over its **successful** members only.

    **Returns:** `{"members", "succeeded", "failed", "percentiles", "t", <output>: {"min", "max", "mean",
    "percentiles"}}`; `min`/`max`/`mean` have the output's per-member shape (T, ...), `percentiles` has
    shape (P, T, ...). With no successful member the statistics are NaN.
    """
    ok = np.asarray(traj.success)
    res: dict[str, Any] = {
        "members": int(ok.size),
        "succeeded": int(ok.sum()),
        "failed": int((~ok).sum()),
        "percentiles": tuple(float(p) for p in percentiles),
        "t": np.asarray(traj.t)[0] if ok.size else np.zeros(0),
    }
    for name in outputs:
        x = np.asarray(getattr(traj, name))[ok]
        if x.shape[0] == 0:
            nan = np.full(np.shape(getattr(traj, name))[1:], np.nan)
            res[name] = {
                "min": nan,
                "max": nan,
                "mean": nan,
                "percentiles": np.stack([nan] * len(percentiles)),
            }
            continue
        res[name] = {
            "min": x.min(axis=0),
            "max": x.max(axis=0),
            "mean": x.mean(axis=0),
            "percentiles": np.percentile(x, list(percentiles), axis=0),
        }
    return res
