"""Receive stage: the OTLP/gRPC TraceService (default :4317), and LogsService for agents that log.

The handler takes the request as raw bytes and decodes it itself, so malformed protobuf gets a
clear INVALID_ARGUMENT (gRPC's own deserializer would answer INTERNAL) and never reaches the
pipeline. Partly malformed requests are answered with OTLP partial success. When the pipeline is at
capacity the answer is RESOURCE_EXHAUSTED with a RetryInfo detail (UNAVAILABLE while the store is
away and the spool full), which OTLP exporters retry with backoff, so load turns into backpressure
rather than memory growth or loss. TLS and bearer-token auth are optional (see `security.py`).
LogsService exports take the same path once `logs.py` has turned their Codex events into spans.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, ClassVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from mast_otel.collector.decode import DecodedTraces, DecodeError, TraceDecoder
from mast_otel.collector.logs import LOGS_SERVICE_NAME, LogsExporter, decode_logs_request
from mast_otel.collector.pipeline import Overloaded
from mast_otel.collector.security import BearerAuthenticator, TlsConfig
from mast_otel.collector.telemetry import CollectorMetrics

log = logging.getLogger(__name__)

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GrpcReceiverConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    endpoint: str = "0.0.0.0:4317"  # host:port; port 0 picks a free port
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_workers: int = 8

    def __post_init__(self) -> None:
        if ":" not in self.endpoint:
            raise ValueError(f"grpc endpoint must be host:port, got {self.endpoint!r}")
        if self.max_message_bytes < 1024 or self.max_workers < 1:
            raise ValueError("max_message_bytes must be >= 1024 and max_workers >= 1")


Accept = Callable[[bytes, DecodedTraces], None]  # the pipeline's entry: record bytes + decoded spans


class GrpcReceiver:
    def __init__(
        self,
        config: GrpcReceiverConfig,
        accept: Accept,
        decoder: TraceDecoder,
        *,
        tls: TlsConfig | None = None,
        authenticator: BearerAuthenticator | None = None,
        metrics: CollectorMetrics | None = None,
    ) -> None:
        self.config = config
        self._accept = accept
        self._decoder = decoder
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="otlp-grpc"),
            interceptors=[authenticator.grpc_interceptor()] if authenticator else [],
            options=[
                ("grpc.max_receive_message_length", config.max_message_bytes),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ],
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._export,
                    request_deserializer=None,  # raw bytes: we decode and validate ourselves
                    response_serializer=ExportTraceServiceResponse.SerializeToString,
                )
            },
        )
        self._logs = LogsExporter(accept, decoder, metrics)
        logs_handler = grpc.method_handlers_generic_handler(
            LOGS_SERVICE_NAME,
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._export_logs,
                    request_deserializer=None,
                    response_serializer=ExportLogsServiceResponse.SerializeToString,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler, logs_handler))
        if tls is not None and tls.enabled:
            self.port: int = self._server.add_secure_port(config.endpoint, tls.grpc_credentials())
        else:
            self.port = self._server.add_insecure_port(config.endpoint)
        if self.port == 0:
            raise OSError(f"could not bind the OTLP/gRPC receiver to {config.endpoint}")

    def start(self) -> None:
        self._server.start()
        log.info("OTLP/gRPC receiver listening on port %d", self.port)

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop taking new calls; calls in progress get `grace_s` to finish."""
        self._server.stop(grace_s).wait()

    def _export(self, body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        try:
            decoded = self._decoder.decode_bytes(body)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            self._accept(body, decoded)
        except Overloaded as exc:
            context.abort_with_status(_retryable(exc))
        response = ExportTraceServiceResponse()
        if decoded.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(
                    rejected_spans=decoded.rejected, error_message="; ".join(decoded.reasons)
                )
            )
        return response

    def _export_logs(self, body: bytes, context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        try:
            request = decode_logs_request(body)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            response = self._logs.export(request)
        except Overloaded as exc:
            context.abort_with_status(_retryable(exc))
        return response


def _retryable(exc: Overloaded) -> grpc.Status:
    # RESOURCE_EXHAUSTED with RetryInfo is retryable in OTLP; UNAVAILABLE while the store is away.
    seconds = int(exc.retry_after_s)
    retry = error_details_pb2.RetryInfo(
        retry_delay=Duration(seconds=seconds, nanos=int((exc.retry_after_s - seconds) * 1e9))
    )
    code = code_pb2.UNAVAILABLE if exc.store_unavailable else code_pb2.RESOURCE_EXHAUSTED
    status = status_pb2.Status(code=code, message=str(exc))
    status.details.add().Pack(retry)
    return rpc_status.to_status(status)
