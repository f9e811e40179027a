"""The ClickHouse store: spans, annotated runs and outcomes into the schema of `schema.py`, and reads.

One client API for both backends: clickhouse-connect's `get_client`, in-process on chDB
(`chdb:///abs/path`) or over HTTP(S) to a ClickHouse server. Inserts are columnar and carry an
`insert_deduplication_token` derived from the batch's keys, so a replayed batch is dropped by the
server instead of being stored twice. Attribute values are stringified exactly as the otelcol-contrib
clickhouseexporter does (pdata's `Value.AsString`), so rows written by either look the same.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, Error, OperationalError

from mast_otel.annotate.base import AnnotatedRun, Blame, Finding
from mast_otel.conversation.model import OutcomeReport, Turn
from mast_otel.spans import (
    Attributes,
    AttributeValue,
    Resource,
    Span,
    SpanEvent,
    SpanKind,
    SpanLink,
    StatusCode,
)
from mast_otel.store.base import QueryResult, StoreError
from mast_otel.store.schema import (
    COLLECTOR_STATS,
    CONVERSATIONS,
    DEFAULT_DATABASE,
    FINDINGS,
    JUDGE_USAGE,
    OUTCOMES,
    TRACES,
    Table,
    ensure_schema,
    quote_database,
)

if TYPE_CHECKING:
    from mast_otel.annotate.llm.usage import JudgeUsage  # imported only where a judge is configured
    from mast_otel.store.otlp_ingest import OtlpSpanWriter  # imports this module

__all__ = ["ClickHouseStore", "ServerTarget", "attribute_to_string", "open_store"]

SERVER_SCHEMES: Final = frozenset({"http", "https", "clickhouse", "clickhouses"})
_TLS_SCHEMES = frozenset({"https", "clickhouses"})
USER_ENV: Final = "CLICKHOUSE_USER"
PASSWORD_ENV: Final = "CLICKHOUSE_PASSWORD"
_SERVICE_VERSION = "service.version"
_T = TypeVar("_T")


# --- attribute values, as the clickhouseexporter writes them -------------------------------------


def attribute_to_string(value: AttributeValue) -> str:
    """A span attribute as the clickhouseexporter stores it (pdata `Value.AsString`).

    Strings as they are, bools "true"/"false", ints in decimal, floats as Go's JSON encoder prints
    them (1.0 -> "1", 1e-7 -> "1e-7"), bytes in standard base64, arrays and maps as compact JSON with
    sorted keys and no HTML escaping.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            special = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
            return f"json: unsupported value: {special}"
        return _go_float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    # Go's json.Marshal fails as a whole on a NaN or Inf inside a container; the exporter then
    # stores the empty string it got back.
    try:
        return _go_json(value)
    except ValueError:
        return ""


def _go_float(number: float) -> str:
    """Go's float64AsString: ES6 number-to-string, shortest digits that round-trip."""
    shortest = repr(number)
    if number != 0 and not 1e-6 <= abs(number) < 1e21:
        mantissa, _, exponent = shortest.partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits}"
    positional = format(Decimal(shortest), "f")
    if "." in positional:
        positional = positional.rstrip("0").rstrip(".")
    return positional


def _go_json(value: AttributeValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("unsupported float")
        return _go_float(value)
    if isinstance(value, str):
        return _go_json_string(value)
    if isinstance(value, bytes):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, (tuple, list)):  # decoders hand arrays over as tuples; lists are tolerated
        return "[" + ",".join(_go_json(item) for item in value) + "]"
    return "{" + ",".join(f"{_go_json_string(k)}:{_go_json(value[k])}" for k in sorted(value)) + "}"


def _go_json_string(text: str) -> str:
    # Go escapes U+2028/U+2029 for JavaScript's sake; Python does not. Otherwise both escape the same.
    return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _attribute_map(attributes: Attributes) -> dict[str, str]:
    return {key: attribute_to_string(value) for key, value in attributes.items()}


# --- rows ----------------------------------------------------------------------------------------


def _span_rows(spans: Sequence[Span]) -> list[tuple[Any, ...]]:
    # Spans of one export share one Resource object: stringify its attributes once, not per span.
    resources: dict[int, dict[str, str]] = {}
    rows = []
    for span in spans:
        resource = resources.get(id(span.resource))
        if resource is None:
            resource = resources[id(span.resource)] = _attribute_map(span.resource.attributes)
        rows.append(_span_row(span, resource))
    return rows


