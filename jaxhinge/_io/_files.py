"""The file layer: every input file (scenario, FIT.toml, SWEEP.toml, SENS.toml) is read and checked through
`_Checker`, and every output file is written through `atomic_write` or `write_output_files`.

Reading: `_Checker(source).read_toml(what)` reads a TOML file with one-line errors (`file:line:col: TOML
syntax error: ...` for syntax errors); its methods check tables and keys (unknown keys with a "did you mean"
hint), numbers, arrays and typed scalars (positive integers, finite positive floats, booleans, strings,
choices, paths relative to the file) and output folders, and raise one-line errors
`file: field = value: what is allowed`.

Writing: `atomic_write(path, write)` (one file) and `write_output_files(folder, writers)` (a set of files in
one folder, all or nothing) write through temporary files in the target folder, `fsync`, give the file the
mode of the file it replaces (or `0o666 & ~umask`) and rename with `os.replace`: a failed write (a full disk: a
one-line `ScenarioError`) or one stopped by `abandon_writes` (Ctrl-C) leaves no half-written or temporary file and
no new empty folder. `toml_text` (TOML: the one writer, exact floats, inline arrays), `write_json` / `to_json` /
`json_number` (JSON, NaN and inf as `null`), `least_squares_json` (the blocks every fit's `result.json` shares).

Nothing here imports the model: the loaders of each file format (`_scenario_file`, `_fit_file`,
`_identify_file`, `_sweep_file`, `_sens_file`) build on it.
"""

import contextlib
import datetime
import difflib
import functools
import json
import math
import os
import pathlib
import re
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

import numpy as np

__all__ = [
    "ScenarioError",
    "abandon_writes",
    "atomic_write",
    "json_number",
    "output_dir_problem",
    "output_file_problem",
    "read_toml",
    "to_json",
    "toml_text",
    "write_json",
    "write_output_files",
]


class ScenarioError(ValueError):
    """A scenario file or dict that cannot be used. `str(error)` is one line:
    `source: field = value: what is allowed`.

    Attributes: `source` (file name or `"<dict>"`), `field` (dotted path such as `panels[1] ("p1").dcm_HB`,
    or `None` for file-level errors).

    Also the error of the SWEEP and SENS files (and of `write_output_files` for an unusable folder).
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        super().__init__(message)
        self.source = source
        self.field = field


# ------------------------------------------------------------------------------------------------------------
# Formatting helpers (every message stays on one line)
# ------------------------------------------------------------------------------------------------------------


def _toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _fmt_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _fmt(value: Any, limit: int = 240) -> str:
    """A value as it would be written in TOML (on one line, shortened past `limit` characters)."""

    def rec(v):
        if isinstance(v, (bool, np.bool_)):
            return "true" if v else "false"
        if isinstance(v, (int, np.integer)):
            return str(int(v))
        if isinstance(v, (float, np.floating)):
            return _fmt_float(float(v))
        if isinstance(v, str):
            return _toml_str(v)
        if isinstance(v, Mapping):
            return "{" + ", ".join(f"{_fmt_key(str(k))} = {rec(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(rec(x) for x in v) + "]"
        if isinstance(v, np.ndarray):
            return rec(v.tolist())
        return _toml_str(str(v)) if not isinstance(v, (datetime.date, datetime.time)) else v.isoformat()

    s = rec(value)
    return s if len(s) <= limit else s[: limit - 5] + " ...]"


def _fmt_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_str(key)


def _kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, (datetime.date, datetime.time)):
        return "a date/time"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "a number"
    return f"a {type(value).__name__}"


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _shape_words(shape: tuple[int, ...]) -> str:
    if shape == ():
        return "a number"
    if len(shape) == 1:
        return f"a list of {shape[0]} numbers"
    return f"{shape[0]} rows of {shape[1]} numbers"


def _unwrap(value: Any) -> Any:
    """NumPy / JAX arrays (e.g. from `scenario_to_dict` edits in code) as nested lists; tuples as lists."""
    if isinstance(value, np.ndarray) or (
        hasattr(value, "__array__") and not isinstance(value, (list, tuple, str, Mapping))
    ):
        value = np.asarray(value).tolist()
    if isinstance(value, tuple):
        value = list(value)
    return value


def _shape_of(value: Any) -> tuple[int, ...] | None:
    value = _unwrap(value)
    if not isinstance(value, list):
        return ()
    shapes = {_shape_of(v) for v in value}
    if len(shapes) > 1 or None in shapes:
        return None
    inner = shapes.pop() if shapes else ()
    return (len(value), *inner)


def _suggest(key: str, allowed: Iterable[str], aliases: Mapping[str, str]) -> str | None:
    """The closest allowed key: same key in another case, a known misnaming, or a difflib match (among the
    allowed keys and the known misnamings)."""
    low = {a.lower(): a for a in allowed}
    low.update({alias: target for alias, target in aliases.items() if alias not in low})
    close = difflib.get_close_matches(key.lower(), list(low), n=1, cutoff=0.6)
    return low[close[0]] if close else None


# ------------------------------------------------------------------------------------------------------------
# Output paths (checked before any compute)
# ------------------------------------------------------------------------------------------------------------


def output_dir_problem(path: str | os.PathLike, files: Iterable[str] = ()) -> str | None:
    """What is wrong with `path` as an output folder, in words, or `None` when it can be used: it exists and
    is not a folder, it is a folder that is not writable, one of the output `files` in it is an existing
    folder, or (when it does not exist yet, it is created) its parent folder is missing or not writable."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            return f"the folder {path!r} is not writable"
        for name in files:
            dest = os.path.join(path, name)
            if os.path.isdir(dest):
                return f"{dest!r} is an existing folder; the output file {name} cannot replace it"
        return None
    if os.path.lexists(path):
        return f"{path!r} exists and is not a folder"
    return _folder_problem(os.path.dirname(path), "its parent folder")


