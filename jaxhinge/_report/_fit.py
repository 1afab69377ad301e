"""Reports of a modal fit: `result.json` (`fit_json`), the console report (`fit_report_lines`) and `fit.png`
(`plot_fit`); `least_squares_json`, the blocks every fit's `result.json` shares."""

import os
import textwrap
from typing import Any

import numpy as np

from .._analysis._fitting._loop import LOOPS
from .._format import json_number, to_json
from .._format import json_number as _num
from .._model._boundary import BOUNDARIES
from .._version import __version__
from ._modes import measurement_json, modes_json
from ._plot import pyplot

__all__ = ["fit_json", "fit_report_lines", "labelled_lines", "least_squares_json", "plot_fit"]

REPORT_WIDTH = 110  # console report lines wrap here
_LABEL = 20  # the width of a report line's label column


def least_squares_json(result: Any) -> dict[str, Any]:
    """The `result.json` blocks every fit shares, from a `LeastSquaresResult`: `correlation` (`names`, `matrix`)
    and `identifiability` (`identifiable`, `well_posed`, `condition_number`, `singular_value_ratios`,
    `undetermined`, `poorly_determined`), plain JSON data (NaN and inf as `None`)."""
    return {
        "correlation": {"names": list(result.names), "matrix": to_json(np.asarray(result.correlation))},
        "identifiability": {
            "identifiable": bool(result.identifiable),
            "well_posed": bool(result.well_posed),
            "condition_number": json_number(result.condition_number),
            "singular_value_ratios": to_json(np.asarray(result.singular_values)),
            "undetermined": to_json(result.undetermined),
            "poorly_determined": to_json(result.poorly_determined),
        },
    }


