"""Grafana dashboards, alert rules and provisioning: generated, valid, and every query answers on chDB.

The data: the demo's scripted agents export over OTLP/gRPC to a collector on the session chDB store.
Each panel's and alert's SQL is expanded the way Grafana and the ClickHouse plugin expand it
(`mast_otel.dashboards.macros`) and run there; the result must have what its panel type needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from mast_otel import sdk
from mast_otel.analysis.sql import GRAFANA_ALL
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector
from mast_otel.dashboards import generated_files
from mast_otel.dashboards.alerts import alert_rules
from mast_otel.dashboards.macros import ALL, QueryContext, Variable, expand
from mast_otel.dashboards.panels import DATASOURCE_UID, PLUGIN_TYPE, all_dashboards
from mast_otel.demo.agents import run_demo_agents
from mast_otel.store.base import QueryResult
from mast_otel.store.clickhouse import ClickHouseStore, open_store

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "dashboards_demo"
RUNS = 90
TRACE_COLUMNS = {"traceID", "spanID", "parentSpanID", "serviceName", "operationName", "startTime", "duration"}


@pytest.fixture(scope="module")
def demo_store(chdb_dir: Path) -> Iterator[ClickHouseStore]:
    config = loopback(
        str(chdb_dir),
        database=DATABASE,
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
    )
    with Collector(config) as collector:
        sdk.configure(
            service_name="sre-triage-demo",
            endpoint=collector.grpc_endpoint,
            insecure=True,
            resource_attributes={"service.version": "demo"},
            set_global=False,  # the global OpenTelemetry provider can be set once per process
        )
        run_demo_agents(runs=RUNS, seed=11)
        assert sdk.force_flush()
        sdk.shutdown()
        assert collector.wait_idle(60)
    store = open_store(chdb_dir, database=DATABASE)
    # What a collector's stats snapshots look like: a spool that grows, a judge that fails.
    store.query(
        "INSERT INTO mast_collector_stats (Timestamp, Instance, Metric, Value) "
        "SELECT now64(9) - toIntervalSecond(60 * (5 - number)), 'collector-0', metric, "
        "if(metric = 'spool_bytes', number * 1e8, number * 3) "
        "FROM numbers(5) ARRAY JOIN ['spool_bytes', 'judge_errors'] AS metric"
    )
    yield store
    store.close()


def context(store: ClickHouseStore, **selected: list[str]) -> QueryContext:
    now = datetime.now(timezone.utc)
    options = {
        name: [row[0] for row in store.query(f"SELECT DISTINCT {column} FROM mast_conversations").rows]
        for name, column in (
            ("model", "Model"),
            ("agent", "RootAgent"),
            ("service", "ServiceName"),
            ("version", "ServiceVersion"),
        )
    }
    variables = {
        name: Variable(selected.get(name, [ALL]), all_value=GRAFANA_ALL, options=values)
        for name, values in options.items()
    }
    variables["fatal_modes"] = Variable(selected.get("fatal_modes", ["FM-1.5", "FM-3.3", "FM-1.4"]))
    trace = store.query(
        "SELECT TraceId FROM mast_conversations FINAL WHERE Outcome = 'failure' ORDER BY TraceId LIMIT 1"
    ).rows[0][0]
    variables["trace_id"] = Variable([trace])
    return QueryContext(now - timedelta(hours=1), now + timedelta(minutes=5), 60, variables)


def panels() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}:{panel['title']}", panel)
        for name, dashboard in all_dashboards().items()
        for panel in dashboard["panels"]
    ]


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_columns(kind: str, result: QueryResult, panel: dict[str, Any]) -> None:
    assert result.rows, "no rows"
    columns = result.column_names
    first = result.rows[0]
    numeric = [name for name, value in zip(columns, first, strict=True) if is_number(value)]
    if kind == "stat":
        assert numeric, columns
    elif kind == "timeseries":
        assert isinstance(first[0], (datetime, date)), columns
        assert numeric, columns
        assert any(isinstance(value, str) for value in first), "a series label column"
    elif kind == "barchart":
        assert isinstance(first[0], str), columns
        assert numeric, columns
    elif kind == "traces":
        assert set(columns) >= TRACE_COLUMNS
        assert all(isinstance(row[columns.index("tags")], list) for row in result.rows)
    for transformation in panel.get("transformations", []):
        if transformation["id"] == "groupingToMatrix":
            fields = transformation["options"]
            assert {fields["rowField"], fields["columnField"], fields["valueField"]} <= set(columns)


@pytest.mark.parametrize(("name", "panel"), panels(), ids=[name for name, _ in panels()])
def test_every_panel_query_runs_on_demo_data(
    demo_store: ClickHouseStore, name: str, panel: dict[str, Any]
) -> None:
    [target] = panel["targets"]
    sql = expand(target["rawSql"], context(demo_store))
    assert "$" not in sql, sql
    check_columns(panel["type"], demo_store.query(sql), panel)


def test_filters_narrow_the_panels(demo_store: ClickHouseStore) -> None:
    fleet = all_dashboards()["fleet-overview.json"]
    table = next(p for p in fleet["panels"] if p["title"] == "Runs by model" and p["type"] == "table")
    everything = demo_store.query(expand(table["targets"][0]["rawSql"], context(demo_store))).dicts()
    assert len(everything) == 3 and sum(row["runs"] for row in everything) == RUNS
    one = everything[0]["group_key"]
    narrowed = demo_store.query(
        expand(table["targets"][0]["rawSql"], context(demo_store, model=[one]))
    ).dicts()
    assert [(row["group_key"], row["runs"]) for row in narrowed] == [(one, everything[0]["runs"])]
    gone = demo_store.query(expand(table["targets"][0]["rawSql"], context(demo_store, agent=["nobody"])))
    assert gone.rows == ()


def alert_queries() -> list[tuple[str, dict[str, Any]]]:
    return [(rule["uid"], rule) for rule in alert_rules()["groups"][0]["rules"]]


@pytest.mark.parametrize(("uid", "rule"), alert_queries(), ids=[uid for uid, _ in alert_queries()])
def test_every_alert_query_runs_on_demo_data(
    demo_store: ClickHouseStore, uid: str, rule: dict[str, Any]
) -> None:
    query = next(item for item in rule["data"] if item["refId"] == "A")
    sql = expand(query["model"]["rawSql"], context(demo_store))
    assert "$" not in sql
    result = demo_store.query(sql)
    assert result.rows, uid
    # Grafana's numeric-data contract: one number per row (the value), the rest string labels.
    for row in result.rows:
        kinds = ["n" if is_number(value) else "s" if isinstance(value, str) else "?" for value in row]
        assert kinds.count("n") == 1 and "?" not in kinds, (result.column_names, row)
    assert result.column_names[-1] == "value"


def test_pipeline_alerts_see_the_growing_spool_and_the_judge_errors(demo_store: ClickHouseStore) -> None:
    values = {}
    for uid, rule in alert_queries():
        threshold = rule["data"][2]["model"]["conditions"][0]["evaluator"]["params"][0]
        result = demo_store.query(expand(rule["data"][0]["model"]["rawSql"], context(demo_store)))
        values[uid] = [(row[-1], threshold) for row in result.rows]
    assert values["mast-spool-growth"] == [(4e8, 64 * 2**20)]  # grew 400 MB: fires
    assert values["mast-judge-errors"] == [(12.0, 5)]  # 12 errors in 15 min: fires
    # The demo's runs all arrived just now: no baseline yet, so nothing about rates may page anyone.
    assert all(value == 0 for value, _ in values["mast-fatal-rate-rising"] + values["mast-mode-spike"])
    assert all(value == 0 for value, _ in values["mast-no-data"])


def test_checked_in_files_equal_the_generator() -> None:
    for relative, content in generated_files().items():
        path = ROOT / "dashboards" / relative
        assert path.is_file(), f"{path} missing: run `python -m mast_otel.dashboards`"
        assert path.read_text(encoding="utf-8") == content, (
            f"{path} is stale: run `python -m mast_otel.dashboards`"
        )


def test_dashboards_are_valid_and_reference_what_exists() -> None:
    uids = []
    for name in ("fleet-overview.json", "model-comparison.json", "run-drilldown.json"):
        dashboard = json.loads((ROOT / "dashboards" / name).read_text(encoding="utf-8"))
        uids.append(dashboard["uid"])
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        declared = {variable["name"] for variable in dashboard["templating"]["list"]}
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                assert variable["datasource"] == {"type": PLUGIN_TYPE, "uid": DATASOURCE_UID}
        for panel in dashboard["panels"]:
            assert panel["datasource"] == {"type": PLUGIN_TYPE, "uid": DATASOURCE_UID}
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == DATASOURCE_UID
                assert target["editorType"] == "sql" and target["rawSql"]
                assert target["format"] == {"table": 1, "timeSeries": 0, "traces": 3}[target["queryType"]]
                used = set(re.findall(r"\$\{(\w+)", target["rawSql"])) | set(
                    re.findall(r"\$(?!__)(\w+)", panel["title"])
                )
                assert used <= declared, used - declared
            if "repeat" in panel:
                assert panel["repeat"] in declared
    assert len(uids) == len(set(uids)) == 3


def test_provisioning_files_are_consistent() -> None:
    provisioning = ROOT / "dashboards" / "provisioning"
    [source] = yaml.safe_load((provisioning / "datasources" / "mast-otel.yaml").read_text())["datasources"]
    assert (source["uid"], source["type"]) == (DATASOURCE_UID, PLUGIN_TYPE)
    assert source["jsonData"]["username"] == "mast_grafana"  # the read-only user
    assert source["secureJsonData"]["password"].startswith("$")  # from the environment, never a literal
    [provider] = yaml.safe_load((provisioning / "dashboards" / "mast-otel.yaml").read_text())["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/mast-otel"
    [group] = yaml.safe_load((provisioning / "alerting" / "mast-otel.yaml").read_text())["groups"]
    rule_uids = [rule["uid"] for rule in group["rules"]]
    assert len(rule_uids) == len(set(rule_uids)) == 5
    for rule in group["rules"]:
        refs = {item["refId"] for item in rule["data"]}
        assert rule["condition"] in refs
        for item in rule["data"]:
            assert item["datasourceUid"] in (DATASOURCE_UID, "__expr__")
            assert item["model"]["refId"] == item["refId"]
            if "expression" in item["model"]:
                assert item["model"]["expression"] in refs
        assert rule["execErrState"] in ("Error", "Alerting", "OK")
        assert "$" not in rule["data"][0]["model"]["rawSql"].replace("$__", "")  # no dashboard variables
