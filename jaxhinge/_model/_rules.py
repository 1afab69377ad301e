"""The physical rules every model value passes, by whatever path it enters: a scenario file or dict (the file
checker), `Hub` / `Panels` built in code (on construction, with concrete values), a sweep's dispersions and
`simulate_batch`'s parameters (every member, before compute), and, traced, `simulate` and the fits' model
evaluations (a member that breaks a rule is reported as a failed run, never `success = True`).

Each rule is written once here, as a NumPy check that names the field, the value and the rule
(`inertia_problem`, `panel_inertia_problem`, `rotation_problem`, `rigid_body_problem`, `model_problems`), and
as the traced condition of the same rule (`model_ok`).

| rule | fields |
|---|---|
| > 0 | `mass`, `d`, `hub.mHub`, `gravity.mu`; `l` of a panel another panel hangs from |
| >= 0 | `k`, `c` |
| = 0 | `l` of a panel nothing hangs from (it places the next panel's hinge) |
| symmetric positive definite | `hub.IHubPntBc_B` |
| diagonal, diagonal > 0 | `IPntS_S` (Basilisk uses only the diagonal: S is a principal frame) |
| a rigid body's | principal moments: the largest <= the sum of the other two (within `TRIANGLE_RTOL`) |
| a proper rotation | `dcm_HB`: orthonormal and det = +1 (within `DCM_TOL`) |
| a unit vector | a wheel's spin axis `gsHat_B` (within `UNIT_TOL`) |
| > 0 / >= 0 | a wheel's `Js`, `omegaLimitCycle` / `cViscous`, `fCoulomb` |
| plausible (files, sweeps, batches) | no mass or principal moment below `REL_FLOOR` of the total / largest |
"""

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

__all__ = ["DCM_TOL", "DIAG_RTOL", "REL_FLOOR", "SYM_RTOL", "TRIANGLE_RTOL", "inertia_problem", "model_ok",
           "model_problems", "panel_inertia_problem", "rigid_body_problem", "rotation_problem", "wheels_problems"]

SYM_RTOL = 1e-12  # hub inertia symmetry, relative to max |I_ij|
REL_FLOOR = 1e-9  # a body's mass or principal moment: at least this fraction of the spacecraft's total / largest
TRIANGLE_RTOL = 1e-3  # principal moments: largest <= sum of the other two + this fraction of the largest
DIAG_RTOL = 1e-12  # panel inertia off-diagonals, relative to max |I_ii|
DCM_TOL = 1e-9  # dcm_HB orthonormality and det

SPD = "must be a symmetric positive-definite 3x3 matrix (kg m^2)"


def inertia_problem(inertia: np.ndarray) -> str | None:
    """What is wrong with a hub inertia (3, 3), or None: not symmetric, not positive definite."""
    scale = np.max(np.abs(inertia))
    asym = np.max(np.abs(inertia - inertia.T))
    if asym > SYM_RTOL * scale:
        return f"not symmetric (max |I - I^T| = {asym:.3g} > {SYM_RTOL:g} * max |I_ij|); {SPD}"
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    if not eig[0] > 0:
        return f"not positive definite (smallest eigenvalue {eig[0]:.6g}); {SPD}"
    return None


def panel_inertia_problem(inertia: np.ndarray) -> tuple[tuple[int, int], str] | None:
    """What is wrong with a panel inertia `IPntS_S` (3, 3), or None: `((row, col), rule)` of the first bad entry
    (0-based): a diagonal entry <= 0, or an off-diagonal entry that is not (close to) zero."""
    diag = np.diag(inertia)
    for j in range(3):
        if not diag[j] > 0:
            return (j, j), "diagonal entries of IPntS_S must be > 0 (kg m^2)"
    scale = np.max(diag)
    for r in range(3):
        for col in range(3):
            if r != col and inertia[r, col] != 0.0 and abs(inertia[r, col]) > DIAG_RTOL * scale:
                return (r, col), ("IPntS_S must be diagonal (off-diagonal entries 0, "
                                  f"or below {DIAG_RTOL:g} * max diagonal): "
                                  "Basilisk assumes the panel frame S is principal and uses only the diagonal")
    return None


def rotation_problem(dcm: np.ndarray) -> str | None:
    """What is wrong with a `dcm_HB` (3, 3) as a proper rotation, or None."""
    ortho = np.max(np.abs(dcm @ dcm.T - np.eye(3)))
    if not ortho <= DCM_TOL:
        return (f"not orthonormal (max |[HB][HB]^T - I| = {ortho:.3g} > {DCM_TOL:g}); "
                "must be a proper rotation matrix (rows h1, h2, h3 in B components)")
    det = float(np.linalg.det(dcm))
    if not abs(det - 1.0) <= DCM_TOL:
        return (f"determinant is {det:.6g}, not +1 (a reflection); must be a proper rotation matrix "
                "(rows h1, h2, h3 in B components, h3 = h1 x h2)")
    return None


