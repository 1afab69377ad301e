"""FIT.toml files: fit model parameters (hinge k, c, masses, inertias, ...) to target modes from a file, and write
the results.

```toml
scenario = "spacecraft.toml"        # required; the model (a scenario TOML file), path relative to this file;
                                    # its values of the free parameters are the initial guesses

[modes]                             # required
boundary = "free"                   # "free" (as flown, default) or "clamped" (hub fixed: FEA fixture, test stand)
targets_hz = [0.215, 0.417, 0.500]  # required; ascending; matched to the lowest flexible modes in order
damping_ratios = [0.005, 0.005, 0.005]  # optional; one per target, each in (0, 1)
mode_numbers = [1, 2, 3]            # optional; the 1-based modes the targets belong to (default 1, 2, ...)
frequency_sigma = 0.01              # optional; relative 1-sigma uncertainty of the frequency targets
damping_sigma = 0.2                 # optional; relative 1-sigma uncertainty of the damping targets
# instead of targets_hz: FEA modes from a solver's output file, paired with the model's modes
# fea = "spacecraft_clamped.dat"    # CalculiX .dat or NASTRAN .f06 (format from the extension, or fea_format)
# fea_units = "m-kg-s"              # the FEA model's units: m-kg-s, mm-t-s, mm-kg-s, in-lbf-s (needed for masses)
# reference_point = [0, 0, 0]       # where the FEA's rotations refer to, in B [m] (default: FEA origin = B origin)
# effective_mass_sigma = 0.05       # also fit the paired modes' effective masses (sigma relative to the totals)
# fea_modes = [1, 2]                # pair by hand: these FEA modes with mode_numbers (default: automatic)
# rigid_hz = 0.01                   # free-free files: modes below this are the 6 rigid-body modes (dropped)
# fea_damping_ratios = [0.005, ...] # damping ratios of the FEA modes (one per mode read, file order)

[fit]                               # required
free = ["wing_pY.k = wing_mY.k", "antenna.k", "wing_pY.c = wing_mY.c", "antenna.c"]
                                    # required; "<panel>.k", "<panel>.c", or any registry parameter that enters
                                    # the modes ("<panel>.mass", "hub.IHubPntBc_B", ...); "a.k = b.k" ties
solver = "lm"                       # "lm" (Levenberg-Marquardt, default), "adam", "lbfgs" (optax)
max_steps = 200                     # solver step budget
rtol = 1e-10                        # termination tolerances (fitted coordinates, cost)
atol = 1e-10
learning_rate = 0.02                # adam only (fitted-coordinate units)
reach_rtol = 1e-6                   # relative frequency error under which the targets count as reached
ident_rtol = 1e-6                   # singular-value ratio below which a combination is undetermined
warn_rtol = 1e-2                    # ... below which it is reported as poorly determined

[check]                             # optional: the independent simulation check (`measure_modes`)
simulate = true                     # simulate the fitted nonlinear model, measure its frequencies
periods = 30                        # free-response length, in periods of the slowest mode
amplitude_rad = 1e-4                # initial hinge amplitude [rad]

[output]                            # optional
dir = "out"                         # relative to this file (default "out"); created if missing (not its parent)
plot = "fit.png"                    # file name in dir (.png, .pdf, .svg), or false for no plot
```

Outputs in `dir`: `result.json` (parameters with value and sigma, targets beside fitted and simulated
values, residuals, iterations, convergence status in words, timing, all fitted modes, the correlation matrix
and the identifiability report), `fitted_scenario.toml`
(the scenario with the fitted values) and the plot. They are written to temporary files and renamed at the
end: a failed run leaves no partial output.
"""

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._analysis._fit import SOLVERS, FitResult, fit
from .._analysis._lsq import FitError
from .._analysis._modes import BOUNDARIES, measure_modes
from .._model._scenario import ConfigError, Scenario, SimulationConfig
from .._simulation._simulate import check_memory
from ._fea import FORMATS, UNIT_SYSTEMS, read_fea
from ._files import _Checker, _kind, least_squares_json, write_json, write_output_files
from ._files import json_number as _num
from ._scenario_file import load_scenario, scenario_toml

