"""The write-ahead spool: every accepted export is on disk before the sender hears "OK".

Records are appended to numbered segment files (`segment-000000000001.wal`), each record framed as
`u32 length | u32 crc32 | OTLP ExportTraceServiceRequest bytes`. A segment is deleted once it is
sealed (the spool moved on to a newer one) and every span it carried is stored. Whatever is still on
disk when the collector starts, or when the database comes back after an outage, is read back in
order and goes through the pipeline again; the store's writes are idempotent, so that replay can
never double-count.

Appends are flushed to the operating system before the append returns, which survives a crash of
the collector process (SIGKILL, OOM kill). `fsync: true` also survives power loss, at the price of a
disk sync per export. A torn record at the end of a segment (a crash in the middle of a write) ends
that segment's replay with a warning; records before it are intact.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<II")  # length, crc32
_NO_FLOOR = 1 << 62
REPLAY = "replay"  # the pipeline's consumer name
_PREFIX, _SUFFIX = "segment-", ".wal"


@dataclass(frozen=True, slots=True)
class SpoolConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    directory: str = ""  # default: <embedded data dir>/spool, or ./mast-otel-spool with a server store
    segment_bytes: int = 64 * 1024 * 1024
    max_bytes: int = 2 * 1024 * 1024 * 1024  # past this, exports are refused (retryably) until it drains
    fsync: bool = False

    def __post_init__(self) -> None:
        if self.segment_bytes < 4096 or self.max_bytes < self.segment_bytes:
            raise ValueError("spool.segment_bytes must be >= 4096 and spool.max_bytes >= segment_bytes")


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a record starts: its segment and byte offset."""

    segment: int
    offset: int


@dataclass(frozen=True, slots=True)
class Record:
    position: Position
    next: Position  # where the following record starts
    data: bytes


class SpoolFull(RuntimeError):
    """The spool reached max_bytes; the sender should retry once it drains."""


