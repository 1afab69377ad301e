"""Statistics of many members, merged chunk by chunk (campaigns, docs/campaigns.md).

- `Moments`: per element count, mean, sum of squared deviations (`m2`), min and max over the members of one chunk
  (`moments`), merged pairwise by Chan, Golub and LeVeque's update (`merge`): exact up to rounding, so the
  statistics of a million members need one chunk in memory at a time. Merging in chunk order makes the result
  independent of the order the chunks ran in (a resumed or distributed campaign gives the same numbers).
- Percentiles come from a quantile sketch with relative error (the idea of DDSketch, Masson, Rim and Lee 2019)
  on one fixed grid of log buckets: a value `x` with `FLOOR <= |x| <= CEIL` falls in bucket
  `sign(x) ceil(log_gamma |x|)`, `gamma = (1 + ALPHA) / (1 - ALPHA)`, one with `|x| < FLOOR` in the zero bucket,
  one with `|x| > CEIL` (or NaN: last, as `np.sort` puts it) in the extreme bucket of its sign (`bucket_index`).
  A set of values is its count per bucket (`sketch_add`); every chunk uses the same grid, so merging is adding
  integer counts: exact, in any order (the same bytes for a resumed or distributed campaign). Percentile `p` of
  `N` values (`sketch_quantiles`) is the representative value `sign 2 gamma^k / (gamma + 1)` (0 for the zero
  bucket) of the bucket that holds the value of 0-based rank `floor(p / 100 (N - 1))`, NumPy's
  `np.percentile(x, p, method="lower")` `q`, so **|q_sketch - q| <= ALPHA |q| + FLOOR** for `|q| <= CEIL`
  (the bucket's relative width bounds the first term; `FLOOR` covers the zero bucket and the rounding of the
  logarithm at a bucket's edge). With `ALPHA = 0.01`, `FLOOR = 1e-9`, `CEIL = 1e6` (in the history's SI unit:
  rad, rad/s) the grid has `BUCKETS = 3457` buckets: 13.8 kB of int32 counts per element. The grid and the
  moments' order are the campaign store's format: they live with it (`_io._campaign_format`).
- Centred: a campaign sketches each history's deviation `d = x - c` from a fixed centre `c` per element (the
  nominal run's history, known before any chunk and stored with the counts). Subtracting a constant keeps the
  order of the values (floating-point subtraction is monotone), so the value of rank `r` of `x` is `c` plus that
  of `d`, and the band `c + q_sketch(d)` (`sketch_quantiles(..., centre=c)`) is within
  **ALPHA |q - c| + FLOOR** of `q` (up to the rounding of `x - c` and of the sum, a few ulps of `x`, far below
  `FLOOR` for angles and rates): 1 % of the spread about the centre, not 1 % of the value, for a history far
  from zero with a narrow spread.
"""
import dataclasses
import math

import numpy as np

from ..._io._campaign_format import BUCKETS, CEIL, FLOOR, HALF, KMAX, KMIN, LOG_GAMMA, MOMENTS, bucket_values

__all__ = ["FIELDS", "Moments", "bucket_index", "merge", "merge_all", "moments", "sketch_add",
           "sketch_quantiles", "summary_metrics"]

FIELDS = MOMENTS  # the stacked layout (`Moments.stack`): the store's `stats_<history>`


@dataclasses.dataclass(frozen=True)
class Moments:
    """Per-element statistics of a set of members: `count` (members, a scalar), `mean`, `m2` (sum of squared
    deviations from the mean), `min`, `max`, each of the members' per-member shape."""

    count: int
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation (NumPy's `std`, ddof = 0); NaN with no member."""
        return np.sqrt(self.m2 / self.count) if self.count else np.full_like(self.mean, np.nan)

    def stack(self) -> np.ndarray:
        """`(5, ...)`: count (broadcast), mean, m2, min, max (`FIELDS`), as a campaign store keeps them."""
        return np.stack([np.full_like(self.mean, self.count), self.mean, self.m2, self.min, self.max])

    @classmethod
    def unstack(cls, a: np.ndarray) -> "Moments":
        a = np.asarray(a, dtype=float)
        count = a[0].flat[0] if a[0].size else 0.0
        return cls(int(count) if math.isfinite(count) else 0, a[1], a[2], a[3], a[4])


def moments(x: np.ndarray) -> Moments:
    """The moments of `x` (members, ...) over its first axis (no member: count 0, min +inf, max -inf)."""
    x = np.asarray(x, dtype=float)
    shape = x.shape[1:]
    if x.shape[0] == 0:
        return Moments(0, np.zeros(shape), np.zeros(shape), np.full(shape, np.inf), np.full(shape, -np.inf))
    mean = x.mean(axis=0)
    return Moments(x.shape[0], mean, ((x - mean) ** 2).sum(axis=0), x.min(axis=0), x.max(axis=0))


def merge(a: Moments, b: Moments) -> Moments:
    """The moments of the union of two disjoint sets of members (Chan et al.'s pairwise update)."""
    if a.count == 0:
        return b
    if b.count == 0:
        return a
    n = a.count + b.count
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.count / n)
    m2 = a.m2 + b.m2 + delta**2 * (a.count * b.count / n)
    return Moments(n, mean, m2, np.minimum(a.min, b.min), np.maximum(a.max, b.max))


