"""jaxhinge: a differentiable JAX simulator of a rigid hub with hinged rigid panels, exact to Basilisk's
`hingedRigidBodyStateEffector` (and its chain effectors), built for system identification.

Float64 is needed for Basilisk-level accuracy: call `jax.config.update("jax_enable_x64", True)` before
building a model (the CLI does this itself; importing jaxhinge changes no global setting). Without it, building a
model is refused with a message naming `jax_enable_x64`, instead of silently computing in float32.

The public API, by concept (docs/architecture.md maps each to its module). Names are imported on first use, so
`import jaxhinge` is cheap and the `jaxhinge` program handles Ctrl-C from its first instruction.
"""

import importlib
from typing import TYPE_CHECKING

from ._version import __version__ as __version__

_PUBLIC = {
    # Model: pytrees of array leaves (one stacked Panels tree for single panels and chains)
    "Hub": ("_model._spacecraft", "Hub"),
    "Panels": ("_model._spacecraft", "Panels"),
    "PointMassGravity": ("_model._spacecraft", "PointMassGravity"),
    "Spacecraft": ("_model._spacecraft", "Spacecraft"),
    "Wheels": ("_model._spacecraft", "Wheels"),
    "Control": ("_model._control", "Control"),
    "AbstractActuator": ("_model._actuators", "AbstractActuator"),
    "WheelTorques": ("_model._actuators", "WheelTorques"),
    "HubTorque": ("_model._actuators", "HubTorque"),
    "InitialState": ("_model._spacecraft", "InitialState"),
    "State": ("_model._spacecraft", "State"),
    "Loads": ("_model._loads", "Loads"),
    "Pulses": ("_model._loads", "Pulses"),
    "Inputs": ("_model._loads", "Inputs"),
    "Scenario": ("_model._scenario", "Scenario"),
    "SimulationConfig": ("_model._scenario", "SimulationConfig"),
    "RK4": ("_model._integrators", "RK4"),
    "Tsit5": ("_model._integrators", "Tsit5"),
    "Dopri8": ("_model._integrators", "Dopri8"),
    "FIELDS": ("_model._params", "FIELDS"),
    "apply_parameters": ("_model._params", "apply_parameters"),
    "parameter_names": ("_model._params", "parameter_names"),
    # Dynamics: the back-substitution vector field and Basilisk's diagnostics
    "accelerations": ("_dynamics._backsub", "accelerations"),
    "Diagnostics": ("_dynamics._energy", "Diagnostics"),
    "diagnostics": ("_dynamics._energy", "diagnostics"),
    "initial_state": ("_dynamics._energy", "initial_state"),
    # Simulation
    "Trajectory": ("_simulation._trajectory", "Trajectory"),
    "simulate": ("_simulation._simulate", "simulate"),
    "simulate_unjitted": ("_simulation._simulate", "simulate_unjitted"),
    "MRPSwitch": ("_simulation._solver", "MRPSwitch"),
    "Telemetry": ("_model._telemetry", "Telemetry"),
    "telemetry_from_arrays": ("_model._telemetry", "telemetry_from_arrays"),
    # Analyses: modes, fits, telemetry identification, sensitivities, batches
    "Linearization": ("_analysis._linear._linearize", "Linearization"),
    "linearize": ("_analysis._linear._linearize", "linearize"),
    "Modes": ("_analysis._linear._modes", "Modes"),
    "ClosedLoopPoles": ("_analysis._linear._closed_loop", "ClosedLoopPoles"),
    "closed_loop_poles": ("_analysis._linear._closed_loop", "closed_loop_poles"),
    "modes": ("_analysis._linear._modes", "modes"),
    "ModeMeasurement": ("_analysis._linear._measure", "ModeMeasurement"),
    "measure_modes": ("_analysis._linear._measure", "measure_modes"),
    "LeastSquaresResult": ("_analysis._fitting._lsq_analysis", "LeastSquaresResult"),
    "FitResult": ("_analysis._fitting._fit_result", "FitResult"),
    "fit": ("_analysis._fitting._fit", "fit"),
    "FeaModes": ("_model._fea_modes", "FeaModes"),
    "pair_modes": ("_analysis._fitting._pairing", "pair_modes"),
    "ShapeMap": ("_model._fea_modes", "ShapeMap"),
    "IdentifyResult": ("_analysis._fitting._identify", "IdentifyResult"),
    "identify": ("_analysis._fitting._identify", "identify"),
    "SingleShooting": ("_analysis._fitting._shooting", "SingleShooting"),
    "MultipleShooting": ("_analysis._fitting._shooting", "MultipleShooting"),
    "AbstractBoundary": ("_model._boundary", "AbstractBoundary"),
    "FreeFree": ("_model._boundary", "FreeFree"),
    "HubClamped": ("_model._boundary", "HubClamped"),
    "AbstractLoop": ("_analysis._fitting._loop", "AbstractLoop"),
    "OpenLoop": ("_analysis._fitting._loop", "OpenLoop"),
    "ClosedLoop": ("_analysis._fitting._loop", "ClosedLoop"),
    "AbstractFitSolver": ("_analysis._fitting._solvers", "AbstractFitSolver"),
    "LevenbergMarquardt": ("_analysis._fitting._solvers", "LevenbergMarquardt"),
    "Dogleg": ("_analysis._fitting._solvers", "Dogleg"),
    "GaussNewton": ("_analysis._fitting._solvers", "GaussNewton"),
    "Adam": ("_analysis._fitting._solvers", "Adam"),
    "LBFGS": ("_analysis._fitting._solvers", "LBFGS"),
    "ModalTargets": ("_analysis._fitting._fit_options", "ModalTargets"),
    "FeaTargets": ("_analysis._fitting._fit_options", "FeaTargets"),
    "Starts": ("_analysis._fitting._fit_options", "Starts"),
    "RandomStarts": ("_analysis._fitting._fit_options", "RandomStarts"),
    "Acceptance": ("_analysis._fitting._fit_options", "Acceptance"),
    "SensitivityResult": ("_analysis._studies._sensitivity", "SensitivityResult"),
    "sensitivity": ("_analysis._studies._sensitivity", "sensitivity"),
    "check_dispersions": ("_analysis._studies._batch", "check_dispersions"),
    "grid_dispersions": ("_analysis._studies._batch", "grid_dispersions"),
    "sample_dispersions": ("_analysis._studies._batch", "sample_dispersions"),
    "simulate_batch": ("_analysis._studies._batch", "simulate_batch"),
    "run_campaign": ("_jobs._campaign", "run_campaign"),
    "open_campaign": ("_jobs._campaign", "open_campaign"),
    "CampaignResult": ("_jobs._campaign", "CampaignResult"),
    "load_sweep": ("_jobs._sweep", "load_sweep"),
    "summarize": ("_analysis._studies._batch", "summarize"),
    # Reports and figures
    "plot_trajectory": ("_report._plot", "plot_trajectory"),
    "plot_fit": ("_report._fit", "plot_fit"),
    "plot_identify": ("_report._identify", "plot_identify"),
    "plot_tornado": ("_report._sensitivity", "plot_tornado"),
    "plot_envelopes": ("_report._sweep", "plot_envelopes"),
    "plot_histograms": ("_report._sweep", "plot_histograms"),
    # Files: scenario, fit, telemetry and FEA files
    "load_scenario": ("_io._scenario_file", "load_scenario"),
    "dump_scenario": ("_io._scenario_file", "dump_scenario"),
    "scenario_from_dict": ("_io._scenario_file", "scenario_from_dict"),
    "scenario_to_dict": ("_io._scenario_file", "scenario_to_dict"),
    "example_path": ("_io._scenario_file", "example_path"),
    "load_fit": ("_jobs._fit_files", "load_fit_file"),
    "load_telemetry": ("_io._telemetry_file", "load_telemetry"),
    "write_telemetry": ("_io._telemetry_file", "write_telemetry"),
    "telemetry_columns": ("_io._telemetry_file", "telemetry_columns"),
    "read_fea": ("_io._fea", "read_fea"),
    # Errors (one base class; docs/errors.md)
    "JaxhingeError": ("_errors", "JaxhingeError"),
    "ScenarioError": ("_errors", "ScenarioError"),
    "ConfigError": ("_errors", "ConfigError"),
    "ParameterError": ("_errors", "ParameterError"),
    "FitError": ("_errors", "FitError"),
    "TelemetryError": ("_errors", "TelemetryError"),
    "SweepError": ("_errors", "SweepError"),
    "SensitivityError": ("_errors", "SensitivityError"),
    "FeaError": ("_errors", "FeaError"),
    "OutputError": ("_errors", "OutputError"),
    # Runtime and command line (`jh.main(["fit", "FIT.toml"])` returns the exit code)
    "configure_cpu": ("_runtime._policy", "configure_cpu"),
    "main": ("_cli", "main"),
}
__all__ = ["__version__", *_PUBLIC]  # noqa: PLE0604  (the lazy table's keys are strings)