def _span_row(span: Span, resource_attributes: dict[str, str]) -> tuple[Any, ...]:
    return (
        span.start_ns,
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.trace_state,
        span.name,
        span.kind.value,
        span.service_name,
        resource_attributes,
        span.scope_name,
        span.scope_version,
        _attribute_map(span.attributes),
        span.duration_ns,
        span.status.value,
        span.status_message,
        [event.time_ns for event in span.events],
        [event.name for event in span.events],
        [_attribute_map(event.attributes) for event in span.events],
        [link.trace_id for link in span.links],
        [link.span_id for link in span.links],
        [link.trace_state for link in span.links],
        [_attribute_map(link.attributes) for link in span.links],
    )


def _span_from_row(row: Sequence[Any], resources: dict[tuple[tuple[str, str], ...], Resource]) -> Span:
    (
        timestamp,
        trace_id,
        span_id,
        parent,
        state,
        name,
        kind,
        resource_attrs,
        scope,
        scope_version,
        attrs,
        duration,
        status,
        status_message,
        event_times,
        event_names,
        event_attrs,
        link_traces,
        link_spans,
        link_states,
        link_attrs,
    ) = row
    start_ns = int(timestamp)
    key = tuple(sorted(resource_attrs.items()))
    resource = resources.get(key)
    if resource is None:
        resource = resources[key] = Resource(dict(resource_attrs))
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=start_ns,
        end_ns=start_ns + int(duration),
        kind=SpanKind(kind) if kind in SpanKind._value2member_map_ else SpanKind.UNSPECIFIED,
        status=StatusCode(status) if status in StatusCode._value2member_map_ else StatusCode.UNSET,
        status_message=status_message,
        attributes=dict(attrs),
        events=tuple(
            SpanEvent(n, int(t), dict(a))
            for t, n, a in zip(event_times, event_names, event_attrs, strict=False)
        ),
        links=tuple(
            SpanLink(t, s, st, dict(a))
            for t, s, st, a in zip(link_traces, link_spans, link_states, link_attrs, strict=False)
        ),
        resource=resource,
        scope_name=scope,
        scope_version=scope_version,
        trace_state=state,
    )


def span_columns(spans: Sequence[Span]) -> list[list[Any]]:
    """`otel_traces` columns (in `schema.TRACES.insert_columns` order) for these spans."""
    return _columns(_span_rows(spans), len(TRACES.insert_columns))


def _turn_tuple(turn: Turn) -> tuple[Any, ...]:
    tool = turn.tool
    return (
        turn.index,
        turn.kind.value,
        turn.agent,
        turn.content,
        turn.span_id,
        turn.time_ns,
        tool.name if tool else "",
        tool.call_id if tool else "",
        tool.arguments if tool else "",
        tool.result if tool else None,
        tool.error if tool else "",
        turn.target_agent,
        turn.model,
        turn.finish_reason,
        turn.context_size,
    )


def _conversation_row(run: AnnotatedRun) -> tuple[Any, ...]:
    conversation = run.conversation
    tool_calls = conversation.tool_calls
    return (
        conversation.start_ns,
        conversation.end_ns,
        conversation.trace_id,
        conversation.root_span_id,
        conversation.conversation_id,
        conversation.task_id,
        conversation.service_name,
        conversation.attributes.get(_SERVICE_VERSION, ""),
        conversation.root_agent,
        list(conversation.agents),
        conversation.model,
        list(conversation.models),
        conversation.outcome.value,
        conversation.score,
        len(conversation.turns),
        len(tool_calls),
        sum(1 for turn in tool_calls if turn.tool is not None and turn.tool.failed),
        conversation.input_tokens,
        conversation.output_tokens,
        conversation.span_count,
        conversation.error,
        conversation.task,
        dict(conversation.attributes),
        [_turn_tuple(turn) for turn in conversation.turns],
        run.version,
        run.version,
        *_blame_columns(run.blame),
    )


def _blame_columns(blame: Blame | None) -> tuple[str, int, str, str, float, str]:
    if blame is None:
        return ("", -1, "", "", 0.0, "")
    mode = blame.mode.code if blame.mode is not None else ""
    return (blame.agent, blame.step_index, blame.span_id, mode, blame.confidence, blame.explanation)


