"""Modal results of a finite-element analysis (FEA), as read from a solver's output files.

`FeaModes` is what every reader returns and what the modal fit pairs and fits against: SI units, the axes of the
FEA model taken to be the hub body frame B, rotations (participation factors and effective masses) about
`reference_point`.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class FeaModes:
    """The first modes of an FEA modal analysis, in SI units.

    Attributes:
        frequencies: (n,) natural frequencies [Hz], ascending as in the file.
        mode_numbers: (n,) the FEA's own mode numbers (1-based, as printed by the solver).
        effective_mass: (n, 6) modal effective masses: translations x, y, z [kg], rotations about x, y, z
            through `reference_point` [kg m^2]; None where the file has none.
        participation: (n, 6) participation factors of mass-normalised modes (translations [kg^0.5], rotations
            [kg^0.5 m]) about `reference_point`; None where the file has none.
        damping: (n,) modal damping ratios [-]; None where the file has none.
        reference_point: (3,) the point the rotational components refer to [m], FEA coordinates (= frame B).
        boundary: "clamped" (interface/hub fixed, the usual deliverable for appendages), "free" (free-free, with
            rigid-body modes removed) or None when the file does not say.
        total_mass: (6,) the rigid-body mass the effective masses are fractions of (the solver's "total effective
            mass" line where printed, else None).
        source: the file read.
    """

    frequencies: np.ndarray
    mode_numbers: np.ndarray
    effective_mass: np.ndarray | None = None
    participation: np.ndarray | None = None
    damping: np.ndarray | None = None
    reference_point: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))
    boundary: str | None = None
    total_mass: np.ndarray | None = None
    source: str = ""
