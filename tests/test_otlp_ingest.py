"""Raw OTLP ingest: ClickHouse parses the requests and must store exactly what the Python path stores.

Every test writes the same requests twice, through `TraceDecoder` + `ClickHouseStore.insert_spans`
into one database and through `OtlpSpanWriter` into another, and compares `otel_traces` (and the
trace-id MV) row by row, every column, byte for byte in ClickHouse's own text rendering, so map key
order and float spelling count too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from mast_otel.collector.decode import DEFAULT_MAX_ATTRIBUTE_BYTES, TRUNCATION_MARKER, TraceDecoder
from mast_otel.store.base import StoreError
from mast_otel.store.clickhouse import ClickHouseStore, open_store
from mast_otel.store.otlp_ingest import OtlpSpanWriter
from mast_otel.store.otlp_schema import MAX_NESTING
from mast_otel.store.schema import TRACES

START = 1_700_000_000_123_456_789
HUGE = DEFAULT_MAX_ATTRIBUTE_BYTES + 10
_trace_ids = itertools.count(1)


def trace_id() -> bytes:
    return next(_trace_ids).to_bytes(16, "big")


def span_id(n: int) -> bytes:
    return (0x0A00_0000_0000_0000 + n).to_bytes(8, "big")


# --- building requests -------------------------------------------------------------------------------


def value(raw: object) -> AnyValue:
    """A Python value as an AnyValue: `None` unset, ("kv", [(k, v), ...]) a kvlist (keys may repeat)."""
    out = AnyValue()
    if raw is None:
        return out
    if isinstance(raw, bool):
        out.bool_value = raw
    elif isinstance(raw, int):
        out.int_value = raw
    elif isinstance(raw, float):
        out.double_value = raw
    elif isinstance(raw, bytes):
        out.bytes_value = raw
    elif isinstance(raw, str):
        out.string_value = raw
    elif isinstance(raw, tuple) and raw[:1] == ("kv",):
        out.kvlist_value.SetInParent()
        out.kvlist_value.values.extend(KeyValue(key=k, value=value(v)) for k, v in raw[1])
    elif isinstance(raw, list):
        out.array_value.SetInParent()
        out.array_value.values.extend(value(item) for item in raw)
    else:
        raise TypeError(raw)
    return out


def kvs(pairs: Sequence[tuple[str, object]]) -> list[KeyValue]:
    return [KeyValue(key=key, value=value(raw)) for key, raw in pairs]


def kv(**pairs: object) -> tuple[str, list[tuple[str, object]]]:
    return ("kv", list(pairs.items()))


def nested(depth: int) -> object:
    """An array/kvlist chain `depth` containers deep, alternating, ending in a string."""
    inner: object = "bottom"
    for level in range(depth):
        inner = [inner, level] if level % 2 == 0 else kv(level=inner)
    return inner


EVERY_KIND: list[tuple[str, object]] = [
    ("s", "plain"),
    ("empty", ""),
    ("unicode", 'é 漢字 😀 \u2028\u2029 "quoted" back\\slash a/b \\u001F <&> \x7f'),
    ("control", "tab\there\nnl\r\x00\x01\x0b\x1f\x08\x0c"),
    ("t", True),
    ("f", False),
    ("zero", 0),
    ("negative", -42),
    ("max", 2**63 - 1),
    ("min", -(2**63)),
    ("d0", 0.0),
    ("dneg0", -0.0),
    ("d", 1.5),
    ("dbig", 1e21),
    ("dhuge", 1.7976931348623157e308),
    ("dsmall", 1e-7),
    ("dsub", 5e-324),
    ("dint", 123456789.0),
    ("nan", math.nan),
    ("inf", math.inf),
    ("ninf", -math.inf),
    ("bytes", b"\x00\x01\xfe\xff"),
    ("nobytes", b""),
    ("unset", None),
    ("array", ["a", 1, 2.5, True, None, b"\x01", "x/y", "\x1f\\", "", -0.0, 1e22]),
    ("emptyarray", []),
    ("emptykv", kv()),
    ("kvlist", kv(zeta=1, alpha="a", mid=None, bin=b"\xff", f=1e22, n=-0.0, t=True, s="é\n")),
    ("dupkeys", ("kv", [("k", 1), ("j", 2), ("k", "last")])),
    ("nan_inside", [1.0, math.nan]),
    ("inf_inside", kv(a=math.inf)),
    ("deepest", nested(MAX_NESTING)),
    ("s", "the key again: last value wins, first position stays"),
]


def a_span(
    n: int, trace: bytes, *, parent: bytes = b"", start: int = START, end: int | None = None, **fields: object
) -> PbSpan:
    span = PbSpan(
        trace_id=trace,
        span_id=span_id(n),
        parent_span_id=parent,
        name=f"span {n}",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1_000 if end is None else end,
    )
    for name, field in fields.items():
        if name == "attributes":
            span.attributes.extend(kvs(field))  # type: ignore[arg-type]
        else:
            setattr(span, name, field)
    return span


def a_request(
    *resources: tuple[Sequence[tuple[str, object]], Sequence[tuple[str, str, Sequence[PbSpan]]]],
) -> bytes:
    request = ExportTraceServiceRequest()
    for resource_attributes, scopes in resources:
        resource_spans = ResourceSpans(schema_url="https://opentelemetry.io/schemas/1.26.0")
        resource_spans.resource.attributes.extend(kvs(resource_attributes))
        resource_spans.resource.dropped_attributes_count = 3
        for scope_name, scope_version, spans in scopes:
            scope_spans = ScopeSpans(spans=spans, schema_url="x")
            scope_spans.scope.name = scope_name
            scope_spans.scope.version = scope_version
            scope_spans.scope.attributes.extend(kvs([("scope.attr", 1)]))
            resource_spans.scope_spans.append(scope_spans)
        request.resource_spans.append(resource_spans)
    return request.SerializeToString()


def rich_requests() -> list[bytes]:
    trace, other = trace_id(), trace_id()
    root = a_span(1, trace, attributes=EVERY_KIND, kind=PbSpan.SPAN_KIND_SERVER, trace_state="congo=t61")
    root.flags = 0x301
    root.dropped_attributes_count = 7
    error = a_span(
        2, trace, parent=span_id(1), kind=PbSpan.SPAN_KIND_CLIENT, attributes=[("error.type", "timeout")]
    )
    error.status.code = 2
    error.status.message = "upstream timed out — réessayez"
    error.events.add(time_unix_nano=START + 5, name="exception").attributes.extend(
        kvs([("exception.message", "boom"), ("exception.escaped", False), ("n", kv(x=1))])
    )
    error.events.add(time_unix_nano=START + 6, name="no attributes")
    link = error.links.add(trace_id=other, span_id=span_id(99), trace_state="rojo=1")
    link.attributes.extend(kvs([("link.kind", "follows"), ("weight", 0.25)]))
    error.links.add(trace_id=b"\x01\x02", span_id=b"")  # odd ids in links are kept as they are
    ok = a_span(3, trace, parent=span_id(1), kind=PbSpan.SPAN_KIND_PRODUCER)
    ok.status.code = 1
    zero_length = a_span(4, trace, parent=span_id(1), end=START, kind=PbSpan.SPAN_KIND_CONSUMER)
    skewed = a_span(5, trace, parent=span_id(1), end=START - 10)  # ends before it starts
    odd_enums = a_span(6, trace, parent=span_id(1), kind=9)
    odd_enums.status.code = 7
    huge = a_span(
        7,
        trace,
        parent=span_id(1),
        name="n" * HUGE,
        attributes=[
            ("huge", "é" * HUGE),  # counted in characters, not bytes
            ("huge_bytes", b"\x01" * HUGE),
            ("huge_inside", ["x" * HUGE]),
            ("just_fits", "y" * DEFAULT_MAX_ATTRIBUTE_BYTES),
        ],
    )
    huge.status.message = "m" * HUGE
    rejected = [
        PbSpan(trace_id=b"\x00" * 16, span_id=span_id(90), start_time_unix_nano=START),
        PbSpan(trace_id=trace, span_id=b"\x01" * 3, start_time_unix_nano=START),
        PbSpan(trace_id=trace, span_id=b"\x00" * 8, start_time_unix_nano=START),
        PbSpan(trace_id=trace, span_id=span_id(91), parent_span_id=b"\x01", start_time_unix_nano=START),
        PbSpan(trace_id=trace, span_id=span_id(92), start_time_unix_nano=0),
        # Past what DateTime64(9) holds (2262): start, end, or an event.
        PbSpan(trace_id=trace, span_id=span_id(93), start_time_unix_nano=2**64 - 1),
        PbSpan(trace_id=trace, span_id=span_id(94), start_time_unix_nano=START, end_time_unix_nano=2**63),
        PbSpan(
            trace_id=trace,
            span_id=span_id(95),
            start_time_unix_nano=START,
            events=[PbSpan.Event(time_unix_nano=2**63, name="too late")],
        ),
    ]
    other_root = a_span(8, other, name="", attributes=[("k", "v")])
    # Fields of the profiles signal's string table: neither path reads them.
    other_root.attributes.add(key="strindex", key_strindex=3).value.string_value_strindex = 5
    in_array = other_root.attributes.add(key="strindex_inside").value.array_value.values
    in_array.add().string_value_strindex = 5
    in_array.add().string_value = "kept"
    first = a_request(
        (
            [("service.name", "sre-agent"), ("service.version", "1.4.0"), ("host.arch", ["amd64", "arm64"])],
            [
                ("mast_otel.sdk", "0.1.0", [root, error]),
                ("", "", [ok, zero_length, *rejected]),
            ],
        ),
        ([("service.name", 42)], [("other", "2", [skewed])]),  # not a string: unknown_service
        ([("service.name", "")], [("other", "3", [odd_enums])]),
    )
    second = a_request(
        ([("service.name", "first"), ("service.name", "last")], [("big", "1", [huge])]),
        ([], [("s", "", [other_root])]),
    )
    return [first, b"", second]


# --- comparing the two paths -------------------------------------------------------------------------


@dataclass
class Paths:
    python: ClickHouseStore
    raw: ClickHouseStore
    writer: OtlpSpanWriter

    def store_both(self, bodies: Sequence[bytes]) -> None:
        decoder = TraceDecoder()
        spans = [span for body in bodies for span in decoder.decode_bytes(body).spans]
        self.python.insert_spans(spans)
        self.writer.insert_requests(bodies)

    def rows(self, store: ClickHouseStore, where: str = "1") -> list[tuple[str, str, str]]:
        # ClickHouse's own text of every column: map key order, float spelling and nanoseconds count.
        columns = ", ".join(f"`{name}`" for name in TRACES.insert_columns)
        result = store.query(
            f"SELECT TraceId, SpanId, formatRowNoNewline('TSV', {columns}) FROM otel_traces"
            f" WHERE {where} ORDER BY TraceId, SpanId, Timestamp"
        )
        return [tuple(row) for row in result.rows]  # type: ignore[misc]

    def assert_same(self, where: str = "1") -> int:
        python_rows = self.rows(self.python, where)
        raw_rows = self.rows(self.raw, where)
        assert raw_rows == python_rows
        typed = f"SELECT * FROM otel_traces WHERE {where} ORDER BY TraceId, SpanId"
        assert self.raw.query(typed).rows == self.python.query(typed).rows
        return len(raw_rows)


_paths = itertools.count(1)


def open_paths(chdb_dir: Path, name: str) -> Paths:
    python = open_store(chdb_dir, database=f"{name}_py")
    raw = open_store(chdb_dir, database=f"{name}_raw")
    return Paths(python, raw, OtlpSpanWriter(raw._client, raw.database))


@pytest.fixture
def paths(chdb_dir: Path, database: str) -> Iterator[Paths]:
    opened = open_paths(chdb_dir, database)
    yield opened
    opened.python.close()
    opened.raw.close()


@pytest.fixture(scope="module")
def shared_paths(chdb_dir: Path) -> Iterator[Paths]:
    opened = open_paths(chdb_dir, f"otlp_ingest_{next(_paths)}")
    yield opened
    opened.python.close()
    opened.raw.close()


# --- tests ---------------------------------------------------------------------------------------------


def test_rich_requests_store_the_same_rows(paths: Paths) -> None:
    bodies = rich_requests()
    paths.store_both(bodies)
    decoded = sum(len(TraceDecoder().decode_bytes(body).spans) for body in bodies)
    assert decoded == 8
    assert paths.assert_same() == decoded
    assert paths.writer.batches_decoded_in_python == 0
    ts_sql = "SELECT TraceId, Start, End FROM otel_traces_trace_id_ts ORDER BY TraceId, Start"
    assert paths.raw.query(ts_sql).rows == paths.python.query(ts_sql).rows
    assert len(paths.raw.query(ts_sql).rows) == 2


def test_the_values_that_need_care(paths: Paths) -> None:
    """Spot checks, so that "both paths agree" cannot hide both being wrong the same way."""
    paths.store_both(rich_requests())
    span_1 = "SELECT SpanAttributes FROM otel_traces WHERE SpanName = 'span 1'"
    attributes = paths.raw.query(span_1).rows[0][0]
    assert attributes["dbig"] == "1e+21" and attributes["dsmall"] == "1e-7" and attributes["dneg0"] == "-0"
    assert (
        attributes["nan"] == "json: unsupported value: NaN"
        and attributes["ninf"] == "json: unsupported value: -Inf"
    )
    assert attributes["bytes"] == "AAH+/w==" and attributes["unset"] == "" and attributes["empty"] == ""
    assert attributes["array"] == '["a",1,2.5,true,null,"AQ==","x/y","\\u001f\\\\","",-0,1e+22]'
    kvlist = '{"alpha":"a","bin":"/w==","f":1e+22,"mid":null,"n":-0,"s":"é\\n","t":true,"zeta":1}'
    assert attributes["kvlist"] == kvlist
    assert attributes["dupkeys"] == '{"j":2,"k":"last"}'
    assert attributes["nan_inside"] == "" and attributes["inf_inside"] == ""
    assert attributes["emptyarray"] == "[]" and attributes["emptykv"] == "{}"
    assert attributes["s"].startswith("the key again")
    assert next(iter(attributes)) == "s"
    huge = paths.raw.query(
        "SELECT SpanAttributes, lengthUTF8(SpanName), StatusMessage FROM otel_traces"
        " WHERE SpanName LIKE 'nnn%'"
    ).rows[0]
    assert huge[0]["huge"].endswith(TRUNCATION_MARKER) and len(huge[0]["huge"]) == DEFAULT_MAX_ATTRIBUTE_BYTES
    assert huge[0]["just_fits"] == "y" * DEFAULT_MAX_ATTRIBUTE_BYTES
    assert huge[1] == DEFAULT_MAX_ATTRIBUTE_BYTES and huge[2].endswith(TRUNCATION_MARKER)
    kinds = paths.raw.query(
        "SELECT SpanName, SpanKind, StatusCode, ServiceName, Duration FROM otel_traces ORDER BY SpanName"
    ).rows
    assert ("span 2", "Client", "Error", "sre-agent", 1_000) in kinds
    assert ("span 5", "Unspecified", "Unset", "unknown_service", 0) in kinds
    assert ("span 6", "Unspecified", "Unset", "unknown_service", 1_000) in kinds
    assert ("", "Unspecified", "Unset", "unknown_service", 1_000) in kinds
    other = paths.raw.query("SELECT SpanAttributes FROM otel_traces WHERE SpanName = ''").rows[0][0]
    assert other == {"k": "v", "strindex": "", "strindex_inside": '[null,"kept"]'}


def test_values_nested_deeper_than_the_view_unrolls_go_the_python_way(paths: Paths) -> None:
    trace = trace_id()
    deep_span = a_span(1, trace, attributes=[("deep", nested(MAX_NESTING + 1))])
    deep = a_request(([], [("s", "", [deep_span])]))
    flat = a_request(([], [("s", "", [a_span(2, trace, attributes=[("flat", nested(MAX_NESTING))])])]))
    paths.store_both([flat, deep])
    assert paths.writer.batches_decoded_in_python == 1
    assert paths.assert_same() == 2
    stored = paths.raw.query("SELECT SpanAttributes['deep'] FROM otel_traces WHERE SpanName = 'span 1'")
    assert '"bottom"' in stored.rows[0][0]
    paths.writer.insert_requests([flat, deep], dedup_token="deep-batch")
    paths.writer.insert_requests([flat, deep], dedup_token="deep-batch")  # a replay, dropped
    assert paths.raw.query("SELECT count() FROM otel_traces").rows[0][0] == 4
    assert paths.writer.batches_decoded_in_python == 3


def test_a_replayed_batch_is_stored_once(paths: Paths) -> None:
    bodies = rich_requests()
    paths.writer.insert_requests(bodies, dedup_token="batch-1")
    paths.writer.insert_requests(bodies, dedup_token="batch-1")
    assert paths.raw.query("SELECT count() FROM otel_traces").rows[0][0] == 8
    assert paths.raw.query("SELECT count() FROM otel_traces_trace_id_ts").rows[0][0] == 2
    paths.writer.insert_requests(bodies[:1], dedup_token="batch-2")
    assert paths.raw.query("SELECT count() FROM otel_traces").rows[0][0] == 8 + 6


def test_garbage_fails_the_batch_with_a_store_error(paths: Paths) -> None:
    with pytest.raises(StoreError, match="OTLP trace requests"):
        paths.writer.insert_requests([rich_requests()[0], b"\x0a\xff\xff\xff\xff\x0f garbage"])
    assert paths.raw.query("SELECT count() FROM otel_traces").rows[0][0] == 0
    paths.writer.insert_requests([])  # nothing to do is not an error
    paths.writer.insert_requests([b""])


# --- any value at all ----------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=20),
    st.text(max_size=30),  # any code point but lone surrogates, control characters included
)


def _values(depth: int) -> st.SearchStrategy[object]:
    if depth == 0:
        return _scalars
    inner = _values(depth - 1)
    return st.one_of(
        _scalars,
        st.lists(inner, max_size=4),
        st.lists(st.tuples(st.text(max_size=8), inner), max_size=4).map(lambda pairs: ("kv", pairs)),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attributes=st.lists(st.tuples(st.text(max_size=10), _values(MAX_NESTING)), max_size=12))
def test_any_attributes_store_the_same_strings(
    shared_paths: Paths, attributes: list[tuple[str, object]]
) -> None:
    trace = trace_id()
    span = a_span(1, trace, attributes=attributes)
    span.events.add(time_unix_nano=START, name="e").attributes.extend(kvs(attributes[:3]))
    body = a_request((attributes[3:6], [("scope", "1", [span])]))
    shared_paths.store_both([body])
    assert shared_paths.assert_same(f"TraceId = '{trace.hex()}'") == 1
    assert shared_paths.writer.batches_decoded_in_python == 0  # all of it went through ClickHouse