def _finding_rows(run: AnnotatedRun) -> list[tuple[Any, ...]]:
    """One row per (mode, annotator): the table's key, so rows that share it are merged here.

    An annotator may report a mode twice in a run (two separate loops, say). ReplacingMergeTree would
    keep one of those rows at random on merge; merging them here keeps all their evidence, always.
    """
    grouped: dict[tuple[str, str], list[Finding]] = {}
    for finding in run.findings:
        grouped.setdefault((finding.mode.code, finding.annotator), []).append(finding)
    conversation = run.conversation
    rows = []
    for (code, annotator), findings in grouped.items():
        mode = findings[0].mode
        steps = _unique(step for f in findings for step in f.evidence.step_indexes)
        rows.append(
            (
                conversation.start_ns,
                conversation.trace_id,
                conversation.service_name,
                conversation.model,
                next((f.evidence.agent for f in findings if f.evidence.agent), ""),
                code,
                mode.name,
                mode.category.value,
                annotator,
                max(f.confidence for f in findings),
                _unique(span_id for f in findings for span_id in f.evidence.span_ids),
                steps[0] if steps else -1,
                steps,
                "; ".join(_unique(f.explanation for f in findings if f.explanation)),
                run.version,
            )
        )
    return rows


def _outcome_row(report: OutcomeReport, received_ns: int) -> tuple[Any, ...]:
    # A report without a time is ordered by when it reached us: mast_outcomes keeps the latest.
    return (report.time_ns or received_ns, report.trace_id, report.outcome.value, report.score, report.source)


def _judge_usage_row(usage: JudgeUsage) -> tuple[Any, ...]:
    return (
        usage.time_ns,
        usage.content_hash,
        usage.trace_id,
        usage.service_name,
        usage.run_model,
        usage.judge_model,
        usage.status.value,
        usage.reason,
        usage.requests,
        usage.chunks,
        usage.input_tokens,
        usage.output_tokens,
        usage.cost_usd,
        list(usage.unknown_modes),
        usage.verdict,
    )


