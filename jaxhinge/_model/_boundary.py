r"""The boundary condition of the hub in a modal analysis: free-free (as flown) or hub clamped (an FEA fixture, a
test stand), as objects (diffrax-style strategies): `FreeFree()`, `HubClamped()`.

What differs between them lives here, once: whether the hub moves in the modes (free: condensed out of the
hinge coordinates with zero total momentum; clamped: removed), how many rigid-body modes an FEA of that boundary
carries (6 or 0), how the simulation check holds the hub (a hub `hub_mass_factor` times heavier). Files and the
command line keep their names `"free"`, `"clamped"` (`BOUNDARIES`), mapped to these objects by `as_boundary`
at each public entry (`modes`, `linearize`'s reduced matrices, `measure_modes`, `fit`), so no analysis tests a
string.
"""

import abc
from typing import ClassVar

import equinox as eqx

__all__ = ["BOUNDARIES", "AbstractBoundary", "FreeFree", "HubClamped", "as_boundary"]


class AbstractBoundary(eqx.Module):
    """How the hub is held in a modal analysis. Stateless (no fields): equal and hashable by kind, so a static
    argument of a compiled program."""

    name: ClassVar[str]  # the file / command-line name
    hub_free: ClassVar[bool]  # the hub moves in the modes (zero total momentum) or is held fixed
    rigid_body_modes: ClassVar[int]  # rigid-body modes an FEA of this boundary has (removed by the readers)
    hub_mass_factor: ClassVar[float]  # the simulation check holds the hub by making it this much heavier
    description: ClassVar[str]  # a few words for tables and plots

    @abc.abstractmethod
    def _kind(self) -> None:
        """(Marks the class abstract: only the concrete kinds below are instantiated.)"""


class FreeFree(AbstractBoundary):
    """Free-free: the hub floats, as flown. The 6 rigid-body modes are excluded; each flexible mode moves the hub
    with zero total momentum."""

    name: ClassVar[str] = "free"
    hub_free: ClassVar[bool] = True
    rigid_body_modes: ClassVar[int] = 6
    hub_mass_factor: ClassVar[float] = 1.0
    description: ClassVar[str] = "free-free"

    def _kind(self) -> None:
        return None


class HubClamped(AbstractBoundary):
    """Hub clamped: the hub is fixed (an FEA fixture, a test stand); the panels move alone. The simulation
    check holds the hub by a mass and inertia $10^9$ times the model's."""

    name: ClassVar[str] = "clamped"
    hub_free: ClassVar[bool] = False
    rigid_body_modes: ClassVar[int] = 0
    hub_mass_factor: ClassVar[float] = 1e9
    description: ClassVar[str] = "hub-clamped"

    def _kind(self) -> None:
        return None


# The one name table: file and command-line names -> kinds.
BOUNDARIES: dict[str, type[AbstractBoundary]] = {"free": FreeFree, "clamped": HubClamped}


def as_boundary(boundary: "AbstractBoundary | str", field: str = "boundary") -> AbstractBoundary:
    """`boundary` as an `AbstractBoundary`: an object as is, a name of `BOUNDARIES` (`"free"`, `"clamped"`) as its
    kind; anything else a `ValueError` naming `field`, the value and the choices."""
    if isinstance(boundary, AbstractBoundary):
        return boundary
    if isinstance(boundary, str) and boundary in BOUNDARIES:
        return BOUNDARIES[boundary]()
    raise ValueError(f"{field} = {boundary!r}: allowed values are " + ", ".join(f'"{n}"' for n in BOUNDARIES)
                     + " (or the objects " + ", ".join(f"{k.__name__}()" for k in BOUNDARIES.values()) + ")")
