"""Overload benchmark: drive a collector at several times its sustainable rate; watch memory and delivery.

The collector runs in its own process (so its RSS is its own) on a fresh embedded store. Senders
replay OTLP/gRPC exports of the realistic GenAI mix (see ingest.py; every replay gets fresh trace
ids) at `--factor` times the rate the collector sustained in a short calibration phase. Refused
exports are retried after a pause, as OTLP exporters do, so every span is eventually delivered.

It runs at two in-flight caps (10k and 50k spans by default): the growth per span at one cap
charges the process's fixed costs to the spans, the slope between the two is what one more span
in flight costs.

    python bench/overload.py --json
    {"sent_spans": ..., "stored_spans": ..., "delivered_equals_sent": true, "refused_exports": ...,
     "peak_rss_mb": ..., "peak_spans_in_flight": ..., "bytes_per_in_flight_span": ...,
     "marginal_bytes_per_in_flight_span": ..., "runs": [...]}
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import export_call, generate_requests

from mast_otel.collector.process import CollectorProcess

RETRYABLE = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE}


class Exports:
    """Endless distinct exports from a pool: each pass over the pool rewrites the trace ids."""

    def __init__(self, pool: list[bytes]) -> None:
        self._pool = [ExportTraceServiceRequest.FromString(body) for body in pool]
        self._next = itertools.count()
        self._lock = threading.Lock()

    def take(self) -> tuple[bytes, int]:
        with self._lock:
            n = next(self._next)
        generation, index = divmod(n, len(self._pool))
        request = ExportTraceServiceRequest()
        request.CopyFrom(self._pool[index])
        spans = 0
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    span.trace_id = generation.to_bytes(4, "big") + span.trace_id[4:]
                    spans += 1
        return request.SerializeToString(), spans


def drive(
    collector: CollectorProcess,
    exports: Exports,
    rate: float,
    seconds: float,
    senders: int,
    totals: dict[str, int],
) -> None:
    lock = threading.Lock()
    started = time.monotonic()
    stop_at = started + seconds

    def sender() -> None:
        channel = grpc.insecure_channel(collector.grpc_target)
        export = export_call(channel)
        sent = 0
        while time.monotonic() < stop_at:
            body, spans = exports.take()
            pause = started + (sent + spans) / (rate / senders) - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            while True:  # as an OTLP exporter does: back off on retryable codes, then send again
                try:
                    export(body, timeout=30)
                    break
                except grpc.RpcError as exc:
                    if exc.code() not in RETRYABLE:
                        raise
                    with lock:
                        totals["refused_exports"] += 1
                    time.sleep(0.2)
            sent += spans
            with lock:
                totals["sent_spans"] += spans
        channel.close()

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# What the embedded ClickHouse engine itself holds (its own memory accounting): its share of the peak.
ENGINE_MEMORY = "SELECT value FROM system.metrics WHERE metric = 'MemoryTracking'"


def wait_stored(collector: CollectorProcess, expected: int, timeout_s: float) -> int:
    return collector.wait_for("SELECT count() FROM otel_traces", expected, timeout_s)


def overload(cap: int, args: argparse.Namespace, exports: Exports) -> dict[str, Any]:
    """One collector, calibrated, then driven at `args.factor` times its rate with `cap` spans in flight."""
    with tempfile.TemporaryDirectory(prefix="mast-overload-") as tmp:
        config = ["--config", args.collector_config] if args.collector_config else []
        collector = CollectorProcess(Path(tmp), "--grace", "0.5", "--max-in-flight-spans", str(cap), *config)
        baseline_kb = collector.rss_kb()
        calibration = {"sent_spans": 0, "refused_exports": 0}
        started = time.monotonic()
        drive(collector, exports, 1e9, 5.0, args.senders, calibration)  # flat out, briefly
        wait_stored(collector, calibration["sent_spans"], 300)
        sustainable = calibration["sent_spans"] / (time.monotonic() - started)

        totals = {"sent_spans": 0, "refused_exports": 0}
        samples: list[tuple[int, int, int]] = []  # (spans in flight, RSS KiB, engine bytes), every 100 ms
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.1):
                in_flight = int(str(collector.stats()["spans_in_flight"]))
                samples.append((in_flight, collector.rss_kb(), collector.count(ENGINE_MEMORY)))

        sampler = threading.Thread(target=sample)
        sampler.start()
        drive(collector, exports, sustainable * args.factor, args.seconds, args.senders, totals)
        done.set()
        sampler.join()
        sent = calibration["sent_spans"] + totals["sent_spans"]
        stored = wait_stored(collector, sent, 600)
        peak_kb = collector.rss_kb("VmHWM")
        collector.terminate()
    peak_in_flight = max((n for n, _, _ in samples), default=0)
    return {
        "max_in_flight_spans": cap,
        "sustainable_spans_per_s": round(sustainable),
        "offered_spans_per_s": round(sustainable * args.factor),
        "sent_spans": sent,
        "stored_spans": stored,
        "delivered_equals_sent": stored == sent,
        "refused_exports": totals["refused_exports"],
        "baseline_rss_mb": round(baseline_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "peak_engine_mb": round(max((e for _, _, e in samples), default=0) / 2**20, 1),
        "peak_spans_in_flight": peak_in_flight,
        # Charges everything the process grew by to the spans in flight: chDB's insert buffers and
        # the memory glibc keeps after free (see tune_allocator) included, so it is an upper bound.
        "bytes_per_in_flight_span": round((peak_kb - baseline_kb) * 1024 / max(1, peak_in_flight)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="overload duration (default 60)")
    parser.add_argument("--factor", type=float, default=5.0, help="times the sustainable rate (default 5)")
    parser.add_argument(
        "--max-in-flight-spans",
        default="10000,50000",
        help="in-flight caps to run at, comma-separated (default 10000,50000: two give the marginal cost)",
    )
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--collector-config", metavar="FILE", help="a collector YAML to run under load")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    caps = sorted(int(cap) for cap in args.max_in_flight_spans.split(","))
    pool, _ = generate_requests(20_000, seed=7, batch=256)
    exports = Exports(pool)
    runs = [overload(cap, args, exports) for cap in caps]
    result: dict[str, Any] = {"seconds": args.seconds, "factor": args.factor, **runs[-1], "runs": runs}
    if len(runs) > 1:
        # What one more span in flight costs: the slope between the smallest and largest cap, free of
        # what the process needs whatever the cap (the engine's insert buffers, caches, merges).
        low, high = runs[0], runs[-1]
        result["marginal_bytes_per_in_flight_span"] = round(
            (high["peak_rss_mb"] - low["peak_rss_mb"])
            * 2**20
            / max(1, high["peak_spans_in_flight"] - low["peak_spans_in_flight"])
        )
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0 if all(run["delivered_equals_sent"] for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