def _unique(items: Iterable[_T]) -> list[_T]:
    return list(dict.fromkeys(items))


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def _scrub(value: Any) -> Any:
    """`value` with every string made encodable as UTF-8 (lone surrogates become "?")."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_scrub(item) for item in value)
    if isinstance(value, dict):
        return {_scrub(key): _scrub(item) for key, item in value.items()}
    return value


def deduplication_token(table: Table, keys: Iterable[tuple[object, ...]]) -> str:
    """The batch's identity for the server's insert deduplication: the same keys, the same token.

    Keys are sorted so that a batch replayed in another order is still recognised.
    """
    digest = hashlib.blake2b(digest_size=16)
    for key in sorted("\x1f".join(map(str, key)) for key in keys):
        digest.update(key.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e")
    return f"{table.name}-{digest.hexdigest()}"


# --- connection targets --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerTarget:
    """A ClickHouse server URL, parsed: `http(s)://user:pass@host:port/db?option=value`.

    `clickhouse://` means HTTP as well (clickhouse-connect speaks only HTTP); `clickhouses://`,
    `?secure=true` or port 8443/443 mean TLS. Credentials missing from the URL come from
    CLICKHOUSE_USER and CLICKHOUSE_PASSWORD. Other query options go to clickhouse-connect as they
    are (verify, ca_cert, compress, connect_timeout...).
    """

    host: str
    port: int
    secure: bool
    username: str | None = None
    password: str = field(default="", repr=False)
    database: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, url: str, env: Mapping[str, str] | None = None) -> ServerTarget:
        env = os.environ if env is None else env
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in SERVER_SCHEMES:
            raise StoreError(
                f"unsupported ClickHouse URL scheme {parts.scheme!r}: use {', '.join(sorted(SERVER_SCHEMES))}"
            )
        options = dict(parse_qsl(parts.query))
        secure_option = options.pop("secure", "").lower()
        try:
            port = parts.port
        except ValueError as exc:
            raise StoreError(f"invalid port in ClickHouse URL {_redact_url(url)}: {exc}") from None
        secure = scheme in _TLS_SCHEMES or secure_option in {"1", "true", "yes"} or port in (443, 8443)
        database = unquote(parts.path.strip("/").split("/")[0]) or None
        return cls(
            host=parts.hostname or "localhost",
            port=port or (8443 if secure else 8123),
            secure=secure,
            username=unquote(parts.username) if parts.username else env.get(USER_ENV) or None,
            password=unquote(parts.password) if parts.password else env.get(PASSWORD_ENV, ""),
            database=database,
            options=tuple(options.items()),
        )

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `clickhouse_connect.get_client`; no database, it may not exist yet."""
        kwargs: dict[str, Any] = dict(self.options)
        kwargs.update(
            host=self.host,
            port=self.port,
            interface="https" if self.secure else "http",
            secure=self.secure,
            username=self.username,
            password=self.password,
            # A server session serialises queries: the writer and a reader on the same client
            # would fail with SESSION_IS_LOCKED. Nothing here needs session state.
            autogenerate_session_id=False,
        )
        return kwargs

    def redacted(self) -> str:
        """The URL for messages and reprs: never the password."""
        user = f"{quote(self.username)}:***@" if self.username else ""
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{user}{self.host}:{self.port}"


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def open_store(target: str | Path, database: str | None = None) -> ClickHouseStore:
    """Open (and create the schema of) the store at `target`.

    `target` is a chDB data directory (a path, or `chdb:///abs/path`; `chdb://memory` for a
    throwaway in-memory store) or a ClickHouse server URL (`http://`, `https://`, `clickhouse://`,
    `clickhouses://`, see `ServerTarget`). `database` defaults to the URL's database, else "mast".

    chDB runs the engine inside this process, with two limits: a data directory can be open in ONE
    process at a time (while the collector runs, read its store through the collector, or use a
    ClickHouse server), and a process can open only ONE chDB directory (more stores in one process
    share that directory and are told apart by database).
    """
    text = str(target)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme in SERVER_SCHEMES:
        server = ServerTarget.parse(text)
        description = server.redacted()
        secrets: tuple[str, ...] = (server.password,)
        database = database or server.database or DEFAULT_DATABASE
        kwargs = server.client_kwargs()

        def connect() -> Client:
            return clickhouse_connect.get_client(**kwargs)

    elif scheme in ("", "chdb"):
        dsn = _chdb_dsn(text, scheme)
        description = dsn
        secrets = ()
        database = database or DEFAULT_DATABASE

        def connect() -> Client:
            return clickhouse_connect.get_client(dsn=dsn)

    else:
        raise StoreError(
            f"unsupported store target {_redact_url(text)!r}: give a chDB data directory, chdb:///abs/path, "
            f"or a ClickHouse URL ({', '.join(f'{s}://' for s in sorted(SERVER_SCHEMES))})"
        )
    client = _connect(connect, description, secrets)
    try:
        return ClickHouseStore(client, database, description=description, secrets=secrets, connect=connect)
    except BaseException:
        client.close()
        raise


def _chdb_dsn(text: str, scheme: str) -> str:
    if scheme == "chdb":
        parts = urlsplit(text)
        if parts.netloc in ("memory", ":memory:"):
            return "chdb://memory"
        if parts.netloc:
            raise StoreError(f"chDB targets take an absolute path, chdb:///abs/path, not {text!r}")
        text = unquote(parts.path)
    if text in (":memory:", "memory"):
        return "chdb://memory"
    path = Path(text).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the chDB data directory {path}: {exc}") from None
    return f"chdb://{path}"


def _connect(factory: Callable[[], Client], description: str, secrets: Sequence[str]) -> Client:
    try:
        return factory()
    except (ClickHouseError, OSError) as exc:
        raise _store_error(exc, f"connecting to {description}", secrets) from None


# --- errors --------------------------------------------------------------------------------------

# UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, AUTHENTICATION_FAILED
_AUTH_CODES = frozenset({192, 193, 194, 516})
_MISSING_CODES = frozenset({60, 81})  # UNKNOWN_TABLE, UNKNOWN_DATABASE
_ACCESS_CODES = frozenset({164, 497})  # READONLY, ACCESS_DENIED


