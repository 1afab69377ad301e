"""Values in messages and JSON: every message stays on one line and shows a value as it would be written in a
file (TOML spelling: `0.2769`, `[1.0, 0.0, 0.0]`, `true`), JSON has no NaN (`null`)."""

import datetime
import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["did_you_mean", "fmt_float", "fmt_key", "fmt_shape", "fmt_value", "json_number", "kind", "shape_of",
           "shape_words", "suggest", "to_json", "toml_str", "unwrap"]


def toml_str(s: str) -> str:
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


def fmt_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def fmt_value(value: Any, limit: int = 240) -> str:
    """A value as it would be written in TOML (on one line, shortened past `limit` characters)."""

    def rec(v):
        if isinstance(v, (bool, np.bool_)):
            return "true" if v else "false"
        if isinstance(v, (int, np.integer)):
            return str(int(v))
        if isinstance(v, (float, np.floating)):
            return fmt_float(float(v))
        if isinstance(v, str):
            return toml_str(v)
        if isinstance(v, Mapping):
            return "{" + ", ".join(f"{fmt_key(str(k))} = {rec(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(rec(x) for x in v) + "]"
        if isinstance(v, np.ndarray):
            return rec(v.tolist())
        return toml_str(str(v)) if not isinstance(v, (datetime.date, datetime.time)) else v.isoformat()

    s = rec(value)
    return s if len(s) <= limit else s[: limit - 5] + " ...]"


def fmt_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_str(key)


def kind(value: Any) -> str:
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


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def shape_words(shape: tuple[int, ...]) -> str:
    if shape == ():
        return "a number"
    if len(shape) == 1:
        return f"a list of {shape[0]} numbers"
    return f"{shape[0]} rows of {shape[1]} numbers"


def unwrap(value: Any) -> Any:
    """NumPy / JAX arrays (e.g. from `scenario_to_dict` edits in code) as nested lists; tuples as lists."""
    if isinstance(value, np.ndarray) or (
        hasattr(value, "__array__") and not isinstance(value, (list, tuple, str, Mapping))
    ):
        value = np.asarray(value).tolist()
    if isinstance(value, tuple):
        value = list(value)
    return value


def shape_of(value: Any) -> tuple[int, ...] | None:
    value = unwrap(value)
    if not isinstance(value, list):
        return ()
    shapes = {shape_of(v) for v in value}
    if len(shapes) > 1 or None in shapes:
        return None
    inner = shapes.pop() if shapes else ()
    return (len(value), *inner)


def suggest(key: str, allowed: Iterable[str], aliases: Mapping[str, str]) -> str | None:
    """The closest allowed key: same key in another case, a known misnaming, or a difflib match (among the
    allowed keys and the known misnamings)."""
    low = {a.lower(): a for a in allowed}
    low.update({alias: target for alias, target in aliases.items() if alias not in low})
    close = difflib.get_close_matches(key.lower(), list(low), n=1, cutoff=0.6)
    return low[close[0]] if close else None

def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`" (did you mean 'x'?)"` for the closest of `choices` (same case first, then any case), or `""`."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        low = {c.lower(): c for c in choices}
        close = [low[c] for c in difflib.get_close_matches(word.lower(), list(low), n=1, cutoff=0.6)]
    return f" (did you mean {close[0]!r}?)" if close else ""


def json_number(x: Any) -> float | None:
    """`float(x)`, or `None` for NaN and inf (JSON has no such numbers)."""
    x = float(x)
    return x + 0.0 if math.isfinite(x) else None  # + 0.0: -0.0 is written as 0.0


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
