"""Receive stage: OTLP/HTTP (default :4318), `POST /v1/traces` (and `/v1/logs`, for agents that log:
see `logs.py`) with protobuf or JSON bodies, gzip or not.

Answers follow the OTLP/HTTP specification: the response body is an ExportTraceServiceResponse in the
request's encoding (with partial success when spans were rejected); a malformed body is 400 with the
reason; a body over the size limit is 413; at capacity the answer is 429 (or 503 while the store is
away) with Retry-After, which OTLP exporters retry. Compressed bodies are inflated with the same
limit, so a small gzip bomb cannot take the memory the limit protects.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from mast_otel.collector.decode import DecodedTraces, DecodeError, TraceDecoder
from mast_otel.collector.logs import LOGS_PATH, LogsExporter, decode_logs_request
from mast_otel.collector.pipeline import Overloaded
from mast_otel.collector.security import BearerAuthenticator, TlsConfig
from mast_otel.collector.telemetry import CollectorMetrics

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


@dataclass(frozen=True, slots=True)
class HttpReceiverConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    endpoint: str = "0.0.0.0:4318"  # host:port; port 0 picks a free port; "" disables the receiver
    max_body_bytes: int = 16 * 1024 * 1024  # after decompression

    def __post_init__(self) -> None:
        if self.endpoint and ":" not in self.endpoint:
            raise ValueError(f"http endpoint must be host:port, got {self.endpoint!r}")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")


Accept = Callable[[bytes, DecodedTraces], None]  # the pipeline's entry: record bytes + decoded spans
_Request = TypeVar("_Request", bound=Message)


class BodyError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def decode_json_request(body: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON -> protobuf. OTLP's JSON differs from protobuf's JSON mapping: ids are hex, not base64."""
    return parse_otlp_json(body, ExportTraceServiceRequest(), "resourceSpans")


def parse_otlp_json(body: bytes, into: _Request, top_level: str) -> _Request:
    """An OTLP/JSON request of any signal into the protobuf message `into` (`top_level` names the
    signal's list, for the error message); `DecodeError` when it is not one."""
    try:
        tree = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"not JSON: {exc}") from exc
    if not isinstance(tree, dict):
        raise DecodeError(f"an OTLP/JSON body must be an object with {top_level}")
    _hex_ids_to_base64(tree)
    try:
        json_format.ParseDict(tree, into, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise DecodeError(f"not an OTLP/JSON {type(into).__name__}: {exc}") from exc
    return into


def _hex_ids_to_base64(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise DecodeError(f"{key} {value[:40]!r} is not hex") from None
            else:
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BodyError(415, f"unsupported Content-Encoding {encoding!r}; send gzip or none")
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BodyError(400, f"body is not valid {encoding}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyError(413, f"decompressed body exceeds the limit of {limit} bytes")
    return out


class HttpReceiver:
    def __init__(
        self,
        config: HttpReceiverConfig,
        accept: Accept,
        decoder: TraceDecoder,
        *,
        tls: TlsConfig | None = None,
        authenticator: BearerAuthenticator | None = None,
        metrics: CollectorMetrics | None = None,
    ) -> None:
        self.config = config
        host, _, port = config.endpoint.rpartition(":")
        self._server = ThreadingHTTPServer(
            (host or "0.0.0.0", int(port)), _handler(config, accept, decoder, authenticator, metrics)
        )
        self._server.daemon_threads = True
        if tls is not None and tls.enabled:
            self._server.socket = tls.ssl_context().wrap_socket(self._server.socket, server_side=True)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="otlp-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        log.info("OTLP/HTTP receiver listening on port %d", self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(
    config: HttpReceiverConfig,
    accept: Accept,
    decoder: TraceDecoder,
    authenticator: BearerAuthenticator | None,
    metrics: CollectorMetrics | None,
) -> type[BaseHTTPRequestHandler]:
    logs = LogsExporter(accept, decoder, metrics)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse connections
        server_version = "mast-otel"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("otlp-http: " + format, *args)

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            if path not in (TRACES_PATH, LOGS_PATH):
                self._plain(
                    404, f"no such endpoint {self.path}; OTLP traces go to {TRACES_PATH}, logs to {LOGS_PATH}"
                )
                return
            if authenticator is not None and not authenticator.accepts(self.headers.get("Authorization")):
                self._plain(401, "missing or invalid bearer token", {"WWW-Authenticate": "Bearer"})
                return
            content_type = (self.headers.get("Content-Type") or _PROTOBUF).split(";")[0].strip().lower()
            as_json = content_type == _JSON
            try:
                body = self._body()
                if not as_json and content_type != _PROTOBUF:
                    raise BodyError(
                        415, f"unsupported Content-Type {content_type!r}; send {_PROTOBUF} or {_JSON}"
                    )
                response = self._traces(body, as_json) if path == TRACES_PATH else self._logs(body, as_json)
            except BodyError as exc:
                self._plain(exc.status, str(exc))
                return
            except DecodeError as exc:
                self._plain(400, str(exc))
                return
            except Overloaded as exc:
                status = 503 if exc.store_unavailable else 429
                self._plain(status, str(exc), {"Retry-After": str(max(1, round(exc.retry_after_s)))})
                return
            if as_json:
                payload = json.dumps(json_format.MessageToDict(response)).encode()
                self._send(200, payload, _JSON)
            else:
                self._send(200, response.SerializeToString(), _PROTOBUF)

        def _traces(self, body: bytes, as_json: bool) -> ExportTraceServiceResponse:
            if as_json:
                request = decode_json_request(body)
                decoded, record = decoder.decode(request), request.SerializeToString()
            else:
                decoded, record = decoder.decode_bytes(body), body
            accept(record, decoded)
            response = ExportTraceServiceResponse()
            if decoded.rejected:
                response.partial_success.CopyFrom(
                    ExportTracePartialSuccess(
                        rejected_spans=decoded.rejected, error_message="; ".join(decoded.reasons)
                    )
                )
            return response

        def _logs(self, body: bytes, as_json: bool) -> ExportLogsServiceResponse:
            if as_json:
                request = parse_otlp_json(body, ExportLogsServiceRequest(), "resourceLogs")
            else:
                request = decode_logs_request(body)
            return logs.export(request)

        def _body(self) -> bytes:
            length_header = self.headers.get("Content-Length")
            if length_header is None:
                raise BodyError(411, "Content-Length is required")
            try:
                length = int(length_header)
            except ValueError:
                raise BodyError(400, "Content-Length is not a number") from None
            if length > config.max_body_bytes:
                self.close_connection = True  # don't read a body we refuse
                raise BodyError(
                    413, f"body of {length} bytes exceeds the limit of {config.max_body_bytes} bytes"
                )
            raw = self.rfile.read(length)
            return inflate(raw, self.headers.get("Content-Encoding") or "", config.max_body_bytes)

        def _plain(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
            self._send(status, message.encode(), "text/plain; charset=utf-8", headers)

        def _send(
            self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


__all__ = [
    "LOGS_PATH",
    "TRACES_PATH",
    "BodyError",
    "HttpReceiver",
    "HttpReceiverConfig",
    "decode_json_request",
    "inflate",
    "parse_otlp_json",
]