def merge_all(parts) -> Moments:
    """`merge` of `parts` in their order (pairwise up a balanced tree: the rounding grows as log of the count)."""
    parts = list(parts)
    if not parts:
        raise ValueError("merge_all: no part to merge")
    while len(parts) > 1:
        parts = [merge(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def bucket_index(x) -> np.ndarray:
    """The signed bucket of every value of `x`, `int16` in `[-(BUCKETS // 2), BUCKETS // 2]`, increasing with
    the value: 0 for `|x| < FLOOR`, `sign(x) (k - k(FLOOR) + 1)` for log bucket `k = ceil(log_gamma |x|)`,
    clamped to the extreme bucket above `CEIL` (NaN counts as +CEIL, last, as `np.sort` puts it)."""
    x = np.asarray(x, dtype=float)
    a = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.ceil(np.log(np.clip(a, FLOOR, CEIL)) / LOG_GAMMA)
    k = np.clip(k, KMIN, KMAX) - (KMIN - 1)
    k = np.where(a < FLOOR, 0.0, np.where(np.isnan(x), HALF, np.copysign(k, x)))
    return k.astype(np.int16)


def sketch_add(counts: np.ndarray, index: np.ndarray) -> None:
    """Add the values of `index` (`bucket_index` of `(members, ...)` values) to `counts` (`(..., BUCKETS)`
    int32, in place): one count per member in each element's bucket."""
    index = np.asarray(index)
    if index.shape[0] == 0:
        return
    flat = counts.reshape(-1)
    base = np.arange(flat.size // BUCKETS, dtype=np.int64).reshape(index.shape[1:]) * BUCKETS + HALF
    where, n = np.unique((base + index).ravel(), return_counts=True)
    flat[where] += n.astype(flat.dtype)


def sketch_quantiles(counts: np.ndarray, percentiles, centre=0.0) -> np.ndarray:
    """Percentiles `p` [%] of the values counted in `counts` (`(..., BUCKETS)`): **returns** `(len(p), ...)`, the
    representative value of the bucket holding the value of rank `floor(p / 100 (N - 1))` (from 0) of each
    element's `N` values (`np.percentile`'s `method="lower"`), within `ALPHA |q| + FLOOR` of it; NaN where
    `N = 0`. `centre` (broadcast to `counts.shape[:-1]`): the counts are of deviations `x - centre` from it
    (a campaign's sketch): the percentiles of `x` are returned, `centre` + those of the deviations, within
    `ALPHA |q - centre| + FLOOR` of `x`'s."""
    counts = np.asarray(counts)
    cum = np.cumsum(counts, axis=-1, dtype=np.int64)
    n = cum[..., -1]
    centre = np.broadcast_to(np.asarray(centre, dtype=float), n.shape)
    q = np.true_divide(np.asarray(percentiles, dtype=float), 100)
    values = bucket_values()
    out = np.empty((q.size, *n.shape))
    for j, qj in enumerate(q):
        rank = np.floor((n - 1) * qj).astype(np.int64)
        k = np.minimum((cum <= rank[..., None]).sum(axis=-1), BUCKETS - 1)
        out[j] = np.where(n > 0, centre + values[k], np.nan)
    return out


def summary_metrics(run) -> dict[str, np.ndarray]:
    """The summary's metrics (`_io._sweep_file.SUMMARY_METRICS`, declared in `_outputs`) of every member of a
    batched trajectory (`theta`, `omega_BN_B` with a member axis), on the host."""
    theta = np.asarray(run.theta)
    omega = np.asarray(run.omega_BN_B)
    return {"peak_hub_rate": np.linalg.norm(omega, axis=-1).max(axis=1), "final_theta": theta[:, -1, :],
            "peak_abs_theta": np.abs(theta).max(axis=1)}
