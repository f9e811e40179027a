"""Overload: past the in-flight limit senders get retryable answers, back off, and deliver everything."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from spanfactory import span, to_request

from mast_otel import sdk
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig


def test_the_otel_sdk_backs_off_and_delivers_everything(
    chdb_dir: Path, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.3, max_wait_s=5.0),
        pipeline=PipelineConfig(max_in_flight_spans=40, flush_interval_s=0.05),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    with Collector(config) as collector:
        sdk.configure(
            service_name="busy-agent", endpoint=collector.grpc_endpoint, insecure=True, set_global=False
        )
        for n in range(30):
            with sdk.agent_run("a", model="m", task=f"task {n}") as run:
                for step in range(3):
                    with run.tool_call("check", arguments={"step": step}) as tool:
                        tool.set_result("ok")
        assert sdk.force_flush()
        sdk.shutdown()
        assert collector.wait_idle(60)
        stats = collector.stats()
        assert stats.refused_exports > 0  # the limit really was hit...
        stored = collector.store.query("SELECT count(), uniqExact(SpanId) FROM otel_traces").rows[0]
        assert stored == (120, 120)  # ...and every span still arrived, once


def test_http_senders_get_429_with_retry_after(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=30, max_wait_s=60),
        pipeline=PipelineConfig(max_in_flight_spans=3),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    with Collector(config) as collector:

        def post(trace: str) -> tuple[int, str]:
            spans = [span(trace, "chat", 1, 2, parent="00000000000000aa") for _ in range(2)]
            request = urllib.request.Request(
                collector.http_endpoint + "/v1/traces",
                data=to_request(spans).SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status, ""
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers.get("Retry-After", "")

        assert post("1" * 32) == (200, "")
        status, retry_after = post("2" * 32)
        assert status == 429 and int(retry_after) >= 1