def output_file_problem(path: str | os.PathLike, suffixes: Iterable[str] = ()) -> str | None:
    """What is wrong with `path` as an output file, in words, or `None`: a name without one of the `suffixes`
    (case-insensitive), an existing folder, or a folder that is missing or not writable."""
    path = os.fspath(path)
    suffixes = tuple(suffixes)
    if suffixes and not path.lower().endswith(suffixes):
        return f"the file name must end with {' or '.join(suffixes)}"
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return f"{full!r} is an existing folder, not a file"
    return _folder_problem(os.path.dirname(full), "folder")


def _folder_problem(folder: str, what: str) -> str | None:
    """`None` when `folder` exists and can be written into, else what is wrong, naming it as `what`."""
    if not os.path.isdir(folder):
        return f"{what} {folder!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{what} {folder!r} is not writable"
    return None


# ------------------------------------------------------------------------------------------------------------
# The checker
# ------------------------------------------------------------------------------------------------------------

_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_END = re.compile(r"\s*\(at end of document\)\s*$")


class _Checker:
    """Checks the values of one input file (or dict) and builds one-line errors: `source: field = value: rule`
    (`bad`) or `source: field: message` (`fail`).

    **Arguments:**

    - `source`: the file name (or `"<dict>"`); relative paths in the file are relative to its folder.
    - `error`: the exception class, called as `error(message, field=...)`; default `ScenarioError` (with
      `source`). The fit files pass `FitError`.
    - `descriptions`: `{key: what it means}`, added to "missing required key" messages.
    - `aliases`: `{lower-case misnaming: key}` for the "did you mean" hints of `keys` (default of every call).
    """

    def __init__(
        self,
        source: str,
        *,
        error: Callable[..., Exception] | None = None,
        descriptions: Mapping[str, str] | None = None,
        aliases: Mapping[str, str] | None = None,
    ):
        self.source = source
        self.error = error if error is not None else functools.partial(ScenarioError, source=source)
        self.descriptions = dict(descriptions or {})
        self.aliases = dict(aliases or {})

    @property
    def folder(self) -> str:
        """The folder relative paths in the file are relative to."""
        return os.path.dirname(os.path.abspath(self.source))

    def fail(self, field: str | None, message: str) -> Exception:
        """`source: field: message`."""
        where = f"{self.source}: {field}" if field else self.source
        return self.error(f"{where}: {message}", field=field)

    def bad(self, field: str, value: Any, rule: str) -> Exception:
        """`source: field = value: rule`."""
        return self.error(f"{self.source}: {field} = {_fmt(value)}: {rule}", field=field)

    # -- the file

    def read_toml(self, what: str = "file") -> dict[str, Any]:
        """The parsed TOML file `source`. Errors: `source: cannot read <what>: reason`, `source: not a UTF-8
        text file (...)`, `source:line:col: TOML syntax error: ...` (`source:line: ... (at end of file)`)."""
        source = self.source
        try:
            raw = pathlib.Path(source).read_bytes()
        except OSError as e:
            raise self.error(f"{source}: cannot read {what}: {e.strerror or e}", field=None) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.error(
                f"{source}: not a UTF-8 text file ({e.reason} at byte {e.start})", field=None
            ) from None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            msg = str(e).splitlines()[0] if str(e) else "invalid TOML"
            m = _TOML_POS.search(msg)
            end = _TOML_END.search(msg)
            if m:
                msg = f"{source}:{m.group(1)}:{m.group(2)}: TOML syntax error: {msg[: m.start()]}"
            elif end:
                last = len(text.rstrip("\n").split("\n"))
                msg = f"{source}:{last}: TOML syntax error: {msg[: end.start()]} (at end of file)"
            else:
                msg = f"{source}: TOML syntax error: {msg}"
            raise self.error(msg, field=None) from None

    # -- structure

    def table(self, value: Any, field: str, header: str) -> Mapping:
        if not isinstance(value, Mapping):
            raise self.bad(field, value, f"must be a table ({header}), got {_kind(value)}")
        return value

    def keys(
        self,
        table: Mapping,
        field: str | None,
        allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        """Unknown keys (with the closest allowed one: `(did you mean 'x'?)`), then missing required keys."""
        where = field if field is not None else "top level"
        aliases = self.aliases if aliases is None else aliases
        for key in table:
            if not isinstance(key, str) or key not in allowed:
                key_s = str(key)
                hint = _suggest(key_s, allowed, aliases)
                hint = f" (did you mean {hint!r}?)" if hint else ""
                raise self.fail(where, f"unknown key {key_s!r}{hint}; allowed keys: {', '.join(allowed)}")
        for key in required:
            if key not in table:
                desc = f" ({self.descriptions[key]})" if key in self.descriptions else ""
                raise self.fail(where, f"missing required key {key!r}{desc}")

    def section(
        self,
        data: Mapping,
        key: str,
        allowed: tuple[str, ...],
        *,
        required: bool = False,
        aliases: Mapping[str, str] | None = None,
    ) -> Mapping:
        """The top-level table `[key]` of `data`, its keys checked; `{}` when it is optional and absent."""
        if key not in data:
            if required:
                raise self.fail(None, f"missing required table [{key}]")
            return {}
        t = self.table(data[key], key, f"[{key}]")
        self.keys(t, key, allowed, (), aliases)
        return t

    # -- numbers and arrays

    def number(self, value: Any, field: str) -> float:
        value = _unwrap(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise self.bad(field, value, f"must be a number, got {_kind(value)}")
        try:
            x = float(value)
        except OverflowError:
            raise self.bad(field, value, "too large for a float64") from None
        if not math.isfinite(x):
            raise self.bad(field, value, "must be a finite number (nan and inf are not allowed)")
        return x

    def array(self, value: Any, field: str, shape: tuple[int, ...]) -> np.ndarray:
        value = _unwrap(value)
        given = _shape_of(value)
        if given != shape:
            got = "a ragged nested array" if given is None else f"shape {_fmt_shape(given)}"
            if given == ():
                got = _kind(value)
            raise self.bad(
                field, value, f"expected shape {_fmt_shape(shape)} ({_shape_words(shape)}), got {got}"
            )
        out = np.empty(shape)
        for idx in np.ndindex(*shape):
            elem = value
            for i in idx:
                elem = elem[i]
            # components numbered 1, 2, 3 as in parameter names (`hub.omega_BN_BInit[3]`: about b3)
            out[idx] = self.number(elem, field + "".join(f"[{i + 1}]" for i in idx))
        return out

    def positive(self, value: Any, field: str, unit: str) -> float:
        x = self.number(value, field)
        if not x > 0:
            raise self.bad(field, value, f"must be > 0 ({unit})")
        return x

    def nonnegative(self, value: Any, field: str, unit: str) -> float:
        x = self.number(value, field)
        if not x >= 0:
            raise self.bad(field, value, f"must be >= 0 ({unit})")
        return x

    # -- typed scalars

    def finite_positive(self, value: Any, field: str) -> float:
        """A finite number > 0 (an integer is accepted and returned as a float)."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise self.bad(field, value, f"must be a number, got {_kind(value)}")
        try:
            x = float(value)
        except OverflowError:
            x = math.inf
        if not (math.isfinite(x) and x > 0):
            raise self.bad(field, value, "must be a finite number > 0")
        return x

    def integer(self, value: Any, field: str, minimum: int = 1) -> int:
        """An integer >= `minimum` (not a boolean, not a float); "> 0" for `minimum = 1`."""
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if not ok or int(value) < minimum:
            rule = "> 0" if minimum == 1 else f">= {minimum}"
            raise self.bad(field, value, f"must be an integer {rule}")
        return int(value)

    def boolean(self, value: Any, field: str) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise self.bad(field, value, "must be true or false")
        return bool(value)

    def string(self, value: Any, field: str, what: str = "a non-empty string") -> str:
        """A non-empty string; the error says it `must be <what>`."""
        if not isinstance(value, str) or not value:
            raise self.bad(field, value, f"must be {what}")
        return value

    def choice(self, value: Any, field: str, allowed: Iterable[Any]) -> Any:
        allowed = tuple(allowed)
        if not isinstance(value, type(allowed[0])) or isinstance(value, bool) or value not in allowed:
            raise self.bad(field, value, f"allowed values are {', '.join(_fmt(a) for a in allowed)}")
        return value

    def path(self, value: Any, field: str, what: str = "a file name") -> str:
        """A path written relative to the file's folder (or absolute), resolved: `normpath(folder/value)`."""
        self.string(value, field, f"{what} (a string, relative to this file)")
        return os.path.normpath(os.path.join(self.folder, value))

    def output_dir(self, value: Any, field: str, files: Iterable[str] = ()) -> str:
        """An output folder (relative to the file's folder), resolved and checked now, before any compute:
        `output_dir_problem` (not a folder, not writable, output `files` that are folders, parent missing or
        not writable). The folder itself is created by `write_output_files`."""
        path = self.path(value, field, "a folder name")
        problem = output_dir_problem(path, files)
        if problem:
            raise self.bad(field, value, problem)
        return path

    def output_folder(
        self, table: Mapping, default: str, files: Iterable[str] = (), override: str | None = None
    ) -> str:
        """The output folder of a file with an `[output]` table: `table["dir"]` (default `default`) checked
        by `output_dir` as `output.dir`; or, when the caller gives an `override` (e.g. the CLI's `--out-dir`),
        the override checked instead (as `out_dir`), the file's value only checked to be a string."""
        value = table.get("dir", default)
        if override is None:
            return self.output_dir(value, "output.dir", files)
        self.string(value, "output.dir", "a folder name (a string, relative to this file)")
        return self.output_dir(os.path.abspath(override), "out_dir", files)


def read_toml(
    path: str | os.PathLike, what: str = "file", error: Callable[..., Exception] | None = None
) -> dict:
    """`_Checker(path, error=error).read_toml(what)`: a TOML file, or a one-line error."""
    return _Checker(os.fspath(path), error=error).read_toml(what)


# ------------------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------------------


_COMMIT = threading.Lock()  # held while outputs are renamed into place, and by `abandon_writes`
_PENDING: set[str] = set()  # the temporary files, and the output folders created, of the writes in progress


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode_for(dest: str) -> int:
    """The mode a new version of `dest` gets: that of the file it replaces, else `0o666 & ~umask`."""
    try:
        return os.stat(dest).st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def _unlink(path: str) -> None:
    _PENDING.discard(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def abandon_writes() -> None:
    """Remove the temporary files and new output folders of the writes in progress and keep the lock of their
    final renames (none completes): the CLI's Ctrl-C handler, which then ends the process, leaves no output."""
    _COMMIT.acquire()
    for path in sorted(_PENDING, reverse=True):  # a folder's temporary files before the folder
        with contextlib.suppress(OSError):
            (os.rmdir if os.path.isdir(path) else os.unlink)(path)


def _cannot_write(dest: str, e: OSError) -> ScenarioError:  # disk full, quota, I/O error: one line
    return ScenarioError(f"{dest}: cannot write: {e.strerror or e}; nothing was written", source=dest)


def _fsync_folder(folder: str) -> None:
    """Make the renames durable (best effort: not every platform can open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_temp(dest: str, write: Callable[[IO[bytes]], Any]) -> str:
    """Write `dest`'s new content through `write(fileobj)` into a temporary file beside it, fsync it and give
    it its final mode. **Returns:** the temporary path (the caller renames it); removed on any exception, an
    `OSError` (disk full, ...) raised as a one-line `ScenarioError` (`_cannot_write`)."""
    folder, name = os.path.split(dest)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".jaxhinge-{name}.", suffix=".tmp", dir=folder)
        _PENDING.add(tmp)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(dest))
    except BaseException as e:
        if tmp is not None:
            _unlink(tmp)
        if isinstance(e, OSError):
            raise _cannot_write(dest, e) from None
        raise
    return tmp


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Write `path` through `write(fileobj)` (a binary file object): into a temporary file in the same folder,
    fsynced, with the mode of the file it replaces (or `0o666 & ~umask`, never mkstemp's 0600), then
    `os.replace`d onto `path`. On any exception the temporary file is removed, `path` is untouched, and the
    exception propagates (an `OSError` as a one-line `ScenarioError`: `path: cannot write: No space left on
    device; nothing was written`)."""
    dest = os.path.abspath(os.fspath(path))
    tmp = _write_temp(dest, write)
    try:
        with _COMMIT:
            os.replace(tmp, dest)
    except OSError as e:
        raise _cannot_write(dest, e) from None
    finally:
        _unlink(tmp)
    _fsync_folder(os.path.dirname(dest))


def write_output_files(
    folder: str | os.PathLike, writers: Mapping[str, Callable[[IO[bytes]], Any]]
) -> list[str]:
    """Write a set of files, all or nothing: `writers[name](fileobj)` writes each (`name` a file name in
    `folder`, or a path relative to it) into a temporary file beside it, as `atomic_write` does; only when every
    one succeeded are they renamed to their names. On any exception (an `OSError` as `atomic_write` raises it)
    no temporary file is left, no output file is replaced, and `folder` is removed again if this call created it.

    **Returns:** the written paths, in the order of `writers`.

    **Raises:** `ScenarioError` (one line) when the folder cannot be created; the writers' own exceptions.
    """
    folder = os.path.abspath(os.fspath(folder))
    created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise ScenarioError(
            f"{folder}: cannot create the output folder: {e.strerror or e}", source=folder
        ) from None
    if created:
        _PENDING.add(folder)
    tmps: dict[str, str] = {}
    try:
        for name, write in writers.items():
            tmps[name] = _write_temp(os.path.join(folder, name), write)
        with _COMMIT:
            written = [os.path.join(folder, name) for name in tmps]
            for tmp, dest in zip(tmps.values(), written):
                os.replace(tmp, dest)
        created = False
        for d in {os.path.dirname(w) for w in written}:
            _fsync_folder(d)
        return written
    finally:
        for tmp in tmps.values():
            _unlink(tmp)
        _PENDING.discard(folder)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _toml_float(x: float) -> str:
    """Exact (round-trips bit for bit): `repr`, or for |x| >= 1e6 the shortest exact scientific form when it
    is shorter (`3.986004415e14`, not `398600441500000.0`)."""
    text = _fmt_float(x)
    if not math.isfinite(x) or abs(x) < 1e6:
        return text
    mantissa, exponent = np.format_float_scientific(x, unique=True, trim="-").split("e")
    sci = f"{mantissa}e{int(exponent)}"
    return sci if len(sci) < len(text) and float(sci) == x else text


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _toml_float(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _dumps(data: Mapping[str, Any], header: str = "") -> str:
    """Tables, arrays of tables, numbers, strings and nested lists (inline: a 3x3 matrix stays on one line)."""
    lines: list[str] = [header] if header else []

    def table(t: Mapping[str, Any], path: list[str], array: bool):
        if path:
            if lines:
                lines.append("")
            name = ".".join(_fmt_key(p) for p in path)
            lines.append(f"[[{name}]]" if array else f"[{name}]")
        subtables = []
        for k, v in t.items():
            if isinstance(v, Mapping) or _is_table_array(v):
                subtables.append((k, v))
            else:
                lines.append(f"{_fmt_key(k)} = {_toml_value(v)}")
        for k, v in subtables:
            if isinstance(v, Mapping):
                table(v, [*path, k], False)
            else:
                for item in v:
                    table(item, [*path, k], True)

    table(data, [], False)
    return "\n".join(lines) + "\n"


def toml_text(data: Mapping[str, Any], header: str = "") -> str:
    """`data` as TOML text after an optional comment `header` line: the one TOML writer (scenario files,
    fitted scenarios). Floats are exact (`repr`, or the shortest exact scientific form for |x| >= 1e6), arrays
    inline. The text is parsed back and compared with `data` before it is returned."""
    text = _dumps(data, header)
    if tomllib.loads(text) != data:  # pragma: no cover - a writer bug, not a user error
        raise AssertionError("internal error: the TOML writer does not round-trip this data")
    return text


def json_number(x: Any) -> float | None:
    """`float(x)`, or `None` for NaN and inf (JSON has no such numbers)."""
    x = float(x)
    return x if math.isfinite(x) else None


def to_json(obj: Any) -> Any:
    """`obj` as plain JSON data: floats (Python or NumPy) through `json_number` (NaN, inf -> `None`), NumPy
    integers and booleans as Python ones, arrays and tuples as lists, mappings as dicts (keys as strings)."""
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return json_number(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def write_json(data: Any, file: str | os.PathLike | IO[bytes], *, indent: int | None = 2) -> None:
    """Write `to_json(data)` as JSON (no NaN: `null`), with a final newline, into a binary file object or,
    for a path, atomically (`atomic_write`)."""
    payload = (json.dumps(to_json(data), indent=indent, allow_nan=False) + "\n").encode("utf-8")
    if isinstance(file, (str, os.PathLike)):
        atomic_write(file, lambda f: f.write(payload))
    else:
        file.write(payload)


def least_squares_json(result: Any) -> dict[str, Any]:
    """The `result.json` blocks every fit shares, from a `LeastSquaresResult`: `correlation` (`names`, `matrix`)
    and `identifiability` (`identifiable`, `well_posed`, `condition_number`, `singular_value_ratios`,
    `undetermined`, `poorly_determined`), plain JSON data (NaN and inf as `None`)."""
    return {
        "correlation": {"names": list(result.names), "matrix": to_json(np.asarray(result.correlation))},
        "identifiability": {
            "identifiable": bool(result.identifiable),
            "well_posed": bool(result.well_posed),
            "condition_number": json_number(result.condition_number),
            "singular_value_ratios": to_json(np.asarray(result.singular_values)),
            "undetermined": to_json(result.undetermined),
            "poorly_determined": to_json(result.poorly_determined),
        },
    }
