"""A SWEEP file made ready to run (`load_sweep`): the file as read (`_io._sweep_file.read_sweep`), its scenario
loaded, the default chunk size, the dispersions checked against the scenario (`check_dispersions`) and the
metrics parsed as SENS.toml outputs (`parse_outputs`), every error in the file's terms, before any compute. The
campaign (`_campaign`) runs it."""

import dataclasses
import os

from .._analysis._studies._batch import check_dispersions
from .._analysis._studies._sensitivity import needs_simulation, parse_outputs
from .._errors import SensitivityError, SweepError
from .._io._checker import Checker as _Checker
from .._io._checker import in_file_terms
from .._io._scenario_file import load_scenario, scenario_files
from .._io._sweep_file import SUMMARY_METRICS, Retain, read_sweep, sweep_checker
from .._model._scenario import Scenario
from .._simulation._memory import bytes_per_member

__all__ = ["CPU_CHUNK", "MAX_CHUNK", "Sweep", "default_chunk_size", "load_sweep"]


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
    f = read_sweep(path, out_dir=out_dir)
    ck = sweep_checker(f.source)
    scenario = load_scenario(f.scenario_path)
    chunk_size = f.chunk_size or default_chunk_size(scenario)
    check_dispersions(scenario, f.dispersions, f.members, source=f.source, batch=chunk_size)
    metrics = _metrics(ck, f.metrics, scenario, f.retain)
    for j, (name, _, _) in enumerate(f.retain.worst if f.retain is not None else ()):
        ck.choice(name, f"retain.worst[{j}].metric", [o.name for o in metrics])
    files = (os.path.abspath(f.source), *scenario_files(scenario, f.scenario_path))
    return Sweep(f.source, f.scenario_path, scenario, f.dispersions, f.members, f.seed, chunk_size, f.out_dir,
                 f.retain, metrics, files)


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


def _metrics(ck: _Checker, names: list, scenario: Scenario, retain: Retain | None) -> tuple:
    """`[metrics] names = [...]` (as read): SENS.toml's output names and option tables (`parse_outputs`), no
    histories; the summary's metrics (`SUMMARY_METRICS`) added when the campaign simulates."""
    try:
        outputs = parse_outputs(scenario, names, ck.source) if names else ()
    except SensitivityError as e:
        raise SweepError(str(in_file_terms(e, ck.source, {"outputs": "metrics.names"})), source=ck.source,
                         field="metrics.names") from None
    for j, o in enumerate(outputs):
        if o.kind == "history":
            raise ck.bad(f"metrics.names[{j}]", o.name, "is a time history, not a metric: keep histories with "
                         "[retain] outputs")
    if _simulates(outputs, retain):
        have = {o.name for o in outputs}
        outputs = outputs + parse_outputs(scenario, [n for n in SUMMARY_METRICS if n not in have], ck.source)
    return outputs