def rigid_body_problem(bodies: Sequence[tuple[str, float, str, np.ndarray]],
                       plausible: bool = True) -> tuple[str, object, str] | None:
    """The first body `(mass field, mass, inertia field, inertia)` that is not a rigid body's (principal moments
    breaking the triangle inequality, within `TRIANGLE_RTOL` of the largest) or, with `plausible`, whose mass or
    smallest principal moment is below `REL_FLOOR` of the spacecraft's total mass / largest moment (a unit slip,
    most likely; the equations of motion are then ill-conditioned): `(field, value, rule)`, or None."""
    moments = [np.linalg.eigvalsh(0.5 * (inertia + inertia.T)) for *_, inertia in bodies]
    total, top = sum(b[1] for b in bodies), max(m[-1] for m in moments)
    for (mass_field, m, field, inertia), (a, b, c) in zip(bodies, moments):
        if c > a + b + TRIANGLE_RTOL * c:
            return field, inertia, (f"principal moments {a:.6g}, {b:.6g}, {c:.6g} kg m^2 are not a rigid body's: "
                                    f"the largest must be <= the sum of the others (within {TRIANGLE_RTOL:g} of "
                                    "the largest)")
        if plausible and m < REL_FLOOR * total:
            return mass_field, m, (f"implausibly small: must be >= {REL_FLOOR:g} x the spacecraft's total mass "
                                   f"({total:.6g} kg), or the equations of motion are ill-conditioned")
        if plausible and a < REL_FLOOR * top:
            return field, inertia, (f"principal moment {a:.6g} kg m^2 is implausibly small: must be >= "
                                    f"{REL_FLOOR:g} x the spacecraft's largest ({top:.6g}), or the equations are "
                                    "ill-conditioned")
    return None


def _scalar_problem(names, key: str, values, rule: str, unit: str) -> tuple[str, float, str] | None:
    """The first of per-body `values` that is not finite or breaks `rule` ("> 0" or ">= 0"): `(<name>.<key>,
    value, rule in words)`, or None."""
    v = np.asarray(values, dtype=float).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        return f"{names[bad[0]]}.{key}", float(v[bad[0]]), "must be a finite number (nan and inf are not allowed)"
    bad = np.flatnonzero(~((v > 0) if rule == "> 0" else (v >= 0)))
    if bad.size:
        return f"{names[bad[0]]}.{key}", float(v[bad[0]]), f"must be {rule} ({unit})"
    return None


def _has_child(parent: Sequence[int]) -> np.ndarray:
    child = np.zeros(len(parent), bool)
    for p in parent:
        if p >= 0:
            child[p] = True
    return child


def hub_problems(mHub, IHubPntBc_B) -> tuple[str, object, str] | None:
    """The first rule a (single) hub breaks: `(field, value, rule)` with fields `mHub`, `IHubPntBc_B`, or None."""
    m = float(np.asarray(mHub))
    if not (np.isfinite(m) and m > 0):
        return "mHub", m, "must be > 0 (kg)"
    inertia = np.asarray(IHubPntBc_B, dtype=float)
    if not np.all(np.isfinite(inertia)):
        return "IHubPntBc_B", inertia, "must be finite numbers"
    problem = inertia_problem(inertia)
    if problem is not None:
        return "IHubPntBc_B", inertia, problem
    problem = rigid_body_problem([("mHub", m, "IHubPntBc_B", inertia)], plausible=False)
    return problem


def panels_problems(panels) -> tuple[str, object, str] | None:
    """The first rule one (unbatched) `Panels` breaks: `(field, value, rule)`, the field as
    `<panel name>.<field>`, or None."""
    names = panels.labels
    child = _has_child(panels.parent)
    scalars = (("mass", "> 0", "kg"), ("d", "> 0", "m"), ("k", ">= 0", "N m/rad"), ("c", ">= 0", "N m s/rad"))
    for key, rule, unit in scalars:
        p = _scalar_problem(names, key, getattr(panels, key), rule, unit)
        if p is not None:
            return p
    l = np.asarray(panels.l, dtype=float)
    for j in range(panels.count):
        if child[j] and not (np.isfinite(l[j]) and l[j] > 0):
            return f"{names[j]}.l", float(l[j]), "must be > 0 (m): it places the hinge of the panel hinged to this one"
        if not child[j] and l[j] != 0.0:
            return f"{names[j]}.l", float(l[j]), ("must be 0 (or absent): no panel is hinged to this one, and l places "
                                                  "the next panel's hinge (as in Basilisk's nHinged effector)")
    inertia = np.asarray(panels.IPntS_S, dtype=float)
    dcm = np.asarray(panels.dcm_HB, dtype=float)
    for j in range(panels.count):
        p = panel_inertia_problem(inertia[j])
        if p is not None:
            (r, c), rule = p
            return f"{names[j]}.IPntS_S[{r + 1}][{c + 1}]", float(inertia[j, r, c]), rule
        p = rotation_problem(dcm[j])
        if p is not None:
            return f"{names[j]}.dcm_HB", dcm[j], p
        p = rigid_body_problem([(f"{names[j]}.mass", 1.0, f"{names[j]}.IPntS_S", inertia[j])], plausible=False)
        if p is not None:
            return p
    return None


