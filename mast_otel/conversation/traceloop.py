"""OpenLLMetry (Traceloop) spans in their indexed-attribute form -> `SpanView`.

Convention: the attributes of opentelemetry-semantic-conventions-ai (read against 0.5.1, the form
the OpenLLMetry instrumentations wrote up to their 0.4x releases): a model call numbers its
messages, `gen_ai.prompt.N.role/content/tool_call_id` and `gen_ai.completion.N.role/content/
finish_reason`, with requested calls in `gen_ai.completion.N.tool_calls.M.id/name/arguments`;
tokens are `gen_ai.usage.input_tokens/output_tokens` (or the older `prompt_tokens/completion_tokens`,
or `llm.usage.*`). The Traceloop SDK's decorators mark their spans with `traceloop.span.kind`
(workflow, agent, task, tool) and record `traceloop.entity.name/input/output`, where the input is
`{"args": [...], "kwargs": {...}}` as JSON. Workflows and agents are runs, tools are tool calls,
tasks are plumbing. Current OpenLLMetry releases (0.62) write the GenAI JSON message form instead,
which `GenAiNormalizer` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mast_otel import semconv as sc
from mast_otel.conversation.flattened import has_indexed, indexed
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
    _strings,
)
from mast_otel.spans import AttributeValue, Span

SPAN_KIND = "traceloop.span.kind"
ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"
PROMPTS = "gen_ai.prompt"
COMPLETIONS = "gen_ai.completion"
_KINDS = {"workflow": Operation.AGENT, "agent": Operation.AGENT, "tool": Operation.TOOL}
_LLM_REQUEST_TYPES = frozenset({"chat", "completion"})


class TraceloopNormalizer:
    """Reads spans with `traceloop.span.kind` or numbered `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`."""

    def accepts(self, span: Span) -> bool:
        attributes = span.attributes
        return (
            SPAN_KIND in attributes
            or has_indexed(attributes, PROMPTS)
            or has_indexed(attributes, COMPLETIONS)
        )

    def view(self, span: Span) -> SpanView:
        attributes = span.attributes
        base = SpanView(span, Operation.OTHER, error=_error(span))
        kind = span.text(SPAN_KIND)
        if kind in _KINDS:
            operation = _KINDS[kind]
            name = span.text(ENTITY_NAME) or span.name.rsplit(".", 1)[0]
            if operation is Operation.TOOL:
                result = attributes.get(ENTITY_OUTPUT)
                tool = ToolCall(
                    name=name,
                    arguments=_as_text(attributes.get(ENTITY_INPUT)),
                    result=None if result is None else _as_text(result),
                    error=_error(span),
                )
                return replace(base, operation=operation, tool=tool)
            task = _entity_text(attributes.get(ENTITY_INPUT))
            answer = _entity_text(attributes.get(ENTITY_OUTPUT))
            return replace(
                base,
                operation=operation,
                agent=name,
                input_messages=(Message("user", (Part(sc.PART_TEXT, task),)),) if task else (),
                output_messages=(Message("assistant", (Part(sc.PART_TEXT, answer),)),) if answer else (),
            )
        request_type = span.text("llm.request.type")
        is_call = has_indexed(attributes, PROMPTS) or has_indexed(attributes, COMPLETIONS)
        if not is_call and request_type not in _LLM_REQUEST_TYPES:
            return base
        outputs = _messages(attributes, COMPLETIONS, "assistant")
        finish = tuple(m.finish_reason for m in outputs if m.finish_reason) or _strings(
            attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
        )
        return replace(
            base,
            operation=Operation.LLM,
            model=span.text(sc.GEN_AI_RESPONSE_MODEL) or span.text(sc.GEN_AI_REQUEST_MODEL),
            input_messages=_messages(attributes, PROMPTS, "user"),
            output_messages=outputs,
            finish_reasons=finish,
            input_tokens=_first_count(
                span, sc.GEN_AI_USAGE_INPUT_TOKENS, "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens"
            ),
            output_tokens=_first_count(
                span,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS,
                "gen_ai.usage.completion_tokens",
                "llm.usage.completion_tokens",
            ),
        )


def _messages(
    attributes: Mapping[str, AttributeValue], prefix: str, default_role: str
) -> tuple[Message, ...]:
    return tuple(_message(group, default_role) for group in indexed(attributes, prefix))


def _message(group: Mapping[str, AttributeValue], default_role: str) -> Message:
    role = _as_text(group.get("role")) or default_role
    content = _text(group.get("content"))
    parts: list[Part] = []
    if role == "tool":
        parts.append(Part(sc.PART_TOOL_CALL_RESPONSE, content, id=_as_text(group.get("tool_call_id"))))
    elif content:
        parts.append(Part(sc.PART_TEXT, content))
    calls = indexed(group, "tool_calls")
    if "function_call.name" in group:  # the pre-tools OpenAI form
        calls.append({"name": group["function_call.name"], "arguments": group.get("function_call.arguments")})
    for call in calls:
        parts.append(
            Part(
                sc.PART_TOOL_CALL,
                id=_as_text(call.get("id")),
                name=_as_text(call.get("name")),
                arguments=_as_text(call.get("arguments")),
            )
        )
    return Message(role, tuple(parts), _as_text(group.get("finish_reason")))


def _text(value: AttributeValue) -> str:
    """A message's content; multimodal content arrives as a JSON list of parts."""
    text = _as_text(value)
    if text.startswith("[") and text.endswith("]"):
        decoded = _load_json(text)
        if isinstance(decoded, list):
            return _content_text(decoded)
    return text


def _entity_text(value: AttributeValue) -> str:
    """A decorated function's input or output as text: the one string argument when there is one."""
    if value is None:
        return ""
    decoded = _load_json(value)
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, dict) and set(decoded) <= {"args", "kwargs"}:
        args = decoded.get("args") or []
        kwargs = decoded.get("kwargs") or {}
        values = [*args, *kwargs.values()] if isinstance(args, list) and isinstance(kwargs, dict) else []
        strings = [v for v in values if isinstance(v, str) and v]
        if len(strings) == 1:
            return strings[0]
    return _as_text(value)


def _first_count(span: Span, *keys: str) -> int:
    for key in keys:
        value = span.number(key)
        if value is not None:
            return _count(value)
    return 0
