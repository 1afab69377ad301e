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
    return {"boundary": m.boundary.name, "reference_point_m": [_num(v) for v in np.asarray(m.reference_point)],
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
            + ("; clamped = hub mass and inertia x 1e9" if not mm.boundary.hub_free else "")
        ),
        "t_end_s": mm.t_end,
        "save_dt_s": mm.save_dt,
        "success": mm.success,
        "modes": rows,
    }


def _fixed(x, w: int, d: int) -> str:
    """`x` in `w` characters with `d` decimals, "-" for None; a value that rounds to zero without a sign (no
    "-0.000000")."""
    if x is None:
        return f"{'-':>{w}}"
    text = f"{x:{w}.{d}f}"
    return text.replace("-", " ") if float(text) == 0 else text


def spinning_wheels(m, wheels: bool) -> bool:
    """Whether `Modes` `m` of a spacecraft with (`wheels`) or without reaction wheels carry the wheels'
    gyroscopic coupling (free-free modes with wheels): their undamped frequency is then that of the wheels stopped."""
    return wheels and m.boundary.hub_free


def modes_table_lines(m, path: str, wheels: bool = False) -> list[str]:
    """The console table of `jaxhinge modes`: each flexible mode's frequencies, damping and energy shares.
    `wheels`: the spacecraft has reaction wheels (the columns then say which frequencies hold the wheels' spin)."""
    rows = modes_json(m)["modes"]
    parts = list(m.participants)
    spinning = spinning_wheels(m, wheels)
    excluded = f"{m.boundary.rigid_body_modes} rigid-body modes excluded" if m.boundary.hub_free else "hub fixed"
    lines = [
        f"scenario            {path}",
        (f"boundary            {m.boundary.name} ({excluded}); linearised about theta = thetaRef, hub at rest, "
         "no gravity, loads or motor torque" + ("; wheels at OmegaInit" if spinning else "")),
        f"flexible modes      {len(rows)}",
    ]
    if not rows:
        return lines
    undamped = "C=0,G=0 [Hz]" if spinning else "undamped [Hz]"
    head = f"{'mode':>4}  {'freq [Hz]':>12}  {'damping':>10}  {'damped [Hz]':>12}  {undamped:>13}"
    label = {"hub_translation": "hub transl.", "hub_rotation": "hub rot."}
    head += "".join(f"  {label.get(p, p)[:12]:>12}" for p in parts)
    lines += ["", "kinetic energy share per mode (hub translation, hub rotation, each panel):", head]
    for r in rows:
        line = (f"{r['mode']:>4}  {_fixed(r['frequency_hz'], 12, 6)}  {_fixed(r['damping_ratio'], 10, 6)}  "
                f"{_fixed(r['damped_frequency_hz'], 12, 6)}  {_fixed(r['natural_frequency_hz'], 13, 6)}")
        line += "".join(f"  {_fixed(None if r['energy_fraction'][p] is None else 100 * r['energy_fraction'][p], 11, 1)}%"
                        for p in parts)
        if r["overdamped"]:
            line += "  (overdamped)"
        lines.append(line)
    lines.append("")
    lines.append("freq = |lambda|/2pi, damping = -Re(lambda)/|lambda| (MATLAB damp); damped = |Im lambda|/2pi; "
                 + (UNDAMPED_SPINNING if spinning else "undamped: C = 0"))
    return lines


UNDAMPED_SPINNING = ("freq, damping, damped: with the wheels spinning at OmegaInit (their gyroscopic coupling G "
                     "in the poles); C=0,G=0: the undamped frequency with the wheels stopped (C = 0 and G = 0), "
                     "the same at any wheel speed")


def modes_cli_json(m, scenario_path: str, boundary: str | None = None, wheels: bool = False) -> dict:
    """The object `jaxhinge modes --json` prints (the boundary: `m.boundary`'s; `boundary`, the name the command
    line gave, is not needed; `wheels`: the spacecraft has reaction wheels;
    `natural_frequency_hz` is then the wheels-stopped frequency of a free-free mode, said by
    `natural_frequency_model`)."""
    return {"scenario": scenario_path, "boundary": m.boundary.name,
            "rigid_body_modes_excluded": m.boundary.rigid_body_modes,
            "natural_frequency_model": ("C = 0, wheels stopped (G = 0)" if spinning_wheels(m, wheels) else "C = 0"),
            "panels": list(m.panel_names), "modes": modes_json(m)["modes"]}


