"""Reports of a telemetry fit: `result.json` (`identify_json`), the console report (`identify_report_lines`) and
the figures `fit.png` and `residuals.png` (`plot_identify`)."""

import os
from typing import Any

import numpy as np

from .._format import json_number as _num
from .._simulation._telemetry import column_unit
from ._fit import labelled_lines, least_squares_json
from ._plot import legend_outside, pyplot, shown

__all__ = ["dt_line", "identify_json", "identify_report_lines", "plot_identify", "shooting_line"]


def identify_json(result, spec=None) -> dict[str, Any]:
    """The `result.json` content of a telemetry fit (`IdentifyResult`, and its `IdentifySpec` when there is one;
    JSON-safe: non-finite numbers as null)."""
    tel = result.telemetry
    params = {n: {"value": float(v), "sigma": _num(s), "initial": float(x0), "unit": unit,
                  "relative_sigma": _num(s / abs(v)) if v else None}
              for n, v, s, x0, unit in zip(result.names, result.values, result.sigma, result.initial,
                                           result.units)}
    return {
        "kind": "telemetry",
        "fit_file": spec.path if spec else None,
        "scenario": spec.scenario_path if spec else None,
        "parameters": params,
        "chi2": _num(result.chi2),
        "dof": int(result.dof),
        "chi2_per_dof": _num(result.chi2_per_dof),
        "converged": bool(result.converged),
        "status": result.status,
        "message": result.message,
        "iterations": int(result.iterations),
        **least_squares_json(result),
        "sigma_basis": result.sigma_note,
        "data": _data_block(tel, result.residuals, spec.csv_path if spec else tel.source),
        "options": result.options,
        "shooting": _shooting_json(result.shooting),
        "integration": result.integration,
        "starts": result.starts,
        "timing_s": {"identify": float(result.wall_s)},
        **({"records": [_data_block(r["telemetry"], r["residuals"],
                                    spec.records[k].csv_path if spec and spec.records else r["telemetry"].source)
                        for k, r in enumerate(result.records)]} if len(result.records) > 1 else {}),
    }


def _shooting_json(info: dict) -> dict[str, Any]:
    """result.json's `shooting` block: the method and, for multiple shooting, its segments, steps per phase and
    continuity defects at the solution (absolute per state component, and the largest relative to its sigma);
    after a fall-back, `fallback` (`from`, `reason` and the abandoned run's own block, `multiple`)."""
    return {k: (_shooting_json(v) if isinstance(v, dict) and k != "steps" else
                [_num(x) for x in v] if isinstance(v, list) and k != "horizon" else
                _num(v) if isinstance(v, float) else v) for k, v in info.items()}


def shooting_line(info: dict) -> str:
    """One line on how a telemetry fit integrated its record (console report); a second after a fall-back."""
    if info.get("method") != "multiple":
        line = f"shooting            single (horizon {', '.join(f'{h:g}' for h in info.get('horizon', [1.0]))})"
        fb = info.get("fallback")
        if fb:
            line += (f"\n                    after multiple shooting ended worse than its start ({fb['reason']}): "
                     "the fall-back")
        return line
    st = info["steps"]
    return (f"shooting            multiple: {info['segments']} segments of {info['segment_s']:g} s, "
            f"{st['penalty']} + {st['condensed']} steps (penalty, condensed), largest continuity defect "
            f"{info['max_defect']:.1e} of its sigma")


def dt_line(info: dict) -> str:
    """One line on the step `dt = "auto"` chose and its Richardson checks (console report)."""
    pairs = "; ".join(f"{p['dt']:g} s against {p['checked_with']:g} s: {p['max_error_sigma']:.2g} sigma"
                      for p in info["pairs"])
    return f"integration step    dt = {info['dt']:g} s (auto: {pairs}; accepted below {info['tolerance_sigma']:g})"


def _data_block(tel, residuals: np.ndarray, csv: str) -> dict[str, Any]:
    """One record's `data` block of result.json."""
    return {"csv": csv, "columns": list(tel.columns), "sigma": [float(s) for s in tel.sigma], "samples": tel.samples,
            "t_span": [float(tel.t[0]), float(tel.t[-1])],
            "rms_residual": {c: float(np.sqrt(np.mean(residuals[:, j] ** 2))) for j, c in enumerate(tel.columns)}}