def _store_error(exc: BaseException, doing: str, secrets: Sequence[str]) -> StoreError:
    message = str(exc).strip() or type(exc).__name__
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    code = exc.code if isinstance(exc, Error) else None
    if "EmbeddedServer already initialized" in message:
        hint = (
            "chDB opens one data directory per process and another one is already open here: "
            "open the same directory (stores are told apart by database) or use a ClickHouse server"
        )
    elif "EmbeddedServer" in message:
        hint = (
            "another process (a running collector?) probably has this chDB directory open; chDB allows "
            "one process per directory: stop it, query through it, or use a ClickHouse server"
        )
    elif code in _AUTH_CODES:
        hint = f"check the user and password (the URL's, or {USER_ENV} / {PASSWORD_ENV})"
    elif code in _MISSING_CODES:
        hint = "the mast-otel schema is missing: open the store with mast-otel, which creates it"
    elif code in _ACCESS_CODES:
        hint = "the ClickHouse user lacks the rights for this: grant them, or use a user that has them"
    elif isinstance(exc, (OperationalError, OSError)):
        hint = "check that ClickHouse is running and reachable (host, port, TLS)"
    else:
        hint = "the server refused it; its message says why"
    return StoreError(f"{doing} failed: {message} -- {hint}")


# --- the store -----------------------------------------------------------------------------------