class Spool:
    """Thread-safe append-only log of export requests, with per-segment reference counts."""

    def __init__(self, directory: Path, config: SpoolConfig) -> None:
        self.directory = directory
        self.config = config
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        existing = sorted(_segment_id(p) for p in directory.glob(f"{_PREFIX}*{_SUFFIX}"))
        self._sizes: dict[int, int] = {s: self._path(s).stat().st_size for s in existing}
        self._pending: dict[int, int] = dict.fromkeys(existing, 0)  # spans not yet stored, per segment
        self._active_id = (existing[-1] + 1) if existing else 1
        self._active: BinaryIO = open(self._path(self._active_id), "ab")  # noqa: SIM115 - closed in close()
        self._sizes[self._active_id] = 0
        self._pending[self._active_id] = 0
        # Consumers that read the spool in order (the pipeline's replay, the raw span writer) each
        # hold a floor: no segment from a consumer's floor on is deleted. Segments found on disk
        # are unread, so the replay's floor starts at the oldest of them.
        self._floors: dict[str, int] = {REPLAY: existing[0] if existing else _NO_FLOOR}

    # --- writing -------------------------------------------------------------------------------
    def append(self, record: bytes) -> Position:
        """Durably append one record (see module docstring for what "durably" means)."""
        with self._lock:
            if self.total_bytes + len(record) + _HEADER.size > self.config.max_bytes:
                raise SpoolFull(f"spool at {self.directory} is full ({self.config.max_bytes} bytes)")
            if self._sizes[self._active_id] >= self.config.segment_bytes:
                self._rotate()
            position = Position(self._active_id, self._sizes[self._active_id])
            self._active.write(_HEADER.pack(len(record), zlib.crc32(record)) + record)
            self._active.flush()
            if self.config.fsync:
                os.fsync(self._active.fileno())
            self._sizes[self._active_id] += _HEADER.size + len(record)
            return position

    @property
    def end(self) -> Position:
        with self._lock:
            return Position(self._active_id, self._sizes[self._active_id])

    def normalized(self, position: Position) -> Position:
        """The same place in the log, spelled canonically: the end of a sealed segment is the start
        of the next one, so positions compare as "before/after" whichever spelling they come in."""
        with self._lock:
            segment, offset = position.segment, position.offset
            while segment != self._active_id and offset >= self._sizes.get(segment, 0):
                later = [s for s in self._sizes if s > segment]
                if not later:
                    break
                segment, offset = min(later), 0
            return Position(segment, offset)

    def bytes_after(self, position: Position) -> int:
        """Bytes of the records from `position` to the end."""
        with self._lock:
            return sum(
                size - (position.offset if segment == position.segment else 0)
                for segment, size in self._sizes.items()
                if segment >= position.segment
            )

    @property
    def total_bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def segment_count(self) -> int:
        return len(self._sizes)

    # --- reference counts ----------------------------------------------------------------------
    def hold(self, segment: int, spans: int) -> None:
        with self._lock:
            if segment in self._pending:
                self._pending[segment] += spans

    def release(self, segment: int, spans: int) -> None:
        """`spans` of `segment` are stored; delete sealed segments that hold nothing unstored."""
        with self._lock:
            if segment in self._pending:
                self._pending[segment] = max(0, self._pending[segment] - spans)
            self._delete_drained(before=min(self._floors.values()))

    def reset_holds(self) -> None:
        """Forget all counts (the pipeline dropped its memory and will replay from disk)."""
        with self._lock:
            for segment in self._pending:
                self._pending[segment] = 0

    def set_floor(self, consumer: str, segment: int | None) -> None:
        """Keep every segment from `segment` on until `consumer` moves on (None: it needs none)."""
        with self._lock:
            self._floors[consumer] = _NO_FLOOR if segment is None else segment
            self._delete_drained(before=min(self._floors.values()))

    def _delete_drained(self, before: int) -> None:
        for segment in sorted(self._pending):
            if segment >= self._active_id or segment >= before:
                break
            if self._pending[segment] > 0:
                break  # keep deletion in order: an older segment with unstored spans holds the rest
            self._path(segment).unlink(missing_ok=True)
            del self._pending[segment]
            del self._sizes[segment]

    # --- reading -------------------------------------------------------------------------------
    def first_position(self) -> Position:
        with self._lock:
            return Position(min(self._sizes), 0)

    def read_from(self, start: Position) -> Iterator[Record]:
        """Records from `start` to the current end, including records appended while reading."""
        segment, offset = start.segment, start.offset
        while True:
            with self._lock:
                remaining = [s for s in self._sizes if s >= segment]
                if not remaining:
                    return
                if min(remaining) != segment:  # that segment is gone: continue with the next one
                    segment, offset = min(remaining), 0
                size = self._sizes[segment]
                active = segment == self._active_id
            if offset < size:
                yield from self._read_segment(segment, offset, size)
                offset = size
                continue  # the active segment may have grown meanwhile
            if active:
                return
            segment, offset = segment + 1, 0

    def _read_segment(self, segment: int, offset: int, size: int) -> Iterator[Record]:
        with open(self._path(segment), "rb") as handle:
            handle.seek(offset)
            while offset < size:
                header = handle.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    log.warning(
                        "spool segment %d ends in a torn record at %d; replay stops there", segment, offset
                    )
                    return
                length, checksum = _HEADER.unpack(header)
                record = handle.read(length)
                if len(record) < length or zlib.crc32(record) != checksum:
                    log.warning(
                        "spool segment %d has a damaged record at %d; replay stops there", segment, offset
                    )
                    return
                following = offset + _HEADER.size + length
                yield Record(Position(segment, offset), Position(segment, following), record)
                offset = following

    # --- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._active.close()
            if self._sizes.get(self._active_id) == 0 and self._pending.get(self._active_id) == 0:
                self._path(self._active_id).unlink(missing_ok=True)

    def _rotate(self) -> None:
        self._active.close()
        self._active_id += 1
        self._active = open(self._path(self._active_id), "ab")  # noqa: SIM115
        self._sizes[self._active_id] = 0
        self._pending[self._active_id] = 0

    def _path(self, segment: int) -> Path:
        return self.directory / f"{_PREFIX}{segment:012d}{_SUFFIX}"


def _segment_id(path: Path) -> int:
    return int(path.name.removeprefix(_PREFIX).removesuffix(_SUFFIX))
