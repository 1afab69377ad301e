"""The boundary conditions live in `_model._boundary`; named here for the modules that import them from this
storey still (`_closed_loop`)."""

from ..._model._boundary import BOUNDARIES, AbstractBoundary, FreeFree, HubClamped, as_boundary

__all__ = ["BOUNDARIES", "AbstractBoundary", "FreeFree", "HubClamped", "as_boundary"]
