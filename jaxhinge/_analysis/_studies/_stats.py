"""Statistics of many members, merged chunk by chunk (campaigns, docs/campaigns.md).

- `Moments`: per element count, mean, sum of squared deviations (`m2`), min and max over the members of one chunk
  (`moments`), merged pairwise by Chan, Golub and LeVeque's update (`merge`): exact up to rounding, so the
  statistics of a million members need one chunk in memory at a time. Merging in chunk order makes the result
  independent of the order the chunks ran in (a resumed or distributed campaign gives the same numbers).
- Percentile bands come from a systematic sample of the members (every `every`-th member, whose histories a
  campaign keeps): exact when every member is kept; otherwise, for Monte Carlo members (independent draws), the
  sample's percentile `p` has a rank error whose standard deviation is `rank_error(p, K)` for `K` sampled members.
"""

import dataclasses
import math

import numpy as np

__all__ = ["FIELDS", "SUMMARY_METRICS", "Moments", "merge", "merge_all", "moments", "rank_error", "summary_metrics"]

FIELDS = ("count", "mean", "m2", "min", "max")  # the stacked layout (`Moments.stack`)


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


def rank_error(p: float, sampled: int) -> float:
    """The standard deviation of the rank (as a fraction, 0..1) of the sample percentile `p` [%] of `sampled`
    independent members: $\\sqrt{q (1 - q) / K}$ with $q = p / 100$ (0 when every member is in the sample)."""
    q = p / 100.0
    return math.sqrt(q * (1.0 - q) / sampled) if sampled else float("nan")


# the metrics every campaign keeps (name -> (trailing axis, unit, description)), from the histories of a chunk
SUMMARY_METRICS = {
    "peak_hub_rate": (None, "rad/s", "peak |omega_BN_B| over the saved samples"),
    "final_theta": ("panel", "rad", "hinge angle at t_end"),
    "peak_abs_theta": ("panel", "rad", "peak |theta| over the saved samples"),
}


def summary_metrics(run) -> dict[str, np.ndarray]:
    """`SUMMARY_METRICS` of every member of a batched trajectory (`theta`, `omega_BN_B` with a member axis)."""
    theta = np.asarray(run.theta)
    omega = np.asarray(run.omega_BN_B)
    return {"peak_hub_rate": np.linalg.norm(omega, axis=-1).max(axis=1), "final_theta": theta[:, -1, :],
            "peak_abs_theta": np.abs(theta).max(axis=1)}
