"""Raw span storage without Python objects: serialized OTLP trace requests straight into `otel_traces`.

The Python path decodes every span into a typed `Span`, builds a row per span and inserts the rows;
for raw span storage that is most of the collector's work. `OtlpSpanWriter` hands the request bodies
to ClickHouse as they came off the wire instead: ClickHouse parses them (input format Protobuf, the
schema travels with the insert) into the Null table `mast_otlp_requests`, and its materialized view
writes the `otel_traces` rows, value for value the rows `ClickHouseStore.insert_spans` writes for the
decoded spans (`otlp_schema` says how).

A batch holding an attribute value nested deeper than the view unrolls is refused by the view before
anything is written; the writer then stores that batch the Python way (decode, rows, insert), so the
rows are the same either way, only slower.

It works on the store's own clickhouse-connect client (`raw_insert`, chDB or server alike), so one
client still serves the whole store: chDB allows one engine per process, and its client serialises
calls anyway.

The bodies are trusted to be what the receiver accepted: check them first (`TraceDecoder`, or at
least `ExportTraceServiceRequest.FromString`, which checks structure and UTF-8 at C speed). A body
ClickHouse cannot parse fails the whole batch with a `StoreError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from mast_otel.collector.decode import TraceDecoder
from mast_otel.store import otlp_schema
from mast_otel.store.base import StoreError
from mast_otel.store.clickhouse import span_columns
from mast_otel.store.schema import DEFAULT_DATABASE, OTLP_REQUESTS, TRACES, quote_database

__all__ = ["OtlpSpanWriter", "frame_requests"]

# Settings every insert carries: the schema itself, and oneof presence, which tells an empty string
# from an unset value and an array from a kvlist.
_FORMAT_SETTINGS: Final = {
    "format_schema_source": "string",
    "format_schema": otlp_schema.PROTO_SCHEMA,
    "format_schema_message_name": otlp_schema.MESSAGE_NAME,
    "input_format_protobuf_oneof_presence": 1,
    # A replayed batch (same token) is then dropped by otel_traces too, not only by the Null table.
    "deduplicate_blocks_in_dependent_materialized_views": 1,
}
_DEFAULT_BLOCK_ROWS: Final = 1_048_449  # ClickHouse's max_insert_block_size


def frame_requests(bodies: Sequence[bytes]) -> bytes:
    """The bodies as ClickHouse's `Protobuf` input format wants them: each prefixed by its varint length."""
    parts: list[bytes] = []
    for body in bodies:
        parts.append(_varint(len(body)))
        parts.append(body)
    return b"".join(parts)


def _varint(number: int) -> bytes:
    out = bytearray()
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


class OtlpSpanWriter:
    """Stores the spans of serialized ExportTraceServiceRequests in `otel_traces`, parsed by ClickHouse.

    `client` is the store's clickhouse-connect client and `database` a database whose schema
    `ensure_schema` created (a `ClickHouseStore` on it does that). Thread-safe as far as the client is.
    """

    def __init__(self, client: Client, database: str = DEFAULT_DATABASE) -> None:
        self._client = client
        self._database = database
        self._table = f"{quote_database(database)}.{OTLP_REQUESTS.name}"
        self._decoded_in_python = 0

    @property
    def batches_decoded_in_python(self) -> int:
        """Batches the view refused (a value nested too deep) and the Python path stored instead."""
        return self._decoded_in_python

    def insert_requests(self, bodies: Sequence[bytes], dedup_token: str | None = None) -> None:
        """Store every valid span of these requests (what `TraceDecoder` keeps), in one insert.

        With `dedup_token`, inserting the same batch again with the same token stores nothing: a
        replayed spool batch is a no-op, as for the store's other inserts.
        """
        bodies = [body for body in bodies if body]  # an empty request holds no spans
        if not bodies:
            return
        settings: dict[str, object] = dict(_FORMAT_SETTINGS)
        # One block for the whole batch: the view then refuses it whole or writes it whole.
        settings["max_insert_block_size"] = max(len(bodies), _DEFAULT_BLOCK_ROWS)
        if dedup_token is not None:
            settings["insert_deduplication_token"] = dedup_token
        try:
            self._client.raw_insert(
                self._table, insert_block=frame_requests(bodies), settings=settings, fmt="Protobuf"
            )
        except (ClickHouseError, OSError) as exc:
            if otlp_schema.NESTED_TOO_DEEP not in str(exc):
                raise StoreError(
                    f"inserting {len(bodies)} OTLP trace requests into {self._table} failed: {exc}"
                    " -- a body ClickHouse cannot parse fails the batch: check bodies before storing them"
                ) from None
            self._insert_decoded(bodies, dedup_token)

    def _insert_decoded(self, bodies: Sequence[bytes], dedup_token: str | None) -> None:
        """The Python path, for a batch the view refused: the same rows, at the Python path's speed."""
        self._decoded_in_python += 1
        decoder = TraceDecoder()
        spans = [span for body in bodies for span in decoder.decode_bytes(body).spans]
        if not spans:
            return
        settings = {} if dedup_token is None else {"insert_deduplication_token": dedup_token}
        try:
            self._client.insert(
                TRACES.name,
                span_columns(spans),
                column_names=TRACES.insert_columns,
                database=self._database,
                column_oriented=True,
                settings=settings,
            )
        except (ClickHouseError, OSError) as exc:
            raise StoreError(f"inserting {len(spans)} decoded spans into otel_traces failed: {exc}") from None
