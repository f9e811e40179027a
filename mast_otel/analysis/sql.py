"""SQL templates and the dialects that fill them: one metric text for the CLI, the report and Grafana.

A template is ClickHouse SQL with a few named holes, `{{name}}` or `{{name:arg:arg}}`, for the parts
that differ between where the query runs. `Bound` fills them for the CLI and the report (server-side
bindings), `Grafana` for dashboards and alert rules:

- `{{time_filter:COL}}`: `COL >= {since:DateTime64(9)} AND COL < {until:DateTime64(9)}` /
  `$__timeFilter(COL)`
- `{{bucket:COL}}`: `toStartOfInterval(toDateTime(COL), INTERVAL {bucket_s:UInt32} second)` /
  `$__timeInterval(COL)`
- `{{group}}`: `{group:Identifier}` / the panel's column, e.g. `Model`
- `{{filter:COL:var}}`: `(empty({models:Array(String)}) OR has(...))` / `${model:singlequote}` with a
  custom All value
- `{{fatal_mask}}`: `{fatal_mask:UInt32}` / computed from `${fatal_modes}`, the study's in alerts
- `{{value:NAME}}`: `{NAME:Type}` (see `VALUE_TYPES`) / the literal from `AlertSettings`
- `{{var:NAME}}`: `{NAME:String}` / `${NAME:singlequote}`
- `{{modes}}`: the taxonomy's codes as an array literal, in both

User-supplied values never become SQL text in the CLI: they travel as bound parameters. Grafana
interpolates its own template variables; the plugin's macros are expanded by its backend (see
`mast_otel.dashboards.macros` for how tests reproduce both).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final

from mast_otel.taxonomy import CODES, MODES, Prior

# Every template variable a filter may name, with the dashboard variable and the bound parameter.
FILTER_VARIABLES: Final = ("model", "agent", "service", "version")
# Grafana's "All" for multi-value variables: a custom all value, inserted as it is (not formatted).
GRAFANA_ALL: Final = "'__all__'"

VALUE_TYPES: Final = {
    "bucket_s": "UInt32",
    "top": "UInt32",
    "recent_s": "UInt32",
    "baseline_s": "UInt32",
    "min_runs": "UInt32",
    "min_baseline_runs": "UInt32",
    "rise_factor": "Float64",
    "stats_window_s": "UInt32",
    "silence_s": "UInt32",
    "min_expected_runs": "Float64",
}

_HOLE = re.compile(r"\{\{(\w+)((?::[^:}]+)*)\}\}")


def modes_literal() -> str:
    """The 14 codes as a ClickHouse array literal; bit i of a mode mask is `CODES[i]`."""
    return "[" + ", ".join(f"'{code}'" for code in CODES) + "]"


def mode_mask(codes: tuple[str, ...] | list[str]) -> int:
    """The bit mask of these mode codes (bit i for `CODES[i]`)."""
    mask = 0
    for code in codes:
        mask |= 1 << CODES.index(code)
    return mask


STUDY_FATAL_MODES: Final = tuple(mode.code for mode in MODES if mode.prior is Prior.FATAL)


class Dialect(ABC):
    """Fills a template's holes for one place the SQL runs."""

    def render(self, template: str) -> str:
        def fill(match: re.Match[str]) -> str:
            name, args = match.group(1), [a for a in match.group(2).split(":") if a]
            if name == "modes":
                return modes_literal()
            method = getattr(self, f"fill_{name}", None)
            if method is None:
                raise ValueError(f"unknown template hole {{{{{name}}}}}")
            text: str = method(*args)
            return text

        return _HOLE.sub(fill, template)

    @abstractmethod
    def fill_time_filter(self, column: str) -> str: ...

    @abstractmethod
    def fill_bucket(self, column: str) -> str: ...

    @abstractmethod
    def fill_group(self) -> str: ...

    @abstractmethod
    def fill_filter(self, column: str, variable: str) -> str: ...

    @abstractmethod
    def fill_fatal_mask(self) -> str: ...

    @abstractmethod
    def fill_value(self, name: str) -> str: ...

    @abstractmethod
    def fill_var(self, name: str) -> str: ...


