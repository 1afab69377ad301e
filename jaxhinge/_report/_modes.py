"""Reports of modes: `Modes` and `ModeMeasurement` as JSON data (`modes_json`, `measurement_json`: the
`modes` and `check` blocks of a fit's `result.json`, and `jaxhinge modes --json`) and the console table of
`jaxhinge modes` (`modes_table_lines`)."""

import numpy as np

from .._analysis._linear._linearize import EFFECTIVE_MASS_NAMES
from .._format import json_number as _num

__all__ = ["closed_loop_json", "closed_loop_table_lines", "measurement_json", "modes_cli_json", "modes_json",
           "modes_table_lines"]


def modes_json(m) -> dict:
    """A `Modes` as plain Python (JSON-ready; NaN/inf as `None`): `{"boundary", "modes": [...]}`, one entry per mode."""
    values = {k: np.asarray(getattr(m, k))
              for k in ("frequency_hz", "damping_ratio", "damped_frequency_hz", "natural_frequency_hz")}
    lam, over, shape, ef, em = (np.asarray(x) for x in (m.eigenvalue, m.overdamped, m.shape,
                                                        m.energy_fraction, m.effective_mass))
    return {"boundary": m.boundary, "reference_point_m": [_num(v) for v in np.asarray(m.reference_point)],
            "modes": [
        {
            "mode": j + 1,
            **{k: _num(v[j]) for k, v in values.items()},
            "eigenvalue": [_num(lam[j].real), _num(lam[j].imag)],
            "overdamped": bool(over[j]),
            "energy_fraction": {k: _num(v) for k, v in zip(m.participants, ef[j])},
            "effective_mass": dict(zip(EFFECTIVE_MASS_NAMES, (_num(v) for v in em[j]))),
            "shape": {
                "x_B_m": [_num(v) for v in shape[j, :3]],
                "phi_B_rad": [_num(v) for v in shape[j, 3:6]],
                "theta_rad": {k: _num(v) for k, v in zip(m.panel_names, shape[j, 6:])},
            },
        }
        for j in range(lam.shape[0])
    ]}


def measurement_json(mm) -> dict:
    """A `ModeMeasurement` as JSON-ready data: one entry per mode plus the run settings (without the time histories)."""
    values = {"measured_frequency_hz": mm.frequency_hz, "measured_damping_ratio": mm.damping_ratio,
              "measured_damped_frequency_hz": mm.damped_frequency_hz,
              "model_frequency_hz": mm.model_frequency_hz,
              "model_damping_ratio": mm.model_damping_ratio}
    rows = [{"mode": j + 1, **{k: _num(v[j]) for k, v in values.items()},
             "zero_crossings": int(mm.crossings[j]), "panel": mm.panel[j]}
            for j in range(len(mm.panel))]
    return {
        "method": (
            "each mode started alone (initial state = real part of its damped eigenvector, hinge amplitude "
            f"{mm.amplitude_rad:g} rad, zero total momentum) and the nonlinear model integrated (dopri8, "
            "rtol 1e-11); zero crossings of the largest hinge angle located by cubic interpolation give the "
            "oscillation frequency, the decay of the slopes at the crossings gives the decay rate"
            + ("; clamped = hub mass and inertia x 1e9" if mm.boundary == "clamped" else "")
        ),
        "t_end_s": mm.t_end,
        "save_dt_s": mm.save_dt,
        "success": mm.success,
        "modes": rows,
    }


def modes_table_lines(m, path: str) -> list[str]:
    """The console table of `jaxhinge modes`: each flexible mode's frequencies, damping and energy shares."""
    rows = modes_json(m)["modes"]
    parts = list(m.participants)
    excluded = "6 rigid-body modes excluded" if m.boundary == "free" else "hub fixed"
    lines = [
        f"scenario            {path}",
        (f"boundary            {m.boundary} ({excluded}); linearised about theta = thetaRef, hub at rest, "
         "no gravity, loads or motor torque"),
        f"flexible modes      {len(rows)}",
    ]
    if not rows:
        return lines
    head = f"{'mode':>4}  {'freq [Hz]':>12}  {'damping':>10}  {'damped [Hz]':>12}  {'undamped [Hz]':>13}"
    label = {"hub_translation": "hub transl.", "hub_rotation": "hub rot."}
    head += "".join(f"  {label.get(p, p)[:12]:>12}" for p in parts)
    lines += ["", "kinetic energy share per mode (hub translation, hub rotation, each panel):", head]
    for r in rows:
        def f(x, w, fmt):
            return f"{'-':>{w}}" if x is None else f"{x:{w}{fmt}}"

        line = (f"{r['mode']:>4}  {f(r['frequency_hz'], 12, '.6f')}  {f(r['damping_ratio'], 10, '.6f')}  "
                f"{f(r['damped_frequency_hz'], 12, '.6f')}  {f(r['natural_frequency_hz'], 13, '.6f')}")
        line += "".join(f"  {f(None if r['energy_fraction'][p] is None else 100 * r['energy_fraction'][p], 11, '.1f')}%"
                        for p in parts)
        if r["overdamped"]:
            line += "  (overdamped)"
        lines.append(line)
    lines.append("")
    lines.append("freq = |lambda|/2pi, damping = -Re(lambda)/|lambda| (MATLAB damp); damped = |Im lambda|/2pi; "
                 "undamped: C = 0")
    return lines