UNIT_TOL = 1e-9  # |gsHat_B| - 1


def wheels_problems(wheels) -> tuple[str, object, str] | None:
    """The first rule one (unbatched) `Wheels` breaks: `(field, value, rule)`, the field as `<wheel>.<field>`, or
    None: `gsHat_B` a unit vector, `Js` > 0, `cViscous`, `fCoulomb` >= 0, `omegaLimitCycle` > 0."""
    names = wheels.labels
    g = np.asarray(wheels.gsHat_B, dtype=float).reshape(-1, 3)
    for j in range(g.shape[0]):
        norm = float(np.linalg.norm(g[j]))
        if not (np.all(np.isfinite(g[j])) and abs(norm - 1.0) <= UNIT_TOL):
            return f"{names[j]}.gsHat_B", g[j], f"must be a unit vector (its norm is {norm:.12g}): the spin axis in B"
    for key, rule, unit in (("Js", "> 0", "kg m^2"), ("cViscous", ">= 0", "N m s"), ("fCoulomb", ">= 0", "N m"),
                            ("omegaLimitCycle", "> 0", "rad/s")):
        p = _scalar_problem(names, key, getattr(wheels, key), rule, unit)
        if p is not None:
            return p
    for key in ("u", "u_max"):
        v = np.asarray(getattr(wheels, key), dtype=float).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            return f"{names[bad[0]]}.{key}", float(v[bad[0]]), "must be a finite number (nan and inf are not allowed)"
    return None


def _member(batch_shape: tuple[int, ...], flat: int) -> str:
    idx = np.unravel_index(flat, batch_shape)
    return "member " + ",".join(str(int(i)) for i in idx)


def model_problems(spacecraft, plausible: bool = True) -> tuple[str | None, str, object, str] | None:
    """The first rule a (possibly batched: leading axes on every leaf) `Spacecraft` breaks, member by member:
    `(member, field, value, rule)` (`member` as `"member i"` for a batch, None for one model), or None. Fields are
    named as in the parameter registry (`hub.mHub`, `<panel>.k`, ...). `plausible` adds the relative-floor rule
    (files, sweeps, batches)."""
    hub, panels = spacecraft.hub, spacecraft.panels
    batch = np.shape(hub.mHub)
    n = panels.count
    mHub = np.broadcast_to(np.asarray(hub.mHub, dtype=float), batch).reshape(-1)
    IH = np.broadcast_to(np.asarray(hub.IHubPntBc_B, dtype=float), (*batch, 3, 3)).reshape(-1, 3, 3)
    leaves = {k: np.broadcast_to(np.asarray(getattr(panels, k), dtype=float), (*batch, n, *s)).reshape(-1, n, *s)
              for k, s in (("mass", ()), ("d", ()), ("l", ()), ("k", ()), ("c", ()), ("IPntS_S", (3, 3)),
                           ("dcm_HB", (3, 3)))}
    mu = None if spacecraft.gravity is None else np.broadcast_to(
        np.asarray(spacecraft.gravity.mu, dtype=float), batch).reshape(-1)
    for i in range(mHub.shape[0]):
        who = _member(batch, i) if batch else None
        p = hub_problems(mHub[i], IH[i])
        if p is not None:
            return who, f"hub.{p[0]}", p[1], p[2]
        one = _PanelView(panels, {k: v[i] for k, v in leaves.items()})
        p = panels_problems(one)
        if p is not None:
            return (who, *p)
        if mu is not None and not (np.isfinite(mu[i]) and mu[i] > 0):
            return who, "gravity.mu", float(mu[i]), "must be > 0 (m^3/s^2)"
        if spacecraft.wheels is not None:
            w = spacecraft.wheels
            one = _WheelView(w, {k: np.broadcast_to(np.asarray(getattr(w, k), dtype=float),
                                                    (*batch, *np.shape(getattr(w, k))[len(batch):])).reshape(
                                    -1, *np.shape(getattr(w, k))[len(batch):])[i]
                                 for k in ("gsHat_B", "Js", "u", "u_max", "cViscous", "fCoulomb", "omegaLimitCycle")})
            p = wheels_problems(one)
            if p is not None:
                return (who, *p)
        bodies = [("hub.mHub", mHub[i], "hub.IHubPntBc_B", IH[i])]
        bodies += [(f"{nm}.mass", leaves["mass"][i, j], f"{nm}.IPntS_S", leaves["IPntS_S"][i, j])
                   for j, nm in enumerate(panels.labels)]
        p = rigid_body_problem(bodies, plausible)
        if p is not None:
            return (who, *p)
    return None