def closed_loop_json(p, scenario_path: str, first_command: float | None = None) -> dict:
    """The object `jaxhinge modes --closed-loop --json` prints: the loop, its margins, whether the scenario's own
    run starts saturated (`first_command`: as `closed_loop_table_lines`) and one entry per pole with Im >= 0 (a
    complex pair once; neutral poles counted, not listed)."""
    lam, f, z, neutral, flex, ef, cmd, sat = (np.asarray(x) for x in (
        p.eigenvalue, p.frequency_hz, p.damping_ratio, p.neutral, p.flexible, p.energy_fraction, p.command_per_rad,
        p.saturation_angle))
    keep = [j for j in range(lam.shape[0]) if not neutral[j] and lam[j].imag >= 0]
    growth = float(p.growth_rate)
    out = {"scenario": scenario_path, "loop": "sampled" if p.sampled else "continuous",
           "control_dt_s": _num(p.control_dt) if p.sampled else None,
           "margin": _num(p.margin), "flexible_margin": _num(p.flexible_margin),
           "growth_rate_per_s": _num(growth), "stable": bool(growth < 0),
           "neutral_poles": int(np.sum(neutral)), "participants": list(p.participants),
           "first_command_over_u_max": _num(first_command) if first_command is not None else None,
           "starts_saturated": first_command is not None and first_command > 1,
           "poles": [{"frequency_hz": _num(f[j]), "damping_ratio": _num(z[j]),
                      "eigenvalue": [_num(lam[j].real), _num(lam[j].imag)],
                      "kind": "flexible" if flex[j] else "rigid", "complex_pair": bool(lam[j].imag > 0),
                      "energy_fraction": {k: _num(v) for k, v in zip(p.participants, ef[j])},
                      "command_Nm_per_rad": _num(cmd[j]), "saturation_angle_rad": _num(sat[j])}
                     for j in keep]}
    if p.sampled:
        out["spectral_radius"] = _num(np.exp(growth * float(p.control_dt)))
    return out


def closed_loop_table_lines(p, path: str, first_command: float | None = None) -> list[str]:
    """The console table of `jaxhinge modes --closed-loop`: each pole (a complex pair once), its kind, damping,
    which body moves in it and how hard the actuators work, then the margins. `first_command`: the largest
    |u| / u_max of the wheels at the scenario's first call of the flight software (`_closed_loop.first_command`):
    above 1 the scenario's own run starts saturated, which the linearisation leaves out (a note says so)."""
    d = closed_loop_json(p, path, first_command)
    label = {"hub_translation": "hub transl.", "hub_rotation": "hub rot."}
    loop = (f"sampled every control_dt = {d['control_dt_s']:g} s, zero-order hold (poles ln(z)/control_dt)"
            if p.sampled else "continuous law (the controller applied continuously)")
    lines = [f"scenario            {path}",
             (f"closed loop         {loop}; linearised about the reference attitude, at rest, thetaRef, wheels at "
              "OmegaInit"),
             (f"poles               {len(d['poles'])} listed (a complex pair once), {d['neutral_poles']} neutral "
              "(|lambda| < 1e-9 1/s: conserved momentum, wheel null motion) not listed"), ""]
    head = f"{'pole':>4}  {'freq [Hz]':>12}  {'damping':>10}  {'kind':>8}"
    head += "".join(f"  {label.get(q, q)[:12]:>12}" for q in d["participants"])
    head += f"  {'N m/deg':>9}  {'sat. [deg]':>10}"
    lines += [("kinetic energy share per pole (structure); N m/deg: the largest actuator command per degree of "
               "the pole's largest angle; sat.: that angle where a wheel reaches u_max"), head]

    def pct(x, w):
        return f"{'-':>{w}}" if x is None else f"{100 * x:{w - 1}.1f}%"

    deg = np.degrees(1.0)
    for j, r in enumerate(d["poles"], 1):
        line = f"{j:>4}  {_fixed(r['frequency_hz'], 12, 6)}  {_fixed(r['damping_ratio'], 10, 6)}  {r['kind']:>8}"
        line += "".join(f"  {pct(r['energy_fraction'][q], 12)}" for q in d["participants"])
        cmd, sat = r["command_Nm_per_rad"], r["saturation_angle_rad"]
        line += f"  {'-' if cmd is None else f'{cmd / deg:.4g}':>9}"
        line += f"  {'-' if sat is None else 'none' if np.isinf(sat) else f'{sat * deg:.4g}':>10}"
        if not r["complex_pair"]:
            line += "  (real)"
        lines.append(line)
    state = "stable" if d["stable"] else "UNSTABLE"
    lines += ["", (f"margin              {d['margin']:.6f} (smallest damping ratio); flexible modes "
                   f"{d['flexible_margin']:.6f}"),
              f"growth rate         {d['growth_rate_per_s']:.6g} 1/s (largest Re lambda): {state}"
              + (f"; spectral radius max|z| = {d['spectral_radius']:.9f}" if p.sampled else ""),
              "freq = |lambda|/2pi, damping = -Re(lambda)/|lambda| (MATLAB damp)",
              (f"{'linear':<20}the poles hold while every wheel command stays below its u_max (amplitudes below "
               "sat.): saturation is not in the linearisation")]
    if d["starts_saturated"]:
        lines.append(f"{'note':<20}the scenario's own run starts saturated: its first wheel command is "
                     f"{first_command:.3g} x u_max, so these poles do not describe it until the wheels leave "
                     "their limits (jaxhinge simulate reports for how long)")
    return lines
