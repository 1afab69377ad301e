r"""FEA modes and how they are paired with the model's modes.

`FeaModes` (`_model._fea_modes`) holds the first modes of an FEA modal analysis in SI units (what the readers of
`jaxhinge._io._fea` return). `pair_modes` pairs every model mode with one FEA mode by an assignment problem on
$(1 - \mathrm{MAC}) + 0.1\,|\ln(f_{model}/f_{FEA})|$, the MAC of unit-free participation vectors; by frequency
alone where the FEA modes carry no effective mass, and always free-free (whose elastic modes carry none:
`unclean_free_modes` warns when an FEA's do). With mode shapes (`ShapeMap`, `_model._fea_modes`: FEA nodes -> the
model's coordinates, `fea_shape_vectors`, `model_shape_matrix`) the MAC is the shapes' and the frequency term weighs 1
(`SHAPE_FREQ_WEIGHT`). `pairs_by_hand` checks a pairing given by mode numbers.
"""


import jax.numpy as jnp
import numpy as np

from ..._errors import FitError
from ..._format import fmt_value as _fmt
from ..._math import assignment
from ..._model._fea_modes import FeaModes, ShapeMap
from .._linear._modes import Modes

__all__ = ["mac", "pair_modes", "unclean_free_modes"]

FREQ_WEIGHT = 0.1  # pairing: a factor e in frequency weighs as much as 0.1 of MAC
# with mode shapes: a factor e weighs as much as the whole MAC range (an elastic mode of a flexible FE part, far in
# frequency, can look like a hinge mode on the few shape coordinates that map the model)
SHAPE_FREQ_WEIGHT = 1.0


def total_effective_mass(fea: FeaModes) -> np.ndarray:
    """Each component's total effective mass (the file's total line, else the listed modes' sum), floored."""
    t = fea.total_mass if fea.total_mass is not None else np.sum(fea.effective_mass, axis=0)
    t = np.asarray(t, float)
    return np.maximum(t, 1e-12 * max(float(t.max()), 1e-300))


def unit_participation(fea: FeaModes, model: Modes) -> tuple[np.ndarray, np.ndarray] | None:
    """Participation vectors made unit-free (each component over the square root of its total effective mass),
    FEA and model; `None` where they cannot tell modes apart: the FEA modes carry no effective mass (not in the
    file), or the modes are free-free, whose elastic modes carry none (the model's are zero; an FEA's that are
    not are the residue of unclean rigid-body modes, `unclean_free_modes`, and would pair by noise)."""
    if fea.effective_mass is None or model.boundary.hub_free:
        return None
    scale = np.sqrt(total_effective_mass(fea))
    if fea.participation is not None:
        a, b = np.asarray(fea.participation) / scale, np.asarray(model.participation) / scale
    else:  # effective masses only: the signs are unknown, compare magnitudes
        a, b = np.sqrt(np.asarray(fea.effective_mass)) / scale, np.abs(np.asarray(model.participation)) / scale
    if np.sum(a * a) < 1e-9 * len(a):
        return None
    return a, b


UNCLEAN_FRACTION = 1e-4  # free-free elastic modes whose effective mass exceeds this share of the total: warned


def unclean_free_modes(fea: FeaModes) -> str | None:
    """A warning when free-free FEA modes carry effective mass (more than `UNCLEAN_FRACTION` of a component's
    total), which free-free elastic modes cannot: the FE run's rigid-body modes are not clean (a `*RIGID BODY`
    hub, pins with spring elements). Names the modes and their largest fraction; `None` when clean or absent."""
    if fea.effective_mass is None:
        return None
    frac = np.asarray(fea.effective_mass, float) / total_effective_mass(fea)
    names = ("T1", "T2", "T3", "R1", "R2", "R3")
    bad = [(int(fea.mode_numbers[i]), float(frac[i].max()), names[int(np.argmax(frac[i]))])
           for i in range(frac.shape[0]) if frac[i].max() > UNCLEAN_FRACTION]
    if not bad:
        return None
    listed = ", ".join(f"mode {m} ({100 * f:.3g} % of {c})" for m, f, c in bad[:6]) + (
        f" and {len(bad) - 6} more" if len(bad) > 6 else "")
    return (f"{fea.source}: free-free elastic modes carry effective mass, which they cannot: {listed}; the "
            "rigid-body modes of the FE run are not clean. The modes are paired by frequency (and mode shapes, "
            "where given), their effective masses left out")


