"""OTLP trace requests as ClickHouse reads them: the protobuf schema, the landing columns, the flattening SQL.

ClickHouse parses serialized `ExportTraceServiceRequest`s itself (input format `Protobuf`), one row
per request, into a Null-engine landing table whose nested columns mirror the messages. A
materialized view ARRAY JOINs resource -> scope -> span and computes the `otel_traces` columns
exactly as the Python path does (`TraceDecoder` then `ClickHouseStore.insert_spans`): the same
validation, truncation, SpanKind/StatusCode spellings and attribute strings (pdata's
`Value.AsString`, see `clickhouse.attribute_to_string`). No Python object per span is built.

The protobuf schema is a wire-compatible subset of opentelemetry-proto (same field numbers; enums
read as int32 so unknown values cannot fail a batch) and travels with each insert
(`format_schema_source = 'string'`, ClickHouse >= 25.9 with `input_format_protobuf_oneof_presence`),
so nothing has to be installed next to a ClickHouse server.

AnyValue is recursive, ClickHouse column types are not: the landing columns unroll arrays and
kvlists `MAX_NESTING` levels below a top-level value. Each level doubles the column tree (an array
and a kvlist branch) and ClickHouse analyses a materialized view's query on every insert, so every
level costs each insert time: one level covers the values the specification allows on spans (arrays
of primitives) and flat maps. A request holding a value nested deeper makes the view fail the insert
with `NESTED_TOO_DEEP` before anything is written; `OtlpSpanWriter` then stores that batch through
the Python path. So the rows are always the Python path's rows.
"""

from __future__ import annotations

from typing import Final

from mast_otel.collector.decode import DEFAULT_MAX_ATTRIBUTE_BYTES, MAX_TIME_NS, TRUNCATION_MARKER

# Containers (arrays, kvlists) unrolled below a top-level attribute value.
MAX_NESTING: Final = 1
NESTED_TOO_DEEP: Final = "mast-otel: an attribute value nests deeper than the ClickHouse ingest unrolls"
MESSAGE_NAME: Final = "ExportTraceServiceRequest"

PROTO_SCHEMA: Final = """\
syntax = "proto3";
// Wire-compatible subset of opentelemetry-proto (collector/trace/v1, trace/v1, common/v1, resource/v1):
// same field numbers; fields mast-otel does not store are left out and skipped by the reader.
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  repeated Event events = 11;
  repeated Link links = 13;
  Status status = 15;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
message Link {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4;
}
message Status { string message = 2; int32 code = 3; }
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
    int32 string_value_strindex = 8;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
"""

# `input_format_protobuf_oneof_presence` fills this column with the number of the field that was set.
_ONEOF = (
    "Enum8('none' = 0, 'string' = 1, 'bool' = 2, 'int' = 3, 'double' = 4, 'array' = 5, 'kvlist' = 6, "
    "'bytes' = 7, 'strindex' = 8)"
)
_LIMIT = DEFAULT_MAX_ATTRIBUTE_BYTES  # characters, as TraceDecoder counts them
_ALL = 1 << 30  # a substring length longer than any string
_KINDS = ("Internal", "Server", "Client", "Producer", "Consumer")  # SpanKind 1..5; anything else Unspecified


# --- landing columns -------------------------------------------------------------------------------


def _any_value_type(levels: int) -> str:
    """AnyValue with `levels` more levels of arrays/kvlists below it."""
    scalars = (
        f"value {_ONEOF}, string_value String, bool_value Bool, int_value Int64, "
        "double_value Float64, bytes_value String"
    )
    if levels == 0:
        return f"Tuple({scalars})"
    inner = _any_value_type(levels - 1)
    return (
        f"Tuple({scalars}, array_value Tuple(values Array({inner})), "
        f"kvlist_value Tuple(values Array(Tuple(key String, value {inner}))))"
    )


def landing_columns() -> str:
    """The landing table's one column: a request's resource_spans, nested as the messages are."""
    attributes = f"Array(Tuple(key String, value {_any_value_type(MAX_NESTING)}))"
    return f"""resource_spans Array(Tuple(
        resource Tuple(attributes {attributes}),
        scope_spans Array(Tuple(
            scope Tuple(name String, version String),
            spans Array(Tuple(
                trace_id String,
                span_id String,
                trace_state String,
                parent_span_id String,
                name String,
                kind Int32,
                start_time_unix_nano UInt64,
                end_time_unix_nano UInt64,
                attributes {attributes},
                events Array(Tuple(time_unix_nano UInt64, name String, attributes {attributes})),
                links Array(Tuple(
                    trace_id String, span_id String, trace_state String, attributes {attributes})),
                status Tuple(message String, code Int32)))))))"""


