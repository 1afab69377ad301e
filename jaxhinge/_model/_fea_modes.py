"""The modes of an FEA modal analysis in SI units (`FeaModes`): what the FEA readers (`_io._fea`) return and the modal
fit pairs the model's modes with (`_analysis._fitting._pairing`); and which FEA nodes give the model's coordinates
(`ShapeMap`, a FIT.toml's `[modes.shapes]`)."""

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["FeaModes", "ShapeMap"]


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
        reference_grid: the FEA grid the rotations refer to (NASTRAN `PARAM,GRDPNT`) when the file names one and
            no `reference_point` was given: its coordinates are not in the file, so a fit asks for them.
        unread: why tables present in the file were not read (None: everything needed was read).
        shape_nodes: (g,) the grid points (nodes) whose mode shapes were read; None where none were.
        shapes: (n, g, 6) the mode shapes at `shape_nodes`: translations T1-T3 [m] and rotations R1-R3 [rad] in
            B (the FEA axes rotated by `dcm_BF` where given), in the solver's scaling; NaN where the file has
            no value (CalculiX nodes of solid elements carry no rotations).
        shapes_source: the file the shapes were read from (`source`, or a separate `.frd`).
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
    reference_grid: int | None = None
    unread: str | None = None
    shape_nodes: np.ndarray | None = None
    shapes: np.ndarray | None = None
    shapes_source: str = ""


@dataclasses.dataclass(frozen=True)
class ShapeMap:
    r"""Which FEA grid points (nodes) give the model's coordinates, for MAC pairing and mode-shape residuals.

    - `hub`: a node fixed to the hub: its translations (3 coordinates) and, where the file has them, its
      rotations; `hub_point`: its position in B [m] (the hub's translation there is $x_B + \phi\times p$).
    - `hub_rotation`: a node whose rotation is the hub's (3 coordinates): its rotations R1-R3 where the file has
      them, else its displacements (a CalculiX `*RIGID BODY` ROT NODE's displacements are its rotation vector);
      None: the hub node's own rotations, where the file has them.
    - `panels`: per mapped panel `(name, node, distance)`: `distance` None: the node turns with the panel, its
      rotation (as `hub_rotation`: R1-R3, else its displacements) is $\phi + \theta\,\hat s_2$ (3
      coordinates); a number [m]: the node lies on the panel at that distance from the hinge line (on the line
      from the hinge point through the panel's CoM), its displacement normal to the panel ($\hat s_3$) is
      $\hat s_3\cdot(x_B + \phi\times p) + \theta\,$distance (1 coordinate).
    - `sigma`: fit the paired modes' shapes with this 1-sigma uncertainty (per coordinate of the unit-normalised
      shape vector); None: shapes pair the modes and judge the solutions only. `mac_min`: a solution whose paired
      modes have a shape MAC below this does not count as reaching the targets.
    """

    hub: int | None
    hub_point: Sequence[float | int]
    hub_rotation: int | None = None
    panels: tuple[tuple[str | int, int, float | int | None], ...] = ()  # panel name (or index), node, distance
    sigma: float | int | None = None
    mac_min: float | int = 0.9

    def __post_init__(self):  # hashable (a static field of the compiled residuals)
        object.__setattr__(self, "hub_point", tuple(float(x) for x in self.hub_point))
        object.__setattr__(self, "panels", tuple(tuple(p) for p in self.panels))
