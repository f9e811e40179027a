"""Spans of an agent run: the run itself, its LLM calls, tool calls, reasoning, messages and handoffs.

An `AgentRun` owns one `invoke_agent` span. Every step recorded on it becomes a child span carrying
`mast.step.index`, numbered in creation order by a counter that the root run shares with its sub
agents, so the steps of one trace are totally ordered even when spans end out of order or clocks of
threads disagree. The current run travels in a context variable (asyncio tasks inherit it), which
is what the module-level shortcuts and decorators act on.

Content (messages, reasoning, tool payloads, the task and the final answer) goes through the
`ContentPolicy`: dropped when capture is off, redacted otherwise.
"""

from __future__ import annotations

import asyncio
import math
import threading
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.semconv.attributes.exception_attributes import EXCEPTION_MESSAGE, EXCEPTION_STACKTRACE
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from mast_otel.conversation.model import Outcome
from mast_otel.sdk import _messages
from mast_otel.sdk._config import ContentPolicy, Instrumentation, active
from mast_otel.semconv import (
    ERROR_TYPE,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    MAST_HANDOFF_SOURCE,
    MAST_HANDOFF_TARGET,
    MAST_STEP_INDEX,
    MAST_STEP_KIND,
    MAST_TASK_ID,
    MAST_TASK_OUTCOME,
    MAST_TASK_SCORE,
    OP_CHAT,
    OP_EXECUTE_TOOL,
    OP_INVOKE_AGENT,
    SPAN_HANDOFF,
    SPAN_MESSAGE,
    SPAN_OUTCOME,
    SPAN_REASONING,
    STEP_HANDOFF,
    STEP_MESSAGE,
    STEP_OUTCOME,
    STEP_REASONING,
)

Attributes = dict[str, AttributeValue]
Message = Mapping[str, object]

_current_run: ContextVar[AgentRun | None] = ContextVar("mast_otel_current_run", default=None)
_id_generator = RandomIdGenerator()


def current_run() -> AgentRun | None:
    """The innermost run active in this context (thread or asyncio task), if any."""
    return _current_run.get()


class _StepCounter:
    """Numbers the steps of one trace; shared by a root run and all its sub agents."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0

    def take(self) -> int:
        with self._lock:
            index = self._next
            self._next += 1
            return index


class ChatCall:
    """An LLM call (`chat {model}` span); report what the model answered with `set_response`."""

    def __init__(self, span: trace.Span, content: ContentPolicy, model: str | None) -> None:
        self._span = span
        self._content = content
        self._model = model

    @property
    def span(self) -> trace.Span:
        return self._span

    def set_response(
        self,
        text: str | None = None,
        *,
        reasoning: str | None = None,
        tool_calls: Sequence[Mapping[str, object]] | None = None,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        response_model: str | None = None,
    ) -> None:
        """Record the model's answer: its text, reasoning, requested tool calls, finish reason and usage.

        `tool_calls` items are `{"id", "name", "arguments"}` or OpenAI's `{"id", "function": {...}}`.
        `response_model` defaults to the requested model.
        """
        attributes: Attributes = {}
        model = response_model or self._model
        if model:
            attributes[GEN_AI_RESPONSE_MODEL] = model
        if finish_reason:
            attributes[GEN_AI_RESPONSE_FINISH_REASONS] = (finish_reason,)
        if input_tokens is not None:
            attributes[GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if self._content.capture:
            redact = self._content.redact
            parts: list[_messages.Part] = []
            if reasoning:
                parts.append(_messages.reasoning_part(reasoning, redact))
            if text:
                parts.append(_messages.text_part(text, redact))
            parts.extend(_messages.tool_call_part(call, redact) for call in tool_calls or ())
            # The spec requires a finish reason on output messages; infer the obvious one if not given.
            inferred = "tool_call" if tool_calls else "stop"
            attributes[GEN_AI_OUTPUT_MESSAGES] = _messages.output_message_json(
                parts, finish_reason or inferred
            )
        self._span.set_attributes(attributes)


class ToolCallSpan:
    """A tool execution (`execute_tool {tool}` span); report its result or failure."""

    def __init__(self, span: trace.Span, content: ContentPolicy, name: str, call_id: str | None) -> None:
        self._span = span
        self._content = content
        self.name = name
        self.call_id = call_id

    @property
    def span(self) -> trace.Span:
        return self._span

    def set_result(self, result: object) -> None:
        """The tool's result: a string as is, anything else as JSON."""
        if self._content.capture:
            self._span.set_attribute(
                GEN_AI_TOOL_CALL_RESULT, _messages.value_json(result, self._content.redact)
            )

    def set_error(self, error_type: str, message: str | None = None) -> None:
        """Mark the call failed without raising, e.g. when the tool reported an error in its result."""
        self._span.set_attribute(ERROR_TYPE, error_type)
        description = f"{error_type}: {self._content.redact(message)}" if message else error_type
        self._span.set_status(Status(StatusCode.ERROR, description))


