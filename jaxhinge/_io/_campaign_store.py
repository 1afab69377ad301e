"""The campaign store: `<out-dir>/campaign.zarr`, a Zarr v3 group written chunk by chunk (docs/campaigns.md).

Per member, at the root, the member the first axis: `success`, `result`, every dispersed parameter as
`param_<name>`, every metric as `metric_<name>`, `retained` (whose histories are kept) and the kept histories
`theta`, `thetaDot` (member, time, panel), `omega_BN_B`, `sigma_BN` (member, time, component): NaN (never written,
no space on disk) for a member whose history is not kept. Per chunk, `stats_<history>` (chunk, moment, time, ...)
holds the chunk's moments over its successful members (`MOMENTS`), merged in chunk order for the
envelopes (by the campaign job). The percentile bands' quantile sketch (its grid: `_campaign_format`), `sketch_<history>` (band_time, panel or
component, bucket: int32 counts over every successful member of the deviation from `sketch_centre_<history>`,
the nominal run's history, written when the store is created) of the histories in the `bands` attribute, at
every `band_stride`-th sample time (`band_time`), is written once every chunk is merged, then `sketch_done`;
until then the running counts live in the checkpoint `<out-dir>/campaign.sketch.npz` (`write_checkpoint`).
Coordinates `member`, `time` [s], `panel` (the panels' names), `component` (x, y, z), `moment`, `band_time` [s],
`bucket` (each bucket's representative value). Each
array carries its unit (`units`), its description and, where Basilisk has one, the Basilisk message field
(`basilisk`), so `xarray.open_zarr` gives labelled data. The group's attributes hold the SWEEP file's text, the
SHA-256 of every input file, the seed, the member count and the chunk size: a campaign can be re-run exactly.

A chunk counts only when all its arrays are written: `chunk_done[c]` is written last, one Zarr chunk per flag,
and a chunk's members are whole Zarr chunks of every member array (no chunk shares a Zarr chunk with another),
so a chunk is written by one writer with no read-modify-write. A flag that cannot be read (a write torn by a
kill) counts as not done. The store is created complete (every array, no data) under a temporary name and
renamed into place, so a store that exists always has its whole layout.
"""

import contextlib
import dataclasses
import hashlib
import os
import shutil
import zipfile
from collections.abc import Mapping, Sequence

import numpy as np

from .._errors import OutputError
from .._version import __version__
from ._campaign_format import (
    ALPHA,
    BUCKETS,
    CEIL,
    FLOOR,
    FORMAT,
    HISTORIES,
    MOMENTS,
    band_stride,
    bucket_values,
)

__all__ = ["FORMAT", "HISTORIES", "STORE", "CampaignStore", "StoreLayout", "checkpoint_path", "file_digest",
           "input_digests", "read_checkpoint", "remove_checkpoint", "sweep_sources", "write_checkpoint"]

STORE = "campaign.zarr"  # the store's name in a campaign's output folder


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes (hex)."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def sweep_sources(sweep) -> dict[str, str]:
    """SHA-256 of the SWEEP file and of its scenario file, by base name (the store's `sources` attribute)."""
    return {os.path.basename(sweep.source): file_digest(sweep.source),
            os.path.basename(sweep.scenario_path): file_digest(sweep.scenario_path)}


def input_digests(sweep) -> dict[str, str]:
    """SHA-256 of every file the campaign read (`Sweep.files`: the SWEEP file, its scenario, the scenario's
    `[inputs]` CSV), by its path relative to the SWEEP file's folder (the store's `input_files` attribute: what a
    resume, and every Dask worker, must find unchanged)."""
    folder = os.path.dirname(os.path.abspath(sweep.source))
    files = sweep.files or (os.path.abspath(sweep.source), os.path.abspath(sweep.scenario_path))
    return {os.path.relpath(f, folder): file_digest(f) for f in files}


