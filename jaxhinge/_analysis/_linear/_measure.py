r"""The independent check of the modes: free responses of the nonlinear model, their frequencies and damping measured
from zero crossings (`measure_modes`)."""

import math

import equinox as eqx
import jax
import numpy as np

from ..._errors import ScenarioError
from ..._model._boundary import AbstractBoundary, FreeFree, as_boundary
from ..._model._integrators import Dopri8
from ..._model._loads import Loads
from ..._model._scenario import Scenario, SimulationConfig, compile_key
from ..._model._spacecraft import InitialState, Spacecraft
from ..._runtime._programs import program
from ..._simulation._memory import check_memory
from ..._simulation._simulate import simulate_unjitted
from ._linearize import rest_spacecraft, spacecraft_of
from ._modes import complex_mode_state, modes

# ------------------------------------------------------------------------------------------------------------
# Independent check: free responses of the nonlinear model
# ------------------------------------------------------------------------------------------------------------



class ModeMeasurement(eqx.Module):
    """Frequencies and damping ratios measured from nonlinear free responses (one per mode), beside the linear
    model's values. NaN where a mode could not be measured (overdamped, fewer than 4 zero crossings).

    - `frequency_hz`, `damping_ratio`, `damped_frequency_hz`: measured ($|\\lambda| = \\sqrt{\\sigma^2 +
      \\omega_d^2}$, $\\zeta = \\sigma/|\\lambda|$ from the measured decay rate $\\sigma$ and oscillation $\\omega_d$).
    - `model_frequency_hz`, `model_damping_ratio`: the linear model (`modes`).
    - `crossings`: zero crossings used per mode; `panel`: the hinge whose angle was analysed (largest in the
      mode); `amplitude_rad`: the initial hinge amplitude; `t_end`, `save_dt` [s]; `success`: every run finished.
    - `t` (modes, T) [s] and `theta` (modes, T, panels) [rad]: the free responses, hinge angles relative to
      `thetaRef` (run j started in mode j).
    """

    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    damped_frequency_hz: np.ndarray
    model_frequency_hz: np.ndarray
    model_damping_ratio: np.ndarray
    crossings: np.ndarray
    panel: tuple[str, ...]
    amplitude_rad: float
    t_end: float
    save_dt: float
    success: bool
    boundary: AbstractBoundary
    t: np.ndarray
    theta: np.ndarray


@program
def _simulate_batch(scenario: Scenario, initials):
    def one(ini):
        traj = simulate_unjitted(Scenario(scenario.spacecraft, ini, scenario.loads, scenario.simulation))
        return traj.t, traj.theta, traj.success

    return jax.lax.map(one, initials)


