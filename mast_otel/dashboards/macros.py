"""Expand a panel's SQL the way Grafana and grafana-clickhouse-datasource (v4.x) do, to run it elsewhere.

Two steps, in Grafana's order: the frontend interpolates template variables (`${model:singlequote}`,
`${model}`, `$model`; a multi-value variable set to All becomes its custom all value, inserted as it
is), then the plugin's backend replaces its macros (pkg/macros/macros.go):

- `$__timeFilter(c)` -> `c >= toDateTime(<from s>) AND c <= toDateTime(<to s>)`
- `$__timeFilter_ms(c)` -> the same with `fromUnixTimestamp64Milli(<ms>)`
- `$__fromTime` / `$__toTime` -> `toDateTime(<s>)`; `$__fromTime_ms` / `$__toTime_ms` -> milliseconds
- `$__timeInterval(c)` -> `toStartOfInterval(toDateTime(c), INTERVAL <interval s, at least 1> second)`
- `$__interval_s` -> the interval in seconds

Tests and the benchmark use this to run every panel and alert query against chDB.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

ALL: str = "$__all"  # Grafana's internal marker for "All" selected

_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(?!__)(\w+)")
_MACRO = re.compile(r"\$__(\w+)(?:\(([^()]*)\))?")


@dataclass(frozen=True, slots=True)
class Variable:
    values: Sequence[str]  # selected values, or [ALL]
    all_value: str | None = None  # the variable's custom all value, if any
    options: Sequence[str] = field(default_factory=tuple)  # what All stands for without a custom value


@dataclass(frozen=True, slots=True)
class QueryContext:
    time_from: datetime
    time_to: datetime
    interval_s: float = 60.0
    variables: Mapping[str, Variable] = field(default_factory=dict)


def expand(sql: str, context: QueryContext) -> str:
    """The SQL the ClickHouse server would receive from Grafana for this panel query."""
    return expand_macros(interpolate(sql, context.variables), context)


def interpolate(sql: str, variables: Mapping[str, Variable]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        fmt = match.group(2) or ""
        variable = variables.get(name)
        if variable is None:
            return match.group(0)  # Grafana leaves unknown variables as they are
        values = list(variable.values)
        if values == [ALL]:
            if variable.all_value is not None:
                return variable.all_value
            values = list(variable.options)
        if fmt == "singlequote":
            return ",".join("'" + value.replace("'", "\\'") + "'" for value in values)
        if fmt == "doublequote":
            return ",".join('"' + value.replace('"', '\\"') + '"' for value in values)
        if fmt in ("", "raw", "csv"):
            return ",".join(values) if len(values) != 1 else values[0]
        raise ValueError(f"variable format {fmt!r} is not reproduced here")

    return _VARIABLE.sub(replace, sql)


def expand_macros(sql: str, context: QueryContext) -> str:
    start_s, end_s = int(context.time_from.timestamp()), int(context.time_to.timestamp())
    start_ms, end_ms = int(context.time_from.timestamp() * 1000), int(context.time_to.timestamp() * 1000)
    interval = max(int(context.interval_s), 1)

    def replace(match: re.Match[str]) -> str:
        name, args = match.group(1), match.group(2)
        column = (args or "").strip()
        if name == "timeFilter":
            return f"{column} >= toDateTime({start_s}) AND {column} <= toDateTime({end_s})"
        if name == "timeFilter_ms":
            return (
                f"{column} >= fromUnixTimestamp64Milli({start_ms}) AND "
                f"{column} <= fromUnixTimestamp64Milli({end_ms})"
            )
        if name == "timeInterval":
            return f"toStartOfInterval(toDateTime({column}), INTERVAL {interval} second)"
        bare = {
            "fromTime": f"toDateTime({start_s})",
            "toTime": f"toDateTime({end_s})",
            "fromTime_ms": f"fromUnixTimestamp64Milli({start_ms})",
            "toTime_ms": f"fromUnixTimestamp64Milli({end_ms})",
            "interval_s": str(interval),
        }
        if name in bare and args is None:
            return bare[name]
        raise ValueError(f"macro $__{name} is not reproduced here")

    return _MACRO.sub(replace, sql)
