"""Every error jaxhinge raises on purpose: one base class, one subclass per kind of failure.

`str(error)` is one line. Where there is one, it names the input (`source`: a file name, `"<dict>"` or the API
function), the field (`field`: a dotted file path such as `panels[1] ("p1").k`, or an argument name), the value
and the rule that the value breaks: `source: field = value: rule`. The attributes `source`, `field`, `value`
and `rule` hold the parts (`None` where there is none). Every class is a `ValueError`, so existing
`except ValueError` code keeps working. The command line prints `jaxhinge: error: <str(error)>` and exits 2
for any of them (docs/errors.md).

| class | raised for |
|---|---|
| `ScenarioError` | a scenario file, dict or model built in code that breaks a rule |
| `ConfigError` | a simulation setting (`simulation.*`), a memory estimate over the limit |
| `ParameterError` | an unknown parameter name, or a value a parameter cannot take |
| `FitError` | a FIT.toml file or `fit`/`identify` argument, targets that cannot be reached |
| `TelemetryError` | telemetry data (CSV file, columns, samples, weights); a `FitError` |
| `SweepError` | a SWEEP.toml file, dispersions or batch parameters |
| `SensitivityError` | a SENS.toml file or `sensitivity` argument |
| `FeaError` | an FEA result file (CalculiX `.dat`, NASTRAN `.f06`) |
| `OutputError` | an output that cannot be written (folder unusable, disk full): nothing was written |
"""

from typing import Any

from ._format import fmt_value

__all__ = [
    "ConfigError",
    "FeaError",
    "FitError",
    "JaxhingeError",
    "JaxhingeNote",
    "OutputError",
    "ParameterError",
    "ScenarioError",
    "SensitivityError",
    "SweepError",
    "TelemetryError",
]

_UNSET = object()


class JaxhingeNote(UserWarning):
    """A value jaxhinge accepted and adjusted, or a doubt about an input that does not stop it (a spin axis
    normalised, a record sampled coarsely): issued with `warnings.warn`; the command line prints it as
    `jaxhinge: note: <message>`."""


class JaxhingeError(ValueError):
    """The base class of jaxhinge's errors (a `ValueError`): a one-line message and, where known, `source`,
    `field`, `value` and `rule`."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None,
                 value: Any = None, rule: str | None = None):
        super().__init__(message)
        self.source = source
        self.field = field
        self.value = value
        self.rule = rule

    @classmethod
    def bad(cls, source: str | None, field: str, value: Any, rule: str):
        """`source: field = value: rule` (without `source: ` when `source` is None)."""
        head = f"{source}: " if source else ""
        return cls(f"{head}{field} = {fmt_value(value)}: {rule}", source=source, field=field, value=value, rule=rule)

    @classmethod
    def fail(cls, source: str | None, field: str | None, message: str):
        """`source: field: message` (the parts that are None left out)."""
        where = ": ".join(p for p in (source, field) if p)
        return cls(f"{where}: {message}" if where else message, source=source, field=field, rule=message)


class ScenarioError(JaxhingeError):
    """A scenario file, scenario dict or model built in code that cannot be used."""


class ConfigError(JaxhingeError):
    """An invalid simulation setting: `field` (e.g. `"simulation.save_dt"`), `value` and `rule` (what is
    allowed); `str(error)` is `field = value: rule`."""

    def __init__(self, field: str, value: Any, rule: str, *, source: str | None = None):
        # plain numbers in the message: `0.2769`, not `np.float64(0.2769)`
        head = f"{source}: " if source else ""
        super().__init__(f"{head}{field} = {fmt_value(value)}: {rule}", source=source, field=field, value=value, rule=rule)


class ParameterError(JaxhingeError):
    """An unknown or malformed parameter name, or a value a parameter cannot take."""


class FitError(JaxhingeError):
    """A fit that cannot be set up (a FIT.toml field or a keyword argument of `fit`/`identify`, named by
    `field`) or that asks for something unreachable."""


class TelemetryError(FitError):
    """Bad telemetry (file, columns, samples or weights)."""


class SweepError(JaxhingeError):
    """A SWEEP.toml file, a dispersion or batch parameters that cannot be used."""


class SensitivityError(JaxhingeError):
    """A SENS.toml file or a `sensitivity` argument that cannot be used."""


class FeaError(JaxhingeError):
    """An FEA result file that cannot be read."""


class OutputError(JaxhingeError):
    """An output that cannot be written: the folder is unusable, the disk is full. Nothing was written."""
