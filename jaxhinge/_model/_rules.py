"""The physical rules every model value passes, by whatever path it enters: a scenario file or dict (the file
checker), `Hub` / `Panels` built in code (on construction, with concrete values), a sweep's dispersions and
`simulate_batch`'s parameters (every member, before compute), and, traced, `simulate` and the fits' model
evaluations (a member that breaks a rule is reported as a failed run, never `success = True`).

Which rule a field obeys is declared with the field (`jaxhinge._model._schema`, `Field.rule`); each rule is
written once here, as a NumPy check that names the field, the value and the rule (`value_problem`, and the
whole-body checks `inertia_problem`, `panel_inertia_problem`, `rotation_problem`, `rigid_body_problem`; per model
`hub_problems`, `panels_problems`, `wheels_problems`, `model_problems`), and as the traced condition of the same
rule (`model_ok`).

| rule (`Field.rule`) | check |
|---|---|
| `positive`, `nonnegative` | > 0, >= 0 (and finite) |
| `spd` | symmetric (within `SYM_RTOL`) positive definite |
| `principal` | diagonal (within `DIAG_RTOL`), diagonal > 0: Basilisk uses only the diagonal |
| `rotation` | orthonormal and det = +1 (within `DCM_TOL`) |
| `unit` | a unit vector (within `UNIT_TOL`; files normalise within `UNIT_NOTE_TOL`, with a note) |
| `hinge_lever` (`l`) | > 0 where a panel hangs from the panel, 0 where none does (it places the next hinge) |
| every body (structure) | a rigid body's principal moments: the largest <= the sum of the others (`TRIANGLE_RTOL`) |
| plausible (files, sweeps, batches) | no mass or principal moment below `REL_FLOOR` of the total / largest |
"""

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ._schema import BODIES, Field, of_model

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


UNIT_TOL = 1e-9  # |gsHat_B| - 1 of a model (files normalise an axis within UNIT_NOTE_TOL, with a note)
UNIT_NOTE_TOL = 1e-4  # a file's spin axis this close to unit is normalised (a hand-typed 0.57735), farther refused


def value_problem(f: Field, value) -> tuple[str, object, str] | None:
    """What is wrong with one element of field `f` (a value of `f.shape`) by its `rule` (`_schema`):
    `(suffix, value, rule in words)` with `suffix` the entry (`"[2][2]"`) or `""`, or None. `"hinge_lever"` and
    `"choice"` are the structure's and the file's (`panels_problems`, the file checker)."""
    rule, unit = f.rule, f"({f.unit})" if f.unit not in ("", "1") else ""
    if f.static or rule in ("choice", "path"):
        return None
    v = np.asarray(value, dtype=float)
    bad = np.argwhere(~np.isfinite(v))
    if bad.size:
        idx = tuple(int(i) for i in bad[0])
        return "".join(f"[{i + 1}]" for i in idx), float(v[idx]), "must be a finite number (nan and inf are not allowed)"
    if rule == "positive" and not v > 0:
        return "", float(v), f"must be > 0 {unit}".rstrip()
    if rule == "nonnegative" and not v >= 0:
        return "", float(v), f"must be >= 0 {unit}".rstrip()
    if rule == "unit":
        norm = float(np.linalg.norm(v))
        if not abs(norm - 1.0) <= UNIT_TOL:
            return "", v, f"must be a unit vector (its norm is {norm:.12g}): the {f.description}"
    if rule == "rotation":
        problem = rotation_problem(v)
        return None if problem is None else ("", v, problem)
    if rule == "spd":
        problem = inertia_problem(v)
        return None if problem is None else ("", v, problem)
    if rule == "principal":
        problem = panel_inertia_problem(v)
        if problem is not None:
            (r, c), words = problem
            return f"[{r + 1}][{c + 1}]", float(v[r, c]), words
        return None
    if rule == "mrp" and not np.isfinite(np.dot(v, v)):
        return "", v, f"|{f.name}|^2 overflows; the MRP must have a finite norm"
    if rule == "axes":
        for i, row in enumerate(v):
            if not np.linalg.norm(row) > 0:
                return f"[{i + 1}]", row, "must not be zero"
    return None


def _has_child(parent: Sequence[int]) -> np.ndarray:
    child = np.zeros(len(parent), bool)
    for p in parent:
        if p >= 0:
            child[p] = True
    return child


def _fields_problem(model: str, values, names: Sequence[str] | None) -> tuple[str, object, str] | None:
    """The first field of `model` (`_schema.of_model`) whose value breaks its rule: `(<name>.<field><entry>,
    value, rule)`, elements named by `names` (None: one element, named by the field alone)."""
    for f in of_model(model):
        if f.static or not hasattr(values, f.attribute):
            continue
        v = np.asarray(getattr(values, f.attribute), dtype=float)
        for j, nm in enumerate([None] if names is None else names):
            p = value_problem(f, v if names is None else v[j])
            if p is not None:
                return f"{f.name if nm is None else f'{nm}.{f.name}'}{p[0]}", p[1], p[2]
    return None