_TOP = ("scenario", "modes", "fit", "check", "output")
_MODES = ("boundary", "targets_hz", "damping_ratios", "mode_numbers", "frequency_sigma", "damping_sigma", "fea",
          "fea_format", "fea_units", "fea_modes", "rigid_hz", "reference_point", "effective_mass_sigma",
          "fea_damping_ratios")
_FIT = ("free", "solver", "max_steps", "rtol", "atol", "learning_rate", "reach_rtol", "ident_rtol", "warn_rtol")
_CHECK = ("simulate", "periods", "amplitude_rad")
_OUTPUT = ("dir", "plot")
_ALIASES = {
    "targets": "targets_hz",
    "frequencies": "targets_hz",
    "frequencies_hz": "targets_hz",
    "damping": "damping_ratios",
    "zeta": "damping_ratios",
    "parameters": "free",
    "tie": "free",
    "method": "solver",
    "iterations": "max_steps",
    "out": "dir",
    "modes": "mode_numbers",
}
_DESCRIPTION = {
    "scenario": "the model's scenario TOML file, relative to this file",
    "targets_hz": "target frequencies in Hz, ascending",
    "free": 'e.g. free = ["p0.k", "p0.c"]',
}
OUTPUT_FILES = ("result.json", "fitted_scenario.toml")  # and the plot, when there is one


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """A parsed FIT.toml: paths resolved against the file's folder (`scenario_name`: as written in the file);
    `fit_kwargs` are `fit`'s keyword
    arguments; `check` the `measure_modes` options (`None`: no check); `plot` a file name or `None`."""

    path: str
    scenario_path: str
    scenario_name: str
    scenario: Scenario
    targets_hz: list[float] | None  # None: from the FEA modes (`fit_kwargs["fea"]`)
    fit_kwargs: dict[str, Any]
    check: dict[str, Any] | None
    out_dir: str
    plot: str | None


