r"""Modes of the linearisation (`_linearize`): undamped and damped, and their derivatives.

**Modes.** Undamped: $M_r = LL^T$ (Cholesky), `eigh` of the symmetric $\tilde K = L^{-1}K_rL^{-T}$ gives $\omega^2$
and mass-normalised shapes (differentiable, robust to repeated frequencies). Damped: the $2N$ poles $\lambda$ of
$\lambda^2 I + \lambda\tilde C + \tilde K$ (eigenvalues of the first-order matrix, computed inside the compiled
program: `jnp.linalg.eigvals`, LAPACK on CPU, with no host callback, so the modal programs go into the compile
cache; on other backends on the host, `eigenvalues`). Each flexible mode is a pair of poles $(a, b)$: a
complex-conjugate pair (underdamped), or two real poles (overdamped, paired by their overlap with the undamped
modes). MATLAB `damp` definitions:
`frequency_hz` $= |\lambda|/2\pi = \sqrt{ab}/2\pi$, `damping_ratio` $= -\mathrm{Re}\,\lambda/|\lambda| =
-(a+b)/(2\sqrt{ab})$, `damped_frequency_hz` $= |\mathrm{Im}\,\lambda|/2\pi$. An overdamped mode reports the
equivalent second-order values ($\zeta \ge 1$; `damp` would list its two real poles separately with
$\zeta = 1$). Pole pairs are matched to undamped modes by maximum overlap (assignment problem), which gives
each mode its `natural_frequency_hz`, `shape` and `energy_fraction`; modes are ordered by ascending
`frequency_hz`.

**Derivatives.** $\omega^2$ through `eigh`. Poles through a custom JVP of the quadratic eigenproblem,
$d\lambda = -x^T(\lambda\,d\tilde C + d\tilde K)x / x^T(2\lambda I + \tilde C)x$ ($x$: right = left eigenvector,
the matrices being symmetric). Within a cluster of repeated poles (symmetric panels) every member gets the
cluster's mean derivative, $-\mathrm{tr}(G^{-1}V^T(\lambda\,d\tilde C + d\tilde K)V)/m$ ($V$: a basis of the
eigenspace, $G = V^T(2\lambda I + \tilde C)V$): exact for perturbations that keep the symmetry (tied parameters),
and exact for any symmetric function of the cluster (a sorted-target loss) otherwise. Never NaN at repeated
frequencies; the mode *shapes* inside a degenerate cluster are arbitrary (any basis of the eigenspace) and
their derivatives are not defined there.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Complex, Float, Int

from ..._math import assignment, safe_sqrt, tilde
from ..._model._boundary import AbstractBoundary, FreeFree, as_boundary
from ..._model._scenario import Scenario
from ..._model._spacecraft import Spacecraft, strip_labels
from ..._runtime._programs import program
from ._linearize import (
    body_jacobians,
    linear_matrices,
    mass_matrix,
    mode_labels,
    reduced_matrices,
    spacecraft_of,
    structure,
    wheel_speeds,
)

_CLUSTER_RTOL = 1e-8  # poles closer than this (relative to the largest |lambda|) form one cluster
_IMAG_RTOL = 1e-12  # |Im lambda| below this (relative) counts as a real pole



# ------------------------------------------------------------------------------------------------------------
# Damped poles: eigen-solve in the program (LAPACK geev through XLA) + custom JVP
# ------------------------------------------------------------------------------------------------------------


def _pole_clusters(lam, Kt, Ct, phi):
    """For every pole: the cluster's mean-derivative projector $V G^+ V^T / m$ (`_poles_jvp`) and the
    cluster's overlap with the undamped modes `phi` (squared components of its eigenspace basis, normalised).
    The cluster of pole $i$: the poles within `_CLUSTER_RTOL` of it, $m$ of them, mean $\\lambda_c$; $V$ the
    right singular vectors of $\\lambda_c^2 I + \\lambda_c\\tilde C + \\tilde K$ of its $m$ smallest singular
    values (its null space), kept by a mask so that every shape is static."""
    n = Kt.shape[-1]
    scale = jnp.maximum(jnp.max(jnp.abs(lam)), 1e-300)
    near = jnp.abs(lam[:, None] - lam[None, :]) <= _CLUSTER_RTOL * scale
    m = jnp.sum(near, 1)
    lc = jnp.sum(jnp.where(near, lam[None, :], 0.0), 1) / m
    eye = jnp.eye(n, dtype=lam.dtype)
    _, _, vh = jnp.linalg.svd(lc[:, None, None] ** 2 * eye + lc[:, None, None] * Ct + Kt)
    keep = jnp.arange(n)[None, :] >= n - jnp.minimum(m, n)[:, None]  # the m smallest singular values
    V = jnp.where(keep[:, None, :], jnp.conj(jnp.swapaxes(vh, -1, -2)), 0.0)  # (poles, n, n), columns kept
    Vt = jnp.swapaxes(V, -1, -2)
    G = Vt @ ((2.0 * lc)[:, None, None] * eye + Ct) @ V
    proj = V @ jnp.linalg.pinv(G, rtol=1e-12) @ Vt / m[:, None, None]
    overlap = jnp.sum(jnp.abs(jnp.einsum("ka,pkc->pac", phi, V)) ** 2, -1)
    overlap = overlap / jnp.maximum(jnp.sum(jnp.abs(V) ** 2, (-1, -2)), 1e-300)[:, None]
    return proj, overlap


def _eigvals_host(a):
    """`np.linalg.eigvals` through a host callback (batched like the input)."""
    return jax.pure_callback(lambda x: np.linalg.eigvals(x).astype(np.complex128),
                             jax.ShapeDtypeStruct(a.shape[:-1], jnp.complex128), a, vmap_method="broadcast_all")


def eigenvalues(a):
    """Eigenvalues of real square matrices: LAPACK inside the program on CPU (no callback, so the program can be
    cached); on other backends, whose support for nonsymmetric eigenproblems varies, on the host. Only the
    branch of the backend in use is compiled (`lax.platform_dependent`)."""
    return jax.lax.platform_dependent(a, cpu=lambda x: jnp.linalg.eigvals(x).astype(jnp.complex128),
                                      default=_eigvals_host)


def _poles_in_program(Kt, Ct):
    r"""Poles ordered as mode pairs, their derivative projectors, the matched undamped mode, overdamped flags
    (`_pair_poles`) of $\lambda^2 I + \lambda\tilde C + \tilde K$."""
    n = Kt.shape[-1]
    eye = jnp.eye(n, dtype=Kt.dtype)
    lam = eigenvalues(jnp.block([[jnp.zeros_like(Kt), eye], [-Kt, -Ct]]))
    w2, phi = jnp.linalg.eigh(0.5 * (Kt + Kt.T))
    proj, overlap = _pole_clusters(lam, Kt, Ct, phi)
    return _pair_poles(lam, proj, overlap, w2)


def _pair_poles(lam, proj, overlap, w2):
    r"""Group $2n$ poles into $n$ modes and match them to the $n$ undamped modes (`overlap`: pole x undamped
    mode; `w2`: a value per undamped mode that breaks ties in the order).

    Every mode is a pair of poles: a pole with $\mathrm{Im} > 0$ and its conjugate (LAPACK returns conjugate
    pairs exactly), or two real poles, paired by the undamped mode they overlap most when each undamped mode
    gets exactly two, else adjacent in value. Modes are matched to undamped modes by maximum total overlap
    (`assignment`) and ordered by ascending $|\lambda|$, ties by `w2`."""
    n = w2.shape[-1]
    tol_im = _IMAG_RTOL * jnp.maximum(jnp.max(jnp.abs(lam)), 1e-300)
    upper, real = jnp.imag(lam) > tol_im, jnp.abs(jnp.imag(lam)) <= tol_im

    # real poles: sorted by (undamped mode overlapped most, when each such mode has exactly two; value)
    group = jnp.argmax(overlap, 1)
    per_group = jnp.sum(real[:, None] & (group[:, None] == jnp.arange(n)[None, :]), 0)
    by_group = jnp.all((per_group == 0) | (per_group == 2))
    sorted_real = jnp.lexsort((jnp.real(lam), jnp.where(by_group, group, 0), ~real))
    rank = jnp.zeros(2 * n, jnp.int32).at[sorted_real].set(jnp.arange(2 * n, dtype=jnp.int32))
    next_real = sorted_real[jnp.minimum(rank + 1, 2 * n - 1)]

    # one leader pole per mode (n of them): each upper pole, and every other real pole in sorted order
    leader = upper | (real & (rank % 2 == 0))
    a = jnp.argsort(~leader, stable=True)[:n]
    over = real[a]
    b = jnp.where(over, next_real[a], a)
    lam_a, proj_a = lam[a], proj[a]
    lam_b = jnp.where(over, lam[b], jnp.conj(lam_a))  # the conjugate partner: its projector is the conjugate
    proj_b = jnp.where(over[:, None, None], proj[b], jnp.conj(proj_a))
    undamped = assignment(0.5 * (overlap[a] + overlap[b]))
    wn = jnp.sqrt(jnp.maximum(jnp.real(lam_a * lam_b), 0.0))
    order = jnp.lexsort((w2[undamped], wn))
    pair = lambda x, y: jnp.stack([x[order], y[order]], 1).reshape((2 * n,) + x.shape[1:])
    return pair(lam_a, lam_b), pair(proj_a, proj_b), undamped[order], over[order]


@jax.custom_jvp
def _poles(Kt, Ct, lam, proj):
    return lam


@_poles.defjvp
def _poles_jvp(primals, tangents):
    _, _, lam, proj = primals
    dK, dC = (jnp.asarray(t, dtype=proj.dtype) for t in tangents[:2])
    return lam, -jnp.einsum("iab,iba->i", proj, lam[:, None, None] * dC[None] + dK[None])


def damped_poles(
    Kt: Float[Array, "n n"], Ct: Float[Array, "n n"]
) -> tuple[Complex[Array, " two_n"], Int[Array, " n"], Bool[Array, " n"]]:
    """Poles of $\\lambda^2 I + \\lambda\\tilde C + \\tilde K$ as mode pairs `(lam[2j], lam[2j+1])`, modes in
    ascending $|\\lambda|$; the undamped mode (index into ascending $\\omega^2$ of $\\tilde K$) matched to each;
    whether each mode is overdamped. Differentiable in `Kt`, `Ct` (custom JVP, see the module docstring)."""
    lam, proj, undamped, over = _poles_in_program(jax.lax.stop_gradient(Kt), jax.lax.stop_gradient(Ct))
    return _poles(Kt, Ct, lam, proj), undamped, over


# ------------------------------------------------------------------------------------------------------------
# Spinning wheels: the gyroscopic problem, first order, with left/right eigenvectors
# ------------------------------------------------------------------------------------------------------------


def _gyroscopic_system(sc: Spacecraft, Omega):
    r"""The free-free first-order matrix with wheels: $\dot y = A y$, $y = (\delta\theta, \dot q)$ with
    $q = (\phi_B, \delta\theta, \psi)$, the hub translation condensed (zero linear momentum: exact, as no
    stiffness, damping or gyroscopic term acts on it). Hub rotation and wheel angles enter only through their
    rates (no stiffness), so the $3 + W$ rigid poles that they would add at zero are left out.
    **Returns:** `(A, M_q, k)`: the matrix, the condensed mass matrix of $q$, the hinge stiffness matrix."""
    M, C, G, K = linear_matrices(sc, Omega)
    Mq = M[3:, 3:] - M[:3, 3:].T @ jnp.linalg.solve(M[:3, :3], M[:3, 3:])
    Mq = 0.5 * (Mq + Mq.T)
    n, nq = sc.panels.count, Mq.shape[0]
    select = jnp.zeros((n, nq), M.dtype).at[:, 3:3 + n].set(jnp.eye(n, dtype=M.dtype))  # dtheta/dt from qdot
    A = jnp.concatenate([jnp.concatenate([jnp.zeros((n, n), M.dtype), select], 1),
                         -jnp.linalg.solve(Mq, jnp.concatenate([K[3:, 6:6 + n], (C + G)[3:, 3:]], 1))], 0)
    return A, Mq, K[6:6 + n, 6:6 + n]


def first_order_clusters(lam, A):
    r"""For every eigenvalue of `A`: the cluster's mean-derivative projector $X (Y^H X)^+ Y^H / m$ (right and left
    eigenspace bases $X$, $Y$: the null spaces of $\lambda_c I - A$ from its SVD, $m$ the cluster size, as in
    `_pole_clusters`), and $X$ (columns kept by a mask; the last column spans the smallest singular value)."""
    n = A.shape[-1]
    scale = jnp.maximum(jnp.max(jnp.abs(lam)), 1e-300)
    near = jnp.abs(lam[:, None] - lam[None, :]) <= _CLUSTER_RTOL * scale
    m = jnp.sum(near, 1)
    lc = jnp.sum(jnp.where(near, lam[None, :], 0.0), 1) / m
    u, _, vh = jnp.linalg.svd(lc[:, None, None] * jnp.eye(n, dtype=lam.dtype) - A)
    keep = (jnp.arange(n)[None, :] >= n - jnp.minimum(m, n)[:, None])[:, None, :]
    X = jnp.where(keep, jnp.conj(jnp.swapaxes(vh, -1, -2)), 0.0)
    Yh = jnp.conj(jnp.swapaxes(jnp.where(keep, u, 0.0), -1, -2))
    proj = X @ jnp.linalg.pinv(Yh @ X, rtol=1e-12) @ Yh / m[:, None, None]
    return proj, X


@jax.custom_jvp
def poles_first_order(A, lam, proj):
    return lam


@poles_first_order.defjvp
def _poles_first_order_jvp(primals, tangents):
    _, lam, proj = primals
    return lam, jnp.einsum("iab,ba->i", proj, jnp.asarray(tangents[0], dtype=proj.dtype))


def _spinning_poles(sc: Spacecraft, Omega, ref: "Modes", Mr):
    r"""The $2N$ flexible poles of the free-free spacecraft with spinning wheels, as mode pairs matched to the
    modes `ref` of its structure (`structure(sc)`, whose hinge mass matrix is `Mr`).

    Of the $3 + 2N + W$ eigenvalues of `_gyroscopic_system`, the flexible ones are the $2N$ whose eigenvectors
    carry the largest share of hinge strain energy, $\delta\theta^H k\,\delta\theta / (\delta\theta^H
    k\,\delta\theta + \dot q^H M_q \dot q)$ (1/2 for an undamped flexible mode; 0 for the rigid rotation
    and the wheels' spin; small for nutation, whose hinge motion is quasi-static). Derivatives: custom JVP
    $d\lambda = y^H dA\,x / y^H x$ (cluster means)."""
    A, Mq, k = _gyroscopic_system(sc, Omega)
    n = sc.panels.count
    A0 = jax.lax.stop_gradient(A)
    lam = eigenvalues(A0)
    proj, X = first_order_clusters(lam, A0)
    x = X[:, :, -1]
    strain = jnp.real(jnp.einsum("pi,ij,pj->p", jnp.conj(x[:, :n]), k, x[:, :n]))
    kinetic = jnp.real(jnp.einsum("pi,ij,pj->p", jnp.conj(x[:, n:]), Mq, x[:, n:]))
    sel = jnp.argsort(-strain / jnp.maximum(strain + kinetic, 1e-300), stable=True)[: 2 * n]
    Xt = X[sel][:, :n, :]  # hinge part of each flexible pole's eigenspace basis
    phi = ref.shape[:, 6:].T  # structural hinge shapes, Mr-orthonormal
    overlap = jnp.sum(jnp.abs(jnp.einsum("ka,kl,plc->pac", phi, Mr, Xt)) ** 2, -1)
    overlap = overlap / jnp.maximum(jnp.real(jnp.einsum("pkc,kl,plc->p", jnp.conj(Xt), Mr, Xt)), 1e-300)[:, None]
    lam, proj, undamped, over = _pair_poles(lam[sel], proj[sel], overlap, ref.natural_frequency_hz)
    return poles_first_order(A, lam, proj), undamped, over


# ------------------------------------------------------------------------------------------------------------
# Modes
# ------------------------------------------------------------------------------------------------------------


class Modes(eqx.Module):
    """The flexible modes of one spacecraft (N of them, one per panel), ordered by ascending `frequency_hz`.

    - `frequency_hz`: $|\\lambda|/2\\pi$ of the damped linear system [Hz] (MATLAB `damp`'s natural frequency).
    - `damping_ratio`: $-\\mathrm{Re}\\,\\lambda/|\\lambda|$ (`damp`'s damping); $\\ge 1$ for overdamped modes.
    - `damped_frequency_hz`: $|\\mathrm{Im}\\,\\lambda|/2\\pi$ [Hz], the oscillation frequency of a free response.
    - `natural_frequency_hz`: undamped natural frequency [Hz] of the matched undamped mode ($C = 0$; free-free
      with reaction wheels: $C = 0$ with the wheels stopped, $G = 0$, the same at any wheel speed, while the
      other frequencies carry the wheels' gyroscopic coupling).
    - `eigenvalue`: the pole $\\lambda$ with $\\mathrm{Im} \\ge 0$ [1/s] (overdamped: the slower real pole).
    - `overdamped`: the mode's two poles are real.
    - `shape`: the matched undamped mode shape in the $6+N$ coordinates $(x_B$ [m], $\\phi_B$ [rad],
      $\\delta\\theta$ [rad]$)$, mass-normalised ($x^TMx = 1$), sign such that its largest hinge component is
      positive. Clamped: the hub part is zero.
    - `energy_fraction`: the mode's kinetic energy split into hub translation, hub rotation (about the hub CoM)
      and each panel (columns, in `participants` order); rows sum to 1.
    - `participation`: the 6 participation factors of each mass-normalised mode for rigid motion of the hub
      about `reference_point` (translations x, y, z [kg^0.5], rotations about x, y, z through the point
      [kg^0.5 m]): $\\Gamma = X M R$ with $R$ the $(6+N) \\times 6$ rigid-body motion of the hub about the point
      ($x_B = u_P + \\phi \\times (r_B - r_P)$, $\\phi_B = \\phi$, $\\delta\\theta = 0$); sign as `shape`'s.
    - `effective_mass`: $\\Gamma^2$ per component [kg, kg m^2]: the modal effective masses of base motion as FEA
      solvers print them. Clamped: summed over the N modes they give the diagonal of $M_{R\\theta}
      M_{\\theta\\theta}^{-1} M_{\\theta R}$, the panels' mass as seen through their hinges. Free: zero (a
      free-free elastic mode carries no momentum), as in a free-free FEA.
    - `reference_point`: the point the rotational components refer to, in B [m].
    - `boundary` (static): `FreeFree()` or `HubClamped()` (`.name`: `"free"`, `"clamped"`); `panel_names`, `dof_names`, `participants` (static).

    Gradients of `frequency_hz`, `damping_ratio`, `natural_frequency_hz` are defined also at repeated
    frequencies, where shapes and energy fractions are an arbitrary basis of the eigenspace.
    """

    frequency_hz: Float[Array, " modes"]
    damping_ratio: Float[Array, " modes"]
    damped_frequency_hz: Float[Array, " modes"]
    natural_frequency_hz: Float[Array, " modes"]
    eigenvalue: Complex[Array, " modes"]
    overdamped: Bool[Array, " modes"]
    shape: Float[Array, "modes dof"]
    energy_fraction: Float[Array, "modes participants"]
    participation: Float[Array, "modes 6"]
    effective_mass: Float[Array, "modes 6"]
    reference_point: Float[Array, "3"]
    boundary: AbstractBoundary = eqx.field(static=True)
    panel_names: tuple[str, ...] = eqx.field(static=True)
    dof_names: tuple[str, ...] = eqx.field(static=True)
    participants: tuple[str, ...] = eqx.field(static=True)


def _pole_values(lam, overdamped):
    """`(frequency [rad/s], damping ratio, representative pole)` of mode pairs `(lam[2j], lam[2j+1])`."""
    a, b = lam[0::2], lam[1::2]
    wn = safe_sqrt(jnp.real(a * b))
    zeta = jnp.where(wn > 0, -jnp.real(a + b) / (2.0 * jnp.where(wn > 0, wn, 1.0)), jnp.inf) + 0.0
    # the representative pole: Im >= 0, or the slower real pole
    rep = jnp.where(overdamped, jnp.where(jnp.abs(a) <= jnp.abs(b), a, b), jnp.where(jnp.imag(a) >= 0, a, b))
    return wn, zeta, rep


def _modes(sc: Spacecraft, boundary: AbstractBoundary, reference_point=None, Omega=None) -> Modes:
    if sc.wheels is not None:  # the structure's modes; free: moved by the spinning wheels
        ref = _modes(structure(sc), boundary, reference_point)
        if not boundary.hub_free or sc.panels.count == 0:  # a clamped hub holds the wheels' gyroscopic torque
            return ref
        lam, undamped, overdamped = _spinning_poles(sc, Omega, ref, reduced_matrices(structure(sc), FreeFree())[0])
        wn, zeta, rep = _pole_values(lam, overdamped)
        pick = lambda x: x[undamped]
        return dataclasses.replace(
            ref, frequency_hz=wn / (2.0 * jnp.pi), damping_ratio=zeta,
            damped_frequency_hz=jnp.abs(jnp.imag(rep)) / (2.0 * jnp.pi), eigenvalue=rep, overdamped=overdamped,
            natural_frequency_hz=pick(ref.natural_frequency_hz), shape=pick(ref.shape),
            energy_fraction=pick(ref.energy_fraction), participation=pick(ref.participation),
            effective_mass=pick(ref.effective_mass))
    n = sc.panels.count
    dtype = jnp.result_type(sc.hub.mHub)
    ref = jnp.zeros(3, dtype) if reference_point is None else jnp.asarray(reference_point, dtype)
    if n == 0:
        e, e6 = jnp.zeros((0,), dtype), jnp.zeros((0, 6), dtype)
        return Modes(e, e, e, e, jnp.zeros((0,), jnp.complex128), jnp.zeros((0,), bool),
                     e6, jnp.zeros((0, 2), dtype), e6, e6, ref, boundary, **mode_labels(sc))
    Mr, Cr, Kr = reduced_matrices(sc, boundary)
    L = jnp.linalg.cholesky(Mr)

    def congruence(X):
        Y = jax.scipy.linalg.solve_triangular(L, X, lower=True)
        Y = jax.scipy.linalg.solve_triangular(L, Y.T, lower=True)
        return 0.5 * (Y + Y.T)

    Kt, Ct = congruence(Kr), congruence(Cr)
    lam, undamped, overdamped = damped_poles(Kt, Ct)
    wn, zeta, rep = _pole_values(lam, overdamped)
    two_pi = 2.0 * jnp.pi

    w2, psi = jnp.linalg.eigh(Kt)
    w2, psi = w2[undamped], psi[:, undamped]
    phi_t = jax.scipy.linalg.solve_triangular(L.T, psi, lower=False)  # (panels, modes)
    M = mass_matrix(sc)
    phi_h = -jnp.linalg.solve(M[:6, :6], M[:6, 6:] @ phi_t)  # the hub part of zero total momentum
    phi_h = phi_h if boundary.hub_free else jnp.zeros((6, n), dtype)
    X = jnp.concatenate([phi_h, phi_t], 0).T  # (modes, dof)
    big = jnp.argmax(jnp.abs(X[:, 6:]), axis=1)
    sign = jnp.sign(jnp.take_along_axis(X[:, 6:], big[:, None], 1))
    X = X * jnp.where(sign == 0, 1.0, sign)

    bj = body_jacobians(sc)
    v = jnp.einsum("bia,ma->mbi", bj.J_v, X)
    w = jnp.einsum("bia,ma->mbi", bj.J_w, X)
    e_trans = 0.5 * bj.mass * jnp.sum(v * v, -1)  # (modes, bodies)
    e_rot = 0.5 * jnp.einsum("mbi,bij,mbj->mb", w, bj.inertia, w)
    parts = jnp.concatenate([e_trans[:, :1], e_rot[:, :1], (e_trans + e_rot)[:, 1:]], 1)
    gamma = X @ M @ rigid_motion(ref, n)
    return Modes(frequency_hz=wn / two_pi, damping_ratio=zeta,
                 damped_frequency_hz=jnp.abs(jnp.imag(rep)) / two_pi,
                 natural_frequency_hz=safe_sqrt(w2) / two_pi, eigenvalue=rep, overdamped=overdamped, shape=X,
                 energy_fraction=parts / jnp.sum(parts, 1, keepdims=True), participation=gamma,
                 effective_mass=gamma**2, reference_point=ref, boundary=boundary, **mode_labels(sc))


def rigid_motion(reference_point: Float[Array, "3"], n: int) -> Float[Array, "dof 6"]:
    """$R$: the coordinates $(x_B, \\phi_B, \\delta\\theta)$ of a rigid motion of the whole spacecraft (hinges
    locked) by a translation $u_P$ and a small rotation $\\phi$ about `reference_point` P (in B):
    $x_B = u_P + \\phi \\times (0 - r_P)$."""
    eye = jnp.eye(3, dtype=reference_point.dtype)
    return jnp.concatenate([jnp.concatenate([eye, tilde(reference_point)], 1),
                            jnp.concatenate([jnp.zeros_like(eye), eye], 1),
                            jnp.zeros((n, 6), reference_point.dtype)], 0)


def one_member_at_a_time(f):
    """`f` (of array pytrees) computed one member at a time under `vmap` (`lax.map` over the members), so that
    every LAPACK call in it sees one matrix (or the matrices of one member); its derivatives are `f`'s own.

    Why: jaxlib 0.10's CPU LAPACK kernels split a batch into chunks, queue them on XLA's intra-op thread pool and
    block the pool thread that called them until the chunks are done (`jax::ParallelBatchMap`). When as many
    batched LAPACK calls run at once as the pool has threads (independent eigen-solves of one program, on a
    2-core machine two of them), every pool thread waits for chunks that no thread is left to run: XLA:CPU hangs
    (docs/speed.md, "A hang in XLA:CPU batched eigen-solves"). A call on one matrix runs inline and never waits.
    Derivatives (`jvp`, and `grad` through it) are `jax.jvp(f)` and batch as usual (`jax.custom_batching`'s loop
    has no derivative rule of its own)."""
    looped = jax.custom_batching.sequential_vmap(f)
    g = jax.custom_jvp(lambda *args: looped(*args))
    g.defjvp(lambda primals, tangents: jax.jvp(f, primals, tangents))
    return g


def _modes_members(sc: Spacecraft, boundary: AbstractBoundary, reference_point=None, Omega=None) -> Modes:
    """`_modes`, one member at a time under `vmap` (`one_member_at_a_time`); the model's non-array leaves and
    the boundary stay outside the custom rules."""
    dynamic, static = eqx.partition(sc, eqx.is_array)
    one = one_member_at_a_time(lambda d, p, w: _modes(eqx.combine(d, static), boundary, p, w))
    return one(dynamic, reference_point, Omega)


_modes_jit = program(_modes_members)


def modes(model: Scenario | Spacecraft, boundary: AbstractBoundary | str = FreeFree(), reference_point=None, *,
          Omega=None) -> Modes:
    """Flexible modes of the spacecraft linearised about its rest equilibrium.

    **Arguments:**

    - `model`: a `Scenario` or `Spacecraft` (the initial state, loads, gravity, `motorTorque` and `thetaDotRef`
      do not enter: see the module docstring).
    - `boundary`: `FreeFree()` (hub free, as flown; the 6 rigid-body modes are excluded) or `HubClamped()` (hub
      fixed, as on an FEA fixture or a test stand); or their names `"free"`, `"clamped"`.
    - `reference_point`: where the rotational participation factors and effective masses refer to, in B [m]
      (default: the origin of B).
    - `Omega`: with reaction wheels, the wheel speeds relative to the hub [rad/s] the modes are computed at
      (default: the scenario's `OmegaInit`; required with a bare `Spacecraft` that has wheels).

    **Returns:** `Modes`, N flexible modes in ascending `frequency_hz` (`damp` definitions), with undamped
    natural frequencies, mode shapes and kinetic-energy participation of the hub and of each named panel.

    Compiled once per model structure and boundary; differentiable with `jax.grad` / `jax.jacfwd` with
    respect to every array leaf (frequencies and damping ratios); works under `vmap`. The damped eigen-solve,
    pole pairing and mode matching run inside the program (static shapes; on CPU no host callback).
    """
    boundary = as_boundary(boundary)
    sc = spacecraft_of(model)
    return relabel(_modes_jit(strip_labels(sc), boundary, as_point(reference_point), wheel_speeds(model, Omega)), sc)


def relabel(m: Modes, sc: Spacecraft) -> Modes:
    """`Modes` computed on a label-free model, with the model's panel names."""
    return dataclasses.replace(m, **mode_labels(sc))


def modes_unjitted(model: Scenario | Spacecraft, boundary: AbstractBoundary | str = FreeFree(),
                   reference_point=None, *, Omega=None) -> Modes:
    """`modes` without its `eqx.filter_jit` (to compose inside a caller's own jit/grad)."""
    return _modes_members(spacecraft_of(model), as_boundary(boundary), as_point(reference_point),
                          wheel_speeds(model, Omega))


def as_point(p):
    return None if p is None else jnp.broadcast_to(jnp.asarray(p, dtype=float), (3,))


@program
def _matrices_jit(sc: Spacecraft, boundary: AbstractBoundary):
    return (*reduced_matrices(sc, boundary), mass_matrix(sc))


def complex_mode_state(
    model: Scenario | Spacecraft, mode: int, boundary: AbstractBoundary = FreeFree()
) -> tuple[complex, np.ndarray, np.ndarray]:
    """Host helper: the damped (complex) mode `mode` (0-based, in `modes` order) as `(lambda, theta_part,
    u_part)`, with `theta_part` the hinge displacement eigenvector ($N$, complex) and `u_part` the matching
    velocity $\\lambda x$ in all $6+N$ coordinates (the hub part condensed so that the total momentum is zero;
    zero when clamped). Used to start a free response in one mode: $z(0) = \\mathrm{Re}(a\\,v)$."""
    sc = spacecraft_of(model)
    Mr, Cr, Kr, M = (np.asarray(x) for x in _matrices_jit(strip_labels(sc), boundary))
    n = Mr.shape[0]
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-np.linalg.solve(Mr, Kr), -np.linalg.solve(Mr, Cr)]])
    lam, vec = np.linalg.eig(A)
    target = complex(np.asarray(modes(sc, boundary).eigenvalue)[mode])
    i = int(np.argmin(np.abs(lam - target)))
    x = vec[:n, i] / vec[:n, i][np.argmax(np.abs(vec[:n, i]))]
    xdot = lam[i] * x
    hdot = -np.linalg.solve(M[:6, :6], M[:6, 6:] @ xdot) if boundary.hub_free else np.zeros(6, dtype=complex)
    return complex(lam[i]), x, np.concatenate([hdot, xdot])
