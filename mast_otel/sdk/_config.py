"""SDK setup: the tracer provider, its exporter and the content policy the instrumentation follows.

`configure()` builds a `TracerProvider` (resource with `service.name`, the backpressure batch
processor, an OTLP/gRPC exporter by default) and remembers it as the provider of the module-level
API (`agent_run`, `record_outcome`, the decorators). Without `configure()` that API uses the global
tracer provider, so an application that set up OpenTelemetry itself only has to import the SDK.

The standard variables keep their meaning because the OpenTelemetry SDK reads them itself:
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`,
`..._HEADERS`, `..._INSECURE`, `..._CERTIFICATE`, `..._TIMEOUT`, `..._COMPRESSION` and `OTEL_BSP_*`.
Arguments of `configure()` win over them. `MAST_OTEL_CAPTURE_CONTENT=false` turns content capture off.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from mast_otel import __version__
from mast_otel.sdk._processor import BackpressureBatchSpanProcessor
from mast_otel.semconv import SCHEMA_URL

_logger = logging.getLogger(__name__)

INSTRUMENTATION_SCOPE: Final = "mast_otel.sdk"
DEFAULT_SERVICE_NAME: Final = "mast-otel-agent"
CAPTURE_CONTENT_ENV: Final = "MAST_OTEL_CAPTURE_CONTENT"

_FALSE_WORDS: Final = frozenset({"false", "0", "no", "off"})
_TRUE_WORDS: Final = frozenset({"true", "1", "yes", "on"})


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """Whether message texts, reasoning and tool payloads are recorded, and how they are redacted."""

    capture: bool = True
    redact_hook: Callable[[str], str] | None = None

    def redact(self, text: str) -> str:
        return self.redact_hook(text) if self.redact_hook is not None else text


@dataclass(frozen=True, slots=True)
class Instrumentation:
    """What every span of the SDK is made with."""

    tracer: trace.Tracer
    content: ContentPolicy
    provider: TracerProvider | None  # None: the global provider, which the SDK does not own


_lock = threading.Lock()
_configured: Instrumentation | None = None
_fallback: Instrumentation | None = None


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    *,
    insecure: bool | None = None,
    headers: Mapping[str, str] | None = None,
    capture_content: bool | None = None,
    redact: Callable[[str], str] | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    exporter: SpanExporter | None = None,
    set_global: bool = True,
) -> TracerProvider:
    """Set up tracing for agent runs and return the provider.

    Calling it again replaces the provider the module-level API uses; the earlier one is left to
    its owner (shut it down, or call `shutdown()` before configuring again).
    """
    global _configured
    if exporter is None:
        # Arguments left at None let the exporter read OTEL_EXPORTER_OTLP_* (default http://localhost:4317,
        # plaintext for http:// endpoints).
        exporter = OTLPSpanExporter(
            endpoint=endpoint, insecure=insecure, headers=dict(headers) if headers is not None else None
        )
    provider = TracerProvider(resource=_resource(service_name, resource_attributes))
    provider.add_span_processor(BackpressureBatchSpanProcessor(exporter))
    instrumentation = Instrumentation(
        tracer=provider.get_tracer(INSTRUMENTATION_SCOPE, __version__, schema_url=SCHEMA_URL),
        content=ContentPolicy(capture=_capture_content(capture_content), redact_hook=redact),
        provider=provider,
    )
    with _lock:
        _configured = instrumentation
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def shutdown() -> None:
    """Export what is pending and shut down the configured provider; the API falls back to the global one."""
    global _configured
    with _lock:
        instrumentation, _configured = _configured, None
    if instrumentation is not None and instrumentation.provider is not None:
        instrumentation.provider.shutdown()


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export every ended span now; True when the provider reports success."""
    provider = active().provider or trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)  # the API's provider interface has no force_flush
    return bool(flush(timeout_millis)) if callable(flush) else True


def active() -> Instrumentation:
    """The configured instrumentation, else one on the global tracer provider."""
    global _fallback
    with _lock:
        if _configured is not None:
            return _configured
        if _fallback is None:
            # A proxy tracer until the application sets a global provider, then that provider's.
            _fallback = Instrumentation(
                tracer=trace.get_tracer(INSTRUMENTATION_SCOPE, __version__, schema_url=SCHEMA_URL),
                content=ContentPolicy(capture=_capture_content(None)),
                provider=None,
            )
        return _fallback


def _resource(service_name: str | None, resource_attributes: Mapping[str, str] | None) -> Resource:
    attributes: dict[str, str] = dict(resource_attributes or {})
    if service_name:
        attributes[SERVICE_NAME] = service_name
    elif SERVICE_NAME not in attributes and not OTELResourceDetector().detect().attributes.get(SERVICE_NAME):
        # Only when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names the service.
        attributes[SERVICE_NAME] = DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


def _capture_content(explicit: bool | None) -> bool:
    if explicit is not None:
        return explicit
    configured = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    if not configured or configured in _TRUE_WORDS:
        return True
    if configured in _FALSE_WORDS:
        return False
    _logger.warning("%s=%r is not a boolean; content capture stays on.", CAPTURE_CONTENT_ENV, configured)
    return True