def load_fit(path: str | os.PathLike, data: Mapping | None = None, *, out_dir: str | None = None) -> FitSpec:
    """Read and validate a modal FIT.toml file (schema: this module's docstring) and load its scenario. Every
    check, the output folder's included, happens here, before any compute.

    A FIT.toml with a `[data]` table is a telemetry fit: read any FIT.toml with `jaxhinge.load_fit`
    (`jaxhinge._io._fit_files.load_fit_file`), which dispatches.

    **Arguments:**

    - `path`: the FIT.toml file (names the file in errors; relative paths are relative to its folder).
    - `data`: its parsed content, when already read (else `path` is read).
    - `out_dir`: an output folder that replaces `[output] dir` (checked instead of it).

    **Raises:** `FitError` (`file: field = value: rule`) for a bad FIT.toml, `ScenarioError` for a bad scenario.
    """
    source = os.fspath(path)
    ck = _Checker(source, error=FitError, descriptions=_DESCRIPTION, aliases=_ALIASES)
    if data is None:
        data = ck.read_toml("fit file")
    if "data" in data:
        raise ck.fail(None, "a FIT.toml with a [data] table is a telemetry fit: read it with jaxhinge.load_fit")
    ck.keys(data, None, _TOP, ("scenario",))
    scen_path = ck.path(data["scenario"], "scenario", "a scenario file name")

    modes_t = ck.section(data, "modes", _MODES, required=True)
    fit_t = ck.section(data, "fit", _FIT, required=True)
    check_t = ck.section(data, "check", _CHECK)
    out_t = ck.section(data, "output", _OUTPUT)

    kw: dict[str, Any] = {}
    kw["boundary"] = ck.choice(modes_t.get("boundary", "free"), "modes.boundary", BOUNDARIES)
    has_fea = "fea" in modes_t
    ck.keys(modes_t, "modes", _MODES, () if has_fea else ("targets_hz",))
    targets = modes_t.get("targets_hz")
    if has_fea and targets is not None:
        raise ck.bad("modes.targets_hz", targets, "give either targets_hz or fea (the targets then come from the "
                     "FEA file), not both")
    if not has_fea and not isinstance(targets, list):
        raise ck.bad("modes.targets_hz", targets, f"must be a list of numbers, got {_kind(targets)}")
    for key in ("fea_format", "fea_units", "fea_modes", "rigid_hz", "reference_point", "effective_mass_sigma",
                "fea_damping_ratios"):
        if key in modes_t and not has_fea:
            raise ck.bad(f"modes.{key}", modes_t[key], "applies to FEA modes only: give modes.fea too")
    if has_fea:
        fea_path = ck.path(modes_t["fea"], "modes.fea", "an FEA result file (.dat CalculiX, .f06 NASTRAN)")
        fmt = ck.choice(modes_t["fea_format"], "modes.fea_format", FORMATS.values()) if "fea_format" in modes_t \
            else None
        units = ck.choice(modes_t["fea_units"], "modes.fea_units", UNIT_SYSTEMS) if "fea_units" in modes_t else None
        rigid = ck.finite_positive(modes_t["rigid_hz"], "modes.rigid_hz") if "rigid_hz" in modes_t else 0.01
        kw["fea"] = read_fea(fea_path, fmt, units=units, boundary=kw["boundary"], rigid_hz=rigid)
        if "fea_damping_ratios" in modes_t:  # one per FEA mode read (rigid-body modes dropped), as in the file
            z, nf = modes_t["fea_damping_ratios"], len(kw["fea"].frequencies)
            if not isinstance(z, list) or len(z) != nf:
                raise ck.bad("modes.fea_damping_ratios", z, f"must be a list of {nf} damping ratios, one per FEA "
                             f"mode of {fea_path} (modes {', '.join(map(str, kw['fea'].mode_numbers))})")
            z = ck.array(z, "modes.fea_damping_ratios", (nf,))
            if np.any(z <= 0) or np.any(z >= 1):
                raise ck.bad("modes.fea_damping_ratios", modes_t["fea_damping_ratios"], "each must be in (0, 1)")
            kw["fea"] = dataclasses.replace(kw["fea"], damping=z)
        if "reference_point" in modes_t:
            kw["reference_point"] = ck.array(modes_t["reference_point"], "modes.reference_point", (3,)).tolist()
        if "effective_mass_sigma" in modes_t:
            kw["effective_mass_sigma"] = ck.finite_positive(modes_t["effective_mass_sigma"],
                                                            "modes.effective_mass_sigma")
        if "fea_modes" in modes_t:
            fm, known = modes_t["fea_modes"], [int(x) for x in kw["fea"].mode_numbers]
            if not isinstance(fm, list) or len(set(map(str, fm))) != len(fm) or any(x not in known for x in fm):
                raise ck.bad("modes.fea_modes", fm, f"must be distinct mode numbers of {fea_path} ({known[0]}.."
                             f"{known[-1]})")
            if not isinstance(modes_t.get("mode_numbers"), list) or len(modes_t["mode_numbers"]) != len(fm):
                raise ck.bad("modes.fea_modes", fm, "pairs by hand: give modes.mode_numbers too, one model mode "
                             "per FEA mode")
            kw["fea_modes"] = fm
    for key in ("damping_ratios", "mode_numbers"):
        if key in modes_t:
            if not isinstance(modes_t[key], list):
                raise ck.bad(f"modes.{key}", modes_t[key], f"must be a list, got {_kind(modes_t[key])}")
            kw[key] = modes_t[key]
    for key in ("frequency_sigma", "damping_sigma"):
        if key in modes_t:
            kw[key] = ck.finite_positive(modes_t[key], f"modes.{key}")
    ck.keys(fit_t, "fit", _FIT, ("free",))
    kw["free"] = fit_t["free"]
    if "solver" in fit_t:
        kw["solver"] = ck.choice(fit_t["solver"], "fit.solver", SOLVERS)
    if "max_steps" in fit_t:
        kw["max_steps"] = ck.integer(fit_t["max_steps"], "fit.max_steps")
    for key in ("rtol", "atol", "learning_rate", "reach_rtol", "ident_rtol", "warn_rtol"):
        if key in fit_t:
            kw[key] = ck.finite_positive(fit_t[key], f"fit.{key}")

    check: dict[str, Any] | None = {}
    simulate = ck.boolean(check_t.get("simulate", True), "check.simulate")
    if "periods" in check_t:
        check["periods"] = ck.finite_positive(check_t["periods"], "check.periods")
        if check["periods"] < 3:
            raise ck.bad("check.periods", check_t["periods"], "must be >= 3 (zero crossings are counted)")
    if "amplitude_rad" in check_t:
        check["amplitude"] = ck.finite_positive(check_t["amplitude_rad"], "check.amplitude_rad")
    if not simulate:
        check = None

    plot = out_t.get("plot", "fit.png")
    if plot is False:
        plot = None
    elif not isinstance(plot, str) or not plot.lower().endswith((".png", ".pdf", ".svg")) or os.sep in plot:
        raise ck.bad("output.plot", plot, "must be a file name ending in .png, .pdf or .svg, or false")
    files = OUTPUT_FILES + ((plot,) if plot else ())
    out_dir = ck.output_folder(out_t, "out", files, out_dir)

    scenario = load_scenario(scen_path)
    if check and "periods" in check:  # one run per mode, >= 64 samples per period (`measure_modes`), before the fit
        try:
            n = scenario.spacecraft.panels.count
            check_memory(SimulationConfig(t_end=check["periods"], save_dt=1 / 64), n, n, field="check.periods")
        except ConfigError as e:
            raise ck.bad(e.field, check_t["periods"], e.rule) from None
    return FitSpec(
        path=source,
        scenario_path=scen_path,
        scenario_name=data["scenario"],
        scenario=scenario,
        targets_hz=targets,
        fit_kwargs=kw,
        check=check,
        out_dir=out_dir,
        plot=plot,
    )


