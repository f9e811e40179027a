"""The write-ahead spool: append, read back, rotate, delete drained segments, survive torn writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mast_otel.collector.spool import Position, Spool, SpoolConfig, SpoolFull

SMALL = SpoolConfig(segment_bytes=4096, max_bytes=64 * 1024)


def records(spool: Spool, start: Position | None = None) -> list[bytes]:
    return [r.data for r in spool.read_from(start or spool.first_position())]


def test_append_and_read_back_across_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    written = [bytes([i]) * 1000 for i in range(10)]
    positions = [spool.append(r) for r in written]
    assert spool.segment_count == 2  # 4 KiB segments: rotated once past 4096 bytes
    assert positions == sorted(positions)
    assert records(spool) == written
    assert records(spool, positions[7]) == written[7:]


def test_reopen_sees_everything_and_appends_to_a_new_segment(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    for i in range(5):
        spool.append(b"r%d" % i)
    spool.close()
    reopened = Spool(tmp_path, SMALL)
    position = reopened.append(b"after")
    assert records(reopened) == [b"r0", b"r1", b"r2", b"r3", b"r4", b"after"]
    assert position.segment > 1 and position.offset == 0


def test_drained_sealed_segments_are_deleted_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    first = spool.append(b"a" * 4096)  # fills segment 1
    spool.hold(first.segment, 3)
    second = spool.append(b"b" * 4096)  # rotates: segment 2
    spool.hold(second.segment, 1)
    spool.append(b"c")  # segment 3 is active
    spool.release(second.segment, 1)
    assert (tmp_path / "segment-000000000002.wal").exists()  # segment 1 still holds spans: order is kept
    spool.release(first.segment, 3)
    assert not (tmp_path / "segment-000000000001.wal").exists()
    assert not (tmp_path / "segment-000000000002.wal").exists()
    assert records(spool) == [b"c"]


def test_unread_segments_survive_until_the_replay_passes(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    spool.append(b"x" * 4096)
    spool.append(b"y")
    spool.close()
    reopened = Spool(tmp_path, SMALL)
    reopened.release(1, 0)  # nothing held, but nothing replayed yet either
    assert records(reopened) == [b"x" * 4096, b"y"]


def test_torn_tail_stops_that_segment_only(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    spool.append(b"whole")
    spool.close()
    segment = tmp_path / "segment-000000000001.wal"
    with segment.open("ab") as handle:
        handle.write(b"\x10\x00\x00\x00\x00\x00")  # a header cut short by a crash
    reopened = Spool(tmp_path, SMALL)
    reopened.append(b"next")
    assert records(reopened) == [b"whole", b"next"]


def test_corrupt_record_is_detected(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    spool.append(b"good")
    spool.append(b"flipped")
    spool.close()
    segment = tmp_path / "segment-000000000001.wal"
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert records(Spool(tmp_path, SMALL)) == [b"good"]


def test_full_spool_refuses(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SpoolConfig(segment_bytes=4096, max_bytes=8192))
    spool.append(b"x" * 4000)
    spool.append(b"x" * 4000)
    with pytest.raises(SpoolFull):
        spool.append(b"x" * 4000)


def test_invalid_config() -> None:
    with pytest.raises(ValueError):
        SpoolConfig(segment_bytes=10)
    with pytest.raises(ValueError):
        SpoolConfig(segment_bytes=8192, max_bytes=4096)


def test_positions_have_one_spelling_and_bytes_after_counts_what_is_left(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    positions = [spool.append(bytes([i]) * 1000) for i in range(7)]
    assert positions[5] == Position(positions[4].segment + 1, 0)  # 5 records of 1008 bytes filled one
    end_of_sealed = Position(positions[4].segment, 5 * (1000 + 8))
    assert spool.normalized(end_of_sealed) == positions[5] and spool.normalized(positions[2]) == positions[2]
    assert spool.normalized(spool.end) == spool.end  # the active segment's end stays where it is
    assert spool.bytes_after(positions[5]) == 2 * 1008 and spool.bytes_after(spool.end) == 0
    assert spool.bytes_after(spool.first_position()) == spool.total_bytes


def test_a_consumer_floor_keeps_segments_until_that_consumer_moves_on(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SMALL)
    spool.set_floor("reader", 1)
    for i in range(12):
        position = spool.append(bytes([i]) * 1000)
        spool.hold(position.segment, 1)
        spool.release(position.segment, 1)
    assert spool.segment_count == 3  # drained, but the reader has not passed segment 1
    spool.set_floor("reader", 3)
    assert spool.segment_count == 1
    spool.set_floor("reader", None)
    assert records(spool) == [bytes([i]) * 1000 for i in range(10, 12)]