def fit_json(result, spec=None) -> dict[str, Any]:
    """The `result.json` content of a modal fit (`FitResult`, and the `FitSpec` it came from when there is one):
    plain Python, NaN and inf as `null`."""

    params = {}
    for i, members in enumerate(result.members):
        for mname in members:
            entry = {
                "value": _num(result.values[i]),
                "sigma": _num(result.sigma[i]),
                "initial": _num(result.initial[i]),
                "unit": result.units[i],
            }
            if len(members) > 1:
                entry["tied_with"] = [m for m in members if m != mname]
            params[mname] = entry
    f_model = np.asarray(result.modes.frequency_hz)
    z_model = np.asarray(result.modes.damping_ratio)
    f_init = np.asarray(result.initial_modes.frequency_hz)
    z_init = np.asarray(result.initial_modes.damping_ratio)
    chk = result.check
    targets = []
    for i, mode in enumerate(result.mode_numbers):
        j = mode - 1
        row: dict[str, Any] = {
            "mode": mode,
            "target_frequency_hz": _num(result.targets_hz[i]),
            "model_frequency_hz": _num(f_model[j]),
            "frequency_relative_error": _num(result.frequency_error[i]),
            "initial_frequency_hz": _num(f_init[j]),
        }
        if len(result.damping_targets):
            row.update({
                "target_damping_ratio": _num(result.damping_targets[i]),
                "model_damping_ratio": _num(z_model[j]),
                "damping_relative_error": _num(result.damping_error[i]),
                "initial_damping_ratio": _num(z_init[j]),
            })
        else:
            row["model_damping_ratio"] = _num(z_model[j])
        if chk is not None:
            row["simulated_frequency_hz"] = _num(chk.frequency_hz[j])
            row["simulated_damping_ratio"] = _num(chk.damping_ratio[j])
            row["simulated_vs_target_relative"] = _num((chk.frequency_hz[j] - result.targets_hz[i])
                                                       / result.targets_hz[i])
        targets.append(row)
    out: dict[str, Any] = {
        "jaxhinge_version": __version__,
        "fit_file": spec.path if spec else None,
        "scenario": spec.scenario_name if spec else None,
        "boundary": result.boundary,
        "loop": result.options.get("loop", "open"),
        "warnings": list(getattr(result, "warnings", ())),
        "parameters": params,
        "targets": targets,
        "converged": bool(result.converged),
        "targets_reached": bool(result.targets_reached),
        "status": result.status,
        "message": result.message,
        "iterations": int(result.iterations),
        "cost": _num(result.cost),
        "residuals": [_num(x) for x in result.residuals],
        "residual_definition": "(model - target) / (sigma_rel * target); frequencies first, then damping ratios",
        "sigma_basis": result.sigma_note,
        "solver": result.solver,
        "solver_settings": {k: v for k, v in (spec.fit_kwargs.items() if spec else [])
                            if k not in ("free", "fea", "shapes")},
        "free": list(result.names),
        "timing_s": {"fit": _num(result.wall_s), "solver": _num(result.solve_s)},
        "cost_history": [_num(x) for x in result.history],
        "starts": int(result.options.get("starts", 1)),
        "mac_matrix": None if result.mac_matrix is None else {
            "fea_modes": list(result.mac_fea_modes), "model_modes": list(range(1, result.mac_matrix.shape[1] + 1)),
            "mac": to_json(np.asarray(result.mac_matrix))},
        "solutions": [{k: (_num(v) if isinstance(v, float) else
                           {n: _num(x) for n, x in v.items()} if isinstance(v, dict) else v)
                       for k, v in d.items()} for d in result.solutions],
        "modes": modes_json(result.modes)["modes"],
        "chi2": _num(result.chi2),
        "dof": int(result.dof),
        **least_squares_json(result),
    }
    if chk is not None:
        out["check"] = measurement_json(chk)
    if result.pairing is not None:
        fea = spec.fit_kwargs["fea"] if spec else None
        out["fea"] = {"file": None if fea is None else fea.source, "boundary": result.boundary,
                      "reference_point_B_m": result.options["reference_point"],
                      "effective_mass_units": "kg (translations), kg m^2 (rotations)",
                      "pairing": [{k: (v if not isinstance(v, float) else _num(v)) for k, v in row.items()}
                                  for row in result.pairing]}
        shapes = spec.fit_kwargs.get("shapes") if spec else None
        if shapes is not None:
            out["fea"]["shapes"] = {
                "hub": shapes.hub, "hub_point_B_m": list(shapes.hub_point), "hub_rotation": shapes.hub_rotation,
                "panels": {str(n): ({"rotation": node} if d is None else {"node": node, "distance_m": d})
                           for n, node, d in shapes.panels},
                "sigma": shapes.sigma, "mac_min": shapes.mac_min,
                "mac_definition": "|a.b|^2 / (|a|^2 |b|^2) of the FEA and model modes in these shape coordinates"}
    return out