def _node_rotation(fea: FeaModes, node: int) -> np.ndarray:
    """(n, 3) a node's rotations where the file has them, else its displacements (a rotation node)."""
    g = list(fea.shape_nodes).index(node)
    rot = fea.shapes[:, g, 3:]
    return rot if np.all(np.isfinite(rot)) else fea.shapes[:, g, :3]


def _panel_index(sc, name) -> int:
    return name if isinstance(name, int) else list(sc.panels.labels).index(name)


def _panel_axes(sc, j: int):
    r"""Hinge point and panel axes $\hat s_1, \hat s_2, \hat s_3$ (B) of panel `j` at its rest angle."""
    p = sc.panels
    h = p.dcm_HB[j]
    c, s = jnp.cos(p.thetaRef[j]), jnp.sin(p.thetaRef[j])
    return p.r_HB_B[j], c * h[0] - s * h[2], h[1], s * h[0] + c * h[2]


def fea_shape_vectors(fea: FeaModes, smap: ShapeMap, sc) -> np.ndarray:
    """(n, c) the FEA modes in the model's shape coordinates (`ShapeMap`), at the geometry of spacecraft `sc`."""
    cols = []
    if smap.hub is not None:
        g = list(fea.shape_nodes).index(smap.hub)
        cols.append(fea.shapes[:, g, :3])
        cols.append(_node_rotation(fea, smap.hub_rotation if smap.hub_rotation is not None else smap.hub))
    for name, node, dist in smap.panels:
        if dist is None:
            cols.append(_node_rotation(fea, node))
        else:
            s3 = np.asarray(_panel_axes(sc, _panel_index(sc, name))[3])
            cols.append((fea.shapes[:, list(fea.shape_nodes).index(node), :3] @ s3)[:, None])
    return np.concatenate(cols, axis=1)


def model_shape_matrix(sc, smap: ShapeMap):
    r"""(c, 6 + N) the map from a model mode shape $(x_B, \phi, \delta\theta)$ to the shape coordinates of
    `smap` (traceable in the spacecraft's parameters)."""
    n = sc.panels.count
    eye, z = jnp.eye(3), jnp.zeros((3, n))
    rows = []
    cross = lambda p: jnp.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])
    if smap.hub is not None:
        pt = jnp.asarray(smap.hub_point)
        rows.append(jnp.concatenate([eye, -cross(pt), z], axis=1))  # x_B + phi x p = x_B - [p]x phi
        rows.append(jnp.concatenate([jnp.zeros((3, 3)), eye, z], axis=1))
    for name, _, dist in smap.panels:
        j = _panel_index(sc, name)
        H, s1, s2, s3 = _panel_axes(sc, j)
        e = jnp.zeros(n).at[j].set(1.0)
        if dist is None:
            rows.append(jnp.concatenate([jnp.zeros((3, 3)), eye, s2[:, None] * e[None, :]], axis=1))
        else:
            p = H - dist * s1
            rows.append(jnp.concatenate([s3, jnp.cross(p, s3), dist * e])[None, :])
    return jnp.concatenate(rows, axis=0)


def mac(a, b):
    """$|a_i \\cdot b_j|^2 / (|a_i|^2 |b_j|^2)$ for all rows of `a` and `b` (0 where either is zero); traceable."""
    num = (a @ b.T) ** 2
    den = jnp.sum(a * a, 1)[:, None] * jnp.sum(b * b, 1)[None, :]
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def shape_mac(fea_vectors, model: Modes, T):
    """MAC of FEA shape vectors (rows) against every model mode's shape coordinates `model.shape @ T.T`."""
    return mac(jnp.asarray(fea_vectors), model.shape @ T.T)


