"""SWEEP files (`jaxhinge sweep SWEEP.toml`): a Monte Carlo or grid sweep of a scenario, read and checked as a file
(`read_sweep`: its keys, numbers, `[retain]`, `[metrics]` table and output folder) into plain values (`SweepFile`).
The campaign job (`_jobs._sweep.load_sweep`) loads the scenario, checks the dispersions and metrics against it
and runs it into the store `campaign.zarr` (`_campaign_store`).

The schema: docs/sweeps-and-sensitivities.md. Errors are `SweepError`s naming the file, the field, the value and
the rule, before any compute (`sweep_checker` names them for the checks the job makes).
"""

import dataclasses
import os
from typing import Any

import numpy as np

from .._errors import SweepError
from ._checker import Checker as _Checker

__all__ = ["HISTORY_OUTPUTS", "OUTPUT_FILES", "SAMPLE", "SUMMARY_METRICS", "Retain", "SweepFile", "read_sweep",
           "sweep_checker"]

_SWEEP_KEYS = ("scenario", "members", "seed", "chunk_size", "dispersions", "metrics", "retain", "output")
_METRICS_KEYS = ("names",)  # [metrics] (docs/campaigns.md)
SUMMARY_METRICS = ("peak_hub_rate", "final_theta", "peak_abs_theta")  # kept for every simulated campaign
_OUTPUT_KEYS = ("dir",)
_RETAIN_KEYS = ("every", "members", "outputs", "worst")  # [retain] (docs/campaigns.md)
_WORST_KEYS = ("metric", "count", "largest")
HISTORY_OUTPUTS = ("theta", "thetaDot", "omega_BN_B", "sigma_BN")  # the histories a campaign can keep
SAMPLE = 4096  # members in the default statistics sample of a campaign that does not keep every history
_ALIASES = {
    "n": "members",
    "samples": "members",
    "runs": "members",
    "chunk": "chunk_size",
    "dispersion": "dispersions",
    "out": "dir",
}
_DESCRIPTION = {
    "scenario": "the nominal scenario TOML file, relative to this file",
    "members": "number of dispersed runs, an integer > 0",
    "chunk_size": "members per compiled call, an integer > 0 (default 256 on a CPU, from the free memory on a GPU)",
    "dispersions": "one or more [[dispersions]] tables",
    "retain.every": "keep the history of every N-th member (0, N, 2N, ...), an integer > 0",
    "retain.members": "keep the histories of these members (indices from 0), a list of integers",
    "retain.outputs": f"the histories kept, a list of {', '.join(HISTORY_OUTPUTS)} (empty: none)",
    "retain.worst": "the histories of the members with the worst values of a metric, a list of tables "
                    "{metric = name, count = N, largest = true}",
    "metrics.names": "the metrics of every member, a list of SENS.toml output names or tables",
}


@dataclasses.dataclass(frozen=True)
class Retain:
    """Which histories a campaign keeps (`[retain]`): every `every`-th member's (also the sample of the percentile
    bands), the listed `members`', of the `outputs` named. `every = 1`: every member's."""

    every: int
    members: tuple[int, ...] = ()
    outputs: tuple[str, ...] = HISTORY_OUTPUTS
    worst: tuple[tuple[str, int, bool], ...] = ()  # (metric, count, largest: the largest values are the worst)

    def kept(self, members: int) -> np.ndarray:
        """`(members,)` bool: whose histories are kept."""
        keep = np.zeros(members, dtype=bool)
        keep[:: self.every] = True
        keep[list(self.members)] = True
        return keep


OUTPUT_FILES = ("summary.json", "envelopes.png", "histograms.png")


@dataclasses.dataclass(frozen=True)
class SweepFile:
    """A SWEEP file as read (`read_sweep`): its `source`, the `scenario_path` (absolute or relative to the working
    directory), `members`, `seed`, `chunk_size` (None: not given), `dispersions` (the `[[dispersions]]` tables as
    written), `metrics` (`[metrics] names` as written; empty: none), `retain` (None: no `[retain]`) and the output
    folder `out_dir` (checked)."""

    source: str
    scenario_path: str
    members: int
    seed: int
    chunk_size: int | None
    dispersions: list
    metrics: list
    retain: Retain | None
    out_dir: str


def sweep_checker(source: str) -> _Checker:
    """The checker of a SWEEP file: its errors are `SweepError`s in the file's terms (the job's checks use it)."""
    return _Checker(source, error=SweepError, descriptions=_DESCRIPTION, aliases=_ALIASES)


