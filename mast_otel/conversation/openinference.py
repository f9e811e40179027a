"""OpenInference (Arize Phoenix) spans -> `SpanView`.

Convention: OpenInference semantic conventions, tested with openinference-semantic-conventions 0.1.42
as emitted by openinference-instrumentation-openai 0.1.66. A span says what it is in
`openinference.span.kind`: LLM (a model call: `llm.input_messages.N.message.*`,
`llm.output_messages.N.message.*` with `...tool_calls.M.tool_call.function.name/arguments`,
`llm.model_name`, `llm.token_count.prompt/completion`), TOOL (`tool.name`, its arguments in
`input.value`, its result in `output.value`), AGENT (an agent's run: `agent.name`, its task in
`input.value`, its answer in `output.value`) and CHAIN (any step of a framework's pipeline; only a
root CHAIN is read as the run, the others are plumbing). `session.id` is the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mast_otel import semconv as sc
from mast_otel.conversation.flattened import indexed
from mast_otel.conversation.model import ToolCall
from mast_otel.conversation.normalize import (
    Message,
    Operation,
    Part,
    SpanView,
    _as_text,
    _content_text,
    _count,
    _error,
    _load_json,
)
from mast_otel.spans import AttributeValue, Span

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
_OPERATIONS = {"LLM": Operation.LLM, "TOOL": Operation.TOOL, "AGENT": Operation.AGENT}
# Keys a framework's JSON input commonly puts the task under (LangChain's {"input": ...}, ...).
_TASK_KEYS = ("input", "question", "query", "task", "content", "message")


class OpenInferenceNormalizer:
    """Reads spans that carry `openinference.span.kind`."""

    def accepts(self, span: Span) -> bool:
        return SPAN_KIND in span.attributes

    def view(self, span: Span) -> SpanView:
        kind = span.text(SPAN_KIND).upper()
        operation = _OPERATIONS.get(kind, Operation.OTHER)
        if kind == "CHAIN" and span.is_root:
            operation = Operation.AGENT
        attributes = span.attributes
        base = SpanView(span, Operation.OTHER, conversation_id=span.text("session.id"), error=_error(span))
        if operation is Operation.LLM:
            finish = span.text("llm.finish_reason")
            return replace(
                base,
                operation=operation,
                model=span.text("llm.model_name"),
                input_messages=_messages(attributes, "llm.input_messages"),
                output_messages=_messages(attributes, "llm.output_messages"),
                finish_reasons=(finish,) if finish else (),
                input_tokens=_count(span.number("llm.token_count.prompt")),
                output_tokens=_count(span.number("llm.token_count.completion")),
            )
        if operation is Operation.TOOL:
            result = attributes.get(OUTPUT_VALUE)
            arguments = attributes.get(INPUT_VALUE, attributes.get("tool.parameters"))
            tool = ToolCall(
                name=span.text("tool.name") or span.name,
                call_id=span.text("tool_call.id"),
                arguments=_as_text(arguments),
                result=None if result is None else _as_text(result),
                error=_error(span),
            )
            return replace(base, operation=operation, tool=tool)
        if operation is Operation.AGENT:
            task = _task_text(attributes.get(INPUT_VALUE))
            answer = _task_text(attributes.get(OUTPUT_VALUE))
            return replace(
                base,
                operation=operation,
                agent=span.text("agent.name") or span.name,
                input_messages=(Message("user", (Part(sc.PART_TEXT, task),)),) if task else (),
                output_messages=(Message("assistant", (Part(sc.PART_TEXT, answer),)),) if answer else (),
            )
        return base


def _messages(attributes: Mapping[str, AttributeValue], prefix: str) -> tuple[Message, ...]:
    return tuple(_message(group) for group in indexed(attributes, prefix))


def _message(group: Mapping[str, AttributeValue]) -> Message:
    role = _as_text(group.get("message.role")) or "user"
    parts: list[Part] = []
    content = _as_text(group.get("message.content"))
    if not content:  # multimodal form: message.contents.K.message_content.type/text
        texts = (_as_text(c.get("message_content.text")) for c in indexed(group, "message.contents"))
        content = "\n".join(t for t in texts if t)
    if role == "tool":
        parts.append(
            Part(sc.PART_TOOL_CALL_RESPONSE, content, id=_as_text(group.get("message.tool_call_id")))
        )
    elif content:
        parts.append(Part(sc.PART_TEXT, content))
    for call in indexed(group, "message.tool_calls"):
        parts.append(
            Part(
                sc.PART_TOOL_CALL,
                id=_as_text(call.get("tool_call.id")),
                name=_as_text(call.get("tool_call.function.name")),
                arguments=_as_text(call.get("tool_call.function.arguments")),
            )
        )
    return Message(role, tuple(parts), name=_as_text(group.get("message.name")))


def _task_text(value: AttributeValue) -> str:
    """`input.value` / `output.value` as the text a person would read: plain text as it is, a JSON
    string or a framework's {"input": ...} unwrapped, other JSON kept as JSON."""
    if value is None:
        return ""
    decoded = _load_json(value)
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, dict):
        for key in _TASK_KEYS:
            inner = decoded.get(key)
            if isinstance(inner, str) and inner:
                return inner
    return _content_text(decoded) if isinstance(decoded, list) else _as_text(value)