if TYPE_CHECKING:  # the same names, for type checkers and the API reference (mkdocstrings)
    from ._analysis._fitting._fit import fit as fit
    from ._analysis._fitting._fit_options import Acceptance as Acceptance
    from ._analysis._fitting._fit_options import FeaTargets as FeaTargets
    from ._analysis._fitting._fit_options import ModalTargets as ModalTargets
    from ._analysis._fitting._fit_options import RandomStarts as RandomStarts
    from ._analysis._fitting._fit_options import Starts as Starts
    from ._analysis._fitting._fit_result import FitResult as FitResult
    from ._analysis._fitting._identify import IdentifyResult as IdentifyResult
    from ._analysis._fitting._identify import identify as identify
    from ._analysis._fitting._loop import AbstractLoop as AbstractLoop
    from ._analysis._fitting._loop import ClosedLoop as ClosedLoop
    from ._analysis._fitting._loop import OpenLoop as OpenLoop
    from ._analysis._fitting._lsq_analysis import LeastSquaresResult as LeastSquaresResult
    from ._analysis._fitting._pairing import pair_modes as pair_modes
    from ._analysis._fitting._shooting import MultipleShooting as MultipleShooting
    from ._analysis._fitting._shooting import SingleShooting as SingleShooting
    from ._analysis._fitting._solvers import LBFGS as LBFGS
    from ._analysis._fitting._solvers import AbstractFitSolver as AbstractFitSolver
    from ._analysis._fitting._solvers import Adam as Adam
    from ._analysis._fitting._solvers import Dogleg as Dogleg
    from ._analysis._fitting._solvers import GaussNewton as GaussNewton
    from ._analysis._fitting._solvers import LevenbergMarquardt as LevenbergMarquardt
    from ._analysis._linear._closed_loop import ClosedLoopPoles as ClosedLoopPoles
    from ._analysis._linear._closed_loop import closed_loop_poles as closed_loop_poles
    from ._analysis._linear._linearize import Linearization as Linearization
    from ._analysis._linear._linearize import linearize as linearize
    from ._analysis._linear._measure import ModeMeasurement as ModeMeasurement
    from ._analysis._linear._measure import measure_modes as measure_modes
    from ._analysis._linear._modes import Modes as Modes
    from ._analysis._linear._modes import modes as modes
    from ._analysis._studies._batch import check_dispersions as check_dispersions
    from ._analysis._studies._batch import grid_dispersions as grid_dispersions
    from ._analysis._studies._batch import sample_dispersions as sample_dispersions
    from ._analysis._studies._batch import simulate_batch as simulate_batch
    from ._analysis._studies._batch import summarize as summarize
    from ._analysis._studies._sensitivity import SensitivityResult as SensitivityResult
    from ._analysis._studies._sensitivity import sensitivity as sensitivity
    from ._cli import main as main
    from ._dynamics._backsub import accelerations as accelerations
    from ._dynamics._energy import Diagnostics as Diagnostics
    from ._dynamics._energy import diagnostics as diagnostics
    from ._dynamics._energy import initial_state as initial_state
    from ._errors import ConfigError as ConfigError
    from ._errors import FeaError as FeaError
    from ._errors import FitError as FitError
    from ._errors import JaxhingeError as JaxhingeError
    from ._errors import OutputError as OutputError
    from ._errors import ParameterError as ParameterError
    from ._errors import ScenarioError as ScenarioError
    from ._errors import SensitivityError as SensitivityError
    from ._errors import SweepError as SweepError
    from ._errors import TelemetryError as TelemetryError
    from ._io._fea import read_fea as read_fea
    from ._io._scenario_file import dump_scenario as dump_scenario
    from ._io._scenario_file import example_path as example_path
    from ._io._scenario_file import load_scenario as load_scenario
    from ._io._scenario_file import scenario_from_dict as scenario_from_dict
    from ._io._scenario_file import scenario_to_dict as scenario_to_dict
    from ._io._telemetry_file import load_telemetry as load_telemetry
    from ._io._telemetry_file import telemetry_columns as telemetry_columns
    from ._io._telemetry_file import write_telemetry as write_telemetry
    from ._jobs._campaign import CampaignResult as CampaignResult
    from ._jobs._campaign import open_campaign as open_campaign
    from ._jobs._campaign import run_campaign as run_campaign
    from ._jobs._fit_files import load_fit_file as load_fit  # noqa: F401
    from ._jobs._sweep import load_sweep as load_sweep
    from ._model._actuators import AbstractActuator as AbstractActuator
    from ._model._actuators import HubTorque as HubTorque
    from ._model._actuators import WheelTorques as WheelTorques
    from ._model._boundary import AbstractBoundary as AbstractBoundary
    from ._model._boundary import FreeFree as FreeFree
    from ._model._boundary import HubClamped as HubClamped
    from ._model._control import Control as Control
    from ._model._fea_modes import FeaModes as FeaModes
    from ._model._fea_modes import ShapeMap as ShapeMap
    from ._model._integrators import RK4 as RK4
    from ._model._integrators import Dopri8 as Dopri8
    from ._model._integrators import Tsit5 as Tsit5
    from ._model._loads import Inputs as Inputs
    from ._model._loads import Loads as Loads
    from ._model._loads import Pulses as Pulses
    from ._model._params import FIELDS as FIELDS
    from ._model._params import apply_parameters as apply_parameters
    from ._model._params import parameter_names as parameter_names
    from ._model._scenario import Scenario as Scenario
    from ._model._scenario import SimulationConfig as SimulationConfig
    from ._model._spacecraft import Hub as Hub
    from ._model._spacecraft import InitialState as InitialState
    from ._model._spacecraft import Panels as Panels
    from ._model._spacecraft import PointMassGravity as PointMassGravity
    from ._model._spacecraft import Spacecraft as Spacecraft
    from ._model._spacecraft import State as State
    from ._model._spacecraft import Wheels as Wheels
    from ._model._telemetry import Telemetry as Telemetry
    from ._model._telemetry import telemetry_from_arrays as telemetry_from_arrays
    from ._report._fit import plot_fit as plot_fit
    from ._report._identify import plot_identify as plot_identify
    from ._report._plot import plot_trajectory as plot_trajectory
    from ._report._sensitivity import plot_tornado as plot_tornado
    from ._report._sweep import plot_envelopes as plot_envelopes
    from ._report._sweep import plot_histograms as plot_histograms
    from ._runtime._policy import configure_cpu as configure_cpu
    from ._simulation._simulate import simulate as simulate
    from ._simulation._simulate import simulate_unjitted as simulate_unjitted
    from ._simulation._solver import MRPSwitch as MRPSwitch
    from ._simulation._trajectory import Trajectory as Trajectory


def __getattr__(name: str):
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'jaxhinge' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
