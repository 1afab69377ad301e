"""Reports of a sensitivity study: `sensitivity.json` (`sensitivity_json`), `sensitivity.csv`
(`sensitivity_csv_rows`), the tornado plots (`plot_tornado`, `plot_tornados`) and the console lines
(`sensitivity_report_lines`)."""

import numpy as np

from .._format import to_json
from ._plot import pyplot, shown

__all__ = ["plot_tornado", "plot_tornados", "sensitivity_csv_rows", "sensitivity_json", "sensitivity_report_lines"]


def sensitivity_json(result) -> dict:
    """The `sensitivity.json` content of a `SensitivityResult` (no NaN): parameters, and per output its values, Jacobian and normalised Jacobian (nested
    as `shape + (P,)`; undefined normalised entries `None`), unit, labels and options."""
    P = len(result.parameter_names)
    outs = []
    for b in result.blocks:
        v, J, N = result.output(b.name)
        D = result.normalized_defined[b.start : b.stop].reshape(*b.shape, P)
        outs.append({"name": b.name, "kind": b.kind, "unit": b.unit, "options": b.options,
                     "shape": list(b.shape), "labels": list(b.labels), "value": v.tolist(),
                     "jacobian": J.tolist(),
                     "normalized": np.where(D, N, np.nan).astype(object).tolist()})
    return to_json({
        "mode": result.mode,
        "success": result.success,
        "parameters": [
            {"name": n, "value": float(v), "unit": u}
            for n, v, u in zip(result.parameter_names, result.parameter_values, result.parameter_units)
        ],
        "t": None if result.t is None else result.t.tolist(),
        "outputs": outs,
        "notes": list(result.notes),
    })

def sensitivity_csv_rows(result) -> list[list]:
    """The rows of `sensitivity.csv`, one per (output row, parameter): output, component, t, value, unit, parameter, parameter value,
    parameter unit, dy/dp, dln y/dln p (empty when undefined). Header first."""
    rows: list[list] = [["output", "component", "t_s", "value", "unit", "parameter", "parameter_value",
                         "parameter_unit", "dy_dp", "dlny_dlnp"]]
    for b in result.blocks:
        ncomp = len(b.labels) if b.labels else 1
        for r in range(b.start, b.stop):
            local = r - b.start
            comp = b.labels[local % ncomp] if b.labels else ""
            tt = repr(float(result.t[local // ncomp])) if b.kind == "history" else ""
            for j, pn in enumerate(result.parameter_names):
                rows.append([b.name, comp, tt, repr(float(result.output_values[r])), b.unit, pn,
                             repr(float(result.parameter_values[j])), result.parameter_units[j],
                             repr(float(result.jacobian[r, j])),
                             repr(float(result.normalized[r, j])) if result.normalized_defined[r, j] else ""])
    return rows

def plot_tornado(result, output: str, f=None, fmt: str = "png", ax=None, top: int | None = None):
    """Tornado plot of a `SensitivityResult` for one scalar output row: horizontal bars of $\\partial\\ln y/\\partial\\ln p$, largest
    $|\\cdot|$ on top (parameters whose normalisation is undefined are listed, without a bar). Draws on `ax`,
    or writes a figure to the file object `f` (format `fmt`); returns the axes (None when written)."""
    plt = pyplot()
    ranked = result.ranking(output)[:top]
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(ranked) + 1.6))
    labels = [n if v is not None else f"{n} (undefined)" for n, v in ranked]
    vals = [0.0 if v is None else v for _, v in ranked]
    pos = np.arange(len(ranked))[::-1]
    ax.barh(pos, vals, color=["tab:red" if v < 0 else "tab:blue" for v in vals])
    ax.set_yticks(pos, labels)
    ax.axvline(0.0, color="k", lw=0.8)
    r = result.row(output)
    ax.set_xlabel("d ln y / d ln p [-]  (% change of y per % change of p)")
    ax.set_title(f"{output} = {_value_text(float(result.output_values[r]), result.output_units[r])}")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="tab:blue", label="y rises as p rises (> 0)"),
                       Patch(color="tab:red", label="y falls as p rises (< 0)")],
              fontsize="x-small", loc="best")
    ax.grid(axis="x", alpha=0.3)
    if own:
        fig.tight_layout()
        if f is not None:
            fig.savefig(f, format=fmt, dpi=110)
            plt.close(fig)
            return None
    return ax


def plot_tornados(result, rows, f, fmt: str = "png") -> None:
    """One tornado panel per output row of `rows`, stacked, written to the file object `f`."""
    plt = pyplot()
    n, P = max(len(rows), 1), len(result.parameter_names)
    fig, axes = plt.subplots(n, 1, figsize=(7.5, n * (0.42 * P + 1.4)), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        plot_tornado(result, row, ax=ax)
    fig.tight_layout()
    fig.savefig(f, format=fmt, dpi=110)
    plt.close(fig)


def _value_text(value: float, unit: str) -> str:
    """`0.1344 rad/s (7.70 deg/s)`: SI as in the files, and the figures' unit where it differs."""
    text = f"{value:.8g} {unit}"
    fig_value, fig_unit = shown(value, unit)
    return text if fig_unit == unit else f"{text} ({float(fig_value):.4g} {fig_unit})"


def sensitivity_report_lines(study_path: str, result, wall_s: float, out_dir: str) -> list[str]:
    """The console report of `jaxhinge sensitivity`: the size of the study, each scalar output's value and its
    three largest normalised sensitivities, notes."""
    lines = [(f"sensitivity         {study_path}: {len(result.parameter_names)} parameter(s) x "
              f"{len(result.output_names)} output row(s), {result.mode} mode, {wall_s:.2f} s wall (incl. compilation)")]
    rows = result.scalar_rows()
    if rows:
        lines += ["", f"{'output':<32} {'value':<30}  d ln y / d ln p (largest first)"]
        for r in rows:
            i = result.row(r)
            top = ", ".join(f"{n} {v:+.3g}" for n, v in result.ranking(r)[:3] if v is not None)
            value = _value_text(float(result.output_values[i]), result.output_units[i])
            lines.append(f"{r:<32} {value:<30}  {top}")
    lines += [f"note                {note}" for note in result.notes]
    lines.append(f"output              {out_dir}")
    return lines