def plot_identify(result, f, kind: str = "fit") -> None:
    """PNG into the file object `f`: `kind="fit"`: data vs fit (and the initial guess) per column;
    `kind="resid"`: residuals / sigma per column (every record's columns, one panel each)."""
    plt = pyplot()
    recs = result.records or [{"telemetry": result.telemetry, "fitted": result.fitted,
                               "residuals": result.residuals, "initial_fitted": result.initial_fitted}]
    panels = [(r, j, c, c if len(recs) == 1 else f"data[{k + 1}] {c}")
              for k, r in enumerate(recs) for j, c in enumerate(r["telemetry"].columns)]
    C = len(panels)
    fig, axes = plt.subplots(C, 1, figsize=(9.5, 1.8 * C + 1), sharex=len(recs) == 1, squeeze=False)
    for i, (r, j, c, label) in enumerate(panels):
        ax, tel = axes[i, 0], r["telemetry"]
        unit = column_unit(c)
        if kind == "fit":
            ax.plot(tel.t, _shown(c, tel.values[:, j], unit)[0], ".", ms=3, color="k", label="data")
            ax.plot(tel.t, _shown(c, r["initial_fitted"][:, j], unit)[0], "--", color="0.6", lw=1,
                    label="initial guess")
            ax.plot(tel.t, _shown(c, r["fitted"][:, j], unit)[0], "-", color="C0", lw=1.2, label="fit")
            ax.set_ylabel(f"{label}\n[{_shown(c, 0.0, unit)[1]}]", fontsize=8)
        else:
            ax.plot(tel.t, r["residuals"][:, j], ".", ms=3, color="C3")
            ax.axhline(0, color="k", lw=0.5)
            for s in (-1, 1):
                ax.axhline(s, color="0.6", lw=0.5, ls="--")
            ax.set_ylabel(f"{label}\n(fit-data)/sigma [-]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(("data vs fit" if kind == "fit" else "residuals") + f" (chi2/dof {result.chi2_per_dof:.3g})")
    if kind == "fit":
        legend_outside(axes[0, 0])
    axes[-1, 0].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(f, format="png", dpi=90)
    plt.close(fig)


def _shown(column: str, values, unit: str):
    """`shown` for a telemetry column, except wheel speeds (`Omega_<wheel>`): kept in rad/s, the unit of the
    file, its sigma and the wheel's rating (hundreds of rad/s would read as tens of thousands of deg/s)."""
    return (np.asarray(values), unit) if column.startswith("Omega_") else shown(values, unit)


def identify_report_lines(result, spec, written: list[str]) -> list[str]:
    """The console report of a telemetry fit: status, chi2, parameters, identifiability, timing, files written."""
    recs = result.records or [{"telemetry": result.telemetry}]
    what = (f"telemetry: {spec.csv_path}, {result.telemetry.samples} samples x {len(result.telemetry.columns)} columns"
            if len(recs) == 1 else f"{len(recs)} records, {sum(r['telemetry'].values.size for r in recs)} values")
    lines = [f"fit                 {spec.path} ({what})",
             *labelled_lines("status", result.message),
             (f"chi2/dof            {result.chi2_per_dof:.4g} (chi2 {result.chi2:.6g}, dof {result.dof}), "
              f"{result.iterations} solver steps"),
             *([shooting_line(result.shooting)] if result.shooting else []),
             *([dt_line(result.integration)] if result.integration.get("pairs") else []), "",
             f"{'parameter':<28} {'value':>14} {'sigma':>12} {'initial':>14}  unit"]
    for i, n in enumerate(result.names):
        s = result.sigma[i]
        s_s = f"{s:12.4g}" if np.isfinite(s) else f"{'undetermined':>12}"
        lines.append(f"{n:<28} {result.values[i]:14.8g} {s_s} {result.initial[i]:14.8g}  {result.units[i]}")
    for item in result.undetermined:
        lines.append(f"not identifiable    {item['combination']}: {item['description']}")
    for item in result.poorly_determined:
        lines.append(f"poorly determined   {item['combination']}: {item['description']}")
    lines += ["", f"timing              identify {result.wall_s:.2f} s (compilation included)"]
    lines += [f"wrote               {os.path.relpath(w)}" for w in written]
    return lines