def pair_modes(fea: FeaModes, model: Modes, shapes=None) -> tuple[list[int], list[int], np.ndarray]:
    """Pair every model mode with one FEA mode: minimum total cost $(1 - \\mathrm{MAC}) + 0.1\\,|\\ln(f_{model} /
    f_{FEA})|$ (an assignment problem: the effective-mass direction first, the frequency to tell apart modes of
    one direction), the MAC of the unit-free participation vectors (`unit_participation`); by
    frequency alone where the FEA modes carry no effective mass (free-free). With `shapes` = (FEA shape vectors
    (n_fea, c), `model_shape_matrix`) the MAC is that of the mode shapes instead. **Returns:** FEA indices, model
    indices (0-based, ascending) and the MAC of each pair (NaN without effective masses)."""
    f_fea, f_mod = np.asarray(fea.frequencies, float), np.asarray(model.frequency_hz, float)
    weight = FREQ_WEIGHT if shapes is None else SHAPE_FREQ_WEIGHT
    cost = weight * np.abs(np.log(f_mod[None, :] / f_fea[:, None]))
    if shapes is not None:
        m = np.asarray(shape_mac(shapes[0], model, shapes[1]))
    else:
        vec = unit_participation(fea, model)
        m = np.asarray(mac(*vec)) if vec is not None else np.full(cost.shape, np.nan)
    if np.all(np.isfinite(m)):
        cost = cost + (1.0 - m)
    col_of = np.asarray(assignment(-cost))
    rows = np.nonzero(col_of >= 0)[0]
    cols = col_of[rows]
    order = np.argsort(cols)
    fi, mj = [int(rows[k]) for k in order], [int(cols[k]) for k in order]
    return fi, mj, np.array([m[i, j] for i, j in zip(fi, mj)])


def pairs_by_hand(fea: FeaModes, n: int, mode_numbers, fea_modes) -> tuple[list[int], list[int]]:
    if mode_numbers is None or fea_modes is None:
        raise FitError("pairing by hand needs both mode_numbers (model) and fea_modes (FEA mode numbers, "
                       "one per model mode)", field="fea_modes")
    mn, fm = list(mode_numbers), list(fea_modes)
    if len(mn) != len(fm):
        raise FitError(f"fea_modes = {_fmt(fm)} and mode_numbers = {_fmt(mn)}: give one FEA mode per "
                       "model mode", field="fea_modes")
    known = [int(x) for x in fea.mode_numbers]
    bad = [x for x in fm if x not in known]
    if bad or len(set(fm)) != len(fm):
        raise FitError(f"fea_modes = {_fmt(fm)}: must be distinct mode numbers of {fea.source} "
                       f"({known[0]}..{known[-1]})", field="fea_modes")
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 1 <= x <= n for x in mn) \
            or len(set(mn)) != len(mn):
        raise FitError(f"mode_numbers = {_fmt(mn)}: must be distinct integers between 1 and {n}",
                       field="mode_numbers")
    return [known.index(x) for x in fm], [int(x) - 1 for x in mn]


def pairing_table(fea: FeaModes, pairs0, final: list[int], m_init: Modes, m_fit: Modes,
                   auto: bool, shapes=None) -> tuple[list[dict], list[str]]:
    """The pairing report (the model mode of each FEA mode at the start and at the solution), and a note when a
    fresh automatic pairing at the solution differs from the one the fit tracked. `shapes`: (FEA shape vectors,
    `model_shape_matrix` at the start, at the solution): the MACs are the mode shapes'."""
    fi, mj = pairs0
    if shapes is not None:
        mac0 = np.asarray(shape_mac(shapes[0], m_init, shapes[1]))
        mac1 = np.asarray(shape_mac(shapes[0], m_fit, shapes[2]))
    else:
        vec0, vec1 = unit_participation(fea, m_init), unit_participation(fea, m_fit)
        mac0 = np.asarray(mac(*vec0)) if vec0 is not None else None
        mac1 = np.asarray(mac(*vec1)) if vec1 is not None else None
    em = None if fea.effective_mass is None else np.asarray(fea.effective_mass)
    rows = [{"fea_mode": int(fea.mode_numbers[i]), "fea_frequency_hz": float(fea.frequencies[i]),
             "initial_model_mode": j0 + 1, "model_mode": j + 1,
             "initial_model_frequency_hz": float(m_init.frequency_hz[j0]),
             "model_frequency_hz": float(m_fit.frequency_hz[j]),
             "mac_initial": None if mac0 is None else float(mac0[i, j0]),
             "mac": None if mac1 is None else float(mac1[i, j]),
             "fea_effective_mass": None if em is None else em[i].tolist(),
             "model_effective_mass": np.asarray(m_fit.effective_mass)[j].tolist()}
            for i, j0, j in zip(fi, mj, final)]
    notes = []
    if auto:
        fi1, mj1, _ = pair_modes(fea, m_fit, None if shapes is None else (shapes[0], shapes[2]))
        if sorted(zip(fi1, mj1)) != sorted(zip(fi, final)):
            notes.append("the FEA-model pairing at the solution differs from the one fitted (modes swapped during "
                         f"the fit: now {[(int(fea.mode_numbers[i]), j + 1) for i, j in zip(fi1, mj1)]} as (FEA, "
                         "model)); check the pairing table and fix it with mode_numbers and fea_modes")
    return rows, notes
