"""The console reports' wrapping and what the figures show (jaxhinge/_report): status lines wrapped per clause,
fit.png's title and effective-mass panel, the sweep legend off the bands, wheel speeds in rad/s.

Reports draw from result objects; these tests hand them small stand-ins with known values (no JAX, no compile:
well under a second) and read the drawn figures back."""

import json
import os
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from jaxhinge._report._fit import REPORT_WIDTH, labelled_lines, plot_fit
from jaxhinge._report._identify import plot_identify
from jaxhinge._report._sweep import plot_envelopes

matplotlib.use("Agg")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def drawn(monkeypatch):
    """The figures the report functions save (they close them after saving)."""
    figures = []
    save = Figure.savefig

    def keep(fig, *args, **kw):
        figures.append(fig)
        return save(fig, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def test_status_lines_wrap_per_clause_and_keep_the_text():
    """The committed wings fit's 435-character status: one line per clause, none longer than the report width,
    and the words read back are the message's."""
    with open(os.path.join(ROOT, "fits", "fea", "wings", "reference", "result.json"), encoding="utf-8") as f:
        message = json.load(f)["message"]
    assert len(message) > 2 * REPORT_WIDTH
    lines = labelled_lines("status", message)
    assert lines[0].startswith("status ") and all(len(line) <= REPORT_WIDTH for line in lines)
    assert sum(line.endswith(";") for line in lines) == message.count("; ")
    assert " ".join(line[len("status"):].strip() if i == 0 else line.strip() for i, line in enumerate(lines)) \
        == message
    assert labelled_lines("status", "converged in 7 steps") == [f"{'status':<20}converged in 7 steps"]


def _modes(f, z, em):
    return SimpleNamespace(frequency_hz=np.asarray(f), damping_ratio=np.asarray(z), effective_mass=np.asarray(em))


def _fea_fit_result(effective_mass_sigma):
    """A hub-clamped fit to two FEA modes with effective masses (the numbers of fits/fea: T3 and R1 carry the
    mass, the other components are round-off)."""
    fea_em = [[3e-20, 4e-22, 15.35, 62.50, 4e-18, 1e-19], [1e-20, 6e-24, 12.35, 37.87, 2e-18, 3e-20]]
    em0 = np.array([[0, 0, 15.0, 61.0, 0, 0], [0, 0, 12.0, 37.0, 0, 0]])
    em1 = np.array([[0, 0, 15.36, 62.51, 0, 0], [0, 0, 12.352, 37.873, 0, 0]])
    pairing = [{"fea_mode": m, "initial_model_mode": m, "model_mode": m, "fea_effective_mass": fea_em[m - 1],
                "model_effective_mass": em1[m - 1].tolist()} for m in (1, 2)]
    return SimpleNamespace(
        damping_targets=np.zeros(0), mac_matrix=None, solutions=(), mode_numbers=(1, 2), check=None,
        targets_hz=np.array([0.5612, 0.7774]), initial_modes=_modes([0.485, 0.672], [0, 0], em0),
        modes=_modes([0.5612, 0.7774], [0, 0], em1), pairing=pairing,
        options={"effective_mass_sigma": effective_mass_sigma, "loop": "open"}, history=[100.0, 1.0, 1e-4],
        converged=True, solver="lm", boundary="clamped", names=("wing_pY.k", "wing_mY.k"))


def test_fit_figure_names_the_fit_and_plots_fitted_effective_masses(drawn, tmp_path):
    plot_fit(_fea_fit_result(0.01), tmp_path / "fit.png", title="fits/fea/FIT.toml (scenario spacecraft.toml)")
    fig = drawn[-1]
    title = fig._suptitle.get_text()
    assert title.splitlines() == ["fits/fea/FIT.toml (scenario spacecraft.toml)",
                                  ("hub-clamped modes: 2 FEA modes' frequencies, effective masses; "
                                   "free: wing_pY.k, wing_mY.k")]
    em_ax = next(ax for ax in fig.axes if ax.get_title() == "effective masses (fitted)")
    assert [t.get_text() for t in em_ax.get_xticklabels()] == ["1 T3", "1 R1", "2 T3", "2 R1"]
    fea, initial, fitted = (line.get_ydata() for line in em_ax.get_lines()[:3])  # drawn in this order
    np.testing.assert_array_equal(fea, [15.35, 62.50, 12.35, 37.87])
    np.testing.assert_array_equal(initial, [15.0, 61.0, 12.0, 37.0])
    np.testing.assert_array_equal(fitted, [15.36, 62.51, 12.352, 37.873])
    # effective masses used for the pairing only (not fitted): no panel for them
    plot_fit(_fea_fit_result(None), tmp_path / "fit2.png")
    assert all(ax.get_title() != "effective masses (fitted)" for ax in drawn[-1].axes)
    assert drawn[-1]._suptitle.get_text() == ("hub-clamped modes: 2 FEA modes' frequencies; "
                                              "free: wing_pY.k, wing_mY.k")


def _summary(panels: int, T: int = 50):
    t = np.linspace(0.0, 2.0, T)

    def band(n):
        return {"min": -np.ones((T, n)), "max": np.ones((T, n)), "mean": np.zeros((T, n)),
                "percentiles": np.stack([-0.5 * np.ones((T, n)), np.zeros((T, n)), 0.5 * np.ones((T, n))])}

    return {"t": t, "percentiles": (5.0, 50.0, 95.0), "omega_BN_B": band(3), "theta": band(panels),
            "succeeded": 8, "members": 8}


@pytest.mark.parametrize("panels", [2, 3])  # 5 channels: a spare grid cell; 6: none
def test_sweep_legend_sits_off_every_band(drawn, tmp_path, panels):
    with open(tmp_path / "e.png", "wb") as f:
        plot_envelopes(_summary(panels), [f"p{i}" for i in range(panels)], f)
    fig = drawn[-1]
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    renderer = FigureCanvasAgg(fig).get_renderer()  # (closed after saving: a canvas to measure on)
    box = legends[0].get_window_extent(renderer)
    plotted = [ax for ax in fig.axes if ax.axison]
    assert len(plotted) == 3 + panels
    assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in plotted)


def test_telemetry_figure_shows_wheel_speeds_in_rad_per_s(drawn, tmp_path):
    t = np.linspace(0.0, 1.0, 11)
    values = np.stack([1e-3 * np.sin(t), 400.0 + t], axis=1)  # a gyro rate and a wheel speed [rad/s]
    tel = SimpleNamespace(t=t, values=values, columns=("omega_BN_B_1", "Omega_rw1"))
    result = SimpleNamespace(records=(), telemetry=tel, fitted=values, initial_fitted=values,
                             residuals=np.zeros_like(values), chi2_per_dof=1.0)
    with open(tmp_path / "fit.png", "wb") as f:
        plot_identify(result, f, "fit")
    rate_ax, wheel_ax = drawn[-1].axes
    assert rate_ax.get_ylabel().endswith("[deg/s]") and wheel_ax.get_ylabel().endswith("[rad/s]")
    np.testing.assert_allclose(rate_ax.get_lines()[0].get_ydata(), np.degrees(values[:, 0]), rtol=1e-15)
    np.testing.assert_array_equal(wheel_ax.get_lines()[0].get_ydata(), values[:, 1])
