"""SWEEP files (`jaxhinge sweep SWEEP.toml`): a Monte Carlo or grid sweep of a scenario, read and checked. The
campaign (`_jobs._campaign`) runs it into the store `campaign.zarr` (`_campaign_store`) and writes its report
files (`summary.json`, `envelopes.png`, `histograms.png`; all or nothing).

The schema: docs/sweeps-and-sensitivities.md. Errors are `SweepError`s naming the file, the field, the value and
the rule; the dispersions are checked by `jaxhinge._analysis._studies._batch.check_dispersions`, every member's model by
the physical rules (`simulate_batch`), before any compute.
"""

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._analysis._studies._batch import check_dispersions
from .._analysis._studies._sensitivity import HISTORY_OUTPUTS as HISTORY_OUTPUTS_ALL
from .._analysis._studies._sensitivity import needs_simulation, parse_outputs
from .._errors import SensitivityError, SweepError
from .._model._params import resolve
from .._model._scenario import Scenario
from .._simulation._memory import bytes_per_member
from ._checker import Checker as _Checker
from ._checker import in_file_terms
from ._scenario_file import load_scenario, scenario_files

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
class Sweep:
    """A validated SWEEP file: the nominal scenario, dispersions, member count, seed, chunk size, output dir."""

    source: str
    scenario_path: str
    scenario: Scenario
    dispersions: list
    members: int
    seed: int
    chunk_size: int
    out_dir: str
    retain: Retain | None = None  # None: every history (a small campaign), as given by `[retain]` otherwise
    metrics: tuple = ()  # the metrics of every member (`parse_outputs`' specs): `[metrics] names`, and the summary's
    files: tuple[str, ...] = ()  # every file read: this SWEEP file, its scenario and the scenario's (`scenario_files`)

    @property
    def simulates(self) -> bool:
        """Whether the campaign simulates its members: a metric or a kept history needs it (not modes alone)."""
        return _simulates(self.metrics, self.retain)


def load_sweep(path: str | os.PathLike, *, out_dir: str | None = None) -> Sweep:
    """Read and validate a SWEEP TOML file (schema: docs/sweeps-and-sensitivities.md; `jaxhinge sweep --help`).
    Relative paths (`scenario`, `output.dir`) are relative to the SWEEP file. Everything, the output folder
    included, is checked before any compute.

    **Arguments:** `path` (the file), `out_dir` (an output folder that replaces `[output] dir`, checked
    instead of it).

    **Raises:** `SweepError` (`ScenarioError` for its scenario) with a one-line message `SWEEP.toml: field = value: what is allowed`.
    """
    source = os.fspath(path)
    ck = _Checker(source, error=SweepError, descriptions=_DESCRIPTION, aliases=_ALIASES)
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
    scenario = load_scenario(scen_path)
    chunk_size = chunk_size or default_chunk_size(scenario)
    check_dispersions(scenario, disp, members, source=source, batch=chunk_size)
    metrics = _metrics(ck, data.get("metrics"), scenario, retain)
    for j, (name, _, _) in enumerate(retain.worst if retain is not None else ()):
        ck.choice(name, f"retain.worst[{j}].metric", [o.name for o in metrics])
    files = (os.path.abspath(source), *scenario_files(scenario, scen_path))
    return Sweep(source, scen_path, scenario, disp, members, seed, chunk_size, out_dir, retain, metrics, files)


CPU_CHUNK = 256  # members per compiled call on a CPU (larger batches run no faster per member there)
MAX_CHUNK = 1 << 18  # at most, on an accelerator


def default_chunk_size(scenario: Scenario) -> int:
    """The chunk size when the SWEEP file gives none: `CPU_CHUNK` on a CPU; on a GPU (JAX's first device), the
    power of two of members whose outputs and working memory (`bytes_per_member`) fill a quarter of its free
    memory, between `CPU_CHUNK` and `MAX_CHUNK`."""
    import jax

    device = jax.devices()[0]
    if device.platform == "cpu":
        return CPU_CHUNK
    stats = device.memory_stats() or {}
    free = float(stats.get("bytes_limit", 0)) - float(stats.get("bytes_in_use", 0))
    per = bytes_per_member(scenario.simulation, scenario.spacecraft.panels.count)
    fits = int(0.25 * free / per) if free > 0 else CPU_CHUNK
    return int(min(MAX_CHUNK, max(CPU_CHUNK, 1 << max(fits, 1).bit_length() - 1)))


def _simulates(metrics, retain: Retain | None) -> bool:
    return needs_simulation(metrics) or retain is None or bool(retain.outputs)


def _metrics(ck: _Checker, table: Any, scenario: Scenario, retain: Retain | None) -> tuple:
    """`[metrics] names = [...]`: SENS.toml's output names and option tables (`parse_outputs`), no histories; the
    summary's metrics (`SUMMARY_METRICS`) added when the campaign simulates."""
    names: list = []
    if table is not None:
        table = ck.table(table, "metrics", "[metrics]")
        ck.keys(table, "metrics", _METRICS_KEYS, ("names",))
        names = table["names"]
        if not isinstance(names, list) or not names:
            raise ck.bad("metrics.names", names, "must be a non-empty list of output names or tables "
                         "(as SENS.toml's outputs, docs/sweeps-and-sensitivities.md)")
    try:
        outputs = parse_outputs(scenario, names, ck.source) if names else ()
    except SensitivityError as e:
        raise SweepError(str(in_file_terms(e, ck.source, {"outputs": "metrics.names"})), source=ck.source,
                         field="metrics.names") from None
    for j, o in enumerate(outputs):
        if o.name in HISTORY_OUTPUTS_ALL:
            raise ck.bad(f"metrics.names[{j}]", o.name, "is a time history, not a metric: keep histories with "
                         "[retain] outputs")
    if _simulates(outputs, retain):
        have = {o.name for o in outputs}
        outputs = outputs + parse_outputs(scenario, [n for n in SUMMARY_METRICS if n not in have], ck.source)
    return outputs


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
