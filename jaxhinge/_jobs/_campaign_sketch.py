"""The running counts of a campaign's percentile sketch (`SketchMerge`), merged by the process that drives the
campaign as its chunks complete; checkpointed to `<out-dir>/campaign.sketch.npz` (`_io._campaign_store`) for a
resume, and written into the store at the end."""

import numpy as np

from .._analysis._studies._stats import sketch_add
from .._io._campaign_store import CampaignStore, read_checkpoint, remove_checkpoint, write_checkpoint

__all__ = ["SketchMerge"]


class SketchMerge:
    """The running counts of a campaign's percentile sketch (`bands`), merged in the process that drives the
    campaign as chunks complete (`add`: integer addition, in any order), saved every so often (`save`) to the
    checkpoint `<out-dir>/campaign.sketch.npz` with the set of chunks merged (`write_checkpoint`: whole or
    absent), and written into the store at the end (`finish`). `open` on a resume starts from the checkpoint; the
    chunks done in the store but not merged in it (`missing`) have their sketch computed again (the same program
    on the same inputs: the same counts)."""

    def __init__(self, store: CampaignStore, counts: dict[str, np.ndarray], merged: np.ndarray, final: bool):
        self.store, self.counts, self.merged, self.final = store, counts, merged, final
        self.saved = int(merged.sum())

    @classmethod
    def open(cls, store: CampaignStore, resume: bool) -> "SketchMerge":
        """The counts to merge into: none to make when nothing is sketched or the store's are final already; on
        a `resume`, the checkpoint's when it is this campaign's and reads whole, else zero (every done chunk is
        then `missing`)."""
        chunks = store.chunks
        if not store.bands or store.sketch_done():
            return cls(store, {}, np.ones(chunks, dtype=bool), True)
        saved = read_checkpoint(store) if resume else None
        if saved is not None:
            merged, counts = saved
        else:
            merged = np.zeros(chunks, dtype=bool)
            counts = {n: np.zeros(store.group[f"sketch_{n}"].shape, dtype=np.int32) for n in store.bands}
        return cls(store, counts, merged, False)

    def missing(self, done: np.ndarray) -> list[int]:
        """The chunks done in the store whose sketch is not merged."""
        return [int(c) for c in np.flatnonzero(np.asarray(done) & ~self.merged)]

    def add(self, c: int, buckets) -> None:
        """Merge chunk `c`'s `{history: bucket indices (successful members, band_time, ...)}` (`run_chunk`)."""
        if self.final or self.merged[c]:
            return
        for name, index in buckets.items():
            sketch_add(self.counts[name], index)
        self.merged[c] = True

    def save(self) -> None:
        """Write the checkpoint (when a chunk was merged since the last)."""
        if self.final or int(self.merged.sum()) == self.saved:
            return
        write_checkpoint(self.store, self.merged, self.counts)
        self.saved = int(self.merged.sum())

    def finish(self) -> None:
        """Every chunk merged: the counts into the store (`write_sketch`), then the checkpoint removed."""
        if self.final:
            return
        if not self.merged.all():
            raise RuntimeError(f"{self.store.path}: chunks {np.flatnonzero(~self.merged).tolist()} are not in the "
                               "percentile sketch")
        self.store.write_sketch(self.counts)
        self.final = True
        remove_checkpoint(self.store.path)