def hub_problems(hub) -> tuple[str, object, str] | None:
    """The first rule a (single) hub breaks: `(field, value, rule)` with fields `mHub`, `IHubPntBc_B`, ..., or
    None."""
    p = _fields_problem("hub", hub, None)
    if p is not None:
        return p
    (_, m, inertia), _ = BODIES
    return rigid_body_problem([(m, float(np.asarray(getattr(hub, m))), inertia,
                                np.asarray(getattr(hub, inertia), dtype=float))], plausible=False)


def panels_problems(panels) -> tuple[str, object, str] | None:
    """The first rule one (unbatched) `Panels` breaks: `(field, value, rule)`, the field as
    `<panel name>.<field>`, or None: each field's rule (`_schema`), `l` exactly where a panel hangs, each panel a
    rigid body."""
    names = panels.labels
    child = _has_child(panels.parent)
    l = np.asarray(panels.l, dtype=float)
    for j in range(panels.count):
        if child[j] and not (np.isfinite(l[j]) and l[j] > 0):
            return f"{names[j]}.l", float(l[j]), "must be > 0 (m): it places the hinge of the panel hinged to this one"
        if not child[j] and l[j] != 0.0:
            return f"{names[j]}.l", float(l[j]), ("must be 0 (or absent): no panel is hinged to this one, and l places "
                                                  "the next panel's hinge (as in Basilisk's nHinged effector)")
    p = _fields_problem("panels", panels, names)
    if p is not None:
        return p
    _, (_, pm, pI) = BODIES
    inertia = np.asarray(getattr(panels, pI), dtype=float)
    for j in range(panels.count):
        p = rigid_body_problem([(f"{names[j]}.{pm}", 1.0, f"{names[j]}.{pI}", inertia[j])], plausible=False)
        if p is not None:
            return p
    return None


def wheels_problems(wheels) -> tuple[str, object, str] | None:
    """The first rule one (unbatched) `Wheels` breaks: `(field, value, rule)`, the field as `<wheel>.<field>`, or
    None: each field's rule (`_schema`: `gsHat_B` a unit vector, `Js` > 0, friction >= 0, ...)."""
    return _fields_problem("wheels", wheels, wheels.labels)


def _member(batch_shape: tuple[int, ...], flat: int) -> str:
    idx = np.unravel_index(flat, batch_shape)
    return "member " + ",".join(str(int(i)) for i in idx)


def model_problems(spacecraft, plausible: bool = True) -> tuple[str | None, str, object, str] | None:
    """The first rule a (possibly batched: leading axes on every leaf) `Spacecraft` breaks, member by member:
    `(member, field, value, rule)` (`member` as `"member i"` for a batch, None for one model), or None. Fields are
    named as in the parameter registry (`hub.mHub`, `<panel>.k`, ...). `plausible` adds the relative-floor rule
    (files, sweeps, batches)."""
    hub, panels = spacecraft.hub, spacecraft.panels
    (_, hm, hI), (_, pm, pI) = BODIES
    batch = np.shape(hub.mHub)
    mHub = np.broadcast_to(np.asarray(hub.mHub, dtype=float), batch).reshape(-1)
    IH = np.broadcast_to(np.asarray(hub.IHubPntBc_B, dtype=float), (*batch, 3, 3)).reshape(-1, 3, 3)
    mass = np.broadcast_to(np.asarray(panels.mass, dtype=float), (*batch, panels.count)).reshape(-1, panels.count)
    inertia = np.broadcast_to(np.asarray(panels.IPntS_S, dtype=float), (*batch, panels.count, 3, 3)).reshape(
        -1, panels.count, 3, 3)
    mu = None if spacecraft.gravity is None else np.broadcast_to(
        np.asarray(spacecraft.gravity.mu, dtype=float), batch).reshape(-1)

    def member(tree, model, i):
        return {f.attribute: _member_value(getattr(tree, f.attribute), batch, i) for f in of_model(model)
                if not f.static}

    for i in range(mHub.shape[0]):
        who = _member(batch, i) if batch else None
        p = hub_problems(_View((), member(hub, "hub", i)))
        if p is not None:
            return who, f"hub.{p[0]}", p[1], p[2]
        one = _PanelView(panels, member(panels, "panels", i))
        p = panels_problems(one)
        if p is not None:
            return (who, *p)
        if mu is not None and not (np.isfinite(mu[i]) and mu[i] > 0):
            return who, "gravity.mu", float(mu[i]), "must be > 0 (m^3/s^2)"
        if spacecraft.wheels is not None:
            w = spacecraft.wheels
            one = _View(w.labels, member(w, "wheels", i))
            p = wheels_problems(one)
            if p is not None:
                return (who, *p)
        bodies = [(f"hub.{hm}", mHub[i], f"hub.{hI}", IH[i])]
        bodies += [(f"{nm}.{pm}", mass[i, j], f"{nm}.{pI}", inertia[i, j])
                   for j, nm in enumerate(panels.labels)]
        p = rigid_body_problem(bodies, plausible)
        if p is not None:
            return (who, *p)
    return None


