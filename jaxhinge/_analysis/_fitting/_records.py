"""The records of a telemetry fit (`identify`): the free list split into shared, per-record (`"data[k]."`) and
sensor-model names (`"<column>.bias"`, `"<column>.scale"`, `"time_offset"`), their coordinates, and each record's
part (`parse_records`)."""

import dataclasses
import math
import re
from collections.abc import Sequence

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._params import FIELDS
from ..._model._scenario import Scenario
from ..._model._schema import in_table
from ..._model._telemetry import Telemetry
from ._lsq_coords import Coordinate, parse_free

__all__ = ["Sensor", "parse_records", "sensor_coordinate", "sensor_name"]


@dataclasses.dataclass(frozen=True)
class Sensor:
    """A parsed sensor-model name: `kind` (`"bias"`, `"scale"`, `"time_offset"`), `column` (None: the
    record's time offset), `record` (0-based)."""

    kind: str
    column: str | None
    record: int


RECORD = re.compile(r"^\s*data\[\s*(\d+)\s*\]\.(.+)$")


def split_record(entry: str, n_records: int, where: str) -> tuple[int | None, str]:
    """`"data[2].p0.thetaInit"` -> (1, `"p0.thetaInit"`); no prefix -> (None, entry)."""
    m = RECORD.match(entry)
    if not m:
        return None, entry
    k = int(m.group(1))
    if not 1 <= k <= n_records:
        raise FitError(f"{where} = {entry!r}: data[{k}] does not exist (records are data[1]..data[{n_records}], "
                       "numbered from 1)", field=where)
    return k - 1, m.group(2).strip()


def sensors_of(entry: str, rest: str, record: int | None, tels: Sequence[Telemetry], where: str) -> list[Sensor]:
    """The sensor-model parameters an entry names (empty: not a sensor name)."""
    recs = range(len(tels)) if record is None else [record]
    if rest == "time_offset":
        return [Sensor("time_offset", None, k) for k in recs]
    col, _, kind = rest.rpartition(".")
    if kind not in ("bias", "scale") or not col:
        return []
    out = [Sensor(kind, col, k) for k in recs if col in tels[k].columns]
    if not out:
        raise FitError(f"{where} = {entry!r}: {col!r} is not a measured column (columns: "
                       f"{', '.join(tels[recs[0]].columns)}); sensor models are \"<column>.bias\", "
                       "\"<column>.scale\", \"time_offset\"", field=where)
    return out


def sensor_name(sen: Sensor, n_records: int) -> str:
    base = "time_offset" if sen.column is None else f"{sen.column}.{sen.kind}"
    return base if n_records == 1 else f"data[{sen.record + 1}].{base}"


def sensor_coordinate(sen: Sensor, tel: Telemetry, x0: float, n_records: int) -> Coordinate:
    fld = FIELDS[sen.kind]
    if sen.kind == "bias":
        scale, unit = float(tel.sigma[tel.columns.index(sen.column)]), "column unit"
    else:
        scale, unit = fld.scale, fld.param_unit
    return Coordinate(name=sensor_name(sen, n_records), targets=(), log=False, x0=float(x0), scale=scale,
                      field=sen.kind, unit=unit)


def initial_state_names(scenario: Scenario) -> list[str]:
    """The initial state a telemetry fit estimates: the hub rate and every panel's initial conditions."""
    return ["hub.omega_BN_BInit"] + [f"{p}.{f.name}" for p in scenario.spacecraft.panels.labels
                                     for f in in_table("panels") if f.initial]


def prefixed(c: Coordinate, k: int) -> Coordinate:
    return dataclasses.replace(c, name=f"data[{k + 1}].{c.name}")


def parse_records(scens, tels, free, sensors, estimate_initial_state):
    """The coordinates of a fit and each record's part: `(coords, records)` with `records[k] = (index of its
    model coordinates, model coordinates, fixed sensor values, [(global index, Coordinate, Sensor)])`."""
    R = len(tels)
    if isinstance(free, str) or not isinstance(free, (list, tuple)) or not free:
        parse_free(scens[0], free)  # its one-line message
    shared: list[str] = []
    own: list[list[str]] = [[] for _ in range(R)]
    sens: list[tuple[Sensor, str]] = []
    for i, entry in enumerate(free):
        where = f"free[{i}]"
        if not isinstance(entry, str):
            parse_free(scens[0], [entry])
        rec, rest = split_record(entry, R, where)
        found = sensors_of(entry, rest, rec, tels, where)
        if found:
            sens += [(x, where) for x in found]
        elif rec is None:
            shared.append(entry)
        else:
            own[rec].append(rest)
    if estimate_initial_state:
        for k in range(R):
            extra = [n for n in initial_state_names(scens[k]) if n not in shared and n not in own[k]]
            (shared if R == 1 else own[k]).extend(extra)
    fixed: list[dict] = [{} for _ in range(R)]
    for name, value in (sensors or {}).items():
        where = f"sensors[{name!r}]"
        rec, rest = split_record(str(name), R, where)
        found = sensors_of(str(name), rest, rec, tels, where)
        if not found:
            raise FitError(f"{where}: {name!r} is not a sensor-model name (\"<column>.bias\", \"<column>.scale\", "
                           "\"time_offset\", optionally prefixed \"data[k].\")", field="sensors")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise FitError(f"{where} = {_fmt(value)}: must be a finite number", field="sensors")
        for x in found:
            fixed[x.record][(x.kind, x.column)] = float(value)
    coords: list[Coordinate] = list(parse_free(scens[0], shared)) if shared else []
    n_shared = len(coords)
    records = []
    for k in range(R):
        mine = [prefixed(c, k) if R > 1 else c for c in parse_free(scens[k], own[k])] if own[k] else []
        index = list(range(n_shared)) + list(range(len(coords), len(coords) + len(mine)))
        coords += mine
        records.append([index, [coords[j] for j in index], fixed[k], []])
    seen = set()
    for x, where in sens:
        key = (x.kind, x.column, x.record)
        if key in seen:
            raise FitError(f"{where}: {sensor_name(x, R)} is already free (each parameter may appear once)",
                           field=where)
        seen.add(key)
        c = sensor_coordinate(x, tels[x.record], fixed[x.record].get((x.kind, x.column), 0.0), R)
        records[x.record][3].append((len(coords), c, x))
        coords.append(c)
    return tuple(coords), records