class AgentRun:
    """One agent's run (`invoke_agent {agent}` span) and the API to record its steps.

    Obtain one from `agent_run(...)` or `run.sub_agent(...)`; the steps below become child spans.
    """

    def __init__(
        self,
        *,
        instrumentation: Instrumentation,
        span: trace.Span,
        agent_name: str,
        model: str | None,
        provider_name: str | None,
        conversation_id: str,
        steps: _StepCounter,
    ) -> None:
        self._instrumentation = instrumentation
        self._span = span
        self._steps = steps
        self.agent_name = agent_name
        self.model = model
        self.provider_name = provider_name
        self.conversation_id = conversation_id
        self._final_answer_set = False

    @property
    def span(self) -> trace.Span:
        return self._span

    @property
    def trace_id(self) -> str:
        return trace.format_trace_id(self._span.get_span_context().trace_id)

    @property
    def span_id(self) -> str:
        return trace.format_span_id(self._span.get_span_context().span_id)

    @property
    def has_final_answer(self) -> bool:
        return self._final_answer_set

    @contextmanager
    def chat(
        self,
        *,
        model: str | None = None,
        input_messages: Sequence[Message] | None = None,
        system_instructions: str | Sequence[str | Mapping[str, object]] | None = None,
    ) -> Iterator[ChatCall]:
        """An LLM call of this agent; `model` defaults to the run's."""
        model = model or self.model
        attributes: Attributes = {
            GEN_AI_OPERATION_NAME: OP_CHAT,
            GEN_AI_CONVERSATION_ID: self.conversation_id,
        }
        if model:
            attributes[GEN_AI_REQUEST_MODEL] = model
        if self.provider_name:
            attributes[GEN_AI_PROVIDER_NAME] = self.provider_name
        content = self._instrumentation.content
        if content.capture:
            if input_messages is not None:
                attributes[GEN_AI_INPUT_MESSAGES] = _messages.input_messages_json(
                    input_messages, content.redact
                )
            if system_instructions:
                attributes[GEN_AI_SYSTEM_INSTRUCTIONS] = _messages.system_instructions_json(
                    system_instructions, content.redact
                )
        span = self._start_step(f"{OP_CHAT} {model}" if model else OP_CHAT, attributes, SpanKind.CLIENT)
        with _activated(span, content):
            yield ChatCall(span, content, model)

    @contextmanager
    def tool_call(
        self, name: str, *, arguments: object = None, call_id: str | None = None
    ) -> Iterator[ToolCallSpan]:
        """A tool execution by this agent. An exception in the block marks the span failed and propagates."""
        span = self._start_step(
            f"{OP_EXECUTE_TOOL} {name}",
            _tool_attributes(name, arguments, call_id, self._instrumentation.content),
        )
        with _activated(span, self._instrumentation.content):
            yield ToolCallSpan(span, self._instrumentation.content, name, call_id)

    def reasoning(self, text: str) -> None:
        """The agent's reasoning between actions, as a step of its own."""
        self._instant_step(SPAN_REASONING, STEP_REASONING, reasoning=text)

    def message(self, text: str) -> None:
        """Something the agent said without an LLM call span of its own (e.g. a framework's message)."""
        self._instant_step(SPAN_MESSAGE, STEP_MESSAGE, text=text)

    def handoff(self, target: str, *, reason: str | None = None) -> None:
        """Control passes from this agent to `target`."""
        self._instant_step(
            SPAN_HANDOFF,
            STEP_HANDOFF,
            text=reason,
            extra={MAST_HANDOFF_SOURCE: self.agent_name, MAST_HANDOFF_TARGET: target},
        )

    @contextmanager
    def sub_agent(
        self,
        name: str,
        *,
        model: str | None = None,
        task: str | None = None,
        agent_id: str | None = None,
        provider_name: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> Iterator[AgentRun]:
        """A nested agent, child of the current span (e.g. of the tool call that delegates to it).

        Model and provider default to this run's; the conversation id and step numbering are shared.
        """
        current = trace.get_current_span()
        in_this_trace = current.get_span_context().trace_id == self._span.get_span_context().trace_id
        parent = current if in_this_trace else self._span
        with _run_scope(
            self._instrumentation,
            parent=trace.set_span_in_context(parent),
            name=name,
            model=model or self.model,
            provider_name=provider_name or self.provider_name,
            task=task,
            task_id=None,
            agent_id=agent_id,
            conversation_id=self.conversation_id,
            steps=self._steps,
            attributes=attributes,
        ) as run:
            yield run

    def set_outcome(self, outcome: Outcome | str | bool, score: float | None = None) -> None:
        """The run's outcome (and score in [0, 1]); after the run ended it goes out like `record_outcome`."""
        verdict, checked_score = _checked_outcome(outcome), _checked_score(score)
        if not self._span.is_recording():
            _emit_outcome(self._instrumentation, self._span.get_span_context(), verdict, checked_score)
            return
        self._span.set_attribute(MAST_TASK_OUTCOME, verdict.value)
        if checked_score is not None:
            self._span.set_attribute(MAST_TASK_SCORE, checked_score)

    def set_final_answer(self, text: str) -> None:
        """The run's answer, as the output message of its `invoke_agent` span."""
        self._final_answer_set = True
        content = self._instrumentation.content
        if content.capture:
            self._span.set_attribute(
                GEN_AI_OUTPUT_MESSAGES,
                _messages.output_message_json([_messages.text_part(text, content.redact)], "stop"),
            )

    def _start_step(
        self, name: str, attributes: Attributes, kind: SpanKind = SpanKind.INTERNAL
    ) -> trace.Span:
        return self._instrumentation.tracer.start_span(
            name,
            context=trace.set_span_in_context(self._span),
            kind=kind,
            attributes={
                MAST_STEP_INDEX: self._steps.take(),
                GEN_AI_AGENT_NAME: self.agent_name,
                **attributes,
            },
        )

    def _instant_step(
        self,
        name: str,
        step_kind: str,
        *,
        text: str | None = None,
        reasoning: str | None = None,
        extra: Attributes | None = None,
    ) -> None:
        attributes: Attributes = {MAST_STEP_KIND: step_kind, **(extra or {})}
        content = self._instrumentation.content
        if content.capture and (text or reasoning):
            part = (
                _messages.reasoning_part(reasoning, content.redact)
                if reasoning
                else _messages.text_part(text or "", content.redact)
            )
            attributes[GEN_AI_OUTPUT_MESSAGES] = _messages.output_message_json([part], "stop")
        self._start_step(name, attributes).end()


@contextmanager
def agent_run(
    name: str,
    *,
    model: str | None = None,
    task: str | None = None,
    task_id: str | None = None,
    conversation_id: str | None = None,
    provider_name: str | None = None,
    agent_id: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[AgentRun]:
    """Record an agent run: an `invoke_agent {name}` span that is current inside the block.

    Started inside another run of the same trace, the run joins that run's step numbering and
    conversation, like `run.sub_agent`. An exception in the block marks the run failed and propagates.
    """
    outer = current_run()
    current_trace = trace.get_current_span().get_span_context().trace_id
    joins_outer = outer is not None and outer.span.get_span_context().trace_id == current_trace
    with _run_scope(
        active(),
        parent=None,  # the current context
        name=name,
        model=model,
        provider_name=provider_name,
        task=task,
        task_id=task_id,
        agent_id=agent_id,
        conversation_id=conversation_id
        or (outer.conversation_id if outer is not None and joins_outer else uuid.uuid4().hex),
        steps=outer._steps if outer is not None and joins_outer else _StepCounter(),
        attributes=attributes,
    ) as run:
        yield run


def record_outcome(
    trace_id: str,
    outcome: Outcome | str | bool,
    score: float | None = None,
    *,
    root_span_id: str | None = None,
) -> None:
    """Attach a grader's verdict to a run that may have ended long ago, knowing only its trace id.

    Emits a `mast.task.outcome` span inside that trace, a child of `root_span_id` when given. The span
    is exported with the next batch; call `force_flush()` before a short-lived grader exits.
    """
    verdict, checked_score = _checked_outcome(outcome), _checked_score(score)
    parent = SpanContext(
        trace_id=_parse_hex_id(trace_id, 32, "trace_id"),
        span_id=(
            _parse_hex_id(root_span_id, 16, "root_span_id")
            if root_span_id is not None
            else _id_generator.generate_span_id()
        ),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    _emit_outcome(active(), parent, verdict, checked_score)


@contextmanager
def tool_call_span(
    name: str, *, arguments: object = None, call_id: str | None = None
) -> Iterator[ToolCallSpan]:
    """A tool call on the current run, or a stand-alone `execute_tool` span when no run is active."""
    run = current_run()
    if run is not None:
        with run.tool_call(name, arguments=arguments, call_id=call_id) as tool:
            yield tool
        return
    instrumentation = active()
    span = instrumentation.tracer.start_span(
        f"{OP_EXECUTE_TOOL} {name}",
        attributes=_tool_attributes(name, arguments, call_id, instrumentation.content),
    )
    with _activated(span, instrumentation.content):
        yield ToolCallSpan(span, instrumentation.content, name, call_id)


@contextmanager
def _run_scope(
    instrumentation: Instrumentation,
    *,
    parent: Context | None,
    name: str,
    model: str | None,
    provider_name: str | None,
    task: str | None,
    task_id: str | None,
    agent_id: str | None,
    conversation_id: str,
    steps: _StepCounter,
    attributes: Mapping[str, AttributeValue] | None,
) -> Iterator[AgentRun]:
    span_attributes: Attributes = {
        **(attributes or {}),
        MAST_STEP_INDEX: steps.take(),
        GEN_AI_OPERATION_NAME: OP_INVOKE_AGENT,
        GEN_AI_AGENT_NAME: name,
        GEN_AI_CONVERSATION_ID: conversation_id,
    }
    optional: Attributes = {
        GEN_AI_AGENT_ID: agent_id or "",
        GEN_AI_REQUEST_MODEL: model or "",
        GEN_AI_PROVIDER_NAME: provider_name or "",
        MAST_TASK_ID: task_id or "",
    }
    span_attributes.update({key: value for key, value in optional.items() if value})
    if task and instrumentation.content.capture:
        span_attributes[GEN_AI_INPUT_MESSAGES] = _messages.user_message_json(
            task, instrumentation.content.redact
        )
    span = instrumentation.tracer.start_span(
        f"{OP_INVOKE_AGENT} {name}", context=parent, kind=SpanKind.INTERNAL, attributes=span_attributes
    )
    run = AgentRun(
        instrumentation=instrumentation,
        span=span,
        agent_name=name,
        model=model,
        provider_name=provider_name,
        conversation_id=conversation_id,
        steps=steps,
    )
    token = _current_run.set(run)
    try:
        with _activated(span, instrumentation.content):
            yield run
    finally:
        _current_run.reset(token)


@contextmanager
def _activated(span: trace.Span, content: ContentPolicy) -> Iterator[None]:
    """Make `span` current for the block, end it after, and record an exception that escapes."""
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield
        # Cancellation is how asyncio stops an agent that ran out of time: a failure of the step.
        except (Exception, asyncio.CancelledError) as error:
            _record_failure(span, error, content)
            raise


def _record_failure(span: trace.Span, error: BaseException, content: ContentPolicy) -> None:
    error_type = type(error).__qualname__
    message = content.redact(str(error))
    span.set_attribute(ERROR_TYPE, error_type)
    redacted: Attributes | None = None
    if content.redact_hook is not None:
        redacted = {
            EXCEPTION_MESSAGE: message,
            EXCEPTION_STACKTRACE: content.redact("".join(traceback.format_exception(error))),
        }
    span.record_exception(error, attributes=redacted, escaped=True)
    span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}" if message else error_type))


def _tool_attributes(name: str, arguments: object, call_id: str | None, content: ContentPolicy) -> Attributes:
    attributes: Attributes = {GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL, GEN_AI_TOOL_NAME: name}
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    if arguments is not None and content.capture:
        attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = _messages.value_json(arguments, content.redact)
    return attributes


def _emit_outcome(
    instrumentation: Instrumentation, parent: SpanContext, outcome: Outcome, score: float | None
) -> None:
    attributes: Attributes = {MAST_STEP_KIND: STEP_OUTCOME, MAST_TASK_OUTCOME: outcome.value}
    if score is not None:
        attributes[MAST_TASK_SCORE] = score
    instrumentation.tracer.start_span(
        SPAN_OUTCOME,
        context=trace.set_span_in_context(NonRecordingSpan(parent)),
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    ).end()


def _checked_outcome(outcome: Outcome | str | bool) -> Outcome:
    """Lenient about spelling ("passed", True), strict about nonsense: a typo must not become "unknown"."""
    if isinstance(outcome, Outcome):
        return outcome
    parsed = Outcome.parse(outcome)
    if parsed is Outcome.UNKNOWN and str(outcome).strip().lower() != Outcome.UNKNOWN.value:
        raise ValueError(
            f"outcome {outcome!r} is not recognised; use an Outcome or one of "
            f"{', '.join(repr(member.value) for member in Outcome)}"
        )
    return parsed


def _checked_score(score: float | None) -> float | None:
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValueError(f"score must be a number in [0, 1], got {score!r}")
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        raise ValueError(f"score must be in [0, 1], got {score!r}")
    return float(score)


def _parse_hex_id(value: str, length: int, what: str) -> int:
    text = value.strip().lower() if isinstance(value, str) else ""
    if len(text) != length or any(char not in "0123456789abcdef" for char in text):
        raise ValueError(f"{what} must be {length} hexadecimal characters, got {value!r}")
    parsed = int(text, 16)
    if parsed == 0:
        raise ValueError(f"{what} must not be all zeros (the invalid id), got {value!r}")
    return parsed