@dataclasses.dataclass(frozen=True)
class StoreLayout:
    """What a new store holds (`CampaignStore.create`): `members` in chunks of `chunk_size`, the save `times` [s]
    and the `panels`' names; `params`: `{name: (per-member shape, unit)}`; `metrics`: `{name: (trailing
    dimensions, unit, description)}`, each dimension's labels in `coords` (`wheel`, `mode`, ...); `kept`:
    `(members,)` whose histories are kept, of the `outputs` (names of `HISTORIES`); `bands`: the histories whose
    percentile bands are sketched (`sketch_<name>`), about `centre[name]` (`(band_time, ...)`, the history at every
    `band_stride(len(times))`-th time: `sketch_centre_<name>`; `centre_note` says what it is, in the
    `sketch_centre` attribute)."""

    members: int
    chunk_size: int
    times: np.ndarray
    panels: Sequence[str]
    params: Mapping[str, tuple[tuple[int, ...], str]]
    metrics: Mapping[str, tuple[tuple[str, ...], str, str]]
    coords: Mapping[str, Sequence[str]]
    kept: np.ndarray
    outputs: Sequence[str] = ()
    bands: Sequence[str] = ()
    centre: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    centre_note: str = ""


class CampaignStore:
    """An open `campaign.zarr` (`create` or `open`)."""

    def __init__(self, path: str, group):
        self.path = path
        self.group = group

    # -- creation and opening ------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str, layout: "StoreLayout", attrs: Mapping) -> "CampaignStore":
        """A new, empty store at `path` (an existing one is replaced, only once the new one is complete), with the
        arrays of `layout` and the group attributes `attrs` (JSON values)."""
        import zarr

        members, chunk_size, times, panels = layout.members, layout.chunk_size, layout.times, layout.panels
        params, metrics, coords, kept = layout.params, layout.metrics, layout.coords, layout.kept
        outputs, bands, centre, centre_note = layout.outputs, layout.bands, layout.centre, layout.centre_note
        path = os.path.abspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            g = zarr.open_group(tmp, mode="w-", zarr_format=3)
            T, P = len(times), len(panels)
            stride = band_stride(T)
            g.attrs.update({"format": FORMAT, "jaxhinge": __version__, "members": members,
                            "chunk_size": chunk_size, "histories": list(outputs), "metrics": list(metrics),
                            "bands": list(bands), "band_stride": stride, **attrs})
            if bands:
                g.attrs["sketch_centre"] = centre_note
            n_chunks = -(-members // chunk_size)
            width = {"panel": P, "component": 3}
            every_history = bool(np.all(kept))

            def array(name, shape, dims, dtype, fill, chunks=None, **meta):
                return g.create_array(name, shape=shape, dtype=dtype, fill_value=fill, dimension_names=dims,
                                      chunks=(chunk_size, *shape[1:]) if chunks is None else chunks,
                                      attributes=meta)

            array("member", (members,), ["member"], "int64", 0, description="member index")[:] = np.arange(members)
            array("time", (T,), ["time"], "float64", 0.0, chunks=(max(T, 1),), units="s",
                  description="sample time")[:] = np.asarray(times, dtype=float)
            array("panel", (P,), ["panel"], str, "", chunks=(max(P, 1),), description="panel name")[:] = \
                np.asarray(list(panels), dtype=str)
            array("component", (3,), ["component"], str, "", chunks=(3,), description="vector component in B")[:] = \
                np.array(["x", "y", "z"])
            array("moment", (len(MOMENTS),), ["moment"], str, "", chunks=(len(MOMENTS),),
                  description="the statistics of stats_<history>")[:] = np.array(MOMENTS)
            array("success", (members,), ["member"], bool, False, description="the member's run succeeded")
            array("result", (members,), ["member"], "int32", -1,
                  description="diffrax result code (0 success; -1 not run yet)")
            array("retained", (members,), ["member"], bool, False,
                  description="the member's histories are kept")[:] = np.asarray(kept, dtype=bool)
            for name, (shape, unit) in params.items():
                dims = ["member", *(("component",) if tuple(shape) == (3,) else
                                    (f"{name}_axis{k}" for k in range(len(shape))))]
                array(f"param_{name}", (members, *shape), dims, "float64", np.nan, units=unit,
                      description=f"dispersed parameter {name}")
            for dim, labels in coords.items():
                if dim not in width:
                    width[dim] = len(labels)
                    array(dim, (len(labels),), [dim], str, "", chunks=(max(len(labels), 1),),
                          description=f"{dim} label")[:] = np.asarray(list(labels), dtype=str)
            for name, (dims, unit, what) in metrics.items():
                shape = (members, *(width[d] for d in dims))
                array(f"metric_{name}", shape, ["member", *dims], "float64", np.nan, units=unit, description=what)
            for name in outputs:
                axis, unit, what, bsk = HISTORIES[name]
                # one member per Zarr chunk when only some are kept: a member never kept takes no space
                rows = chunk_size if every_history else 1
                array(name, (members, T, width[axis]), ["member", "time", axis], "float64", np.nan,
                      chunks=(rows, T, width[axis]), units=unit, description=what, basilisk=bsk)
            for name, (axis, unit, what, _) in HISTORIES.items():
                array(f"stats_{name}", (n_chunks, len(MOMENTS), T, width[axis]), ["chunk", "moment", "time", axis],
                      "float64", np.nan, chunks=(1, len(MOMENTS), T, width[axis]), units=unit,
                      description=f"{what}: the chunk's moments over its successful members")
            array("chunk_done", (n_chunks,), ["chunk"], bool, False, chunks=(1,),
                  description="the chunk's arrays are all written (written last)")
            if bands:
                tb = np.asarray(times, dtype=float)[::stride]
                array("band_time", (tb.size,), ["band_time"], "float64", 0.0, chunks=(max(tb.size, 1),), units="s",
                      description=f"the sample times of the percentile bands (every {stride}th sample time)")[:] = tb
                array("bucket", (BUCKETS,), ["bucket"], "float64", 0.0, chunks=(BUCKETS,),
                      description="the representative value of each bucket of sketch_<history>: a deviation from "
                      "sketch_centre_<history>, in the history's unit")[:] = bucket_values()
                for name in bands:
                    axis, unit, what, _ = HISTORIES[name]
                    c = np.asarray(centre[name], dtype=float)
                    if c.shape != (tb.size, width[axis]):
                        raise ValueError(f"create: centre[{name!r}] has shape {c.shape}, expected "
                                         f"{(tb.size, width[axis])}")
                    array(f"sketch_centre_{name}", c.shape, ["band_time", axis], "float64", 0.0, chunks=c.shape,
                          units=unit, description=f"{what}: the centre of the percentile sketch at the band times, "
                          f"{centre_note}; sketch_{name} counts each member's deviation from it")[...] = c
                    array(f"sketch_{name}", (tb.size, width[axis], BUCKETS), ["band_time", axis, "bucket"], "int32",
                          0, chunks=(min(max(tb.size, 1), 64), width[axis], BUCKETS), history_units=unit,
                          alpha=ALPHA, floor=FLOOR, ceil=CEIL, band_stride=stride,
                          description=f"{what}: the successful members' count in each bucket of the percentile "
                          f"sketch (relative accuracy alpha, |x| < floor in the zero bucket, |x| > ceil clamped)")
                array("sketch_done", (), [], bool, False, chunks=(),
                      description="the sketch_<history> counts are final (written last)")
            if os.path.exists(path):
                old = f"{path}.old-{os.getpid()}"
                os.replace(path, old)
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise OutputError(f"{path}: cannot create the campaign store: {e.strerror or e}", source=path) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls.open(path)

    @classmethod
    def open(cls, path: str) -> "CampaignStore":
        """An existing store; `OutputError` naming the path when there is none or it is not a campaign's."""
        import zarr

        path = os.path.abspath(path)
        try:
            g = zarr.open_group(path, mode="r+", zarr_format=3)
        except (FileNotFoundError, ValueError, OSError) as e:
            raise OutputError(f"{path}: not a campaign store ({type(e).__name__}: {e})", source=path) from None
        if g.attrs.get("format") != FORMAT:
            raise OutputError(f"{path}: not a campaign store (format {g.attrs.get('format')!r}, expected "
                              f"{FORMAT!r})", source=path)
        return cls(path, g)

    # -- chunks ------------------------------------------------------------------------------------------------

    @property
    def members(self) -> int:
        return int(self.group.attrs["members"])

    @property
    def chunk_size(self) -> int:
        return int(self.group.attrs["chunk_size"])

    @property
    def chunks(self) -> int:
        return -(-self.members // self.chunk_size)

    def chunk_members(self, c: int) -> range:
        """The member indices of chunk `c`."""
        return range(c * self.chunk_size, min((c + 1) * self.chunk_size, self.members))

    def done(self) -> np.ndarray:
        """`(chunks,)` bool: which chunks are complete. A flag that cannot be read counts as not done."""
        flags = self.group["chunk_done"]
        try:
            return np.asarray(flags[:], dtype=bool)
        except Exception:  # noqa: BLE001  (any decoding error) a torn flag (a kill while it was written): read them one by one
            out = np.zeros(self.chunks, dtype=bool)
            for c in range(self.chunks):
                try:
                    out[c] = bool(flags[c])
                except Exception:  # noqa: BLE001
                    out[c] = False
            return out

    def failed_so_far(self, done: np.ndarray) -> int:
        """Members of the done chunks that failed."""
        ok = np.asarray(self.group["success"][:])
        members = [self.chunk_members(int(c)) for c in np.flatnonzero(done)]
        return int(sum(np.sum(~ok[m.start:m.stop]) for m in members))

    def write_chunk(self, c: int, params: Mapping[str, np.ndarray], success: np.ndarray, result: np.ndarray,
                    run, metrics: Mapping[str, np.ndarray], stats: Mapping[str, np.ndarray]) -> None:
        """Write chunk `c`: its parameters, `success`, `result`, metrics, the kept members' histories (`run`: a
        batched `Trajectory` of exactly the chunk's members, or None when nothing was simulated) and the chunk's
        moments (`stats[name]`: `(MOMENTS, time, ...)`, `Moments.stack()`), then its flag."""
        members = self.chunk_members(c)
        sl = slice(members.start, members.stop)
        g = self.group
        for name, v in params.items():
            g[f"param_{name}"][sl] = np.asarray(v, dtype=float)
        g["success"][sl] = np.asarray(success, dtype=bool)
        g["result"][sl] = np.asarray(result, dtype=np.int32)
        for name, v in metrics.items():
            g[f"metric_{name}"][sl] = np.asarray(v, dtype=float)
        kept = np.flatnonzero(np.asarray(g["retained"][sl]))
        for name in g.attrs["histories"] if run is not None else ():
            h = np.asarray(getattr(run, name), dtype=float)
            if kept.size == len(members):
                g[name][sl] = h
            else:
                for i in kept:  # one Zarr chunk per member (`create`)
                    g[name][members.start + i] = h[i]
        for name, v in stats.items():
            g[f"stats_{name}"][c] = v
        g["chunk_done"][c] = True

    def write_histories(self, members, run) -> None:
        """Keep the histories of `members` (a second pass: `run` their batched trajectory, in that order)."""
        g = self.group
        for name in g.attrs["histories"]:
            h = np.asarray(getattr(run, name), dtype=float)
            for k, m in enumerate(members):
                g[name][m] = h[k]
        for m in members:
            g["retained"][m] = True

    def write_sketch(self, counts: Mapping[str, np.ndarray]) -> None:
        """Write the final `sketch_<name>` counts (`{name: (band_time, ..., BUCKETS)}`), then `sketch_done`."""
        for name, v in counts.items():
            self.group[f"sketch_{name}"][...] = v
        self.group["sketch_done"][...] = True

    # -- reading -----------------------------------------------------------------------------------------------

    @property
    def bands(self) -> list[str]:
        """The histories whose percentile bands are sketched."""
        return list(self.group.attrs.get("bands", ()))

    @property
    def band_stride(self) -> int:
        return int(self.group.attrs["band_stride"])

    def sketch_done(self) -> bool:
        """Whether the `sketch_<history>` counts are final (False when one cannot be read: a torn write)."""
        try:
            return bool(self.group["sketch_done"][...])
        except Exception:  # noqa: BLE001  (any decoding error)
            return False

    def sketch(self, name: str) -> np.ndarray:
        """`(band_time, ..., BUCKETS)` int32: the final counts of history `name`'s sketch."""
        return np.asarray(self.group[f"sketch_{name}"][...])

    def has_centre(self) -> bool:
        """Whether every sketched history has its centre (a store of an older jaxhinge has none)."""
        g = self.group
        return not self.bands or ("sketch_centre" in g.attrs and all(f"sketch_centre_{n}" in g for n in self.bands))

    def centre(self, name: str) -> np.ndarray:
        """`(band_time, ...)`: the centre of history `name`'s sketch (its counts are of `x - centre`); zero for a
        store of an older jaxhinge, whose counts are of `x` itself (`has_centre`: a resume of one is refused)."""
        if f"sketch_centre_{name}" not in self.group:
            return np.zeros(self.group[f"sketch_{name}"].shape[:-1])
        return np.asarray(self.group[f"sketch_centre_{name}"][...])

    @property
    def centre_note(self) -> str:
        """What the sketch's centre is: the nominal run, or zero when it failed (the `sketch_centre` attribute)."""
        return str(self.group.attrs.get("sketch_centre", ""))


    def params(self) -> dict[str, np.ndarray]:
        """`{name: (members, ...)}` of the dispersed parameters, in the order they were declared."""
        names = self.group.attrs["parameters"]
        return {n: np.asarray(self.group[f"param_{n}"][:]) for n in names}

    def metrics(self) -> dict[str, np.ndarray]:
        """`{name: (members, ...)}` of the metrics."""
        return {n: np.asarray(self.group[f"metric_{n}"][:]) for n in self.group.attrs["metrics"]}

    def chunk_moments(self, name: str) -> np.ndarray:
        """`(chunks, moment, time, ...)`: every chunk's moments of history `name` over its successful members
        (`MOMENTS` order; NaN for a chunk not done), as written."""
        return np.asarray(self.group[f"stats_{name}"][...])

    def kept_histories(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """`(member indices, histories (K, T, ...))` of the successful members whose history `name` is kept."""
        g = self.group
        idx = np.flatnonzero(np.asarray(g["retained"][:]) & np.asarray(g["success"][:]))
        if name not in g.attrs["histories"]:
            return idx[:0], np.zeros((0,))
        if idx.size == self.members:
            return idx, np.asarray(g[name][:])
        return idx, np.asarray(g[name].get_orthogonal_selection((idx, slice(None), slice(None))))


def checkpoint_path(path: str) -> str:
    """The sketch checkpoint of the store at `path` (`<out-dir>/campaign.zarr` -> `<out-dir>/campaign.sketch.npz`)."""
    return f"{os.path.splitext(os.path.abspath(path))[0]}.sketch.npz"


def read_checkpoint(store: CampaignStore) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """The store's sketch checkpoint, `(merged chunks (chunks,) bool, {history: counts int32})`, when there is one
    of this campaign (`checkpoint_key`) of the store's shapes that reads whole; else None."""
    path = checkpoint_path(store.path)
    if not os.path.exists(path):
        return None
    shapes = {n: tuple(store.group[f"sketch_{n}"].shape) for n in store.bands}
    try:
        with np.load(path) as f:
            if str(f["sources"]) != checkpoint_key(store) or f["merged"].shape != (store.chunks,) or any(
                    f[f"sketch_{n}"].shape != shape for n, shape in shapes.items()):
                return None
            return np.array(f["merged"], dtype=bool), {n: np.array(f[f"sketch_{n}"], dtype=np.int32) for n in shapes}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None  # not readable: none


def write_checkpoint(store: CampaignStore, merged: np.ndarray, counts: Mapping[str, np.ndarray]) -> None:
    """Write the store's sketch checkpoint (under a temporary name, then renamed: a kill leaves the old one or
    the new one); `OutputError` naming the file when it cannot be written."""
    path = checkpoint_path(store.path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, sources=np.array(checkpoint_key(store)), merged=merged,
                                **{f"sketch_{n}": v for n, v in counts.items()})
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise OutputError(f"{path}: cannot write the sketch checkpoint: {e.strerror or e}", source=path) from None


def remove_checkpoint(path: str) -> None:
    """Remove the sketch checkpoint of the store at `path`, if there is one."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(checkpoint_path(path))


def checkpoint_key(store: CampaignStore) -> str:
    """What ties a checkpoint to its campaign: the input files' SHA-256, the member count, the chunk size and the
    sketch's centre (SHA-256 of its bytes: counts of deviations from another centre do not add)."""
    src = store.group.attrs.get("sources", {})
    centre = hashlib.sha256(b"".join(np.ascontiguousarray(store.centre(n), dtype="<f8").tobytes()
                                     for n in store.bands)).hexdigest()
    return " ".join([*(f"{k}={src[k]}" for k in sorted(src)), f"members={store.members}",
                     f"chunk_size={store.chunk_size}", f"centre={centre}"])
