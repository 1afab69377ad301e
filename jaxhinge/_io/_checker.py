"""The checker every input file (scenario, FIT.toml, SWEEP.toml, SENS.toml) is read and checked through.

`Checker(source).read_toml(what)` reads a TOML file with one-line errors (`file:line:col: TOML syntax error:
...`); its methods check tables and keys (unknown keys with a "did you mean" hint), numbers, arrays and typed
scalars (positive integers, finite positive floats, booleans, strings, choices, paths relative to the file) and
output folders, and raise one-line errors `file: field = value: what is allowed` of the file's error class
(`jaxhinge._errors`).
"""

import math
import os
import pathlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .._errors import JaxhingeError, ScenarioError
from .._format import fmt_shape, fmt_value, kind, shape_of, shape_words, suggest, unwrap
from .._paths import output_dir_problem

__all__ = ["Checker", "in_file_terms", "read_toml"]


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_END = re.compile(r"\s*\(at end of document\)\s*$")


class Checker:
    """Checks the values of one input file (or dict) and builds one-line errors: `source: field = value: rule`
    (`bad`) or `source: field: message` (`fail`).

    **Arguments:**

    - `source`: the file name (or `"<dict>"`); relative paths in the file are relative to its folder.
    - `error`: the file's error class (a `jaxhinge._errors.JaxhingeError`); default `ScenarioError`. The fit
      files pass `FitError`, the sweep files `SweepError`, ...
    - `descriptions`: `{key: what it means}`, added to "missing required key" messages.
    - `aliases`: `{lower-case misnaming: key}` for the "did you mean" hints of `keys` (default of every call).
    """

    def __init__(
        self,
        source: str,
        *,
        error: type[JaxhingeError] = ScenarioError,
        descriptions: Mapping[str, str] | None = None,
        aliases: Mapping[str, str] | None = None,
    ):
        self.source = source
        self.error = error
        self.descriptions = dict(descriptions or {})
        self.aliases = dict(aliases or {})

    @property
    def folder(self) -> str:
        """The folder relative paths in the file are relative to."""
        return os.path.dirname(os.path.abspath(self.source))

    def fail(self, field: str | None, message: str) -> Exception:
        """`source: field: message`."""
        return self.error.fail(self.source, field, message)

    def bad(self, field: str, value: Any, rule: str) -> Exception:
        """`source: field = value: rule`."""
        return self.error.bad(self.source, field, value, rule)

    # -- the file

    def read_toml(self, what: str = "file") -> dict[str, Any]:
        """The parsed TOML file `source`. Errors: `source: cannot read <what>: reason`, `source: not a UTF-8
        text file (...)`, `source:line:col: TOML syntax error: ...` (`source:line: ... (at end of file)`)."""
        source = self.source
        try:
            raw = pathlib.Path(source).read_bytes()
        except OSError as e:
            raise self.error(f"{source}: cannot read {what}: {e.strerror or e}", source=source) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.error(
                f"{source}: not a UTF-8 text file ({e.reason} at byte {e.start})", source=source
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
            raise self.error(msg, source=source) from None

    # -- structure

    def table(self, value: Any, field: str, header: str) -> Mapping:
        if not isinstance(value, Mapping):
            raise self.bad(field, value, f"must be a table ({header}), got {kind(value)}")
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
                hint = suggest(key_s, allowed, aliases)
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
        value = unwrap(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise self.bad(field, value, f"must be a number, got {kind(value)}")
        try:
            x = float(value)
        except OverflowError:
            raise self.bad(field, value, "too large for a float64") from None
        if not math.isfinite(x):
            raise self.bad(field, value, "must be a finite number (nan and inf are not allowed)")
        return x

    def array(self, value: Any, field: str, shape: tuple[int, ...]) -> np.ndarray:
        value = unwrap(value)
        given = shape_of(value)
        if given != shape:
            got = "a ragged nested array" if given is None else f"shape {fmt_shape(given)}"
            if given == ():
                got = kind(value)
            raise self.bad(
                field, value, f"expected shape {fmt_shape(shape)} ({shape_words(shape)}), got {got}"
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
            raise self.bad(field, value, f"must be a number, got {kind(value)}")
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
            raise self.bad(field, value, f"allowed values are {', '.join(fmt_value(a) for a in allowed)}")
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


def read_toml(path: str | os.PathLike, what: str = "file", error: type[JaxhingeError] = ScenarioError) -> dict:
    """`Checker(path, error=error).read_toml(what)`: a TOML file, or a one-line error."""
    return Checker(os.fspath(path), error=error).read_toml(what)


def in_file_terms(error: JaxhingeError, source: str, fields: Mapping[str, str]) -> JaxhingeError:
    """An error an analysis raised in its API's terms (argument names: `free[2]`, `targets_hz`), restated in the
    file's (`fit.free[2]`, `modes.targets_hz`) and prefixed with the file name: the file layer calls the
    analyses with Python values and translates their errors back to the fields the user wrote. `fields` maps
    argument names to file fields; an argument name is replaced where it names a field (followed by `[`, ` =`,
    `:` or ` has`, or by `.key` and then ` =` or `:`: a key of a table argument, `shapes.hub = 9`; or after "raise
    " or "give "), never in prose. Same class, `field` translated too."""
    names = "|".join(sorted(map(re.escape, fields), key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.\[\"'])({names})(?=\[| =| has|:|$|(?:\.\w+)+(?: =|:))"
                         rf"|(?:(?<=raise )|(?<=give ))({names})\b")

    def restate(text: str) -> str:
        return pattern.sub(lambda m: fields[m.group(1) or m.group(2)], text)

    message = restate(str(error))
    field = restate(error.field) if error.field else error.field
    if not message.startswith(source):
        message = f"{source}: {message}"
    out = type(error)(message, source=source, field=field, value=error.value, rule=error.rule) \
        if type(error).__init__ is JaxhingeError.__init__ else error
    return out