class Bound(Dialect):
    """ClickHouse server-side parameters (`{name:Type}`); `analysis.queries.parameters` binds them."""

    def fill_time_filter(self, column: str) -> str:
        return f"{column} >= {{since:DateTime64(9)}} AND {column} < {{until:DateTime64(9)}}"

    def fill_bucket(self, column: str) -> str:
        return f"toStartOfInterval(toDateTime({column}), INTERVAL {{bucket_s:UInt32}} second)"

    def fill_group(self) -> str:
        return "{group:Identifier}"

    def fill_filter(self, column: str, variable: str) -> str:
        _check_variable(variable)
        bound = f"{{{variable}s:Array(String)}}"
        return f"(empty({bound}) OR has({bound}, {column}))"

    def fill_fatal_mask(self) -> str:
        return "{fatal_mask:UInt32}"

    def fill_value(self, name: str) -> str:
        return f"{{{name}:{VALUE_TYPES[name]}}}"

    def fill_var(self, name: str) -> str:
        return f"{{{name}:String}}"


@dataclass(frozen=True, slots=True)
class AlertSettings:
    """The windows and thresholds Grafana queries are generated with (defaults documented in the README)."""

    recent_s: int = 3600  # the window that may page: the last hour
    baseline_s: int = 86_400  # compared with the day before it
    min_runs: int = 20  # runs of a model in the recent window before anything may fire
    min_baseline_runs: int = 50  # runs of a model in the baseline before it counts as a baseline
    rise_factor: float = 1.5  # the recent rate must also be this many times the baseline's
    fatal_rise: float = 0.15  # fire when the fatal-mode rate rose by 15 points or more
    mode_spike: float = 0.25  # fire when one mode's prevalence rose by 25 points or more
    stats_window_s: int = 900  # pipeline health looks at the last 15 minutes
    silence_s: int = 1800  # no run stored for 30 minutes...
    min_expected_runs: float = 5.0  # ...while the baseline says at least this many were due
    judge_errors: int = 5  # judge errors in the stats window
    spool_growth_bytes: int = 64 * 1024 * 1024  # spool growth in the stats window
    top: int = 50  # rows of the drill-down's run list

    def literal(self, name: str) -> str:
        value = getattr(self, name)
        return repr(float(value)) if VALUE_TYPES[name] == "Float64" else str(int(value))


@dataclass(frozen=True, slots=True)
class Grafana(Dialect):
    """grafana-clickhouse-datasource (plugin v4): its macros and Grafana's template variables.

    `group_column` is what `{{group}}` becomes. With `variables=False` (alert rules, which cannot
    use dashboard variables) filters match everything and the fatal modes are the study's priors.
    """

    group_column: str = "Model"
    variables: bool = True
    settings: AlertSettings = AlertSettings()

    def fill_time_filter(self, column: str) -> str:
        return f"$__timeFilter({column})"

    def fill_bucket(self, column: str) -> str:
        return f"$__timeInterval({column})"

    def fill_group(self) -> str:
        return self.group_column

    def fill_filter(self, column: str, variable: str) -> str:
        _check_variable(variable)
        if not self.variables:
            return "1"
        selected = f"${{{variable}:singlequote}}"
        return f"({GRAFANA_ALL} IN ({selected}) OR {column} IN ({selected}))"

    def fill_fatal_mask(self) -> str:
        if not self.variables:
            return str(mode_mask(STUDY_FATAL_MODES))
        return (
            "toUInt32(arraySum(arrayMap(code -> bitShiftLeft(toUInt32(1), indexOf("
            f"{modes_literal()}, code) - 1), [${{fatal_modes:singlequote}}])))"
        )

    def fill_value(self, name: str) -> str:
        return self.settings.literal(name)

    def fill_var(self, name: str) -> str:
        return f"${{{name}:singlequote}}"


def _check_variable(variable: str) -> None:
    if variable not in FILTER_VARIABLES:
        raise ValueError(f"unknown filter variable {variable!r}; expected one of {FILTER_VARIABLES}")
