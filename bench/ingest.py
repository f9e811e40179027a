"""Ingest benchmark: end-to-end OTLP/gRPC -> stored (with findings) vs a bare chDB insert of the same rows.

Both are measured in the same run on the same machine, so the ratio is meaningful on a shared,
noisy box where absolute numbers are not; each is repeated (`--repeat`, fresh database each time,
alternating) and the best repetition counts. CPU seconds per 1k spans (all threads of the process,
the database engine's included) are reported too: they depend less on what else the box is doing.

- e2e: pre-serialized OTLP export requests (a realistic GenAI span mix: about 30% of spans carry
  2-8 KB message payloads) are sent over real gRPC to an in-process collector on an embedded chDB
  store; the clock stops when every span, conversation and finding is stored.
- bare: the same spans' `otel_traces` rows, prebuilt as an Arrow table, inserted into chDB.

    python bench/ingest.py --json
    {"e2e_spans_per_s": ..., "bare_insert_rows_per_s": ..., "ratio": ..., "cpu_ms_per_1k_spans": ...}
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel import sdk
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.decode import TraceDecoder
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector, tune_runtime
from mast_otel.store.clickhouse import open_store, span_columns
from mast_otel.store.schema import TRACES

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def export_call(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """OTLP/gRPC trace Export on `channel`, taking request bodies already serialized."""
    return channel.unary_unary(
        EXPORT, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString
    )


WORDS = ("pod", "latency", "error", "rollout", "memory", "restart", "upstream", "timeout", "node", "cpu")


def _payload(rng: random.Random) -> str:
    """2-8 KB of log-like text."""
    size = rng.randint(2048, 8192)
    text = " ".join(rng.choices(WORDS, k=size // 5 + 1))
    return text[:size]


def generate_requests(target_spans: int, seed: int, batch: int = 512) -> tuple[list[bytes], int]:
    """Realistic agent runs through the SDK, encoded as the OTLP exporter would send them."""
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    sdk.configure(service_name="bench-agent", exporter=exporter, set_global=False)
    emitted = 0
    while emitted < target_spans:
        task = "Investigate alert " + _payload(rng)[:200]
        with sdk.agent_run("triage", model="sim-bench", task=task) as run:
            history: list[dict[str, str]] = [{"role": "user", "content": "Investigate the alert."}]
            for step in range(rng.randint(3, 6)):
                # chat spans (1 in 3) carry the 2-8 KB payloads; tool, reasoning and root spans are small
                prompt = [*history[-2:], {"role": "user", "content": _payload(rng)}]
                with run.chat(input_messages=prompt) as call:
                    call.set_response(
                        text="next step",
                        tool_calls=[{"id": f"c{step}", "name": "query_metrics", "arguments": {"q": "up"}}],
                        input_tokens=900,
                        output_tokens=60,
                    )
                run.reasoning("Checking metrics for the failing service.")
                with run.tool_call("query_metrics", arguments={"q": "up"}, call_id=f"c{step}") as tool:
                    tool.set_result({"value": rng.random()})
                history.append({"role": "assistant", "content": "step done"})
            run.set_outcome("success" if rng.random() < 0.5 else "failure", score=rng.random())
        sdk.force_flush()
        emitted = len(exporter.get_finished_spans())
    sdk.shutdown()
    spans: list[ReadableSpan] = list(exporter.get_finished_spans())
    # Whole traces per request (about `batch` spans each): a trace cut off at the end of a run would
    # otherwise wait out max_wait for its root and measure the timeout instead of the collector.
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    requests: list[bytes] = []
    chunk: list[ReadableSpan] = []
    for trace_spans in by_trace.values():
        chunk.extend(trace_spans)
        if len(chunk) >= batch:
            requests.append(encode_spans(chunk).SerializeToString())
            chunk = []
    if chunk:
        requests.append(encode_spans(chunk).SerializeToString())
    return requests, len(spans)


@dataclass(frozen=True)
class Measured:
    seconds: float
    cpu_seconds: float  # user + system, every thread of this process
    stored: int
    findings: int = 0


def measure_e2e(requests: list[bytes], data_dir: Path, database: str, senders: int = 2) -> Measured:
    config = loopback(
        str(data_dir),
        database=database,
        http=False,
        admin=False,
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=30.0),
        pipeline=PipelineConfig(max_in_flight_spans=1_000_000),
    )
    with Collector(config) as collector:
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}")
        export = export_call(channel)
        lock = threading.Lock()
        pending = list(reversed(requests))

        def send() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    body = pending.pop()
                export(body, timeout=60)

        started, cpu_started = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(senders) as pool:
            for future in [pool.submit(send) for _ in range(senders)]:
                future.result()
        if not collector.wait_idle(600):
            raise RuntimeError("collector did not store everything within 600 s")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        channel.close()
        stats = collector.stats()
    return Measured(elapsed, cpu, stats.spans_stored, stats.findings_stored)


def _arrow_table(columns: list[list[Any]]) -> pa.Table:
    text_map = pa.map_(pa.string(), pa.string())
    types: dict[str, pa.DataType] = {
        "Timestamp": pa.timestamp("ns"),
        "Duration": pa.uint64(),
        "ResourceAttributes": text_map,
        "SpanAttributes": text_map,
        "Events.Timestamp": pa.list_(pa.timestamp("ns")),
        "Events.Name": pa.list_(pa.string()),
        "Events.Attributes": pa.list_(text_map),
        "Links.TraceId": pa.list_(pa.string()),
        "Links.SpanId": pa.list_(pa.string()),
        "Links.TraceState": pa.list_(pa.string()),
        "Links.Attributes": pa.list_(text_map),
    }
    arrays = []
    for name, values in zip(TRACES.insert_columns, columns, strict=True):
        kind = types.get(name, pa.string())
        if isinstance(kind, pa.MapType):
            values = [list(v.items()) for v in values]
        elif kind == pa.list_(text_map):
            values = [[list(m.items()) for m in v] for v in values]
        arrays.append(pa.array(values, type=kind))
    return pa.Table.from_arrays(arrays, names=list(TRACES.insert_columns))


def bare_table(requests: list[bytes]) -> pa.Table:
    decoder = TraceDecoder()
    spans = [span for body in requests for span in decoder.decode_bytes(body).spans]
    return _arrow_table(span_columns(spans))


def measure_bare(table: pa.Table, data_dir: Path, database: str) -> Measured:
    store = open_store(data_dir, database=database)
    client = store._client  # the raw clickhouse-connect client: no pipeline, no conversion
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        client.insert_arrow(TRACES.name, table, database=database)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        stored = int(store.query("SELECT count() FROM otel_traces").rows[0][0])
    finally:
        store.close()
    return Measured(elapsed, cpu, stored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=30_000, help="approximate spans to send (default 30000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each; the best counts")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    requests, total = generate_requests(args.spans, args.seed)
    tune_runtime()  # as `mast-otel collector` does
    payload_bytes = sum(len(r) for r in requests)
    table = bare_table(requests)
    e2e: list[Measured] = []
    bare: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="mast-bench-") as tmp:
        for repetition in range(args.repeat):
            bare.append(measure_bare(table, Path(tmp), f"bare_{repetition}"))
            e2e.append(measure_e2e(requests, Path(tmp), f"e2e_{repetition}"))
    for e2e_run, bare_run in zip(e2e, bare, strict=True):
        if e2e_run.stored != total or bare_run.stored != total:
            print(
                f"count mismatch: sent {total}, e2e stored {e2e_run.stored}, bare stored {bare_run.stored}",
                file=sys.stderr,
            )
            return 1
    best_e2e = min(run.seconds for run in e2e)
    best_bare = min(run.seconds for run in bare)
    payload_spans = sum(
        1
        for body in requests
        for s in TraceDecoder().decode_bytes(body).spans
        if len(s.text("gen_ai.input.messages")) >= 2048
    )
    result = {
        "spans": total,
        "payload_span_share": round(payload_spans / total, 2),
        "otlp_bytes": payload_bytes,
        "findings": e2e[0].findings,
        "repeat": args.repeat,
        "e2e_spans_per_s": round(total / best_e2e),
        "bare_insert_rows_per_s": round(total / best_bare),
        "ratio": round(best_bare / best_e2e, 3),
        "cpu_ms_per_1k_spans": {
            "e2e": round(min(run.cpu_seconds for run in e2e) / total * 1e6, 1),
            "bare": round(min(run.cpu_seconds for run in bare) / total * 1e6, 1),
        },
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
