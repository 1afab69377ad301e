"""Small rotation and vector helpers in Basilisk/Schaub conventions.

MRPs: $\\sigma = \\hat e \\tan(\\Phi/4)$; `mrp_to_dcm(sigma)` returns $[BN] = C(\\sigma)$, the DCM that maps
N-frame components to B-frame components (Basilisk's `toRotationMatrix()` returns its transpose $[NB]$).
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int


def tilde(v: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3 3"]:
    """Skew-symmetric cross-product matrix: `tilde(a) @ b == cross(a, b)`."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    zero = jnp.zeros_like(x)
    rows = ([zero, -z, y], [z, zero, -x], [-y, x, zero])
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def mrp_to_dcm(sigma: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3 3"]:
    """$[BN] = C(\\sigma) = I + (8\\tilde\\sigma^2 - 4(1-\\sigma^2)\\tilde\\sigma)/(1+\\sigma^2)^2$."""
    s2 = (sigma[..., 0] ** 2 + sigma[..., 1] ** 2 + sigma[..., 2] ** 2)[..., None, None]
    st = tilde(sigma)
    eye = jnp.eye(3, dtype=sigma.dtype)
    st2 = sigma[..., :, None] * sigma[..., None, :] - s2 * eye  # tilde(s)^2, written out (fuses)
    return eye + (8.0 * st2 - 4.0 * (1.0 - s2) * st) / (1.0 + s2) ** 2


def rotation_dcm(phi: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """DCM $\\exp(-[\\tilde\\phi])$ of a frame rotated by the rotation vector $\\phi$ (Rodrigues; exact at 0, smooth
    through it for gradients)."""
    angle2 = jnp.sum(phi**2)
    safe = jnp.where(angle2 > 0, angle2, 1.0)
    angle = jnp.sqrt(safe)
    small = angle2 < 1e-12
    s = jnp.where(small, 1.0 - angle2 / 6.0, jnp.sin(angle) / angle)
    c1 = jnp.where(small, 0.5 - angle2 / 24.0, (1.0 - jnp.cos(angle)) / safe)
    t = tilde(phi)
    return jnp.eye(3, dtype=phi.dtype) - s * t + c1 * t @ t


def mrp_bmat(sigma: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """$B(\\sigma) = (1-\\sigma^2) I + 2\\tilde\\sigma + 2\\sigma\\sigma^T$, so that $\\dot\\sigma = B\\omega/4$."""
    s2 = sigma[0] ** 2 + sigma[1] ** 2 + sigma[2] ** 2
    return (1.0 - s2) * jnp.eye(3, dtype=sigma.dtype) + 2.0 * tilde(sigma) + 2.0 * sigma[:, None] * sigma[None, :]


def safe_sqrt(x: Float[Array, "*batch"]) -> Float[Array, "*batch"]:
    """$\\sqrt{x}$ where $x > 0$, else 0, with a finite derivative everywhere (0 where $x \\le 0$)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def mrp_near(sigma: Float[Array, "*batch 3"], ref: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3"]:
    """The MRP set of `sigma` (itself or its shadow, the same attitude) nearer `ref`: a state compared with, or
    interpolated towards, another on the same branch."""
    shadow = -sigma / jnp.sum(sigma * sigma, -1, keepdims=True).clip(1e-300)
    far = jnp.sum((shadow - ref) ** 2, -1, keepdims=True) < jnp.sum((sigma - ref) ** 2, -1, keepdims=True)
    return jnp.where(far, shadow, sigma)


def mrp_shadow(sigma: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3"]:
    """Basilisk's switch: if $|\\sigma| > 1$, $\\sigma \\to -\\sigma/|\\sigma|^2$ (same attitude, $|\\sigma| \\le 1$)."""
    s2 = jnp.sum(sigma * sigma, -1, keepdims=True)
    switch = s2 > 1.0
    safe = jnp.where(switch, s2, 1.0)
    return jnp.where(switch, -sigma / safe, sigma)


def sub_mrp(s1: Float[ArrayLike, "3"], s2: Float[ArrayLike, "3"]) -> Float[Array, "3"]:
    """MRP of the rotation from the frame of `s2` to the frame of `s1` (both relative to a common frame), as
    Basilisk's `subMRP`: $\\sigma_{1/2} = \\dfrac{(1-|\\sigma_2|^2)\\sigma_1 - (1-|\\sigma_1|^2)\\sigma_2
    + 2\\sigma_1\\times\\sigma_2}{1 + |\\sigma_1|^2|\\sigma_2|^2 + 2\\sigma_1\\cdot\\sigma_2}$, with `s1`'s shadow set
    where that denominator is below 0.1, mapped to the inner set ($|\\sigma| \\le 1$, `mrp_shadow`). Its principal
    angle is $4\\arctan|\\sigma_{1/2}| \\in [0, \\pi]$. Finite derivatives everywhere (no division by zero in a
    branch not taken)."""
    s22 = jnp.dot(s2, s2)

    def det(a):
        return 1.0 + jnp.dot(a, a) * s22 + 2.0 * jnp.dot(a, s2)

    shadow = jnp.abs(det(s1)) < 0.1
    a = jnp.where(shadow, -s1 / jnp.where(shadow, jnp.dot(s1, s1), 1.0), s1)
    q = ((1.0 - s22) * a + 2.0 * cross3(a, s2) - (1.0 - jnp.dot(a, a)) * s2) / det(a)
    return mrp_shadow(q)


def dcm_to_mrp(dcm: Float[Array, "*batch 3 3"]) -> Float[Array, "*batch 3"]:
    """MRP of a DCM ($[BN] \\to \\sigma_{BN}$), via Shepperd's quaternion method with $\\beta_0 \\ge 0$.

    Returns the set with $|\\sigma| \\le 1$ (at exactly 180 degrees, $|\\sigma| = 1$).
    """
    c = dcm
    tr = c[..., 0, 0] + c[..., 1, 1] + c[..., 2, 2]
    b2 = jnp.stack([(1.0 + tr) / 4.0] + [(1.0 + 2.0 * c[..., k, k] - tr) / 4.0 for k in range(3)], -1)
    i = jnp.argmax(b2, -1)
    d23, d31, d12 = c[..., 1, 2] - c[..., 2, 1], c[..., 2, 0] - c[..., 0, 2], c[..., 0, 1] - c[..., 1, 0]
    s23, s31, s12 = c[..., 1, 2] + c[..., 2, 1], c[..., 2, 0] + c[..., 0, 2], c[..., 0, 1] + c[..., 1, 0]

    def cand(bk, parts):
        bk = jnp.sqrt(jnp.maximum(bk, 1e-300))
        return jnp.stack([p / (4.0 * bk) if p is not None else bk for p in parts], -1)

    q0 = cand(b2[..., 0], [None, d23, d31, d12])
    q1 = cand(b2[..., 1], [d23, None, s12, s31])
    q2 = cand(b2[..., 2], [d31, s12, None, s23])
    q3 = cand(b2[..., 3], [d12, s31, s23, None])
    q = jnp.choose(i[..., None], [q0, q1, q2, q3], mode="clip")
    q = jnp.where(q[..., :1] < 0.0, -q, q)
    return q[..., 1:] / (1.0 + q[..., :1])


def m2(theta: Float[Array, "*batch"]) -> Float[Array, "*batch 3 3"]:
    """Basilisk's `eigenM2`: rotation about the second axis, `[[c, 0, -s], [0, 1, 0], [s, 0, c]]`."""
    ct, st = jnp.cos(theta), jnp.sin(theta)
    z, o = jnp.zeros_like(theta), jnp.ones_like(theta)
    return jnp.stack([jnp.stack([ct, z, -st], -1), jnp.stack([z, o, z], -1), jnp.stack([st, z, ct], -1)], -2)


# Sums and static-matrix products over a short leading axis (the panels), written as unrolled adds of static
# slices: XLA fuses slices and elementwise arithmetic into the surrounding loop, whereas every `reduce`, `dot` or
# gather is a kernel of its own (on CPU ~40 ns of launch cost each, and on GPU a launch of several us). Above
# `UNROLL` entries the plain reduction / dot is used (the unrolled form grows the program).
UNROLL = 16


def lead_sum(x: Float[Array, "n *rest"]) -> Float[Array, "*rest"]:
    """$\\sum_j x_j$ over the leading axis (unrolled for up to `UNROLL` entries; zeros for none)."""
    n = x.shape[0]
    if n == 0 or n > UNROLL:
        return jnp.sum(x, 0)
    parts = jnp.split(x, n)  # transposes to one concatenate (slices would transpose to n pads)
    out = parts[0][0]
    for j in range(1, n):
        out = out + parts[j][0]
    return out


def lead_apply(A, x: Float[Array, "n *rest"]) -> Float[Array, "m *rest"]:
    """$A x$ over the leading axis of `x` for a static NumPy matrix `A` (m, n): unrolled multiply-adds of the
    slices $x_k$ (a column of zeros costs nothing, a column of ones no multiply) for up to `UNROLL` columns, else a
    `tensordot`."""
    A = np.asarray(A)
    m, n = A.shape
    if n > UNROLL:
        return jnp.tensordot(jnp.asarray(A, x.dtype), x, 1)
    shape = (m,) + (1,) * (x.ndim - 1)
    out = None
    for k in range(n):
        col = A[:, k]
        if not col.any():
            continue
        xk = x[k][None]
        term = xk if np.all(col == 1) else jnp.asarray(col, x.dtype).reshape(shape) * xk
        if term.shape[0] != m:
            term = jnp.broadcast_to(term, (m,) + x.shape[1:])
        out = term if out is None else out + term
    return jnp.zeros((m,) + x.shape[1:], x.dtype) if out is None else out


def assignment(score: Float[ArrayLike, "n m"]) -> Int[Array, " n"]:
    """The column assigned to each row that maximises the total `score` (linear assignment problem, Hungarian
    algorithm: `optax.assignment.hungarian_algorithm`), min(n, m) pairs; traceable, works under `jit` and `vmap`.
    **Returns:** an int array, `cols[i]` for row `i`, -1 for a row left without a column (n > m)."""
    import optax

    rows, cols = optax.assignment.hungarian_algorithm(-jnp.asarray(score))
    return jnp.full(score.shape[0], -1, jnp.int32).at[rows].set(cols.astype(jnp.int32))


# ------------------------------------------------------------------------------------------------------------
# 3-vector and 3x3 algebra written out in components (the vector field's helpers). XLA on CPU compiles every
# dot/reduction as its own kernel; written elementwise, a whole stage fuses into one loop. Leading axes
# broadcast once, before the components are split (reverse mode transposes each broadcast into a reduction), and
# matrices are assembled by concatenation rather than by multiplying with the identity.
# ------------------------------------------------------------------------------------------------------------


def xyz(a):
    """The three components of `a` over its last axis, each keeping that axis (length 1): one `split`
    instead of a slice and a squeeze per use (fewer traced operations; the compiled program is the same)."""
    return jnp.split(a, 3, axis=-1)


def dot3(a, b):
    """$a \\cdot b$ over the last axis."""
    a, b = jnp.broadcast_arrays(a, b)
    ax, ay, az = xyz(a)
    bx, by, bz = xyz(b)
    return (ax * bx + ay * by + az * bz)[..., 0]


def mv3(M, x):
    """$M x$ for 3x3 `M`."""
    c0, c1, c2 = xyz(M)  # columns (..., 3, 1)
    x0, x1, x2 = (xi[..., None, :] for xi in xyz(x))  # (..., 1, 1)
    return (c0 * x0 + c1 * x1 + c2 * x2)[..., 0]


def mtv3(M, x):
    """$M^T x$ for 3x3 `M`."""
    r0, r1, r2 = jnp.split(M, 3, axis=-2)  # rows (..., 1, 3)
    x0, x1, x2 = (xi[..., None] for xi in xyz(x))  # (..., 1, 1)
    return (r0 * x0 + r1 * x1 + r2 * x2)[..., 0, :]


def matrix3(entries):
    """3x3 matrices from nine row-major entries of one shape (..., 1)."""
    return jnp.concatenate([jnp.concatenate(entries[3 * i:3 * i + 3], -1)[..., None, :] for i in range(3)], -2)


def mm3(A, B):
    """$A B$ for 3x3 matrices."""
    a0, a1, a2 = xyz(A)  # columns (..., 3, 1)
    b0, b1, b2 = jnp.split(B, 3, axis=-2)  # rows (..., 1, 3)
    return a0 * b0 + a1 * b1 + a2 * b2


def outer3(a, b):
    """$a b^T$ over the last axes."""
    return a[..., :, None] * b[..., None, :]


def cross3(a, b):
    """$a \\times b$ over the last axis."""
    a, b = jnp.broadcast_arrays(a, b)
    ax, ay, az = xyz(a)
    bx, by, bz = xyz(b)
    return jnp.concatenate([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)
