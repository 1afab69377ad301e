"""jaxhinge: a differentiable JAX simulator of a rigid hub with hinged rigid panels, exact to Basilisk's
`hingedRigidBodyStateEffector` (and its chain effectors), built for system identification.

Float64 is needed for Basilisk-level accuracy: call `jax.config.update("jax_enable_x64", True)` before
building a model (the CLI does this itself; importing jaxhinge changes no global setting). Without it, building a
model is refused with a message naming `jax_enable_x64`, instead of silently computing in float32.

The public API, by concept (README "Architecture" maps each to its module):
"""

# Model: pytrees of array leaves (one stacked Panels tree for single panels and chains)
# Analyses: modes, fits, telemetry identification, sensitivities, batches
from ._analysis._batch import check_dispersions as check_dispersions
from ._analysis._batch import grid_dispersions as grid_dispersions
from ._analysis._batch import sample_dispersions as sample_dispersions
from ._analysis._batch import simulate_batch as simulate_batch
from ._analysis._batch import summarize as summarize
from ._analysis._fit import FitResult as FitResult
from ._analysis._fit import fit as fit
from ._analysis._fit import pair_modes as pair_modes
from ._analysis._identify import IdentifyResult as IdentifyResult
from ._analysis._identify import identify as identify
from ._analysis._lsq import FitError as FitError
from ._analysis._lsq import LeastSquaresResult as LeastSquaresResult
from ._analysis._modes import Linearization as Linearization
from ._analysis._modes import ModeMeasurement as ModeMeasurement
from ._analysis._modes import Modes as Modes
from ._analysis._modes import linearize as linearize
from ._analysis._modes import measure_modes as measure_modes
from ._analysis._modes import modes as modes
from ._analysis._sensitivity import SensitivityResult as SensitivityResult
from ._analysis._sensitivity import sensitivity as sensitivity

# Command line (`jaxhinge ...`), callable in-process: `jh.main(["fit", "FIT.toml"])` returns the exit code
from ._cli import configure_cpu as configure_cpu
from ._cli import main as main

# Dynamics: the back-substitution vector field and Basilisk's diagnostics
from ._dynamics._backsub import accelerations as accelerations
from ._dynamics._energy import Diagnostics as Diagnostics
from ._dynamics._energy import diagnostics as diagnostics
from ._dynamics._energy import initial_state as initial_state

# Files: scenario, fit and telemetry files
from ._io._fea import FeaModes as FeaModes
from ._io._fea import read_fea as read_fea
from ._io._fit_files import load_fit_file as load_fit  # noqa: F401
from ._io._scenario_file import ScenarioError as ScenarioError
from ._io._scenario_file import dump_scenario as dump_scenario
from ._io._scenario_file import example_path as example_path
from ._io._scenario_file import load_scenario as load_scenario
from ._io._scenario_file import scenario_from_dict as scenario_from_dict
from ._io._scenario_file import scenario_to_dict as scenario_to_dict
from ._io._telemetry import Telemetry as Telemetry
from ._io._telemetry import TelemetryError as TelemetryError
from ._io._telemetry import load_telemetry as load_telemetry
from ._io._telemetry import telemetry_columns as telemetry_columns
from ._io._telemetry import telemetry_from_arrays as telemetry_from_arrays
from ._io._telemetry import write_telemetry as write_telemetry
from ._model._loads import Loads as Loads
from ._model._loads import Pulses as Pulses
from ._model._params import FIELDS as FIELDS
from ._model._params import ParameterError as ParameterError
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

# Simulation
from ._simulation._simulate import Trajectory as Trajectory
from ._simulation._simulate import simulate as simulate
from ._simulation._simulate import simulate_unjitted as simulate_unjitted
from ._simulation._solver import MRPSwitch as MRPSwitch
from ._version import __version__ as __version__