# --- SQL expressions -------------------------------------------------------------------------------
#
# ClickHouse analyses a materialized view's query again for every insert, so the size of this SQL is
# a fixed cost per batch: two `attribute_string`s serve all attribute lists, each AnyValue level
# names the next level once, and `_let` binds what would otherwise be written twice.


def sql_string(text: str) -> str:
    """`text` as a ClickHouse string literal."""
    out = []
    for char in text:
        if char in "\\'":
            out.append("\\" + char)
        elif ord(char) < 0x20:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


def _let(name: str, value: str, body: str) -> str:
    """`body` with `name` bound to `value`, which is then written (and analysed) once."""
    return f"arrayMap({name} -> {body}, [{value}])[1]"


def _truncated(text: str) -> str:
    """TraceDecoder._text: a string over the limit (in characters) keeps its head and gets the marker."""
    keep = _LIMIT - len(TRUNCATION_MARKER)
    return (
        f"if(length({text}) <= {_LIMIT} OR lengthUTF8({text}) <= {_LIMIT}, {text}, "
        f"concat(substringUTF8({text}, 1, {keep}), {sql_string(TRUNCATION_MARKER)}))"
    )


def _clipped_bytes(data: str) -> str:
    return f"substring({data}, 1, {_LIMIT})"


def _go_float(number: str) -> str:
    """Go's float formatting: ClickHouse prints the same shortest digits, but `1e21` for Go's `1e+21`."""
    return f"if(abs({number}) >= 1e21, replaceOne(toString({number}), 'e', 'e+'), toString({number}))"