def plot_fit(result, path, fmt: str | None = None, title: str = "") -> None:
    """Targets vs initial, fitted and simulated frequencies and damping ratios, the FEA effective masses against
    the model's when they were fitted, and the cost history. The figure's title is `title` (e.g. the fit file)
    above a line that says what was fitted (boundary, targets, free parameters)."""
    plt = pyplot()
    has_z = len(result.damping_targets) > 0
    has_em = _fitted_effective_masses(result) is not None
    extra = [k for k, on in (("mac", result.mac_matrix is not None), ("solutions", len(result.solutions) > 1)) if on]
    n_ax = 2 + int(has_z) + int(has_em) + len(extra)
    # drawn at the file's resolution from the start: the layout's text measurements then serve the saved figure too
    fig, axes = plt.subplots(1, n_ax, figsize=(4.5 * n_ax, 4.6), dpi=_DPI)
    for k, ax in zip(extra, axes[n_ax - len(extra):]):
        (_plot_mac if k == "mac" else _plot_solutions)(ax, result)
    axes = list(axes[:n_ax - len(extra)])
    x = np.asarray(result.mode_numbers)
    j = x - 1
    chk = result.check

    target = "target" if result.pairing is None else "FEA"  # the legend of the first panel serves them all
    _compare(axes[0], x, [str(m) for m in x], result.targets_hz, np.asarray(result.initial_modes.frequency_hz)[j],
             np.asarray(result.modes.frequency_hz)[j], None if chk is None else chk.frequency_hz[j],
             "frequency [Hz]", "mode [-]", target)
    axes[0].legend(fontsize="x-small", loc="upper left")
    if has_z:
        _compare(axes[1], x, [str(m) for m in x], result.damping_targets,
                 np.asarray(result.initial_modes.damping_ratio)[j], np.asarray(result.modes.damping_ratio)[j],
                 None if chk is None else chk.damping_ratio[j], "damping ratio [%]", "mode [-]", target,
                 scale=100.0)
    if has_em:
        ticks, fea, initial, model = _fitted_effective_masses(result)
        ax = axes[1 + int(has_z)]
        _compare(ax, np.arange(1, len(ticks) + 1), ticks, fea, initial, model, None,
                 "effective mass [kg (T), kg m^2 (R)]", "FEA mode, component [-]", target)
        ax.set_title("effective masses (fitted)", fontsize="small")
    ax = axes[-1]
    h = np.asarray(result.history)
    if len(h):
        ax.semilogy(np.arange(len(h)), np.maximum(h, 1e-300), ".-", ms=3)
    ax.set_xlabel("solver step [-]")
    ax.set_ylabel("cost 0.5 sum r^2 [-]")
    ax.set_title(("converged" if result.converged else "NOT converged") + f" ({result.solver})", fontsize="small")
    ax.grid(alpha=0.3, which="both")
    what = _fit_description(result)
    fig.suptitle(f"{title}\n{what}" if title else what, fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, format=fmt)
    plt.close(fig)


_DPI = 110  # fit.png: 1485 x 506 pixels for the usual three panels


def _compare(ax, x, ticks, target, initial, model, simulated, ylabel, xlabel, target_label, scale=1.0) -> None:
    """One comparison panel: the target of each item, the initial and fitted model (and the simulated check),
    the fitted model's relative error written beside it."""
    target, initial, model = (scale * np.asarray(a, dtype=float) for a in (target, initial, model))
    ax.plot(x, target, "_", color="k", ms=22, mew=2.5, label=target_label, zorder=2)
    ax.plot(x, initial, "s", mfc="none", color="0.55", ms=8, label="initial model", zorder=3)
    if simulated is not None:
        ax.plot(x, scale * np.asarray(simulated), "D", mfc="none", color="C3", ms=10, mew=1.3,
                label="fitted, simulated check", zorder=3)
    ax.plot(x, model, "o", color="C0", ms=5, label="fitted model (linear)", zorder=4)
    for xi, t, m in zip(x, target, model):
        ax.annotate(f"{100 * (m - t) / t:+.2g} %", (xi, m), textcoords="offset points", xytext=(12, -3),
                    fontsize="x-small", color="C0")
    ax.plot([], [], " ", label=f"number: (fitted - {target_label})/{target_label}")
    ax.set_xticks(x, ticks)
    ax.set_xlim(min(x) - 0.5, max(x) + 0.9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


_EM_COMPONENTS = ("T1", "T2", "T3", "R1", "R2", "R3")
_EM_SHOWN = 0.01  # effective-mass components shown: at least this fraction of their mode's largest component


def _fitted_effective_masses(result):
    """(tick labels, FEA, initial model, fitted model) of the effective masses a fit was fitted to (the
    components that carry at least `_EM_SHOWN` of their mode's largest), or None when they were not fitted."""
    if result.pairing is None or result.options.get("effective_mass_sigma") is None:
        return None
    rows = [p for p in result.pairing if p.get("fea_effective_mass") is not None]
    if not rows:
        return None
    em0 = np.asarray(result.initial_modes.effective_mass)
    ticks, fea, initial, model = [], [], [], []
    for p in rows:
        f = np.asarray(p["fea_effective_mass"], dtype=float)
        for c in np.flatnonzero(f >= _EM_SHOWN * f.max()):
            ticks.append(f"{p['fea_mode']} {_EM_COMPONENTS[c]}")
            fea.append(f[c])
            initial.append(em0[p["initial_model_mode"] - 1, c])
            model.append(p["model_effective_mass"][c])
    return ticks, fea, initial, model


def _fit_description(result) -> str:
    """What a fit fitted, in one line: the modes (boundary, loop), the targets and the free parameters."""
    kind = BOUNDARIES[result.boundary].description if result.boundary in BOUNDARIES else result.boundary
    loop = ", controller in the loop" if LOOPS[result.options.get("loop", "open")].closed else ""
    n = len(result.mode_numbers)
    if result.pairing is not None:
        what = [f"{n} FEA mode{'s' * (n > 1)}' frequencies"]
        if result.options.get("effective_mass_sigma") is not None:
            what.append("effective masses")
        if result.mac_matrix is not None:
            what.append("mode shapes")
    else:
        what = [f"{n} frequenc{'ies' if n > 1 else 'y'}"]
    if len(result.damping_targets):
        what.append(f"{len(result.damping_targets)} damping ratio{'s' * (len(result.damping_targets) > 1)}")
    free = ", ".join(result.names)
    free = free if len(free) <= 70 else f"{len(result.names)} parameters"
    return f"{kind} modes{loop}: {', '.join(what)}; free: {free}"


def _plot_mac(ax, result) -> None:
    """The mode-shape MAC of every FEA mode read (rows) against every model mode at the solution (columns), the
    fitted pairs outlined."""
    from matplotlib.patches import Rectangle

    m = np.asarray(result.mac_matrix)
    ax.imshow(m, vmin=0.0, vmax=1.0, cmap="Blues", aspect="auto")
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize="x-small",
                    color="white" if m[i, j] > 0.6 else "black")
    rows = list(result.mac_fea_modes)
    for p in result.pairing or []:
        i, j = rows.index(p["fea_mode"]), p["model_mode"] - 1
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="C3", lw=2))
    ax.set_xticks(range(m.shape[1]), [str(j + 1) for j in range(m.shape[1])])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows], fontsize="x-small")
    ax.set_xlabel("model mode (fitted)")
    ax.set_ylabel("FEA mode")
    ax.set_title("mode-shape MAC (red: fitted pairs)", fontsize="small")


