"""The three Grafana dashboards, built from the analysis templates (never from SQL of their own).

Targets grafana-clickhouse-datasource v4.x (query model: `editorType: sql`, `queryType`, `format`,
`rawSql`; `format` 0 time series, 1 table, 3 trace) on Grafana 11/12. Every panel carries exactly one
target; `PANEL_KINDS` tells the tests what columns each panel type needs.
"""

from __future__ import annotations

from typing import Any, Final

from mast_otel.analysis import queries as q
from mast_otel.analysis.sql import FILTER_VARIABLES, GRAFANA_ALL, STUDY_FATAL_MODES, Grafana
from mast_otel.taxonomy import CODES, Category

PLUGIN_TYPE: Final = "grafana-clickhouse-datasource"
PLUGIN_VERSION: Final = "4.13.0"
DATASOURCE_UID: Final = "mast-clickhouse"
DATASOURCE: Final = {"type": PLUGIN_TYPE, "uid": DATASOURCE_UID}
FOLDER: Final = "mast-otel"

FORMAT = {"timeSeries": 0, "table": 1, "traces": 3}
# Panel type -> the query type its target uses.
PANEL_KINDS: Final = {
    "stat": "table",
    "timeseries": "timeSeries",
    "barchart": "table",
    "table": "table",
    "traces": "traces",
}

_BY_MODEL = Grafana(group_column="Model")
_FLEET = Grafana(group_column="'fleet'")

_VARIABLE_COLUMNS = {
    "model": "Model",
    "agent": "RootAgent",
    "service": "ServiceName",
    "version": "ServiceVersion",
}


def target(sql: str, query_type: str) -> dict[str, Any]:
    return {
        "refId": "A",
        "datasource": DATASOURCE,
        "editorType": "sql",
        "queryType": query_type,
        "format": FORMAT[query_type],
        "rawSql": sql.strip(),
        "pluginVersion": PLUGIN_VERSION,
    }


def panel(
    kind: str,
    title: str,
    sql: str,
    grid: tuple[int, int, int, int],
    *,
    description: str = "",
    unit: str = "",
    options: dict[str, Any] | None = None,
    transformations: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit} if unit else {}
    built: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [target(sql, PANEL_KINDS[kind])],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options or {},
    }
    if transformations:
        built["transformations"] = transformations
    built.update(extra or {})
    return built


def variables(*, trace: bool = False) -> list[dict[str, Any]]:
    """Template variables: model, agent, service, version (multi, All), fatal modes, trace id."""
    found: list[dict[str, Any]] = []
    for name in FILTER_VARIABLES:
        column = _VARIABLE_COLUMNS[name]
        sql = (
            f"SELECT DISTINCT {column} FROM mast_conversations "
            f"WHERE $__timeFilter(Timestamp) AND {column} != '' ORDER BY {column}"
        )
        found.append(
            {
                "name": name,
                "label": name.capitalize(),
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"rawSql": sql, "editorType": "sql", "format": 1, "queryType": "table"},
                "definition": sql,
                "refresh": 2,
                "multi": True,
                "includeAll": True,
                "allValue": GRAFANA_ALL,
                "current": {"text": ["All"], "value": ["$__all"]},
                "sort": 1,
            }
        )
    found.append(
        {
            "name": "fatal_modes",
            "label": "Fatal modes",
            "description": "Modes counted as fatal in the fatal-mode rate (default: the reference study's).",
            "type": "custom",
            "query": ",".join(CODES),
            "multi": True,
            "includeAll": False,
            "current": {"text": list(STUDY_FATAL_MODES), "value": list(STUDY_FATAL_MODES)},
            "options": [
                {"text": code, "value": code, "selected": code in STUDY_FATAL_MODES} for code in CODES
            ],
        }
    )
    if trace:
        sql = (
            "SELECT TraceId FROM mast_conversations FINAL WHERE $__timeFilter(Timestamp) "
            "ORDER BY Outcome = 'failure' DESC, Timestamp DESC LIMIT 200"
        )
        found.append(
            {
                "name": "trace_id",
                "label": "Run (trace id)",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"rawSql": sql, "editorType": "sql", "format": 1, "queryType": "table"},
                "definition": sql,
                "refresh": 2,
                "multi": False,
                "includeAll": False,
            }
        )
    return found


def dashboard(
    uid: str, title: str, description: str, panels: list[dict[str, Any]], *, trace: bool = False
) -> dict[str, Any]:
    for number, item in enumerate(panels, start=1):
        item["id"] = number
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["mast-otel", "llm-agents"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": variables(trace=trace)},
        "annotations": {"list": []},
        "links": [{"title": "mast-otel", "type": "dashboards", "tags": ["mast-otel"], "asDropdown": True}],
        "panels": panels,
    }


def _bars(stacking: str = "none") -> dict[str, Any]:
    return {"orientation": "auto", "stacking": stacking, "showValue": "auto", "legend": {"showLegend": True}}