# json.dumps' escapes, used for strings with control characters: toJSONString writes \u001F where
# Python (and Go) write \u001f.
_JSON_ESCAPES: Final = {
    **{chr(code): f"\\u{code:04x}" for code in range(0x20)},
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    '"': '\\"',
    "\\": "\\\\",
}
_ESCAPE_FROM: Final = "[" + ", ".join(sql_string(raw) for raw in _JSON_ESCAPES) + "]"
_ESCAPE_TO: Final = "[" + ", ".join(sql_string(escaped) for escaped in _JSON_ESCAPES.values()) + "]"
_ESCAPED_SLASH: Final = sql_string("\\/")
_CONTROL_CHARACTER: Final = sql_string("[\\x00-\\x1f]")
_LINE_SEPARATORS: Final = (("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def _json_string(text: str) -> str:
    """`text` as a JSON string, as `clickhouse._go_json_string` writes it (json.dumps, U+2028/9 escaped)."""
    # toJSONString escapes "/" as "\/"; each "\/" it writes is such an escape, so this undoes just those.
    common = f"replaceAll(toJSONString(t), {_ESCAPED_SLASH}, '/')"
    # Strings with control characters are escaped byte by byte instead (rare, and slower). A byte of a
    # multi-byte character never matches: UTF-8 continuation and lead bytes are all >= 0x80.
    by_byte = f"arrayMap(b -> transform(b, {_ESCAPE_FROM}, {_ESCAPE_TO}, b), splitByRegexp('', t))"
    escaped = f"arrayStringConcat({by_byte})"
    for raw, replacement in _LINE_SEPARATORS:
        escaped = f"replaceAll({escaped}, {sql_string(raw)}, {sql_string(replacement)})"
    return _let("t", text, f"if(match(t, {_CONTROL_CHARACTER}), concat('\"', {escaped}, '\"'), {common})")


# Marks a NaN or infinity inside a container. NUL never appears raw in the JSON built here (strings
# escape it), so finding one means Go's json.Marshal would have failed: the whole value is then "".
_NON_FINITE: Final = "'\\x00'"


def _json(value: str, levels: int) -> str:
    """An AnyValue inside an array or kvlist, as `clickhouse._go_json` writes it."""
    kind, double = f"{value}.value", f"{value}.double_value"
    branches = [
        (f"{kind} = 'string'", _json_string(_truncated(f"{value}.string_value"))),
        (f"{kind} = 'bool'", f"if({value}.bool_value, 'true', 'false')"),
        (f"{kind} = 'int'", f"toString({value}.int_value)"),
        (f"{kind} = 'double'", f"if(isFinite({double}), {_go_float(double)}, {_NON_FINITE})"),
        (f"{kind} = 'bytes'", f"concat('\"', base64Encode({_clipped_bytes(f'{value}.bytes_value')}), '\"')"),
    ]
    if levels > 0:  # deeper containers never get here: `_nests_too_deep` stops their request
        # A value is an array or a kvlist, never both: one list of (key, value) members serves either.
        # A kvlist keeps the last value per key (dict(...)) and is sorted by key (Go's json.Marshal).
        member = f"m{levels}"
        reversed_pairs = f"arrayReverse({value}.kvlist_value.values)"
        last_per_key = (
            f"arrayFilter(({member}, n) -> n = 1, {reversed_pairs}, "
            f"arrayEnumerateUniq(arrayMap({member} -> {member}.key, {reversed_pairs})))"
        )
        members = (
            f"arrayConcat(arrayMap({member} -> ('', {member}), {value}.array_value.values), "
            f"arraySort({member} -> {member}.key, {last_per_key}))"
        )
        key = f"if({kind} = 'kvlist', concat({_json_string(f'{member}.1')}, ':'), '')"
        rendered = f"arrayMap({member} -> concat({key}, {_json(f'{member}.2', levels - 1)}), {members})"
        opening, closing = f"if({kind} = 'array', '[', '{{')", f"if({kind} = 'array', ']', '}}')"
        brackets = f"{opening}, arrayStringConcat({rendered}, ','), {closing}"
        branches.append((f"{kind} IN ('array', 'kvlist')", f"concat({brackets})"))
    return "multiIf(" + ", ".join(f"{cond}, {result}" for cond, result in branches) + ", 'null')"


def attribute_string(value: str) -> str:
    """SQL for a top-level AnyValue as `clickhouse.attribute_to_string` writes it after decoding."""
    kind, double = f"{value}.value", f"{value}.double_value"
    non_finite = (
        f"concat('json: unsupported value: ', if(isNaN({double}), 'NaN', if({double} > 0, '+Inf', '-Inf')))"
    )
    container = _let("j", _json(value, MAX_NESTING), f"if(position(j, {_NON_FINITE}) > 0, '', j)")
    others = (
        f"multiIf({kind} = 'bool', if({value}.bool_value, 'true', 'false'), "
        f"{kind} = 'int', toString({value}.int_value), "
        f"{kind} = 'double', if(isFinite({double}), {_go_float(double)}, {non_finite}), "
        f"{kind} = 'bytes', base64Encode({_clipped_bytes(f'{value}.bytes_value')}), "
        f"{kind} IN ('array', 'kvlist'), {container}, "
        "'')"
    )
    # Most values are strings, often kilobytes long: a multiIf branch would copy them through a
    # filter and back, concatenating them with the other kinds' (empty) text is twice as fast. The
    # substring keeps out a string that is not the value (a later member of the oneof won).
    string = f"substring({_truncated(f'{value}.string_value')}, 1, if({kind} = 'string', {_ALL}, 0))"
    return f"concat({string}, {others})"


def _attribute_keys(pairs: str) -> str:
    return f"arrayMap(kv -> kv.key, {pairs})"


def _attribute_values(pairs: str) -> str:
    return f"arrayMap(kv -> {attribute_string('kv.value')}, {pairs})"


def _as_map(keys: str, values: str) -> str:
    """A Map like the dict the Python path builds from these pairs: first position, last value per key.

    `keys` and `values` are names (aliases, lambda arguments): each is used more than once here.
    """
    # Duplicate keys break the OTel spec but do arrive; only rows with some pay for the reordering,
    # and no lambda captures the values (that would copy them once per element).
    last = f"arrayMap(i -> arrayLastIndex(k -> k = {keys}[i], {keys}) = i, arrayEnumerate({keys}))"
    first = f"arrayMap(k -> indexOf({keys}, k), {keys})"

    def kept(items: str) -> str:
        positions = f"arrayFilter((p, l) -> l, {first}, {last})"
        return f"arraySort((x, p) -> p, arrayFilter((x, l) -> l, {items}, {last}), {positions})"

    return (
        f"if(arrayUniq({keys}) = length({keys}), mapFromArrays({keys}, {values}), "
        f"mapFromArrays({kept(keys)}, {kept(values)}))"
    )


def attribute_map(pairs: str) -> str:
    """SQL for a KeyValue array as the Map the Python path inserts (for small arrays: copies them)."""
    return _let(
        "pairs",
        pairs,
        _let(
            "keys",
            _attribute_keys("pairs"),
            _let("values", _attribute_values("pairs"), _as_map("keys", "values")),
        ),
    )


# --- the flattening query ------------------------------------------------------------------------


def _nanoseconds(value: str) -> str:
    return f"fromUnixTimestamp64Nano(toInt64({value}))"


def _hex(value: str) -> str:
    return f"lower(hex({value}))"


def _valid_span(span: str) -> str:
    """TraceDecoder's `_invalid`, negated: spans it would reject are not stored either."""
    return (
        f"length({span}.trace_id) = 16 AND {span}.trace_id != repeat('\\x00', 16) "
        f"AND length({span}.span_id) = 8 AND {span}.span_id != repeat('\\x00', 8) "
        f"AND (empty({span}.parent_span_id) OR length({span}.parent_span_id) = 8) "
        f"AND {span}.start_time_unix_nano != 0 "
        f"AND {span}.start_time_unix_nano <= {MAX_TIME_NS} AND {span}.end_time_unix_nano <= {MAX_TIME_NS} "
        f"AND arrayAll(e -> e.time_unix_nano <= {MAX_TIME_NS}, {span}.events)"
    )


def _nests_deeper(value: str, levels: int) -> str:
    """Whether an AnyValue holds containers more than `levels` deep (which the landing types cut off)."""
    if levels == 0:
        return f"{value}.value IN ('array', 'kvlist')"
    item, pair = f"d{levels}", f"p{levels}"
    in_array = f"arrayExists({item} -> {_nests_deeper(item, levels - 1)}, {value}.array_value.values)"
    in_kvlist = (
        f"arrayExists({pair} -> {_nests_deeper(f'{pair}.value', levels - 1)}, {value}.kvlist_value.values)"
    )
    return f"({in_array} OR {in_kvlist})"


def _nests_too_deep(resource_spans: str) -> str:
    """Whether any attribute value of a request nests deeper than `MAX_NESTING`."""

    def any_deep(pairs: str) -> str:
        return f"arrayExists(kv -> {_nests_deeper('kv.value', MAX_NESTING)}, {pairs})"

    in_span = (
        f"{any_deep('sp.attributes')} OR arrayExists(e -> {any_deep('e.attributes')}, sp.events) "
        f"OR arrayExists(l -> {any_deep('l.attributes')}, sp.links)"
    )
    return (
        f"arrayExists(rs -> {any_deep('rs.resource.attributes')} "
        f"OR arrayExists(ss -> arrayExists(sp -> {in_span}, ss.spans), rs.scope_spans), {resource_spans})"
    )


def flatten_select(landing: str) -> str:
    """SELECT turning landing rows (one per request) into `otel_traces` rows, in request order."""
    kinds = ", ".join(sql_string(kind) for kind in _KINDS)
    service = "service_name_value"
    # Span attributes (where the kilobytes are) are stringified in place. The other attribute lists
    # (resource, events, links: small) share one attribute_map, so its SQL is analysed once more only.
    return f"""
WITH
    {_attribute_keys("span.attributes")} AS span_keys,
    {_attribute_values("span.attributes")} AS span_values,
    arrayMap(
        list -> {attribute_map("list")},
        arrayConcat(
            [resource_spans.resource.attributes],
            arrayMap(e -> e.attributes, span.events),
            arrayMap(l -> l.attributes, span.links)
        )
    ) AS other_maps,
    arrayLast(kv -> kv.key = 'service.name', resource_spans.resource.attributes).value AS {service}
SELECT
    {_nanoseconds("span.start_time_unix_nano")} AS Timestamp,
    {_hex("span.trace_id")} AS TraceId,
    {_hex("span.span_id")} AS SpanId,
    {_hex("span.parent_span_id")} AS ParentSpanId,
    span.trace_state AS TraceState,
    if(length(span.name) <= {_LIMIT}, span.name, substringUTF8(span.name, 1, {_LIMIT})) AS SpanName,
    transform(span.kind, [1, 2, 3, 4, 5], [{kinds}], 'Unspecified') AS SpanKind,
    if({service}.value = 'string' AND {service}.string_value != '',
       {_truncated(f"{service}.string_value")}, 'unknown_service') AS ServiceName,
    other_maps[1] AS ResourceAttributes,
    scope_spans.scope.name AS ScopeName,
    scope_spans.scope.version AS ScopeVersion,
    {_as_map("span_keys", "span_values")} AS SpanAttributes,
    if(span.end_time_unix_nano > span.start_time_unix_nano,
       span.end_time_unix_nano - span.start_time_unix_nano, 0) AS Duration,
    transform(span.status.code, [1, 2], ['Ok', 'Error'], 'Unset') AS StatusCode,
    {_truncated("span.status.message")} AS StatusMessage,
    arrayMap(e -> {_nanoseconds("e.time_unix_nano")}, span.events) AS `Events.Timestamp`,
    arrayMap(e -> e.name, span.events) AS `Events.Name`,
    arraySlice(other_maps, 2, length(span.events)) AS `Events.Attributes`,
    arrayMap(l -> {_hex("l.trace_id")}, span.links) AS `Links.TraceId`,
    arrayMap(l -> {_hex("l.span_id")}, span.links) AS `Links.SpanId`,
    arrayMap(l -> l.trace_state, span.links) AS `Links.TraceState`,
    arraySlice(other_maps, 2 + length(span.events)) AS `Links.Attributes`
FROM (
    -- Before any row is made, so that a request it stops leaves nothing half-written.
    SELECT resource_spans FROM {landing}
    WHERE NOT throwIf({_nests_too_deep("resource_spans")}, {sql_string(NESTED_TOO_DEEP)})
)
ARRAY JOIN resource_spans
ARRAY JOIN resource_spans.scope_spans AS scope_spans
ARRAY JOIN scope_spans.spans AS span
WHERE {_valid_span("span")}"""