def _plot_solutions(ax, result) -> None:
    """Every distinct parameter set that reaches the targets, with the start it came from (first two free
    parameters; one parameter: against the solution number)."""
    sols = result.solutions
    names = list(sols[0]["values"])
    for i, d in enumerate(sols):
        v, s0 = list(d["values"].values()), list(d["initial"].values())
        x, y, x0, y0 = (v[0], v[1], s0[0], s0[1]) if len(names) > 1 else (i + 1, v[0], i + 1, s0[0])
        ax.annotate("", (x, y), (x0, y0), arrowprops={"arrowstyle": "->", "color": "0.6"})
        ax.plot(x0, y0, "o", mfc="none", color="0.55", ms=6)
        ax.plot(x, y, "*", color=f"C{i}", ms=14, label=f"solution {i + 1}" + (" (reported)" if i == 0 else ""))
    ax.plot([], [], "o", mfc="none", color="0.55", label="its start")
    label = [f"{n} [{u}]" for n, u in zip(names, result.units)]
    ax.set_xlabel(label[0] if len(names) > 1 else "solution [-]")
    ax.set_ylabel(label[1] if len(names) > 1 else label[0])
    ax.legend(fontsize="x-small")
    ax.grid(alpha=0.3)
    ax.set_title(f"{len(sols)} parameter sets reach the targets", fontsize="small")