def run_fit(spec: FitSpec, progress: Callable[[str], None] | None = None) -> tuple[FitResult, dict[str, float]]:
    """Fit a loaded `FitSpec` and, when asked, run the simulation check. FitErrors name the file.

    **Returns:** `(result, timing)`, `timing = {"check": seconds}` when the check ran."""
    try:
        result = fit(spec.scenario, spec.targets_hz, check=False, progress=progress, **spec.fit_kwargs)
    except FitError as e:
        raise FitError(f"{spec.path}: {e}", field=e.field) from None
    timing: dict[str, float] = {}
    if spec.check is not None:
        if progress:
            progress("fit: independent check: simulating the fitted nonlinear model, one free response per mode...")
        t0 = time.perf_counter()
        measured = measure_modes(result.scenario, result.boundary, **spec.check)
        result = dataclasses.replace(result, check=measured)
        timing["check"] = time.perf_counter() - t0
        if progress:
            progress(f"fit: check done in {timing['check']:.1f} s")
    return result, timing


# ------------------------------------------------------------------------------------------------------------
# Outputs
# ------------------------------------------------------------------------------------------------------------


def result_dict(result: FitResult, spec: FitSpec | None = None) -> dict[str, Any]:
    """The `result.json` content (plain Python; NaN and inf as `null`)."""
    from .._version import __version__

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
        "solver_settings": {k: v for k, v in (spec.fit_kwargs.items() if spec else []) if k not in ("free", "fea")},
        "free": list(result.names),
        "timing_s": {"fit": _num(result.wall_s), "solver": _num(result.solve_s)},
        "cost_history": [_num(x) for x in result.history],
        "modes": result.modes.as_dict()["modes"],
        "chi2": _num(result.chi2),
        "dof": int(result.dof),
        **least_squares_json(result),
    }
    if chk is not None:
        out["check"] = chk.as_dict()
    if result.pairing is not None:
        fea = spec.fit_kwargs["fea"] if spec else None
        out["fea"] = {"file": None if fea is None else fea.source, "boundary": result.boundary,
                      "reference_point_B_m": result.options["reference_point"],
                      "effective_mass_units": "kg (translations), kg m^2 (rotations)",
                      "pairing": [{k: (v if not isinstance(v, float) else _num(v)) for k, v in row.items()}
                                  for row in result.pairing]}
    return out