def modes_cli_json(m, scenario_path: str, boundary: str) -> dict:
    """The object `jaxhinge modes --json` prints."""
    return {"scenario": scenario_path, "boundary": boundary,
            "rigid_body_modes_excluded": 6 if boundary == "free" else 0,
            "panels": list(m.panel_names), "modes": modes_json(m)["modes"]}


def closed_loop_json(p, scenario_path: str) -> dict:
    """The object `jaxhinge modes --closed-loop --json` prints: the loop, its margins and one entry per pole with
    Im >= 0 (a complex pair once; neutral poles counted, not listed)."""
    lam, f, z, neutral, flex, ef, we = (np.asarray(x) for x in (p.eigenvalue, p.frequency_hz, p.damping_ratio,
                                                                p.neutral, p.flexible, p.energy_fraction,
                                                                p.wheel_energy))
    keep = [j for j in range(lam.shape[0]) if not neutral[j] and lam[j].imag >= 0]
    growth = float(p.growth_rate)
    out = {"scenario": scenario_path, "loop": "sampled" if p.sampled else "continuous",
           "control_dt_s": _num(p.control_dt) if p.sampled else None,
           "margin": _num(p.margin), "flexible_margin": _num(p.flexible_margin),
           "growth_rate_per_s": _num(growth), "stable": bool(growth < 0),
           "neutral_poles": int(np.sum(neutral)), "participants": list(p.participants),
           "poles": [{"frequency_hz": _num(f[j]), "damping_ratio": _num(z[j]),
                      "eigenvalue": [_num(lam[j].real), _num(lam[j].imag)],
                      "kind": "flexible" if flex[j] else "rigid", "complex_pair": bool(lam[j].imag > 0),
                      "energy_fraction": {k: _num(v) for k, v in zip(p.participants, ef[j])},
                      "wheel_energy": _num(we[j])} for j in keep]}
    if p.sampled:
        out["spectral_radius"] = _num(np.exp(growth * float(p.control_dt)))
    return out


def closed_loop_table_lines(p, path: str) -> list[str]:
    """The console table of `jaxhinge modes --closed-loop`: each pole (a complex pair once), its kind, damping
    and which body moves in it, then the margins."""
    d = closed_loop_json(p, path)
    label = {"hub_translation": "hub transl.", "hub_rotation": "hub rot."}
    loop = (f"sampled every control_dt = {d['control_dt_s']:g} s, zero-order hold (poles ln(z)/control_dt)"
            if p.sampled else "continuous law (the controller applied continuously)")
    lines = [f"scenario            {path}",
             (f"closed loop         {loop}; linearised about the reference attitude, at rest, thetaRef, wheels at "
              "OmegaInit"),
             (f"poles               {len(d['poles'])} listed (a complex pair once), {d['neutral_poles']} neutral "
              "(|lambda| < 1e-9 1/s: conserved momentum, wheel null motion) not listed"), ""]
    head = f"{'pole':>4}  {'freq [Hz]':>12}  {'damping':>10}  {'kind':>8}"
    head += "".join(f"  {label.get(q, q)[:12]:>12}" for q in d["participants"]) + f"  {'wheels':>8}"
    lines += ["kinetic energy share per pole (structure; wheels: their spin's share of all kinetic energy):", head]

    def pct(x, w):
        return f"{'-':>{w}}" if x is None else f"{100 * x:{w - 1}.1f}%"

    for j, r in enumerate(d["poles"], 1):
        zeta = "-" if r["damping_ratio"] is None else f"{r['damping_ratio']:.6f}"
        line = f"{j:>4}  {r['frequency_hz']:12.6f}  {zeta:>10}  {r['kind']:>8}"
        line += "".join(f"  {pct(r['energy_fraction'][q], 12)}" for q in d["participants"])
        line += f"  {pct(r['wheel_energy'], 8)}"
        if not r["complex_pair"]:
            line += "  (real)"
        lines.append(line)
    state = "stable" if d["stable"] else "UNSTABLE"
    lines += ["", (f"margin              {d['margin']:.6f} (smallest damping ratio); flexible modes "
                   f"{d['flexible_margin']:.6f}"),
              f"growth rate         {d['growth_rate_per_s']:.6g} 1/s (largest Re lambda): {state}"
              + (f"; spectral radius max|z| = {d['spectral_radius']:.9f}" if p.sampled else ""),
              "freq = |lambda|/2pi, damping = -Re(lambda)/|lambda| (MATLAB damp)"]
    return lines
