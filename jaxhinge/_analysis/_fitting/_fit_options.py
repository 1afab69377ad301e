r"""The option objects of the fits, each checking its own values on construction (a `FitError` naming the field,
the value and what is allowed, before any compute):

- `ModalTargets`: target frequencies (and damping ratios) given as numbers, with their uncertainties
  (`fit(scenario, ModalTargets(...))`; a plain list of frequencies is `ModalTargets(list)`).
- `FeaTargets`: the modes of an FEA file (`read_fea`), paired with the model's, with their uncertainties, the
  effective-mass and mode-shape options.
- `Starts`: the starting points of the modal fit's multi-start search (count, box).
- `RandomStarts`: the extra starting points of the telemetry fit (count, spread, seed).
- `Acceptance`: when targets count as reached and parameter combinations as undetermined.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from jaxtyping import ArrayLike, Float

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._model._fea_modes import FeaModes, ShapeMap
from ._fit_targets import number_list

__all__ = ["Acceptance", "FeaTargets", "ModalTargets", "RandomStarts", "Starts"]

MAX_STARTS = 1024


def _positive(value, field: str, what: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise FitError.bad(None, field, value, f"must be a finite number > 0{what}")


def _sigmas(obj) -> None:
    _positive(obj.frequency_sigma, "frequency_sigma", " (relative uncertainty)")
    _positive(obj.damping_sigma, "damping_sigma", " (relative uncertainty)")


@dataclasses.dataclass(frozen=True)
class ModalTargets:
    """Target modes given as numbers.

    - `targets_hz`: target frequencies [Hz], non-decreasing, matched to the lowest flexible modes in order (or
      to `mode_numbers`).
    - `damping_ratios`: optional target damping ratios, one per frequency, each in (0, 1).
    - `mode_numbers`: 1-based, strictly increasing model mode numbers the targets belong to (default 1, 2, ...).
    - `frequency_sigma`, `damping_sigma`: relative 1-sigma uncertainties of the targets (residual weights and the
      basis of the reported `sigma`; default 1 % and 20 %).
    """

    targets_hz: Sequence[float | int] | Float[ArrayLike, " targets"]
    damping_ratios: Sequence[float | int] | Float[ArrayLike, " targets"] | None = None
    mode_numbers: Sequence[int] | None = None
    frequency_sigma: float | int = 0.01
    damping_sigma: float | int = 0.2

    def __post_init__(self):
        ft = number_list(self.targets_hz, "targets_hz", positive=True)
        if np.any(np.diff(ft) < 0):
            raise FitError(f"targets_hz = {_fmt(ft)}: must be in ascending order (they are matched to the modes in "
                           "ascending frequency)", field="targets_hz")
        if self.damping_ratios is not None:
            zt = number_list(self.damping_ratios, "damping_ratios", positive=True)
            if len(zt) != len(ft):
                raise FitError(f"damping_ratios has {len(zt)} values but targets_hz has {len(ft)}: give one "
                               "damping ratio per target frequency", field="damping_ratios")
        _sigmas(self)


@dataclasses.dataclass(frozen=True)
class FeaTargets:
    """Target modes from an FEA modal analysis: each model mode is paired with an FEA mode by `pair_modes`
    (effective-mass MAC and frequency), by hand, or by mode shapes, and fitted to its frequency (and to
    `fea.damping`, one damping ratio per FEA mode, where given).

    - `fea`: the FEA modes (`read_fea`).
    - `damping_ratios`: target damping ratios of the paired modes, one per target, where the FEA modes carry none
      (`fea.damping`).
    - `fea_modes`, `mode_numbers`: pairing by hand: FEA mode numbers (as in the file) and the 1-based model mode
      of each.
    - `reference_point`: where the FEA's rotational effective masses refer to, in B [m] (default: the FEA's own
      `reference_point`).
    - `effective_mass_sigma`: also fit the paired modes' 6 effective masses, with this 1-sigma uncertainty relative
      to each component's total effective mass (default: not fitted, used for pairing only).
    - `shapes`: a `ShapeMap` (FEA grid points -> model coordinates) to pair the FEA modes by the MAC of their mode
      shapes, judge the solutions (`ShapeMap.mac_min`) and, with `ShapeMap.sigma`, fit the shapes too.
    - `frequency_sigma`, `damping_sigma`: as `ModalTargets`'.
    """

    fea: FeaModes
    damping_ratios: Sequence[float | int] | Float[ArrayLike, " targets"] | None = None
    fea_modes: Sequence[int] | None = None
    mode_numbers: Sequence[int] | None = None
    reference_point: Sequence[float | int] | Float[ArrayLike, "3"] | None = None
    effective_mass_sigma: float | int | None = None
    shapes: ShapeMap | None = None
    frequency_sigma: float | int = 0.01
    damping_sigma: float | int = 0.2

    def __post_init__(self):
        if not isinstance(self.fea, FeaModes):
            raise FitError(f"fea: expected FeaModes (read_fea), got {type(self.fea).__name__}", field="fea")
        if self.effective_mass_sigma is not None:
            _positive(self.effective_mass_sigma, "effective_mass_sigma", " (relative uncertainty)")
        if self.shapes is not None and not isinstance(self.shapes, ShapeMap):
            raise FitError(f"shapes: expected a ShapeMap, got {type(self.shapes).__name__}", field="shapes")
        _sigmas(self)


@dataclasses.dataclass(frozen=True)
class Starts:
    """The modal fit's starting points, run as one batched program: the first is the initial guess, the others
    spread over `bounds` by a Halton sequence; every distinct parameter set that reaches the targets is reported.

    - `count`: how many (1 to 1024); default 8 for a least-squares solver, 1 (the only choice) for Adam / LBFGS.
    - `bounds`: `{name: [low, high]}` per free parameter (its name in `free`, or any member of a tie), in the
      parameter's unit: the box the extra starts are spread over; default a factor 10 either side of the initial
      value (positive parameters), +/- one scale unit (the others). Starts only: the solver is not bounded.
    """

    count: int | None = None
    bounds: Mapping[str, Sequence[float | int]] | None = None

    def __post_init__(self):
        c = self.count
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= MAX_STARTS):
            raise FitError.bad(None, "starts", c, f"must be an integer between 1 and {MAX_STARTS}")
        if self.bounds is not None and not isinstance(self.bounds, Mapping):
            raise FitError.bad(None, "bounds", self.bounds, "must be a table {name: [low, high]}")


@dataclasses.dataclass(frozen=True)
class RandomStarts:
    """The telemetry fit's starting points: the scenario's guess, then `count - 1` more at $u_0 + $ `spread`
    $\\cdot U(-1, 1)$ in the fitted coordinates (a log-ratio for positive parameters), drawn with `seed`; the best
    $\\chi^2$ is kept. Defaults: 1 start, spread 0.3, seed 0."""

    count: int = 1
    spread: float | int = 0.3
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.count, bool) or not isinstance(self.count, (int, np.integer)) or self.count < 1:
            raise FitError.bad(None, "starts", self.count, "must be an integer >= 1")
        _positive(self.spread, "spread")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise FitError.bad(None, "seed", self.seed, "must be an integer >= 0")


@dataclasses.dataclass(frozen=True)
class Acceptance:
    """When a fit counts as reaching its targets, and how its identifiability is judged.

    - `reach_rtol` (`fit` only): relative frequency error below which the targets count as reached (damping
      errors: `100 * reach_rtol`); default 1e-6.
    - `ident_rtol`, `warn_rtol`: singular-value ratios of the column-scaled Jacobian below which a parameter
      combination is reported as undetermined (default 1e-6; its parameters get `sigma = inf`) or poorly
      determined (default 1e-2).
    """

    reach_rtol: float | int | None = None
    ident_rtol: float | int = 1e-6
    warn_rtol: float | int = 1e-2

    def __post_init__(self):
        if self.reach_rtol is not None:
            _positive(self.reach_rtol, "reach_rtol")
        _positive(self.ident_rtol, "ident_rtol")
        _positive(self.warn_rtol, "warn_rtol")
