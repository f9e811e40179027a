"""Rebuild stage, part 1: read one span, whatever convention wrote it, into a `SpanView`.

Instrumentations disagree on where they put an LLM call's messages, a tool's result or an agent's
name. A normalizer reads one convention and fills the same `SpanView`, so the rebuild (part 2,
`rebuild.py`) never looks at attribute names. Normalizers are tried in order and the first whose
`accepts` says yes wins; `GenAiNormalizer` (OpenTelemetry GenAI semantic conventions, which our
SDK emits) comes with this module, other conventions plug in through `NORMALIZERS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from mast_otel import semconv as sc
from mast_otel.conversation.model import Outcome, ToolCall
from mast_otel.spans import AttributeValue, Span, StatusCode


class Operation(str, Enum):
    AGENT = "agent"  # an agent's run (invoke_agent / invoke_workflow)
    LLM = "llm"  # one model call (chat / text_completion / generate_content)
    TOOL = "tool"  # one tool execution
    REASONING = "reasoning"
    MESSAGE = "message"  # an agent message recorded without a model call
    HANDOFF = "handoff"
    OUTCOME = "outcome"  # a verdict on the run, possibly from a grader after the run ended
    OTHER = "other"  # HTTP, DB, ... spans: kept in otel_traces, not turns


@dataclass(frozen=True, slots=True)
class Part:
    type: str  # semconv part type: text, tool_call, tool_call_response, reasoning, or what the sender used
    content: str = ""  # text / reasoning content, or a tool response rendered as text
    id: str = ""  # tool call id
    name: str = ""  # tool name
    arguments: str = ""  # tool call arguments as JSON text


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    parts: tuple[Part, ...]
    finish_reason: str = ""
    name: str = ""  # the speaker, when a group chat names participants

    @property
    def text(self) -> str:
        return "\n".join(p.content for p in self.parts if p.type == sc.PART_TEXT and p.content)


@dataclass(frozen=True, slots=True)
class SpanView:
    """What the rebuild needs from one span, independent of the convention that wrote it."""

    span: Span
    operation: Operation
    agent: str = ""
    model: str = ""
    input_messages: tuple[Message, ...] = ()
    output_messages: tuple[Message, ...] = ()
    system_instructions: str = ""
    tool: ToolCall | None = None
    handoff_target: str = ""
    finish_reasons: tuple[str, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    outcome: Outcome | None = None
    score: float | None = None
    task_id: str = ""
    conversation_id: str = ""
    error: str = ""  # error.type, or the status message of an ERROR span


class Normalizer(Protocol):
    def accepts(self, span: Span) -> bool: ...

    def view(self, span: Span) -> SpanView: ...


_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content"})
_AGENT_OPERATIONS = frozenset({sc.OP_INVOKE_AGENT, sc.OP_INVOKE_WORKFLOW, "create_agent"})
_STEP_KINDS = {
    sc.STEP_REASONING: Operation.REASONING,
    sc.STEP_MESSAGE: Operation.MESSAGE,
    sc.STEP_HANDOFF: Operation.HANDOFF,
    sc.STEP_OUTCOME: Operation.OUTCOME,
}


class GenAiNormalizer:
    """OpenTelemetry GenAI semantic conventions (v1.41 JSON message form) plus the `mast.*` extensions."""

    def accepts(self, span: Span) -> bool:
        attributes = span.attributes
        return (
            sc.GEN_AI_OPERATION_NAME in attributes
            or sc.MAST_STEP_KIND in attributes
            or sc.MAST_TASK_OUTCOME in attributes
            or sc.GEN_AI_AGENT_NAME in attributes
        )

    def view(self, span: Span) -> SpanView:
        operation = _operation(span)
        tool = None
        if operation is Operation.TOOL:
            result = span.attributes.get(sc.GEN_AI_TOOL_CALL_RESULT)
            tool = ToolCall(
                name=span.text(sc.GEN_AI_TOOL_NAME) or span.name.removeprefix("execute_tool ").strip(),
                call_id=span.text(sc.GEN_AI_TOOL_CALL_ID),
                arguments=_as_text(span.attributes.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)),
                result=None if result is None else _as_text(result),
                error=_error(span),
            )
        score = span.number(sc.MAST_TASK_SCORE)
        outcome_value = span.attributes.get(sc.MAST_TASK_OUTCOME)
        return SpanView(
            span=span,
            operation=operation,
            agent=span.text(sc.GEN_AI_AGENT_NAME),
            model=span.text(sc.GEN_AI_RESPONSE_MODEL) or span.text(sc.GEN_AI_REQUEST_MODEL),
            input_messages=parse_messages(span.attributes.get(sc.GEN_AI_INPUT_MESSAGES)),
            output_messages=parse_messages(
                span.attributes.get(sc.GEN_AI_OUTPUT_MESSAGES), default_role="assistant"
            ),
            system_instructions=_system_text(span.attributes.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS)),
            tool=tool,
            handoff_target=span.text(sc.MAST_HANDOFF_TARGET),
            finish_reasons=_strings(span.attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)),
            input_tokens=_count(span.number(sc.GEN_AI_USAGE_INPUT_TOKENS)),
            output_tokens=_count(span.number(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
            outcome=None if outcome_value is None else Outcome.parse(outcome_value),
            score=score if score is not None and 0.0 <= score <= 1.0 else None,
            task_id=span.text(sc.MAST_TASK_ID),
            conversation_id=span.text(sc.GEN_AI_CONVERSATION_ID),
            error=_error(span),
        )


class FallbackNormalizer:
    """Spans no convention claims: kept as OTHER so they count, but make no turns."""

    def accepts(self, span: Span) -> bool:
        return True

    def view(self, span: Span) -> SpanView:
        return SpanView(span=span, operation=Operation.OTHER, error=_error(span))


NORMALIZERS: list[Normalizer] = [GenAiNormalizer()]  # replaced below by every convention, in order


def view_span(span: Span, normalizers: Sequence[Normalizer] | None = None) -> SpanView:
    for normalizer in NORMALIZERS if normalizers is None else normalizers:
        if normalizer.accepts(span):
            return normalizer.view(span)
    return FallbackNormalizer().view(span)


def _operation(span: Span) -> Operation:
    step_kind = span.text(sc.MAST_STEP_KIND)
    if step_kind in _STEP_KINDS:
        return _STEP_KINDS[step_kind]
    name = span.text(sc.GEN_AI_OPERATION_NAME)
    if name in _AGENT_OPERATIONS:
        return Operation.AGENT
    if name in _LLM_OPERATIONS:
        return Operation.LLM
    if name == sc.OP_EXECUTE_TOOL:
        return Operation.TOOL
    if sc.MAST_TASK_OUTCOME in span.attributes and not name:
        return Operation.OUTCOME
    return Operation.OTHER


def _count(value: float | None) -> int:
    """A token count from the wire: non-negative and finite, else 0 (senders do send NaN and inf)."""
    if value is None or not math.isfinite(value) or value < 0:
        return 0
    return int(min(value, 2**63 - 1))


def _error(span: Span) -> str:
    error_type = span.text(sc.ERROR_TYPE)
    if error_type:
        return error_type
    if span.status is StatusCode.ERROR:
        return span.status_message or "error"
    return ""


def _as_text(value: AttributeValue) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return json.dumps(value, default=str, ensure_ascii=False)


def _strings(value: AttributeValue) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, tuple):
        return tuple(str(v) for v in value)
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return (value,)
        if isinstance(decoded, list):
            return tuple(str(v) for v in decoded)
        return (value,)
    return (str(value),)


def _load_json(value: AttributeValue) -> Any:
    if isinstance(value, (tuple, dict)):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value  # not JSON: the whole string is one text


def _system_text(value: AttributeValue) -> str:
    if value is None:
        return ""
    decoded = _load_json(value)
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, (list, tuple)):
        texts = [_part(p).content for p in decoded]
        return "\n".join(t for t in texts if t)
    return _as_text(value)


def parse_messages(value: AttributeValue, default_role: str = "user") -> tuple[Message, ...]:
    """Tolerant reading of `gen_ai.input/output.messages`: the spec's shape, OpenAI's shape, or plain text."""
    if value is None:
        return ()
    decoded = _load_json(value)
    if isinstance(decoded, str):
        return (Message(default_role, (Part(sc.PART_TEXT, decoded),)),) if decoded else ()
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, (list, tuple)):
        return ()
    return tuple(_message(item, default_role) for item in decoded if isinstance(item, dict))


def _message(item: dict[str, Any], default_role: str) -> Message:
    role = str(item.get("role") or default_role)
    finish_reason = str(item.get("finish_reason") or "")
    name = str(item.get("name") or "")
    raw_parts = item.get("parts")
    if isinstance(raw_parts, list):
        return Message(role, tuple(_part(p) for p in raw_parts), finish_reason, name)
    # OpenAI chat shape: {"role", "content", "tool_calls", "tool_call_id"}
    parts: list[Part] = []
    content = item.get("content")
    if role == "tool":
        parts.append(
            Part(sc.PART_TOOL_CALL_RESPONSE, _content_text(content), id=str(item.get("tool_call_id") or ""))
        )
    elif content:
        parts.append(Part(sc.PART_TEXT, _content_text(content)))
    for call in item.get("tool_calls") or ():
        if isinstance(call, dict):
            nested = call.get("function")
            function: dict[str, Any] = nested if isinstance(nested, dict) else call
            parts.append(
                Part(
                    sc.PART_TOOL_CALL,
                    id=str(call.get("id") or ""),
                    name=str(function.get("name") or ""),
                    arguments=_json_text(function.get("arguments")),
                )
            )
    return Message(role, tuple(parts), finish_reason, name)


def _part(raw: Any) -> Part:
    if not isinstance(raw, dict):
        return Part(sc.PART_TEXT, _content_text(raw))
    kind = str(raw.get("type") or sc.PART_TEXT)
    if kind == sc.PART_TOOL_CALL:
        return Part(
            kind,
            id=str(raw.get("id") or ""),
            name=str(raw.get("name") or ""),
            arguments=_json_text(raw.get("arguments")),
        )
    if kind == sc.PART_TOOL_CALL_RESPONSE:
        return Part(kind, _content_text(raw.get("response", raw.get("result"))), id=str(raw.get("id") or ""))
    return Part(kind, _content_text(raw.get("content", raw.get("text"))))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts [{"type": "text", "text": ...}]
        texts = [
            str(p.get("text") or p.get("content") or "") if isinstance(p, dict) else str(p) for p in content
        ]
        return "\n".join(t for t in texts if t)
    return json.dumps(content, default=str, ensure_ascii=False)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)


# The other conventions build on the types above, so they are imported last; `conventions.py` is the
# one place that orders them (which convention wins when a span carries several).
from mast_otel.conversation.conventions import ordered_normalizers  # noqa: E402

NORMALIZERS[:] = ordered_normalizers()
