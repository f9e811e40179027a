"""OpenTelemetry GenAI per-message events, recorded as span events -> `SpanView`.

Convention: OpenTelemetry GenAI semantic conventions v1.28-v1.36 (the event form, before the JSON
`gen_ai.input/output.messages` attributes replaced it). A model call's messages are events named
`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message` (content, tool_calls),
`gen_ai.tool.message` (content, id) and `gen_ai.choice` (index, finish_reason, message), whose body
is OpenAI's message shape. On a span event the body travels as attributes: either whole, as JSON
in `gen_ai.event.content` (Azure AI Inference, Semantic Kernel), or field by field (`content`,
`tool_calls`, `id`, `message`, `finish_reason`). The rest of the span (operation, model, tokens)
is plain GenAI and read by `GenAiNormalizer`.

opentelemetry-instrumentation-openai-v2 (tested 2.4b0) emits these events as OTLP *log records*,
not span events, unless told `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`, in which
case it writes the JSON message form. The collector turns such log records back into span events
(`collector/logs.py`), and rebuild moves them onto the span they describe, so they are read here
all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mast_otel.conversation.normalize import (
    GenAiNormalizer,
    Message,
    Operation,
    SpanView,
    _load_json,
    _message,
)
from mast_otel.spans import AttributeValue, Span, SpanEvent

CHOICE = "gen_ai.choice"
EVENT_CONTENT = "gen_ai.event.content"
INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_JSON_FIELDS = frozenset({"tool_calls", "message", "content"})


def is_genai_event(name: str) -> bool:
    """A per-message GenAI event, whether it came as a span event or as a log record."""
    return name in INPUT_EVENTS or name == CHOICE


class GenAiEventsNormalizer:
    """Reads spans whose messages are `gen_ai.*.message` / `gen_ai.choice` span events."""

    def __init__(self) -> None:
        self._attributes = GenAiNormalizer()

    def accepts(self, span: Span) -> bool:
        return any(e.name in INPUT_EVENTS or e.name == CHOICE for e in span.events)

    def view(self, span: Span) -> SpanView:
        view = self._attributes.view(span)
        inputs: list[Message] = []
        outputs: list[Message] = []
        for event in span.events:
            body = _body(event)
            if event.name in INPUT_EVENTS:
                role = str(body.get("role") or INPUT_EVENTS[event.name])
                if role == "tool" and "tool_call_id" not in body:
                    body["tool_call_id"] = body.get("id")
                inputs.append(_message({**body, "role": role}, role))
            elif event.name == CHOICE:
                message = body.get("message")
                fields = dict(message) if isinstance(message, dict) else {}
                fields.setdefault("finish_reason", body.get("finish_reason"))
                outputs.append(_message(fields, "assistant"))
        finish = view.finish_reasons or tuple(m.finish_reason for m in outputs if m.finish_reason)
        operation = view.operation if view.operation is not Operation.OTHER else Operation.LLM
        return replace(
            view,
            operation=operation,
            input_messages=tuple(inputs),
            output_messages=tuple(outputs),
            finish_reasons=finish,
        )


def _body(event: SpanEvent) -> dict[str, Any]:
    """The event's body as a dict, whichever way the sender flattened it onto the span event."""
    attributes: Mapping[str, AttributeValue] = event.attributes
    whole = attributes.get(EVENT_CONTENT, attributes.get("body"))
    if whole is not None:
        decoded = _load_json(whole)
        if isinstance(decoded, dict):
            return dict(decoded)
    body: dict[str, Any] = {}
    for key, value in attributes.items():
        if key.startswith("gen_ai.") or key == "event.name":
            continue  # gen_ai.system and the like describe the call, not the message
        if key in _JSON_FIELDS and isinstance(value, str) and value[:1] in "[{":
            decoded = _load_json(value)
            body[key] = decoded
        else:
            body[key] = list(value) if isinstance(value, tuple) else value
    return body