class _View:
    """One member's values of a model pytree, with its labels (for the `*_problems` functions)."""

    def __init__(self, labels, values):
        self.labels = labels
        for k, v in values.items():
            setattr(self, k, v)


def _member_value(x, batch: tuple[int, ...], i: int) -> np.ndarray:
    """Member `i` (flat index) of a leaf with leading `batch` axes (broadcast where it has none)."""
    x = np.asarray(x, dtype=float)
    rest = x.shape[len(batch):] if x.ndim >= len(batch) and x.shape[:len(batch)] == batch else x.shape
    return np.asarray(np.broadcast_to(x, (*batch, *rest)).reshape(-1, *rest)[i])


class _PanelView:
    """One member's panel values with the static structure of a `Panels` (for `panels_problems`)."""

    def __init__(self, panels, values):
        self.labels, self.parent, self.count = panels.labels, panels.parent, panels.count
        for k, v in values.items():
            setattr(self, k, v)


def _field_ok(f: Field, x):
    """The rule of field `f` (`_schema`) as a traced boolean over every element of `x` (leading axes: panels,
    wheels, members)."""
    if f.rule == "positive":
        return jnp.all(x > 0)
    if f.rule == "nonnegative":
        return jnp.all(x >= 0)
    if f.rule == "unit":
        return jnp.all(jnp.abs(jnp.sqrt(jnp.sum(x * x, -1)) - 1.0) <= UNIT_TOL)
    if f.rule == "rotation":
        ortho = jnp.abs(x @ jnp.swapaxes(x, -1, -2) - jnp.eye(3))
        return jnp.all(ortho <= DCM_TOL) & jnp.all(jnp.abs(_det3(x) - 1.0) <= DCM_TOL)
    if f.rule == "spd":
        asym = jnp.max(jnp.abs(x - jnp.swapaxes(x, -1, -2)), axis=(-2, -1))
        sym = asym <= SYM_RTOL * jnp.max(jnp.abs(x), axis=(-2, -1))
        return jnp.all(sym & _positive_definite(0.5 * (x + jnp.swapaxes(x, -1, -2))))
    if f.rule == "principal":
        return jnp.all(jnp.diagonal(x, axis1=-2, axis2=-1) > 0)
    return jnp.asarray(True)


def model_ok(spacecraft):
    """The rules of `model_problems` (without the relative floor) as one traced boolean: each field's rule
    (`_schema`: masses, `d`, `mHub` > 0, `k`, `c` >= 0, the hub inertia symmetric positive definite, panel
    inertias with a positive diagonal, `dcm_HB` proper rotations, unit wheel axes, ...), `l` > 0 exactly where a
    panel hangs (else 0), every body's principal moments a rigid body's, `mu` > 0. Traceable and vmappable (no
    LAPACK call: Sylvester's criterion on 3x3 matrices)."""
    hub, panels = spacecraft.hub, spacecraft.panels
    ok = jnp.asarray(True)
    for model, tree in (("hub", hub), ("panels", panels), ("wheels", spacecraft.wheels)):
        if tree is not None:
            for f in of_model(model):
                if not f.static:
                    ok &= _field_ok(f, getattr(tree, f.attribute))
    child = jnp.asarray(_has_child(panels.parent))
    ok &= jnp.all(jnp.where(child, panels.l > 0, panels.l == 0))
    # triangle inequality of the principal moments <=> tr(I)/2 * 1 - I (the second moment of the mass
    # distribution) positive semi-definite; TRIANGLE_RTOL of the trace as the tolerance
    bodies = jnp.concatenate([hub.IHubPntBc_B[None], panels.IPntS_S], 0)
    tr = jnp.trace(bodies, axis1=-2, axis2=-1)
    second = (0.5 + TRIANGLE_RTOL) * tr[:, None, None] * jnp.eye(3) - bodies
    ok &= jnp.all(_positive_definite(second))
    if spacecraft.gravity is not None:
        ok &= spacecraft.gravity.mu > 0
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