class _WheelView:
    """One member's wheel values with the labels of a `Wheels` (for `wheels_problems`)."""

    def __init__(self, wheels, values):
        self.labels = wheels.labels
        for k, v in values.items():
            setattr(self, k, v)


class _PanelView:
    """One member's panel values with the static structure of a `Panels` (for `panels_problems`)."""

    def __init__(self, panels, values):
        self.labels, self.parent, self.count = panels.labels, panels.parent, panels.count
        for k, v in values.items():
            setattr(self, k, v)


def model_ok(spacecraft):
    """The rules of `model_problems` (without the relative floor) as one traced boolean: every mass, `d`, `mHub`
    > 0, `k`, `c` >= 0, `l` > 0 exactly where a panel hangs (else 0), the hub inertia symmetric positive definite,
    every body's principal moments a rigid body's, panel inertias with a positive diagonal, `dcm_HB` proper
    rotations, `mu` > 0. Traceable and vmappable (no LAPACK call: Sylvester's criterion on 3x3 matrices)."""
    hub, panels = spacecraft.hub, spacecraft.panels
    child = jnp.asarray(_has_child(panels.parent))
    ok = hub.mHub > 0
    ok &= jnp.all(panels.mass > 0) & jnp.all(panels.d > 0) & jnp.all(panels.k >= 0) & jnp.all(panels.c >= 0)
    ok &= jnp.all(jnp.where(child, panels.l > 0, panels.l == 0))
    IH = hub.IHubPntBc_B
    ok &= jnp.max(jnp.abs(IH - IH.T)) <= SYM_RTOL * jnp.max(jnp.abs(IH))
    ok &= _positive_definite(0.5 * (IH + IH.T))
    diag = jnp.diagonal(panels.IPntS_S, axis1=-2, axis2=-1)
    ok &= jnp.all(diag > 0)
    # triangle inequality of the principal moments <=> tr(I)/2 * 1 - I (the second moment of the mass
    # distribution) positive semi-definite; TRIANGLE_RTOL of the trace as the tolerance
    bodies = jnp.concatenate([IH[None], panels.IPntS_S], 0)
    tr = jnp.trace(bodies, axis1=-2, axis2=-1)
    second = (0.5 + TRIANGLE_RTOL) * tr[:, None, None] * jnp.eye(3) - bodies
    ok &= jnp.all(_positive_definite(second))
    dcm = panels.dcm_HB
    ortho = jnp.abs(dcm @ jnp.swapaxes(dcm, -1, -2) - jnp.eye(3))
    ok &= jnp.all(ortho <= DCM_TOL) & jnp.all(jnp.abs(_det3(dcm) - 1.0) <= DCM_TOL)
    if spacecraft.gravity is not None:
        ok &= spacecraft.gravity.mu > 0
    w = spacecraft.wheels
    if w is not None:
        ok &= jnp.all(jnp.abs(jnp.sqrt(jnp.sum(w.gsHat_B * w.gsHat_B, -1)) - 1.0) <= UNIT_TOL)
        ok &= jnp.all(w.Js > 0) & jnp.all(w.cViscous >= 0) & jnp.all(w.fCoulomb >= 0) & jnp.all(w.omegaLimitCycle > 0)
    return ok


def _det3(a):
    """Determinants of 3x3 matrices (leading axes broadcast), written out (no LAPACK call)."""
    return (a[..., 0, 0] * (a[..., 1, 1] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 1])
            - a[..., 0, 1] * (a[..., 1, 0] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 0])
            + a[..., 0, 2] * (a[..., 1, 0] * a[..., 2, 1] - a[..., 1, 1] * a[..., 2, 0]))


def _positive_definite(a):
    """Sylvester's criterion for symmetric 3x3 matrices (leading axes broadcast): every leading minor > 0."""
    m1 = a[..., 0, 0]
    m2 = a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]
    return (m1 > 0) & (m2 > 0) & (_det3(a) > 0)