def fit_report_lines(result, data: dict, written: list[str]) -> list[str]:
    """The console report of a modal fit: status, parameters, targets, FEA pairing, timing, files written."""
    lines = [f"fit                 {data['fit_file']}",
             f"scenario            {data['scenario']} (boundary {result.boundary}"
             + (", closed loop: the modes of the spacecraft with its controller" if LOOPS[data.get("loop", "open")].closed else "")
             + f", solver {result.solver})",
             *labelled_lines("status", result.message), ""]
    lines.append(f"{'parameter':<28} {'value':>14} {'sigma':>12} {'initial':>14}  unit")
    for i, name in enumerate(result.names):
        sig = result.sigma[i]
        sig_s = f"{sig:12.4g}" if np.isfinite(sig) else f"{'undetermined':>12}"
        lines.append(f"{name:<28} {result.values[i]:14.8g} {sig_s} {result.initial[i]:14.8g}  {result.units[i]}")
    lines += ["", (f"{'mode':>4} {'target [Hz]':>12} {'model [Hz]':>12} {'rel. error':>11} {'simulated [Hz]':>15}"
                   f" {'target zeta':>12} {'model zeta':>11} {'simulated zeta':>15}")]
    for r in data["targets"]:
        def f(key, w, fmt, r=r):
            x = r.get(key)
            return f"{'-':>{w}}" if x is None else f"{x:{w}{fmt}}"

        lines.append(f"{r['mode']:>4} {f('target_frequency_hz', 12, '.6f')} {f('model_frequency_hz', 12, '.6f')} "
                     f"{f('frequency_relative_error', 11, '.2e')} {f('simulated_frequency_hz', 15, '.6f')} "
                     f"{f('target_damping_ratio', 12, '.6f')} {f('model_damping_ratio', 11, '.6f')} "
                     f"{f('simulated_damping_ratio', 15, '.6f')}")
    if result.pairing:
        lines += ["", (f"{'FEA mode':>8} {'FEA [Hz]':>12} {'model mode':>10} {'model [Hz]':>12} {'MAC start':>9} "
                       f"{'MAC end':>8}  effective mass FEA / model [kg, kg m^2] T1 T2 T3 R1 R2 R3")]
        for p in result.pairing:
            def mac(x):
                return f"{'-':>8}" if x is None else f"{x:8.4f}"

            em = "" if p["fea_effective_mass"] is None else " ".join(
                f"{a:.3g}/{b:.3g}" for a, b in zip(p["fea_effective_mass"], p["model_effective_mass"]))
            lines.append(f"{p['fea_mode']:>8} {p['fea_frequency_hz']:12.6f} {p['model_mode']:>10} "
                         f"{p['model_frequency_hz']:12.6f} {mac(p['mac_initial']):>9} {mac(p['mac'])}  {em}")
    if len(result.solutions) > 1:
        head = (f"{len(result.solutions)} distinct parameter sets reach the targets (of "
                f"{result.options.get('starts', 1)} starts):")
        lines += ["", head, f"{'#':>3} {'start':>5}  " + " ".join(
                      f"{n:>16}" for n in result.names) + f" {'max rel. error':>15}" + (
                      f" {'min MAC':>8}" if result.solutions[0].get("mac") is not None else "")]
        for i, d in enumerate(result.solutions):
            mac = d.get("mac")
            lines.append(f"{i + 1:>3} {d['start']:>5}  " + " ".join(f"{v:16.8g}" for v in d["values"].values())
                         + f" {d['frequency_error']:15.2e}" + ("" if mac is None else f" {min(mac):8.4f}"))
    t = data["timing_s"]
    lines += ["", f"timing              fit {t['fit']:.2f} s (solver {t['solver']:.2f} s, compilation included)"
              + (f", simulation check {t['check']:.2f} s" if t.get("check") is not None else "")]
    lines += [f"wrote               {os.path.relpath(w)}" for w in written]
    return lines


def labelled_lines(label: str, text: str) -> list[str]:
    """A labelled report line (`label` padded to the label column), its text wrapped at `REPORT_WIDTH`: one
    line per clause (`; `-separated, each but the last ending in `;`), continuation lines indented past the text
    column."""
    indent = " " * _LABEL
    out = []
    clauses = text.split("; ")
    for i, clause in enumerate(clauses):
        out += textwrap.wrap(clause + ";" * (i < len(clauses) - 1), REPORT_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_long_words=False, break_on_hyphens=False)
    out = out or [indent]
    out[0] = f"{label:<{_LABEL}}{out[0][_LABEL:]}"
    return out
