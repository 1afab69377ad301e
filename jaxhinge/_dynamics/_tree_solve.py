"""The hinge-space solve of a model with chains: the hinge mass matrix is block diagonal by subtree (one block per
chain hinged to the hub), each block solved by an unrolled $L D L^T$ factorisation of its static size."""

import jax.numpy as jnp

from .._math import UNROLL
from .._model._spacecraft import Topology

__all__ = ["hinge_solve"]


def hinge_solve(top: Topology, M, rhs):
    """$M^{-1}$ rhs for the symmetric positive definite hinge mass matrix `M` (N, N) of a model with chains
    (with every panel on the hub it is diagonal and `hinge_contributions` divides instead).

    Each diagonal block (`blocks`) is solved by an unrolled $L D L^T$ factorisation of its static size, and
    the zero blocks between chains are never touched: plain multiply-adds that XLA fuses with the rest of the
    vector field, no LAPACK call (a custom call keeps XLA:CPU from compiling the integration loop into one
    function) and no pivoting (none is needed for a positive definite matrix). Blocks longer than `UNROLL`
    panels use `jnp.linalg.solve`."""
    if max(len(b) for b in top.blocks) > UNROLL:
        return jnp.linalg.solve(M, rhs)
    b = [r[0] for r in jnp.split(rhs, top.count)]
    x = [None] * top.count
    for idx in top.blocks:
        _ldl_solve(M, b, x, idx)
    return jnp.stack(x)


def _ldl_solve(M, b, x, idx: tuple[int, ...]) -> None:
    """Unrolled $L D L^T$ solve of the block `M[idx][:, idx]` against the rows `b[idx]`, written to `x[idx]`."""
    n = len(idx)
    L = [[None] * n for _ in range(n)]
    D = [None] * n
    for i in range(n):
        for j in range(i + 1):
            s = M[idx[i], idx[j]]
            for k in range(j):
                s = s - L[i][k] * L[j][k] * D[k]
            if i == j:
                D[i] = s
            else:
                L[i][j] = s / D[j]
    z = [None] * n
    for i in range(n):  # L z = b
        z[i] = b[idx[i]]
        for k in range(i):
            z[i] = z[i] - L[i][k] * z[k]
    for i in reversed(range(n)):  # D L^T x = z
        xi = z[i] / D[i]
        for k in range(i + 1, n):
            xi = xi - L[k][i] * x[idx[k]]
        x[idx[i]] = xi
