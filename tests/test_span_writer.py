"""The raw span writer: the spool's requests into `otel_traces` in order, exactly once, across crashes,
outages and requests the database's parser refuses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from faults import Outage
from spanfactory import span, to_request

from mast_otel.collector.span_writer import CURSOR_FILE, RawSpanWriter, SpanWriterConfig, _digest
from mast_otel.collector.spool import Position, Spool, SpoolConfig
from mast_otel.store.base import StoreError
from mast_otel.store.clickhouse import ClickHouseStore

SMALL = SpoolConfig(segment_bytes=4096, max_bytes=16 * 1024 * 1024)
FAST = SpanWriterConfig(batch_bytes=8 * 1024, flush_interval_s=0.0, retry_initial_s=0.05, retry_max_s=0.2)


def exports(count: int, spans_each: int = 3) -> list[bytes]:
    """`count` requests of `spans_each` spans, about 1 KB each, every span distinct."""
    bodies = []
    for n in range(count):
        trace = f"{n + 1:032x}"
        spans = [
            span(
                trace,
                f"step {i}",
                1_700_000_000_000_000_000 + i,
                1_700_000_000_000_000_100 + i,
                note="x" * 300,
            )
            for i in range(spans_each)
        ]
        bodies.append(to_request(spans).SerializeToString())
    return bodies


def stored(store: ClickHouseStore) -> tuple[int, int]:
    rows, unique = store.query("SELECT count(), uniqExact(TraceId, SpanId) FROM otel_traces").rows[0]
    return int(rows), int(unique)


def drain(writer: RawSpanWriter, timeout_s: float = 30.0) -> None:
    writer.start()
    deadline = time.monotonic() + timeout_s
    while not writer.caught_up() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writer.stop(timeout_s=10)


def test_every_record_is_stored_once_and_drained_segments_go(tmp_path: Path, store: ClickHouseStore) -> None:
    spool = Spool(tmp_path, SMALL)
    for body in exports(40):
        spool.append(body)
    assert spool.segment_count > 5
    writer = RawSpanWriter(spool, store, FAST)
    drain(writer)
    assert stored(store) == (120, 120)
    stats = writer.stats()
    assert stats.requests_stored == 40 and stats.bytes_behind == 0 and stats.store_errors == 0
    # Only the active segment is left: the pipeline holds nothing, and the writer passed the rest.
    assert spool.segment_count == 1
    cursor = json.loads((tmp_path / CURSOR_FILE).read_text())
    assert cursor["pending_end"] is None and Position(*cursor["written"]) == spool.normalized(spool.end)


def test_a_segment_stays_until_the_writer_has_passed_it(tmp_path: Path, store: ClickHouseStore) -> None:
    spool = Spool(tmp_path, SMALL)
    writer = RawSpanWriter(spool, store, FAST)  # floor at the first segment, before anything is stored
    for body in exports(20):
        position = spool.append(body)
        spool.hold(position.segment, 3)
        spool.release(position.segment, 3)  # the conversation path is done with every record...
    assert spool.segment_count > 3  # ...but the raw spans are not stored yet: nothing was deleted
    drain(writer)
    assert spool.segment_count == 1 and stored(store) == (60, 60)


@pytest.mark.parametrize("inserted_before_the_crash", [True, False])
def test_a_crash_around_an_insert_stores_its_batch_exactly_once(
    tmp_path: Path, store: ClickHouseStore, inserted_before_the_crash: bool
) -> None:
    """The cursor file says a batch was pending; whether its insert landed or not, a restart stores
    it once: the same records give the same token, and ClickHouse drops a repeated insert."""
    spool = Spool(tmp_path, SMALL)
    bodies = exports(10)
    for body in bodies:
        spool.append(body)
    batch, end = bodies[:6], None
    for index, record in enumerate(spool.read_from(spool.first_position())):
        if index == 5:
            end = record.next
    assert end is not None
    start = spool.first_position()
    (tmp_path / CURSOR_FILE).write_text(
        json.dumps({"written": [start.segment, start.offset], "pending_end": [end.segment, end.offset]})
    )
    if inserted_before_the_crash:
        store.insert_otlp_requests(batch, "raw-" + _digest(batch))
        assert stored(store) == (18, 18)
    drain(RawSpanWriter(spool, store, FAST))
    assert stored(store) == (30, 30)


def test_an_unreadable_cursor_file_means_reading_the_spool_again(
    tmp_path: Path, store: ClickHouseStore
) -> None:
    spool = Spool(tmp_path, SMALL)
    for body in exports(4):
        spool.append(body)
    (tmp_path / CURSOR_FILE).write_text("{not json")
    drain(RawSpanWriter(spool, store, FAST))
    assert stored(store) == (12, 12)


def test_an_outage_delays_the_spans_and_loses_none(tmp_path: Path, store: ClickHouseStore) -> None:
    spool = Spool(tmp_path, SMALL)
    outage = Outage(store)
    outage.down.set()
    writer = RawSpanWriter(spool, outage, FAST)
    writer.start()
    for body in exports(10):
        spool.append(body)
    deadline = time.monotonic() + 5
    while writer.stats().store_errors < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writer.stats().store_errors >= 2 and not writer.caught_up()
    assert not writer.wait_stored(spool.end, timeout_s=0.2)
    outage.down.clear()
    assert writer.wait_stored(spool.end, timeout_s=20)
    assert writer.stop(timeout_s=10)
    assert stored(store) == (30, 30)


class RefusesRawRequests(Outage):
    """Reachable, but the raw protobuf insert fails, as for a request ClickHouse's parser refuses."""

    def insert_otlp_requests(self, bodies: object, dedup_token: str) -> None:
        raise StoreError("Cannot parse input: expected a protobuf message (simulated parser refusal)")


def test_a_batch_the_parser_refuses_is_stored_the_python_way(tmp_path: Path, store: ClickHouseStore) -> None:
    spool = Spool(tmp_path, SMALL)
    for body in exports(5):
        spool.append(body)
    writer = RawSpanWriter(spool, RefusesRawRequests(store), FAST)
    drain(writer)
    assert stored(store) == (15, 15)
    assert writer.stats().batches_decoded_in_python >= 1 and writer.stats().store_errors == 0