def fleet_overview() -> dict[str, Any]:
    fleet = _FLEET.render(q.GROUP_SUMMARY_TEMPLATE)
    by_model = _BY_MODEL.render(q.GROUP_SUMMARY_TEMPLATE)
    stats = [
        ("Runs", "runs", "none"),
        ("Success rate", "success_rate", "percentunit"),
        ("Fatal-mode rate", "fatal_mode_rate", "percentunit"),
        ("Distinct modes per failed run", "modes_per_failed_run", "none"),
    ]
    panels = [
        panel("stat", title, q.project(fleet, [column]), (6 * i, 0, 6, 4), unit=unit)
        for i, (title, column, unit) in enumerate(stats)
    ]
    panels += [
        panel(
            "timeseries",
            "Fatal-mode rate by model",
            _BY_MODEL.render(q.over_time(["fatal_mode_rate"])),
            (0, 4, 12, 8),
            description="Share of runs with at least one of the selected fatal modes, per time bucket.",
            unit="percentunit",
        ),
        panel(
            "timeseries",
            "Success rate by model",
            _BY_MODEL.render(q.over_time(["success_rate"])),
            (12, 4, 12, 8),
            description="Among runs with a known outcome (late grader verdicts included).",
            unit="percentunit",
        ),
        panel(
            "timeseries",
            "Runs by model",
            _BY_MODEL.render(q.over_time(["runs"])),
            (0, 12, 12, 7),
        ),
        panel(
            "barchart",
            "Distinct modes per failed run (surgical vs cascading)",
            q.project(by_model, ["group_key", "modes_per_failed_run", "cascading_share"]),
            (12, 12, 12, 7),
            description=f"Mean distinct modes per failed run; cascading share = failed runs with "
            f"{q.CASCADE_MIN_MODES} modes or more. The study: 2.6 (surgical) vs 5.3 (cascading).",
            options=_bars(),
        ),
        panel(
            "barchart",
            "Failed runs by MAST category",
            q.project(
                _BY_MODEL.render(q.CATEGORY_BREAKDOWN_TEMPLATE),
                ["group_key", *(f'"{c.value} {c.label}"' for c in Category)],
            ),
            (0, 19, 12, 8),
            description="Share of failed runs with at least one mode of each category.",
            unit="percentunit",
            options=_bars(),
        ),
        panel(
            "table",
            "Runs by model",
            by_model,
            (12, 19, 12, 8),
        ),
    ]
    return dashboard(
        "mast-fleet",
        "mast-otel / Fleet overview",
        "Runs, success and fatal-mode rates of every agent run, annotated with the MAST taxonomy.",
        panels,
    )


def model_comparison() -> dict[str, Any]:
    prevalence = _BY_MODEL.render(q.MODE_PREVALENCE_TEMPLATE)
    panels = [
        panel(
            "table",
            "Failure vector: prevalence of each mode in failed runs (mode x model)",
            q.project(prevalence, ["mode", "group_key", "failure_prevalence"]),
            (0, 0, 24, 10),
            unit="percentunit",
            transformations=[
                {
                    "id": "groupingToMatrix",
                    "options": {
                        "rowField": "mode",
                        "columnField": "group_key",
                        "valueField": "failure_prevalence",
                    },
                }
            ],
            extra={
                "fieldConfig": {
                    "defaults": {
                        "unit": "percentunit",
                        "custom": {"cellOptions": {"type": "color-background"}},
                        "color": {"mode": "continuous-GrYlRd"},
                    },
                    "overrides": [],
                }
            },
        ),
        panel(
            "barchart",
            "$model: prevalence in successful vs failed runs",
            q.project(prevalence, ["mode", "success_prevalence", "failure_prevalence"]),
            (0, 10, 24, 9),
            description="One panel per selected model. A mode far more common in failed runs is a "
            "candidate fatal mode; one common in both is benign.",
            unit="percentunit",
            options=_bars(),
            extra={"repeat": "model", "repeatDirection": "v"},
        ),
        panel(
            "table",
            "Odds ratios (failed vs successful runs), 95% interval",
            q.project(
                prevalence,
                [
                    "group_key",
                    "mode",
                    "successes_with_mode",
                    "successes",
                    "failures_with_mode",
                    "failures",
                    "round(odds_ratio, 2) AS odds_ratio",
                    "round(odds_ratio_low, 2) AS ci95_low",
                    "round(odds_ratio_high, 2) AS ci95_high",
                ],
                order="group_key, odds_ratio DESC",
            ),
            (0, 19, 24, 10),
            description="Haldane-Anscombe correction on zero cells. `mast-otel analyze` adds Fisher's "
            "exact p and the fatal / benign / inconclusive verdict.",
        ),
    ]
    return dashboard(
        "mast-models",
        "mast-otel / Model comparison",
        "Same success rate, different failure signatures: the modes behind each model's failures.",
        panels,
    )


def run_drilldown() -> dict[str, Any]:
    link = {
        "title": "Open this run",
        "url": "/d/mast-run/mast-otel-run-drill-down"
        "?var-trace_id=${__data.fields.trace_id}&${__url_time_range}",
    }
    panels = [
        panel(
            "table",
            "Failed runs with the most modes",
            _BY_MODEL.render(q.RECENT_RUNS_TEMPLATE),
            (0, 0, 24, 8),
            extra={"fieldConfig": {"defaults": {"links": [link]}, "overrides": []}},
        ),
        panel(
            "table",
            "Findings: mode, evidence and blame",
            _BY_MODEL.render(q.RUN_FINDINGS_TEMPLATE),
            (0, 8, 24, 7),
        ),
        panel(
            "table",
            "Conversation turns",
            _BY_MODEL.render(q.RUN_TURNS_TEMPLATE),
            (0, 15, 24, 10),
        ),
        panel(
            "traces",
            "Spans",
            _BY_MODEL.render(q.RUN_SPANS_TEMPLATE),
            (0, 25, 24, 12),
        ),
    ]
    return dashboard(
        "mast-run",
        "mast-otel / Run drill-down",
        "One run: what the agents said and did, what went wrong where, and its spans.",
        panels,
        trace=True,
    )


def all_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard model."""
    return {
        "fleet-overview.json": fleet_overview(),
        "model-comparison.json": model_comparison(),
        "run-drilldown.json": run_drilldown(),
    }
