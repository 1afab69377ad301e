"""The numbers the campaign store's on-disk format is made of (`_campaign_store`, docs/campaigns.md): the histories
it keeps, the moments of `stats_<history>` in their stacked order, and the percentile sketch's fixed grid of log
buckets (`sketch_<history>`, `bucket`). A store written with other numbers reads differently, so they live with
the format, and the statistics (`_analysis._studies._stats`: `bucket_index`, `sketch_add`, `sketch_quantiles`)
take them from here.

The grid: a value `x` with `FLOOR <= |x| <= CEIL` falls in log bucket `k = ceil(log_gamma |x|)`,
`gamma = (1 + ALPHA) / (1 - ALPHA)`, from `KMIN` (the bucket of `FLOOR`) to `KMAX` (that of `CEIL`); `HALF` buckets
of each sign and the zero bucket make `BUCKETS` (3457 with `ALPHA = 0.01`, `FLOOR = 1e-9`, `CEIL = 1e6`), each
represented by `sign 2 gamma^k / (gamma + 1)` (`bucket_values`). The bands are sketched at every `band_stride`-th
sample time, at most `MAX_BAND_TIMES` of them.
"""

import math

import numpy as np

__all__ = ["ALPHA", "BUCKETS", "CEIL", "FLOOR", "FORMAT", "GAMMA", "HALF", "HISTORIES", "KMAX", "KMIN",
           "LOG_GAMMA", "MAX_BAND_TIMES", "MOMENTS", "band_stride", "bucket_values"]

FORMAT = "jaxhinge-campaign/1"
# history name -> (trailing axis, unit, description, Basilisk message field)
HISTORIES = {
    "theta": ("panel", "rad", "hinge angle", "hingedRigidBodyOutMsg.theta"),
    "thetaDot": ("panel", "rad/s", "hinge rate", "hingedRigidBodyOutMsg.thetaDot"),
    "omega_BN_B": ("component", "rad/s", "hub angular velocity in B", "scStateOutMsg.omega_BN_B"),
    "sigma_BN": ("component", "-", "hub attitude MRP (B relative to N)", "scStateOutMsg.sigma_BN"),
}
MOMENTS = ("count", "mean", "m2", "min", "max")  # the stacked layout of stats_<history> (`_stats.Moments.stack`)

ALPHA = 0.01  # the sketch's relative accuracy
FLOOR = 1e-9  # |x| below: the zero bucket
CEIL = 1e6  # |x| above: the extreme bucket
MAX_BAND_TIMES = 512  # a campaign's percentile bands: at most this many sample times (`band_stride`)
GAMMA = (1.0 + ALPHA) / (1.0 - ALPHA)
LOG_GAMMA = math.log(GAMMA)
KMIN = math.ceil(math.log(FLOOR) / LOG_GAMMA)  # the log bucket of FLOOR ...
KMAX = math.ceil(math.log(CEIL) / LOG_GAMMA)  # ... and of CEIL
HALF = KMAX - KMIN + 1  # buckets of one sign
BUCKETS = 2 * HALF + 1  # negative, zero, positive


def bucket_values() -> np.ndarray:
    """`(BUCKETS,)`: each bucket's representative value, in bucket order: `sign 2 gamma^k / (gamma + 1)`, the
    value within `ALPHA` (relative) of every value of the bucket; 0 for the zero bucket."""
    k = np.arange(KMIN, KMAX + 1, dtype=float)
    pos = 2.0 * GAMMA**k / (GAMMA + 1.0)
    return np.concatenate([-pos[::-1], [0.0], pos])


def band_stride(times: int) -> int:
    """The stride over a history's `times` sample times of its percentile bands: at most `MAX_BAND_TIMES`."""
    return max(1, -(-times // MAX_BAND_TIMES))