def read_sweep(path: str | os.PathLike, *, out_dir: str | None = None) -> SweepFile:
    """Read a SWEEP TOML file and check it as a file (schema: docs/sweeps-and-sensitivities.md): its keys, the
    numbers, `[retain]`, the `[metrics]` table and the output folder. Relative paths (`scenario`, `output.dir`) are
    relative to the SWEEP file. `out_dir`: an output folder that replaces `[output] dir`, checked instead of it.

    **Raises:** `SweepError` with a one-line message `SWEEP.toml: field = value: what is allowed`.
    """
    source = os.fspath(path)
    ck = sweep_checker(source)
    data = ck.read_toml("sweep file")
    ck.keys(data, None, _SWEEP_KEYS, ("scenario", "members", "dispersions"))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")
    members = ck.integer(data["members"], "members")
    seed = ck.integer(data.get("seed", 0), "seed", 0)
    chunk_size = ck.integer(data["chunk_size"], "chunk_size") if "chunk_size" in data else None
    out = ck.section(data, "output", _OUTPUT_KEYS)
    default_dir = os.path.splitext(os.path.basename(source))[0] + "_out"
    out_dir = ck.output_folder(out, default_dir, OUTPUT_FILES, out_dir)
    disp = data["dispersions"]
    if not isinstance(disp, list) or not disp:
        raise ck.bad("dispersions", disp, "must be one or more [[dispersions]] tables")
    retain = _retain(ck, data["retain"], members) if "retain" in data else None
    metrics = _metric_names(ck, data.get("metrics"))
    return SweepFile(source, scen_path, members, seed, chunk_size, disp, metrics, retain, out_dir)


def _metric_names(ck: _Checker, table: Any) -> list:
    """`[metrics] names = [...]` as written (SENS.toml's output names and option tables: the job parses them);
    empty without a `[metrics]` table."""
    if table is None:
        return []
    table = ck.table(table, "metrics", "[metrics]")
    ck.keys(table, "metrics", _METRICS_KEYS, ("names",))
    names = table["names"]
    if not isinstance(names, list) or not names:
        raise ck.bad("metrics.names", names, "must be a non-empty list of output names or tables "
                     "(as SENS.toml's outputs, docs/sweeps-and-sensitivities.md)")
    return names




def _retain(ck: _Checker, table: Any, members: int) -> Retain:
    """`[retain]`: checked keys and values; `every` defaults to a sample of about `SAMPLE` members."""
    table = ck.table(table, "retain", "[retain]")
    ck.keys(table, "retain", _RETAIN_KEYS, ())
    every = ck.integer(table["every"], "retain.every") if "every" in table else max(1, -(-members // SAMPLE))
    listed = table.get("members", [])
    if not isinstance(listed, list):
        raise ck.bad("retain.members", listed, "must be a list of member indices (integers from 0)")
    picked = []
    for j, m in enumerate(listed):
        i = ck.integer(m, f"retain.members[{j}]", 0)
        if i >= members:
            raise ck.bad(f"retain.members[{j}]", m, f"must be < members = {members} (indices count from 0)")
        picked.append(i)
    outputs = table.get("outputs", list(HISTORY_OUTPUTS))
    if not isinstance(outputs, list):
        raise ck.bad("retain.outputs", outputs, f"must be a list of {', '.join(HISTORY_OUTPUTS)} (empty: none)")
    names = tuple(ck.choice(o, f"retain.outputs[{j}]", HISTORY_OUTPUTS) for j, o in enumerate(outputs))
    worst = table.get("worst", [])
    if not isinstance(worst, list):
        raise ck.bad("retain.worst", worst, "must be a list of tables {metric = name, count = N}")
    specs = []
    for j, w in enumerate(worst):
        where = f"retain.worst[{j}]"
        w = ck.table(w, where, "{metric = name, count = N}")
        ck.keys(w, where, _WORST_KEYS, ("metric", "count"))
        specs.append((ck.string(w["metric"], f"{where}.metric", "a metric name ([metrics] names)"),
                      ck.integer(w["count"], f"{where}.count"), ck.boolean(w.get("largest", True), f"{where}.largest")))
    if specs and not names:
        raise ck.bad("retain.worst", worst, "keeps histories, but retain.outputs = [] keeps none")
    return Retain(every, tuple(sorted(set(picked))), tuple(dict.fromkeys(names)), tuple(specs))
