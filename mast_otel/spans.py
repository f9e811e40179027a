"""Typed spans: what the receive stage hands to assembly, rebuild and store.

A `Span` is decoded once from OTLP (see `mast_otel.collector.decode`) and never mutated. Attribute
values keep their OTLP types (str, bool, int, float, bytes, arrays as tuples, kvlists as dicts) so
that normalizers can read them without guessing; the store stringifies them the way the
otelcol-contrib ClickHouse exporter does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

AttributeValue: TypeAlias = (
    str | bool | int | float | bytes | tuple["AttributeValue", ...] | dict[str, "AttributeValue"] | None
)
Attributes = Mapping[str, AttributeValue]


class SpanKind(str, Enum):
    """Span kinds, spelled as the ClickHouse exporter stores them."""

    UNSPECIFIED = "Unspecified"
    INTERNAL = "Internal"
    SERVER = "Server"
    CLIENT = "Client"
    PRODUCER = "Producer"
    CONSUMER = "Consumer"


class StatusCode(str, Enum):
    """Span status codes, spelled as the ClickHouse exporter stores them."""

    UNSET = "Unset"
    OK = "Ok"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Resource:
    """The entity that produced spans; one instance is shared by all spans of a ResourceSpans."""

    attributes: Attributes = field(default_factory=dict)

    @property
    def service_name(self) -> str:
        value = self.attributes.get("service.name")
        return value if isinstance(value, str) and value else "unknown_service"


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    trace_state: str = ""
    attributes: Attributes = field(default_factory=dict)


_NO_RESOURCE = Resource({})


@dataclass(frozen=True, slots=True)
class Span:
    """One finished span. Ids are lowercase hex; a root span has `parent_span_id == ""`."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: str = ""
    kind: SpanKind = SpanKind.INTERNAL
    status: StatusCode = StatusCode.UNSET
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanLink, ...] = ()
    resource: Resource = _NO_RESOURCE
    scope_name: str = ""
    scope_version: str = ""
    trace_state: str = ""

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    @property
    def service_name(self) -> str:
        return self.resource.service_name

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def text(self, key: str, default: str = "") -> str:
        """An attribute as text: strings as they are, other scalars formatted, missing as `default`."""
        value = self.attributes.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def number(self, key: str) -> float | None:
        """A numeric attribute (int, float or a numeric string), or None."""
        value = self.attributes.get(key)
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return None
        return None
