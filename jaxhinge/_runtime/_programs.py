"""Traced programs kept across processes: the CLI's program cache.

JAX's persistent compilation cache (`jax_compilation_cache_dir`) spares XLA's compilation on a second run, but
every process still traces the Python model and lowers it to StableHLO to find its cache entry: seconds for a
diffrax solve, a modal fit or a telemetry fit. `program` (used on the package's compiled entry points where
`eqx.filter_jit` would be) keeps the lowered program itself: exported with `jax.export` the first time, stored
under a key that names everything that shapes it, and loaded by later processes without tracing; XLA then
compiles it or takes it from the compilation cache.

**The key** (SHA-256 of): the function (module and qualified name); the jaxhinge source (its `.py` files); the
versions of Python, jax, jaxlib, equinox, diffrax, optimistix, lineax and optax; the JAX settings that change a
trace (`jax_enable_x64`, matmul precision, dtype promotion) and every `JAX_*`/`EQX_*` environment variable,
equinox's error mode; the backend and its devices; the pytree structure of the arguments with every non-array
value written out (`_canonical`: numbers, strings, tuples, dataclasses, enums, shape-dtype structures,
module-level functions and classes by name); the shape, dtype and weak type of every array. What the key cannot write out faithfully (a lambda or
closure, an object whose state it cannot read) makes the call an ordinary `eqx.filter_jit` call; so does a call
under a trace (`jit`, `grad`, `vmap`), with arrays on several devices, or with the cache off.

**Failure never stops a run**: a program that cannot be exported (a host callback) or whose outputs cannot be
stored is run as an ordinary call; an unwritable folder, an unreadable or corrupt entry gives one warning and
the ordinary call (a corrupt entry is replaced).

Off unless `enable(folder)` is called: the CLI does, next to JAX's compilation cache (`<cache>/programs`); the
library and the tests run plain `eqx.filter_jit`.
"""

import dataclasses
import enum
import functools
import hashlib
import os
import pickle
import re
import sys
import tempfile
import types
from typing import Any

import equinox as eqx
import jax
import numpy as np

_FOLDER: str | None = None
_WARNED: set[str] = set()
_FORMAT = 1  # the layout of an entry; part of the key
STATS = {"loaded": 0, "stored": 0, "ordinary": 0}  # per process: programs loaded, exported and stored, run plain


def enable(folder: str | None) -> None:
    """Keep and load programs in `folder` (created when missing); `None`: off."""
    global _FOLDER
    _FOLDER = folder
    _WARNED.clear()
    _key_base.cache_clear()


def enabled() -> bool:
    """Whether programs are kept (`enable` was called with a folder)."""
    return _FOLDER is not None


class _Uncacheable(Exception):
    """A value the key cannot write out faithfully."""


class _Slot:
    """Where an output array goes in a stored output template."""

    def __reduce__(self):
        return (_Slot, ())


def _qualified(obj) -> str:
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qual or "<lambda>" in qual or "<locals>" in qual:
        raise _Uncacheable(repr(obj))
    return f"{module}.{qual}"


def _canonical(x: Any) -> str:
    """A text that determines `x` (for the key), or `_Uncacheable`."""
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return f"{type(x).__name__}:{x!r}"
    if isinstance(x, enum.Enum):
        return f"{_qualified(type(x))}.{x.name}"
    if isinstance(x, (tuple, list)):
        return f"{_qualified(type(x))}({','.join(map(_canonical, x))})"
    if isinstance(x, dict):
        return "dict{" + ",".join(sorted(f"{_canonical(k)}:{_canonical(v)}" for k, v in x.items())) + "}"
    if isinstance(x, (set, frozenset)):
        return f"{type(x).__name__}{{" + ",".join(sorted(map(_canonical, x))) + "}"
    if isinstance(x, type):
        return f"type:{_qualified(x)}"
    if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        if isinstance(x, types.MethodType):
            return f"method:{_canonical(x.__self__)}.{x.__func__.__name__}"
        return f"function:{_qualified(x)}"
    if isinstance(x, functools.partial):
        return f"partial({_canonical(x.func)},{_canonical(x.args)},{_canonical(x.keywords)})"
    if isinstance(x, jax.ShapeDtypeStruct):  # e.g. a linear operator's input structure in a solver's state
        if x.sharding is not None:
            raise _Uncacheable(repr(x))
        return f"sds:{np.dtype(x.dtype).str}{tuple(x.shape)}{bool(x.weak_type)}"
    if isinstance(x, np.dtype):
        return f"dtype:{x.str}"
    if isinstance(x, np.generic):
        return f"np:{x.dtype.str}:{x.item()!r}"
    if dataclasses.is_dataclass(x):
        fields = ",".join(f"{f.name}={_canonical(getattr(x, f.name, None))}" for f in dataclasses.fields(x))
        return f"{_qualified(type(x))}({fields})"
    if not getattr(x, "__dict__", None) and not getattr(type(x), "__slots__", ()):  # a stateless sentinel
        return f"object:{_qualified(type(x))}"
    raise _Uncacheable(repr(x))


