"""Raw span storage benchmark: OTLP bytes -> ClickHouse (OtlpSpanWriter) vs the Python path vs a bare insert.

All three store the same spans (bench/ingest.py's realistic GenAI mix) into `otel_traces` on one
embedded chDB, in the same run, batch by batch as the collector would:

- python: `TraceDecoder.decode_bytes` + `ClickHouseStore.insert_spans` (typed spans -> rows -> insert);
- raw: `OtlpSpanWriter.insert_requests` on the request bodies (ClickHouse parses and flattens them);
- raw+check: the same after `ExportTraceServiceRequest.FromString` on every body (what a receiver
  that only validates, without decoding spans, would add);
- bare: the same rows prebuilt as an Arrow table, `insert_arrow` (the floor for storing these rows).

Each path gets a fresh database per repetition (inserts are deduplicated, a second insert of the same
batch into the same table would store nothing); the best repetition counts, as the box is shared.
GIL: each path runs again next to a Python thread that only watches the clock: `blocked_share` is
the share of the run it could not run at all, `longest_block_s` its longest wait (least of the
repetitions; the OS scheduler on a busy box adds to both). Python code hands the GIL over every
5 ms, so two Python threads block each other about half the time; a C call that keeps the GIL
blocks the watcher for the whole call; one that releases it does not block it at all.

    python bench/raw_ingest.py --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ingest import _arrow_table, generate_requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.decode import TraceDecoder
from mast_otel.store.clickhouse import ClickHouseStore, open_store, span_columns
from mast_otel.store.otlp_ingest import OtlpSpanWriter
from mast_otel.store.schema import TRACES

Batch = list[bytes]


def batches(requests: Sequence[bytes], spans_per_request: Sequence[int], batch_spans: int) -> list[Batch]:
    out: list[Batch] = [[]]
    filled = 0
    for body, count in zip(requests, spans_per_request, strict=True):
        if filled and filled + count > batch_spans:
            out.append([])
            filled = 0
        out[-1].append(body)
        filled += count
    return out


class Paths:
    """The ways of storing a batch, each into its own fresh database."""

    def __init__(self, data_dir: Path, batch_list: list[Batch]) -> None:
        self._dir = data_dir
        self._batches = batch_list
        self._databases = 0
        decoder = TraceDecoder()
        self._tables = [
            _arrow_table(span_columns([s for b in batch for s in decoder.decode_bytes(b).spans]))
            for batch in batch_list
        ]

    def fresh(self) -> ClickHouseStore:
        self._databases += 1
        return open_store(self._dir, database=f"bench{self._databases}")

    def runner(self, path: str) -> tuple[ClickHouseStore, Callable[[], None]]:
        store = self.fresh()
        client = store._client  # the store's own client: the writer shares it
        if path == "python":
            decoder = TraceDecoder()

            def run() -> None:
                for batch in self._batches:
                    store.insert_spans([s for body in batch for s in decoder.decode_bytes(body).spans])

        elif path in ("raw", "raw+check"):
            writer = OtlpSpanWriter(client, store.database)
            check = path == "raw+check"

            def run() -> None:
                for number, batch in enumerate(self._batches):
                    if check:
                        for body in batch:
                            ExportTraceServiceRequest.FromString(body)
                    writer.insert_requests(batch, dedup_token=f"bench-{number}")

        elif path == "bare":

            def run() -> None:
                for table in self._tables:
                    client.insert_arrow(TRACES.name, table, database=store.database)

        else:
            raise ValueError(path)
        return store, run


def timed(run: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def gil_probe(run: Callable[[], None]) -> tuple[float, float, float]:
    """`run` next to a Python thread that notes how long it could not run: (wall, blocked share, longest).

    The thread loops on the clock; a gap over 2 ms between two turns means it was kept from running
    (by the GIL, or by the OS on a busy box). Python code hands the GIL over every 5 ms; a C call that
    keeps it blocks the thread for the whole call.
    """
    stop = threading.Event()
    blocked = [0.0, 0.0]

    def probe() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            gap = now - last
            if gap > 0.002:
                blocked[0] += gap
                blocked[1] = max(blocked[1], gap)
            last = now

    thread = threading.Thread(target=probe)
    thread.start()
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    stop.set()
    thread.join()
    return wall, blocked[0] / wall, blocked[1]


def fixed_cost(paths: Paths, tiny: bytes, repeats: int = 5) -> dict[str, float]:
    """CPU seconds of one insert of a one-span request: what every insert pays whatever its size."""
    store = paths.fresh()
    writer = OtlpSpanWriter(store._client, store.database)
    spans = TraceDecoder().decode_bytes(tiny).spans
    raw, python = [], []
    for number in range(repeats):
        raw.append(timed(lambda n=number: writer.insert_requests([tiny], dedup_token=f"tiny-{n}"))[1])  # type: ignore[misc]
        python.append(timed(lambda: store.insert_spans(spans))[1])
    store.close()
    return {"raw_s": round(statistics.median(raw), 3), "python_s": round(statistics.median(python), 3)}


def one_span_request(body: bytes) -> bytes:
    request = ExportTraceServiceRequest.FromString(body)
    del request.resource_spans[1:]
    del request.resource_spans[0].scope_spans[1:]
    del request.resource_spans[0].scope_spans[0].spans[1:]
    return request.SerializeToString()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=20_000, help="approximate spans (default 20000)")
    parser.add_argument(
        "--batch-spans",
        type=int,
        default=20_000,
        help="spans per insert (default 20000, the pipeline's batch)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    requests, total = generate_requests(args.spans, args.seed)
    per_request = [len(TraceDecoder().decode_bytes(body).spans) for body in requests]
    batch_list = batches(requests, per_request, args.batch_spans)
    path_names = ("python", "raw", "raw+check", "bare")
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    gil: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mast-raw-bench-") as tmp:
        paths = Paths(Path(tmp), batch_list)
        for repeat in range(args.repeats):
            for name in path_names if repeat % 2 == 0 else reversed(path_names):
                store, run = paths.runner(name)
                wall, used = timed(run)
                stored = int(store.query("SELECT count() FROM otel_traces").rows[0][0])
                store.close()
                if stored != total:
                    print(f"{name}: stored {stored} of {total} spans", file=sys.stderr)
                    return 1
                if wall < best.get(name, float("inf")):
                    best[name], cpu[name] = wall, used
        for _ in range(args.repeats):  # the least blocked run: a busy box only adds to it
            for name in path_names:
                store, run = paths.runner(name)
                wall, share, longest = gil_probe(run)
                store.close()
                seen = gil.setdefault(name, {"blocked_share": 1.0, "longest_block_s": wall, "run_s": wall})
                seen["blocked_share"] = round(min(seen["blocked_share"], share), 2)
                seen["longest_block_s"] = round(min(seen["longest_block_s"], longest), 3)
                seen["run_s"] = round(min(seen["run_s"], wall), 3)
        fixed = fixed_cost(paths, one_span_request(requests[0]))
    rates = {name: total / seconds for name, seconds in best.items()}
    result: dict[str, Any] = {
        "spans": total,
        "otlp_bytes": sum(map(len, requests)),
        "inserts": len(batch_list),
        "spans_per_s": {name: round(rate) for name, rate in rates.items()},
        "ratio_vs_bare": {name: round(rate / rates["bare"], 2) for name, rate in rates.items()},
        "raw_vs_python": round(rates["raw"] / rates["python"], 2),
        "cpu_s_per_1k_spans": {name: round(1000 * cpu[name] / total, 4) for name in path_names},
        "gil": gil,
        "fixed_cpu_s_per_insert": fixed,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
