"""Deployment assets, validated statically (no Docker engine or ClickHouse cluster runs here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from mast_otel.store.clickhouse import ClickHouseStore
from mast_otel.store.cluster import cluster_statements
from mast_otel.store.schema import TABLES

ROOT = Path(__file__).resolve().parent.parent


def test_gateway_routes_by_trace_id_to_the_collectors() -> None:
    config = yaml.safe_load((ROOT / "collector" / "otelcol-gateway.yaml").read_text())
    exporter = config["exporters"]["loadbalancing"]
    assert exporter["routing_key"] == "traceID"
    assert exporter["resolver"]["static"]["hostnames"] == ["mast-otel-collector:4317"]
    assert exporter["protocol"]["otlp"]["retry_on_failure"]["enabled"] is True
    pipeline = config["service"]["pipelines"]["traces"]
    assert set(pipeline["receivers"]) <= set(config["receivers"])
    assert set(pipeline["processors"]) <= set(config["processors"])
    assert pipeline["exporters"] == ["loadbalancing"]
    assert set(config["service"]["extensions"]) <= set(config["extensions"])


def test_dockerfile_copies_what_exists_and_exposes_the_ports() -> None:
    dockerfile = (ROOT / "collector" / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (.+) \S+$", dockerfile, re.M):
        for path in source.split():
            assert (ROOT / path).exists(), path
    assert re.search(r"^EXPOSE 4317 4318 13133 8888$", dockerfile, re.M)
    assert 'ENTRYPOINT ["mast-otel", "collector"]' in dockerfile
    assert "/etc/mast-otel/mast-otel.yaml" in dockerfile


def test_cluster_ddl_parses_and_replicates_every_table(store: ClickHouseStore) -> None:
    statements = cluster_statements("prod")
    for statement in statements:
        store.query("EXPLAIN AST " + statement)  # ClickHouse's own parser; raises on a syntax error
    text = "\n".join(statements)
    tables = [t.name for t in TABLES if "CREATE TABLE" in t.create("mast")]
    for name in tables:
        assert f"`mast`.{name}_local ON CLUSTER 'prod'" in text
        assert f"Distributed('prod', `mast`, {name}_local," in text
    assert "ENGINE = MergeTree()" not in text and "ENGINE = ReplacingMergeTree(" not in text
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/mast/mast_conversations_local'" in text
    assert "cityHash64(TraceId)" in text
    views = [s for s in statements if "MATERIALIZED VIEW" in s]
    assert views and all("_local" in v and "ON CLUSTER" in v for v in views)


def test_schema_command_prints_both_flavours() -> None:
    single = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "schema"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "CREATE TABLE IF NOT EXISTS `mast`.otel_traces (" in single and "ON CLUSTER" not in single
    cluster = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "schema", "--cluster", "prod"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert cluster.count("ON CLUSTER 'prod'") >= 2 * len(TABLES) - 3
    bad = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "schema", "--cluster", "x'; DROP"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