def _structure(td) -> str:
    """A text that determines a pytree structure (node types and their auxiliary data), or `_Uncacheable`."""
    if td.num_nodes == 1 and td.num_leaves == 1:
        return "*"
    kind, aux = td.node_data()
    return f"{_qualified(kind)}[{_canonical(aux)}]({','.join(_structure(c) for c in td.children())})"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 (hex) of jaxhinge's source: every `.py` file of the package, its name and bytes (what a program
    key names, and what a campaign's Dask worker must share with its client)."""
    h = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package (this file is in _runtime)
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _key_base() -> str:
    """Everything in the key that does not depend on the call."""
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"format {_FORMAT}", sys.version, source_digest()]
    for dist in ("jax", "jaxlib", "equinox", "diffrax", "optimistix", "lineax", "optax"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist} -")
    cfg = jax.config
    parts += [str(cfg.jax_enable_x64), str(cfg.jax_default_matmul_precision), str(cfg.jax_numpy_dtype_promotion)]
    parts += sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(("JAX_", "EQX_", "XLA_")))
    try:
        import equinox._errors as eqx_errors

        parts.append(f"EQX_ON_ERROR {getattr(eqx_errors, 'EQX_ON_ERROR', '-')}")
    except ImportError:
        parts.append("EQX_ON_ERROR ?")
    parts.append(f"{jax.default_backend()} {[str(d) for d in jax.devices()]}")
    return "\n".join(parts)


def _debug(message: str) -> None:
    """Why a program is not kept, on stderr when `JAXHINGE_DEBUG_PROGRAMS` is set (otherwise silent: a program
    that is not kept runs as an ordinary one)."""
    if os.environ.get("JAXHINGE_DEBUG_PROGRAMS"):
        print(f"jaxhinge: program cache: {message}", file=sys.stderr)


def _warn(what: str, detail: str) -> None:
    if what not in _WARNED:
        _WARNED.add(what)
        print(f"jaxhinge: warning: program cache: {what} ({detail}); running without it", file=sys.stderr)


def _split(args, kwargs):
    """The call's key text, its array leaves, the flat layout and whether the call can use the cache."""
    leaves, td = jax.tree.flatten((args, kwargs))
    dynamic = [eqx.is_array(x) for x in leaves]
    arrays = [x for x, d in zip(leaves, dynamic) if d]
    for x in arrays:
        if isinstance(x, jax.core.Tracer):
            raise _Uncacheable("traced")
        if isinstance(x, jax.Array) and len(x.sharding.device_set) > 1:
            raise _Uncacheable("sharded")
    text = [_structure(td)]
    for x, d in zip(leaves, dynamic):
        if d:
            text.append(f"a:{np.dtype(x.dtype).str}{tuple(x.shape)}{bool(getattr(x, 'weak_type', False))}")
        else:
            text.append(_canonical(x))
    return "\n".join(text), arrays, leaves, dynamic, td


class _Loaded:
    """An exported program ready to call: its compiled call and the template of its outputs."""

    def __init__(self, exported, template, name):
        def run(*arrays):
            return exported.call(*arrays)

        run.__name__ = run.__qualname__ = name  # logs and compile-cache entries name the function
        self.call = jax.jit(run)
        self.template = template

    def __call__(self, arrays):
        out = self.call(*arrays)
        slots, td = jax.tree.flatten(self.template, is_leaf=lambda x: isinstance(x, _Slot))
        it = iter(out)
        return jax.tree.unflatten(td, [next(it) if isinstance(s, _Slot) else s for s in slots])


