"""Grafana-managed alert rules (file provisioning), from the analysis templates.

Each rule: query A (SQL, table format: string columns become the alert's labels, `value` is the one
number), B reduces A to its last value per series, C is the threshold, the rule's condition. Volume
minimums live in the SQL (`AlertSettings.min_runs`...), so one run cannot page anyone; alert queries
cannot use dashboard variables, so they cover every model and count the study's fatal modes.
"""

from __future__ import annotations

from typing import Any, Final

from mast_otel.analysis import queries as q
from mast_otel.analysis.sql import AlertSettings, Grafana
from mast_otel.dashboards.panels import DATASOURCE_UID, FOLDER, PLUGIN_VERSION

GROUP: Final = "mast-otel"
EXPRESSIONS: Final = "__expr__"


def _rule(
    uid: str,
    title: str,
    sql: str,
    threshold: float,
    *,
    summary: str,
    description: str,
    severity: str,
    for_: str,
    no_data: str = "OK",
    lookback_s: int = 86_400,
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "condition": "C",
        "data": [
            {
                "refId": "A",
                "relativeTimeRange": {"from": lookback_s, "to": 0},
                "datasourceUid": DATASOURCE_UID,
                "model": {
                    "refId": "A",
                    "editorType": "sql",
                    "queryType": "table",
                    "format": 1,
                    "rawSql": sql.strip(),
                    "pluginVersion": PLUGIN_VERSION,
                },
            },
            {
                "refId": "B",
                "datasourceUid": EXPRESSIONS,
                "model": {
                    "refId": "B",
                    "type": "reduce",
                    "expression": "A",
                    "reducer": "last",
                    "settings": {"mode": "dropNN"},
                },
            },
            {
                "refId": "C",
                "datasourceUid": EXPRESSIONS,
                "model": {
                    "refId": "C",
                    "type": "threshold",
                    "expression": "B",
                    "conditions": [{"evaluator": {"type": "gt", "params": [threshold]}}],
                },
            },
        ],
        "noDataState": no_data,
        "execErrState": "Error",
        "for": for_,
        "annotations": {"summary": summary, "description": description},
        "labels": {"severity": severity, "team": "agents", "source": "mast-otel"},
    }


DEFAULT_SETTINGS: Final = AlertSettings()


def alert_rules(settings: AlertSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    """The provisioning document: one rule group of five rules."""
    dialect = Grafana(group_column="Model", variables=False, settings=settings)
    hours = settings.recent_s // 3600
    rules = [
        _rule(
            "mast-fatal-rate-rising",
            "Fatal-mode rate rising",
            dialect.render(q.ALERT_FATAL_RATE_TEMPLATE),
            settings.fatal_rise,
            summary="{{ $labels.model }}: fatal-mode rate up {{ humanizePercentage $values.B.Value }}",
            description=(
                f"In the last {hours} h the share of {{{{ $labels.model }}}} runs with a fatal MAST mode "
                f"rose by more than {settings.fatal_rise:.0%} points (and {settings.rise_factor}x) over the "
                f"{settings.baseline_s // 3600} h before, with at least {settings.min_runs} recent runs. "
                "Open the model-comparison dashboard to see which modes moved."
            ),
            severity="critical",
            for_="10m",
        ),
        _rule(
            "mast-mode-spike",
            "Failure mode spiking",
            dialect.render(q.ALERT_MODE_SPIKE_TEMPLATE),
            settings.mode_spike,
            summary="{{ $labels.model }}: {{ $labels.mode }} up {{ humanizePercentage $values.B.Value }}",
            description=(
                f"One mode's prevalence in {{{{ $labels.model }}}} runs of the last {hours} h rose by more "
                f"than {settings.mode_spike:.0%} points (and {settings.rise_factor}x) over its baseline."
            ),
            severity="warning",
            for_="10m",
        ),
        _rule(
            "mast-no-data",
            "No runs stored",
            dialect.render(q.ALERT_NO_DATA_TEMPLATE),
            0,
            summary="{{ $labels.service }}: no run stored for a while",
            description=(
                f"No run of {{{{ $labels.service }}}} was stored in the last {settings.silence_s // 60} min "
                f"although its baseline says about {{{{ $values.B.Value }}}} were due: check the agents' "
                "exporters, the collector (/healthz) and ClickHouse."
            ),
            severity="critical",
            for_="5m",
        ),
        _rule(
            "mast-judge-errors",
            "LLM judge errors",
            dialect.render(q.ALERT_JUDGE_ERRORS_TEMPLATE),
            settings.judge_errors,
            summary="{{ $labels.instance }}: {{ $values.B.Value }} judge errors",
            description=(
                f"The collector's LLM judge failed more than {settings.judge_errors} times in the last "
                f"{settings.stats_window_s // 60} min: runs are stored without the judge's findings."
            ),
            severity="warning",
            for_="5m",
            lookback_s=settings.stats_window_s,
        ),
        _rule(
            "mast-spool-growth",
            "Collector spool growing",
            dialect.render(q.ALERT_SPOOL_GROWTH_TEMPLATE),
            settings.spool_growth_bytes,
            summary="{{ $labels.instance }}: spool grew {{ humanize1024 $values.B.Value }}B",
            description=(
                f"The collector's on-disk spool grew by more than "
                f"{settings.spool_growth_bytes // 2**20} MiB in {settings.stats_window_s // 60} min: "
                "ClickHouse is refusing or not keeping up with writes."
            ),
            severity="warning",
            for_="10m",
            lookback_s=settings.stats_window_s,
        ),
    ]
    return {
        "apiVersion": 1,
        "groups": [{"orgId": 1, "name": GROUP, "folder": FOLDER, "interval": "1m", "rules": rules}],
    }