def _crossings(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero crossings of a sampled signal (cubic through 4 samples) and the slope there."""
    idx = np.nonzero(np.signbit(x[:-1]) != np.signbit(x[1:]))[0]
    idx = idx[(idx >= 1) & (idx + 2 < len(x))]
    tc, sc = [], []
    for k in idx:
        coef = np.polyfit(t[k - 1 : k + 3] - t[k], x[k - 1 : k + 3], 3)
        h = t[k + 1] - t[k]
        roots = np.roots(coef)
        good = [r.real for r in roots if abs(r.imag) < 1e-9 * h and -1e-9 * h <= r.real <= h * (1 + 1e-9)]
        if not good:
            continue
        r = min(good, key=lambda r: abs(r - h / 2))
        tc.append(t[k] + r)
        sc.append(np.polyval(np.polyder(coef), r))
    return np.asarray(tc), np.asarray(sc)


def measure_modes(
    model: Scenario | Spacecraft,
    boundary: AbstractBoundary | str = FreeFree(),
    *,
    periods: float = 30.0,
    samples_per_period: int = 64,
    amplitude: float = 1e-4,
) -> ModeMeasurement:
    """Measure each flexible mode's frequency and damping from free responses of the **nonlinear** model.

    Each mode is started alone: hinge angles $\\theta_{ref} + a\\,\\mathrm{Re}(x)$, rates $a\\,\\mathrm{Re}(\\lambda
    x)$ (its damped eigenvector $x$, scaled so the largest hinge amplitude is `amplitude` [rad]) and the hub
    rate that makes the total momentum zero. The modes are integrated one after another in one program (`lax.map`:
    each with its own adaptive steps, traced once; `dopri8`, rtol
    1e-11, atol 1e-14 x amplitude) for `periods` periods of the slowest mode, sampled `samples_per_period` times
    per period of the fastest. The largest hinge angle's zero crossings (cubic interpolation through 4 samples)
    give the oscillation period by least squares; the slopes at the crossings decay as $e^{-\\sigma t}$, which
    gives $\\sigma$. Then $|\\lambda| = \\sqrt{\\sigma^2 + \\omega_d^2}$ and $\\zeta = \\sigma/|\\lambda|$ are compared
    with the linear model. Clamped: the hub is made `1e9` times heavier (mass and inertia), which changes the
    frequencies by about `1e-9` relative. Gravity, loads and motor torques are removed, as in `modes`.

    Accuracy (tests): relative frequency error ~1e-9 for a 1e-4 rad amplitude, set by the nonlinearity
    ($\\propto a^2$) and the interpolation, far below an FFT's resolution $1/(\\text{periods})$.

    **Returns:** a `ModeMeasurement` (NumPy arrays; host function, not differentiable).
    """
    boundary = as_boundary(boundary)
    if spacecraft_of(model).wheels is not None:
        raise ScenarioError.fail(None, "wheels", "measure_modes starts the modes of a spacecraft without reaction "
                                 "wheels; with wheels, use modes() (the tests check it against a "
                                 "finite-difference Jacobian of the simulator)")
    sc = rest_spacecraft(spacecraft_of(model))
    m = modes(sc, boundary)
    n = sc.panels.count
    f_model, z_model = np.asarray(m.frequency_hz), np.asarray(m.damping_ratio)
    thetaRef = np.asarray(sc.panels.thetaRef)
    states = [complex_mode_state(sc, j, boundary) for j in range(n)]  # (lambda, x, u), scaled below
    osc = np.array([abs(lam.imag) for lam, _, _ in states])
    panel_idx = [int(np.argmax(np.abs(x))) for _, x, _ in states]
    panels = tuple(sc.panels.labels[i] for i in panel_idx)
    f_meas, z_meas, fd_meas = np.full((3, n), np.nan)
    count = np.zeros(n, int)
    oscillating = osc > 0
    if not np.any(oscillating):  # also no panel at all
        return ModeMeasurement(f_meas, z_meas, fd_meas, f_model, z_model, count, panels, float(amplitude),
                               0.0, 0.0, True, boundary, np.zeros((n, 0)), np.zeros((n, 0, n)))
    w_min, w_max = osc[oscillating].min(), osc[oscillating].max()
    save_dt = float(2 * np.pi / w_max / samples_per_period)
    t_end = save_dt * math.ceil(float(periods * 2 * np.pi / w_min) / save_dt)
    check = Dopri8(rtol=1e-11, atol=1e-14 * amplitude, dt0=save_dt / 4, max_steps=max(100_000, int(200 * t_end / save_dt)))
    cfg = SimulationConfig(t_end=t_end, save_dt=save_dt, integrator=check)
    z3 = np.zeros((n, 3))
    initials = InitialState(z3, z3, z3, np.array([(amplitude * u)[3:6].real for *_, u in states]),
                            np.array([thetaRef + (amplitude * x).real for _, x, _ in states]),
                            np.array([(amplitude * u)[6:].real for *_, u in states]))
    f = boundary.hub_mass_factor  # clamped: a hub f times heavier
    hub = type(sc.hub)(sc.hub.mHub * f, sc.hub.IHubPntBc_B * f, sc.hub.r_BcB_B)
    scen = Scenario(Spacecraft(hub, sc.panels, None),
                    InitialState(z3[0], z3[0], z3[0], z3[0], thetaRef, np.zeros(n)), Loads(), cfg)
    check_memory(cfg, n, n, field="periods", value=periods)
    t, theta, ok = (np.asarray(x) for x in _simulate_batch(compile_key(scen), initials))
    for j in np.nonzero(oscillating)[0]:
        keep = t[j] <= periods * 2 * np.pi / osc[j] + 2 * save_dt
        tc, slope = _crossings(t[j][keep], theta[j][keep, panel_idx[j]] - thetaRef[panel_idx[j]])
        count[j] = len(tc)
        if len(tc) < 4:
            continue
        wd = np.pi / np.polyfit(np.arange(len(tc)), tc, 1)[0]  # pi / half period
        sigma = -np.polyfit(tc, np.log(np.abs(slope)), 1)[0]
        wn = math.hypot(sigma, wd)
        f_meas[j], z_meas[j], fd_meas[j] = wn / (2 * np.pi), sigma / wn, wd / (2 * np.pi)
    return ModeMeasurement(f_meas, z_meas, fd_meas, f_model, z_model, count, panels, float(amplitude), t_end,
                           save_dt, bool(np.all(ok)), boundary, t, theta - thetaRef)
