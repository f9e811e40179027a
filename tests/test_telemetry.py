"""Self-observability: Prometheus metrics and a health endpoint that follows the store."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from faults import Outage
from prometheus_client.parser import text_string_to_metric_families
from spanfactory import agent_attrs, span, to_request

from mast_otel.collector.config import loopback
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig
from mast_otel.store.clickhouse import open_store

T = "6a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return out


def test_metrics_and_health(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    switch = Outage(open_store(chdb_dir, database=database))
    config = loopback(str(chdb_dir), database=database, spool=SpoolConfig(directory=str(tmp_path / "spool")))
    config = replace(config, telemetry=replace(config.telemetry, metrics_endpoint="127.0.0.1:0"))
    with Collector(config, store=switch) as collector:
        root = span(T, "invoke_agent a", 1, 9, **agent_attrs("a"))
        request = urllib.request.Request(
            collector.http_endpoint + "/v1/traces",
            data=to_request([root, root]).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        urllib.request.urlopen(request, timeout=10).close()
        assert collector.wait_idle(10)
        status, text = get(collector.metrics_url)
        assert status == 200
        metrics = samples(text)
        assert metrics["mast_otel_exports_total{protocol=http}"] == 1
        assert metrics["mast_otel_spans_received_total"] == 1
        assert metrics["mast_otel_spans_duplicate_total"] == 1
        assert metrics["mast_otel_spans_stored_total"] == 1
        assert metrics["mast_otel_runs_stored_total"] == 1
        assert metrics["mast_otel_annotation_seconds_count"] == 1
        assert "mast_otel_spool_bytes" in metrics and "mast_otel_traces_in_assembly" in metrics
        assert (
            metrics["mast_otel_raw_requests_stored_total"] == 1 and metrics["mast_otel_raw_bytes_behind"] == 0
        )
        status, body = get(collector.admin_url + "/api/v1/stats")
        stats = json.loads(body)
        assert (
            status == 200 and stats["raw_spans_requests_stored"] == 1 and stats["raw_spans_bytes_behind"] == 0
        )

        assert get(collector.admin_url + "/healthz") == (200, json.dumps({"status": "ok"}))
        switch.down.set()
        assert get(collector.admin_url + "/healthz")[0] == 503
        switch.down.clear()
        assert get(collector.admin_url + "/healthz")[0] == 200
