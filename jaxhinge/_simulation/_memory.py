"""The sampling grid of a run and the memory guard every entry point calls before any compute (`check_memory`:
samples and kept rk4 step states, per run, against `JAXHINGE_MEMORY_LIMIT_GB`)."""

import math
import os

import numpy as np

from .._errors import ConfigError
from .._model._scenario import SimulationConfig

MEMORY_ENV = "JAXHINGE_MEMORY_LIMIT_GB"  # the memory limit of `check_memory` (default: half the physical memory)


def memory_limit() -> float:
    """Bytes a run's outputs and working arrays may take: `$JAXHINGE_MEMORY_LIMIT_GB` GB, else half the physical
    memory (8 GB where the system does not say). **Raises:** `ConfigError` for a setting that is not a number > 0."""
    env = os.environ.get(MEMORY_ENV)
    try:
        gb = float(env) if env is not None else 5e-10 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a number; or no sysconf (Windows)
        gb = math.nan if env is not None else 8.0
    if not gb > 0:
        raise ConfigError(MEMORY_ENV, env, "must be a number of GB > 0 (the memory a run may use)")
    return gb * 1e9


def sample_counts(cfg: SimulationConfig) -> tuple[int, int]:
    """`(K, n)`: K save intervals ($\\lfloor t_{end}/\\Delta t_{save}\\rfloor$), n rk4 steps to t_end; no array built."""
    return (int(np.floor(cfg.t_end / cfg.save_dt * (1.0 + 1e-12) + 1e-9)),
            int(np.ceil(cfg.t_end / cfg.dt * (1.0 - 1e-12) - 1e-9)))


def save_times(cfg: SimulationConfig) -> np.ndarray:
    """Output times: $k\\,\\Delta t_{save}$ for $k = 0..\\lfloor t_{end}/\\Delta t_{save}\\rfloor$."""
    return np.minimum(np.arange(sample_counts(cfg)[0] + 1) * cfg.save_dt, cfg.t_end)


def step_times(cfg: SimulationConfig) -> np.ndarray:
    """The rk4 step grid $k\\,dt$ (exact multiples, as Basilisk's integer-nanosecond clock), ending at t_end."""
    ts = np.arange(sample_counts(cfg)[1] + 1) * cfg.dt
    ts[-1] = cfg.t_end
    return ts


def bytes_per_member(cfg: SimulationConfig, panels: int) -> float:
    """`check_memory`'s estimate for one member of a batch on the `save_dt` grid [bytes]."""
    return 8.0 * (sample_counts(cfg)[0] + 1) * (39 + 19 * panels)


def check_memory(cfg: SimulationConfig, panels: int, members: int = 1, samples: int | None = None,
                 field: str | None = None, value=None, stored_steps: bool = False) -> None:
    """The one memory estimate, made before compute by every entry point (simulate, batches, the fit check,
    sensitivities, telemetry fits): 8 bytes x members x (samples x (39 + 19 N) + steps x (13 + 2 N)), N panels: each
    saved sample (default: the `save_dt` grid) holds the outputs and the solver state; rk4 keeps its `steps` for
    output at given times, and with `stored_steps` (`stores_steps`) another 4 (12 + 2 N) + 17 per step for reverse
    mode. **Raises:** `ConfigError` (`field = value`, default `save_dt`, or `dt` when the steps dominate) with the
    estimate and the limit (`memory_limit`) when it does not fit."""
    K, n = sample_counts(cfg)
    steps = n + 1 if samples is not None and cfg.integrator.fixed_step else 0
    samples = K + 1 if samples is None else samples
    per_step = (13 + 2 * panels) * (steps > 0) + (4 * (12 + 2 * panels) + 17) * stored_steps
    steps = max(steps, n) if stored_steps else steps
    need, limit = 8.0 * members * (samples * (39 + 19 * panels) + steps * per_step), memory_limit()
    if need > limit:
        if field is None and stored_steps:
            field, value = "adjoint.checkpoints", n
        elif field is None:
            field, value = ("simulation.dt", cfg.dt) if steps > samples else ("simulation.save_dt", cfg.save_dt)
        what = f"{samples:.4g} samples" + (f" + {steps:.4g} rk4 steps" if steps else "")
        what += " kept for reverse mode" if stored_steps else ""
        raise ConfigError(field, value, f"{members} run(s) x {what} with {panels} panel(s) need about {need / 1e9:.3g}"
                          f" GB of outputs and working memory, above the limit of {limit / 1e9:.3g} GB (set "
                          f"{MEMORY_ENV} to raise it)")