class ClickHouseStore:
    """`Store` on ClickHouse through a clickhouse-connect client (chDB or a server).

    Creates the schema on construction when it is missing; queries run in `database`, so SQL names
    tables without a database prefix. Safe to share between threads as far as the client is (chDB
    clients serialise calls; server clients run without a session).
    """

    def __init__(
        self,
        client: Client,
        database: str = DEFAULT_DATABASE,
        *,
        description: str = "",
        secrets: Sequence[str] = (),
        connect: Callable[[], Client] | None = None,
    ) -> None:
        quote_database(database)
        self._client = client
        self._connect = connect
        self._database = database
        self._description = description or "ClickHouse"
        self._secrets = tuple(secrets)
        self._otlp_writer: OtlpSpanWriter | None = None
        self._call(f"creating the schema in {database!r}", lambda: ensure_schema(client, database))
        client.database = database

    @property
    def database(self) -> str:
        return self._database

    def __repr__(self) -> str:
        return f"ClickHouseStore({self._description!r}, database={self._database!r})"

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        result = self._call("query", lambda: self._client.query(sql, parameters=dict(parameters or {})))
        return QueryResult(tuple(result.column_names), tuple(tuple(row) for row in result.result_rows))

    def insert_spans(self, spans: Sequence[Span]) -> None:
        rows = _span_rows(spans)
        self._insert(TRACES, rows, ((s.trace_id, s.span_id) for s in spans))

    def with_own_connection(self) -> ClickHouseStore:
        """The same store on a connection of its own, for a thread whose long calls (big inserts)
        must not wait for the others' or hold them up: calls on one chDB handle run one at a time,
        calls on separate handles run side by side. The caller closes it."""
        if self._connect is None:
            return self  # a client handed in from outside: nothing to open a second one with
        client = _connect(self._connect, self._description, self._secrets)
        return ClickHouseStore(
            client,
            self._database,
            description=self._description,
            secrets=self._secrets,
            connect=self._connect,
        )

    def insert_otlp_requests(self, bodies: Sequence[bytes], dedup_token: str) -> None:
        if self._otlp_writer is None:
            from mast_otel.store.otlp_ingest import OtlpSpanWriter  # it builds on this module

            self._otlp_writer = OtlpSpanWriter(self._client, self._database)
        writer = self._otlp_writer
        self._call(
            f"storing {len(bodies)} OTLP requests", lambda: writer.insert_requests(bodies, dedup_token)
        )

    def insert_runs(self, runs: Sequence[AnnotatedRun]) -> None:
        # Findings first: until the conversation row of a new version lands, readers keep joining
        # the previous version's findings instead of seeing a run without any.
        finding_rows = [row for run in runs for row in _finding_rows(run)]
        finding_keys = (
            (run.conversation.trace_id, run.version, finding.mode.code, finding.annotator)
            for run in runs
            for finding in run.findings
        )
        self._insert(FINDINGS, finding_rows, finding_keys)
        conversation_rows = [_conversation_row(run) for run in runs]
        self._insert(CONVERSATIONS, conversation_rows, ((r.conversation.trace_id, r.version) for r in runs))

    def insert_outcomes(self, outcomes: Sequence[OutcomeReport]) -> None:
        received_ns = time.time_ns()
        rows = [_outcome_row(report, received_ns) for report in outcomes]
        keys = ((o.trace_id, o.time_ns, o.outcome.value, o.score, o.source) for o in outcomes)
        self._insert(OUTCOMES, rows, keys)

    def insert_collector_stats(self, instance: str, values: Mapping[str, float], time_ns: int) -> None:
        """One snapshot of a collector's own metrics (for pipeline-health dashboards and alerts)."""
        rows = [(time_ns, instance, metric, float(value)) for metric, value in sorted(values.items())]
        self._insert(COLLECTOR_STATS, rows, ((time_ns, instance, row[2]) for row in rows))

    def insert_judge_usage(self, rows: Sequence[JudgeUsage]) -> None:
        """The LLM judge's usage rows (mast_otel.annotate.llm.usage), into `mast_judge_usage`."""
        keys = ((u.content_hash, u.trace_id, u.status.value, u.time_ns) for u in rows)
        self._insert(JUDGE_USAGE, [_judge_usage_row(usage) for usage in rows], keys)

    def existing_runs(self, trace_ids: Sequence[str]) -> set[str]:
        """Which of these traces already have a stored run (a primary-key lookup)."""
        if not trace_ids:
            return set()
        result = self.query(
            "SELECT DISTINCT TraceId FROM mast_conversations WHERE TraceId IN {ids:Array(String)}",
            {"ids": list(trace_ids)},
        )
        return {row[0] for row in result.rows}

    def load_spans(self, trace_ids: Sequence[str]) -> dict[str, list[Span]]:
        """The stored spans of these traces, rebuilt as typed Spans, each span once.

        Attribute values come back as the strings they were stored as; normalizers read numbers and
        JSON from strings, so a conversation rebuilt from them is the same.
        """
        if not trace_ids:
            return {}
        result = self.query(
            # Nanoseconds as integers: DateTime64(9) would come back as datetime, which stops at micros.
            "SELECT toUnixTimestamp64Nano(Timestamp), TraceId, SpanId, ParentSpanId, TraceState, SpanName,"
            " SpanKind, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode,"
            " StatusMessage, arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp), Events.Name,"
            " Events.Attributes,"
            " Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes"
            " FROM otel_traces WHERE TraceId IN {ids:Array(String)}"
            # A span a sender exported twice in different requests is stored twice: read it once.
            " LIMIT 1 BY TraceId, SpanId",
            {"ids": list(trace_ids)},
        )
        spans: dict[str, list[Span]] = {}
        resources: dict[tuple[tuple[str, str], ...], Resource] = {}
        for row in result.rows:
            span = _span_from_row(row, resources)
            spans.setdefault(span.trace_id, []).append(span)
        return spans

    def ping(self) -> bool:
        try:
            return bool(self._client.ping())
        except (ClickHouseError, OSError):
            return False

    def close(self) -> None:
        self._client.close()

    def _insert(
        self, table: Table, rows: Sequence[tuple[Any, ...]], keys: Iterable[tuple[object, ...]]
    ) -> None:
        if not rows:
            return
        token = deduplication_token(table, keys)
        columns = _columns(rows, len(table.insert_columns))
        try:
            self._insert_columns(table, columns, token)
        except UnicodeEncodeError:
            # Text that was never UTF-8 (a lone surrogate from a JSON "\udcff" escape) cannot be
            # sent: store "?" in its place rather than lose the batch. Same token, so if the failed
            # attempt got through after all, this one is dropped.
            self._insert_columns(table, _scrub(columns), token)

    def _insert_columns(self, table: Table, columns: list[list[Any]], token: str) -> None:
        self._call(
            f"inserting {len(columns[0])} rows into {table.name}",
            lambda: self._client.insert(
                table.name,
                columns,
                column_names=table.insert_columns,
                database=self._database,
                column_oriented=True,
                settings={"insert_deduplication_token": token},
            ),
        )

    def _call(self, doing: str, operation: Callable[[], _T]) -> _T:
        try:
            return operation()
        except (ClickHouseError, OSError) as exc:
            raise _store_error(exc, f"{doing} on {self._description}", self._secrets) from None