def _export(fn, leaves, dynamic, td):
    """Trace and lower `fn` for this call's static part and array shapes; **returns** the `jax.export.Exported`
    and the template of its outputs (arrays replaced by `_Slot`)."""
    template = []

    def flat(*arrays):
        it = iter(arrays)
        args, kwargs = jax.tree.unflatten(td, [next(it) if d else x for x, d in zip(leaves, dynamic)])
        out = fn(*args, **kwargs)
        out_leaves, out_td = jax.tree.flatten(out)
        template.append(jax.tree.unflatten(out_td, [_Slot() if eqx.is_array(x) else x for x in out_leaves]))
        return [x for x in out_leaves if eqx.is_array(x)]

    flat.__name__ = flat.__qualname__ = fn.__name__

    avals = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False))
             for x, d in zip(leaves, dynamic) if d]
    # jax.export refuses custom calls without a cross-version compatibility guarantee (LAPACK's `ormqr`, used by
    # the least-squares solvers' QR): the key names the jaxlib version, so a stored program only ever runs with
    # the jaxlib that exported it; those targets are allowed by name.
    checks = []
    while True:
        try:
            exported = jax.export.export(jax.jit(flat), disabled_checks=checks)(*avals)
            return exported, template[-1]
        except ValueError as e:
            named = sorted(set(re.findall(r"custom_call @(\w+)", str(e))))
            new = [jax.export.DisabledSafetyCheck.custom_call(t) for t in named]
            if not new or any(c in checks for c in new):
                raise
            checks += new


def program(fn):
    """`eqx.filter_jit(fn)`, whose traced program is kept across processes when the cache is on (`enable`)."""
    jitted = eqx.filter_jit(fn)
    loaded: dict[tuple[str, str], _Loaded | None] = {}  # this process: (folder, key) -> program (None: plain)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _FOLDER is None:
            return jitted(*args, **kwargs)
        try:
            text, arrays, leaves, dynamic, td = _split(args, kwargs)
            key = hashlib.sha256(f"{_key_base()}\n{_qualified(fn)}\n{text}".encode()).hexdigest()
        except _Uncacheable as e:
            STATS["ordinary"] += 1
            _debug(f"{fn.__name__}: not kept ({e})")
            return jitted(*args, **kwargs)
        if (_FOLDER, key) not in loaded:
            loaded[_FOLDER, key] = _load(key, fn) or _store(key, fn, leaves, dynamic, td)
        prog = loaded[_FOLDER, key]
        if prog is not None:
            try:
                return prog(arrays)
            except Exception as e:  # noqa: BLE001 (a stored program that does not run here): run it plain
                _warn(f"entry {key[:16]}... did not run", f"{type(e).__name__}: {e}"[:200])
                loaded[_FOLDER, key] = None
        STATS["ordinary"] += 1
        return jitted(*args, **kwargs)

    call.plain = jitted  # the ordinary program (tests compare the two)
    call.loaded = loaded
    return call


def _path(key: str) -> str:
    return os.path.join(_FOLDER, f"{key}.jaxhinge-program")


def _load(key: str, fn) -> "_Loaded | None":
    path = _path(key)
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            blob, template = pickle.load(f)
        prog = _Loaded(jax.export.deserialize(bytearray(blob)), template, fn.__name__)
    except Exception as e:  # noqa: BLE001 (corrupt or from another layout: replaced by the next store
        _warn(f"entry {os.path.basename(path)!r} is unreadable", f"{type(e).__name__}: {e}"[:200])
        try:
            os.remove(path)
        except OSError:
            pass
        return None
    STATS["loaded"] += 1
    return prog


def _store(key: str, fn, leaves, dynamic, td) -> "_Loaded | None":
    try:
        exported, template = _export(fn, leaves, dynamic, td)
        blob = exported.serialize()
        payload = pickle.dumps((blob, template), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 (not exportable: a host callback, outputs that cannot be stored): run plain
        _debug(f"{fn.__name__}: not exportable ({type(e).__name__}: {str(e)[:300]})")
        return None
    tmp = None
    try:
        os.makedirs(_FOLDER, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_FOLDER, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, _path(key))
        STATS["stored"] += 1
    except OSError as e:
        _warn(f"folder {_FOLDER!r} is not writable", e.strerror or str(e))
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
    # the program as a later process will load it (the same module text, so the same compile-cache entry)
    return _Loaded(jax.export.deserialize(blob), template, fn.__name__)