def plot_fit(result: FitResult, path, fmt: str | None = None, title: str = "") -> None:
    """Targets vs initial, fitted and simulated frequencies and damping ratios, and the cost history."""
    from ._plot import _plt

    plt = _plt()
    has_z = len(result.damping_targets) > 0
    fig, axes = plt.subplots(1, 3 if has_z else 2, figsize=(13 if has_z else 9, 4.2))
    x = np.asarray(result.mode_numbers)
    j = x - 1
    chk = result.check

    def panel(ax, target, initial, model, simulated, ylabel, scale=1.0):
        target, initial, model = (scale * np.asarray(a) for a in (target, initial, model))
        ax.plot(x, target, "_", color="k", ms=22, mew=2.5, label="target", zorder=2)
        ax.plot(x, initial, "s", mfc="none", color="0.55", ms=8, label="initial model", zorder=3)
        if simulated is not None:
            ax.plot(x, scale * np.asarray(simulated), "D", mfc="none", color="C3", ms=10, mew=1.3,
                    label="fitted, simulated check", zorder=3)
        ax.plot(x, model, "o", color="C0", ms=5, label="fitted model (linear)", zorder=4)
        for xi, t, m in zip(x, target, model):
            ax.annotate(f"{100 * (m - t) / t:+.2g} %", (xi, m), textcoords="offset points", xytext=(12, -3),
                        fontsize="x-small", color="C0")
        ax.plot([], [], " ", label="number: (fitted - target)/target")
        ax.set_xticks(x)
        ax.set_xlim(x.min() - 0.5, x.max() + 0.9)
        ax.set_xlabel("mode [-]")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)

    panel(axes[0], result.targets_hz, np.asarray(result.initial_modes.frequency_hz)[j],
          np.asarray(result.modes.frequency_hz)[j], None if chk is None else chk.frequency_hz[j], "frequency [Hz]")
    axes[0].legend(fontsize="x-small", loc="upper left")
    if has_z:
        panel(axes[1], result.damping_targets, np.asarray(result.initial_modes.damping_ratio)[j],
              np.asarray(result.modes.damping_ratio)[j], None if chk is None else chk.damping_ratio[j],
              "damping ratio [%]", scale=100.0)
    ax = axes[-1]
    h = np.asarray(result.history)
    if len(h):
        ax.semilogy(np.arange(len(h)), np.maximum(h, 1e-300), ".-", ms=3)
    ax.set_xlabel("solver step [-]")
    ax.set_ylabel("cost 0.5 sum r^2 [-]")
    ax.set_title(("converged" if result.converged else "NOT converged") + f" ({result.solver})", fontsize="small")
    ax.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)


def write_outputs(result: FitResult, spec: FitSpec, extra: dict | None = None) -> list[str]:
    """Write result.json, fitted_scenario.toml and the plot into `spec.out_dir` (all or nothing)."""
    data = result_dict(result, spec)
    if extra:
        data["timing_s"].update(extra)
    writers = {
        "result.json": lambda f: write_json(data, f),
        "fitted_scenario.toml": lambda f: f.write(scenario_toml(result.scenario, os.path.join(spec.out_dir, "fitted_scenario.toml")).encode("utf-8")),
    }
    if spec.plot:
        fmt = os.path.splitext(spec.plot)[1].lstrip(".").lower()
        writers[spec.plot] = lambda f: plot_fit(result, f, fmt=fmt, title=os.path.basename(spec.path))
    return write_output_files(spec.out_dir, writers)
