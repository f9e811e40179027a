"""Codex CLI sessions -> the spans of an agent run: the one module that knows Codex's vocabulary.

Codex (OpenAI's coding agent, the harness of IBM's ITBench SRE agent) records a session twice:

- its rollout file, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`: one JSON
  object per line, `{timestamp, type, payload}`. `session_meta` (id, cli_version, instructions),
  `turn_context` (model, ...), `response_item` (what the model saw and said: `message` with
  `input_text` / `output_text` parts, `reasoning`, `function_call` / `custom_tool_call` /
  `local_shell_call` and their `*_output`), `event_msg` (`user_message`, `token_count`,
  `task_complete`, `turn_aborted`, ...) and `compacted`. Line types and items this module does not
  know are passed over (every Codex release adds some); the oldest format, bare items without the
  `{timestamp, type, payload}` envelope, is read too.
- the OTLP log events it exports when its `[otel]` config names an exporter: `codex.user_prompt`
  (the prompt with `log_user_prompt`), `codex.tool_result` (tool, arguments, output),
  `codex.agent_response` (the final answer with `log_agent_responses`), `codex.sse_event` (token
  usage on `response.completed`), `codex.conversation_starts`, and more that carry no turn.

Both become the spans our SDK emits for an agent run (GenAI semantic conventions, `semconv.py`), so
`rebuild` turns them into a Conversation and annotation, storage and dashboards need nothing new:

- the session: an `invoke_agent codex` root. Its trace id is the session UUID's 32 hex digits, so
  a session imported twice, resumed, or exported over many batches is always the same run.
- each human prompt opens a Codex turn: an `invoke_agent codex` child with the prompt as its input
  message (from a rollout it spans the turn, holds its model and tool calls, and outputs the
  turn's final answer).
- each model response: `chat {model}` with the input messages that are new to it (developer
  instructions and injected context as `system`), its output (reasoning, text, tool calls) and
  token usage; the session's base instructions are the first call's `gen_ai.system_instructions`.
- each tool execution: `execute_tool {name}` with call id, arguments and output.
- from logs, the final answer is a `message` step (`mast.step.kind`): logs carry no other model
  output, so they lose the reasoning, commentary messages and system instructions a rollout has.

Log events are mapped one by one, without state across exports, so any batching of a session's
events rebuilds the same run; every log span id is derived from its record, so a retried export
duplicates nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from mast_otel import semconv as sc
from mast_otel.conversation.model import Conversation
from mast_otel.conversation.rebuild import rebuild
from mast_otel.sdk import _messages
from mast_otel.spans import AttributeValue, Resource, Span, SpanKind, StatusCode

AGENT_NAME = "codex"
SCOPE_NAME = "mast_otel.codex"
DEFAULT_SERVICE_NAME = "codex"

# --- rollout vocabulary -----------------------------------------------------------------------
LINE_SESSION_META = "session_meta"
LINE_TURN_CONTEXT = "turn_context"
LINE_RESPONSE_ITEM = "response_item"
LINE_EVENT_MSG = "event_msg"
LINE_COMPACTED = "compacted"
LINE_TOKEN_USAGE = "token_usage_record"  # Codex 0.17x: one per model response, besides token_count
_TOOL_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_TOOL_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
_OUTPUT_ITEMS = frozenset({"reasoning", "web_search_call"}) | _TOOL_CALL_ITEMS
_RESPONSE_ITEMS = frozenset({"message"}) | _OUTPUT_ITEMS | _TOOL_OUTPUT_ITEMS

# --- log vocabulary ---------------------------------------------------------------------------
EVENT_PREFIX = "codex."
EVENT_CONVERSATION_STARTS = "codex.conversation_starts"
EVENT_USER_PROMPT = "codex.user_prompt"
EVENT_SSE = "codex.sse_event"
EVENT_TOOL_RESULT = "codex.tool_result"
EVENT_AGENT_RESPONSE = "codex.agent_response"
ATTR_EVENT_NAME = "event.name"
ATTR_CONVERSATION_ID = "conversation.id"
ATTR_EVENT_TIMESTAMP = "event.timestamp"
_SSE_COMPLETED = "response.completed"

# Codex puts harness context (environment, AGENTS.md, skills) into user-role messages; this is
# how such a message looks, as opposed to what a human typed.
_INJECTED_BLOCK = re.compile(r"\A\s*<([A-Za-z_][\w-]*)[^>]*>.*</\1>\s*\Z", re.DOTALL)
_INJECTED_PREFIXES = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>")
_ISO_FRACTION = re.compile(r"\.(\d+)")
_MICROSECOND = 1_000
_LAST_SECOND = (2**63 - 1) // 1_000_000_000  # the last Unix second signed 64-bit nanoseconds can hold


def session_trace_id(session_id: str) -> str:
    """The trace id of a Codex session: its UUID as 32 hex digits (a hash of any other id)."""
    try:
        return uuid.UUID(session_id.strip()).hex
    except ValueError:
        return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]


def is_codex_event(name: str) -> bool:
    return name.startswith(EVENT_PREFIX)


# === rollouts ================================================================================


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A rollout line that could not be used, and why (the rest of the file still is)."""

    line: int
    problem: str


@dataclass(frozen=True, slots=True)
class RolloutRun:
    """A rollout, rebuilt: the run, and the lines that had to be left out."""

    conversation: Conversation
    problems: tuple[LineProblem, ...]


class RolloutError(ValueError):
    """The rollout holds no Codex session at all."""


def rollout_conversation(records: Iterable[tuple[int, object]], *, fallback_trace_id: str) -> RolloutRun:
    """Rebuild one rollout from its parsed lines, `(line number, JSON value)` in file order.

    `fallback_trace_id` identifies the run when the rollout names no session. Raises
    `RolloutError` when no line is a Codex record.
    """
    builder = _RolloutBuilder(list(records))
    spans, context_sizes = builder.spans(fallback_trace_id)
    if not spans:
        problem = "no Codex session records (session_meta, response_item, ...) in it"
        raise RolloutError(problem)
    conversation = rebuild(spans)
    # Chat spans carry only the messages new to each call (the full history each time would make a
    # long session quadratic), so the size of what each call saw is set here from the rollout.
    turns = tuple(
        replace(turn, context_size=context_sizes[turn.span_id]) if turn.span_id in context_sizes else turn
        for turn in conversation.turns
    )
    return RolloutRun(replace(conversation, turns=turns), tuple(builder.problems))


@dataclass
class _Call:
    """One model response, gathered from consecutive output items."""

    span_id: str
    parent: str
    start_ns: int
    end_ns: int
    model: str
    context_size: int
    inputs: list[dict[str, object]]
    system_instructions: str = ""
    parts: list[_messages.Part] = field(default_factory=list)
    requested_calls: int = 0
    usage: tuple[int, int] | None = None


@dataclass
class _Tool:
    call_id: str
    name: str
    arguments: str
    requested_by: _Call
    order: int
    span_id: str = ""
    end_ns: int = 0
    result: str | None = None
    error: str = ""


@dataclass
class _Turn:
    span_id: str
    start_ns: int
    end_ns: int
    prompt: str
    answer: str = ""
    error: str = ""  # error.type when the turn did not finish
    error_message: str = ""


@dataclass
class _Session:
    session_id: str = ""
    cli_version: str = ""
    originator: str = ""
    provider: str = ""
    source: str = ""
    instructions: str = ""
    start_ns: int | None = None


class _RolloutBuilder:
    """Walks a rollout's lines once, in order, and emits the spans at the end (token counts and
    tool outputs arrive after the call that they belong to)."""

    def __init__(self, records: list[tuple[int, object]]) -> None:
        self.problems: list[LineProblem] = []
        self._records = records
        self._session = _Session()
        self._now = 0
        self._end = 0
        self._model = ""
        self._history = 0  # items in the model's context
        self._pending: list[dict[str, object]] = []  # input messages since the last call
        self._calls: list[_Call] = []
        self._open: _Call | None = None
        self._tools: list[_Tool] = []
        self._awaiting: dict[str, _Tool] = {}  # tool calls without an output yet, by call id
        self._turns: list[_Turn] = []
        self._prompts = _human_prompts(records)
        self._instructions_sent = False
        self._local_ids = 0

    # --- walking ---------------------------------------------------------------------------
    def spans(self, fallback_trace_id: str) -> tuple[list[Span], dict[str, int]]:
        for line, record in self._records:
            try:
                self._read(record)
            except _BadLine as exc:
                self.problems.append(LineProblem(line, str(exc)))
        self._close_call()
        if not (self._calls or self._turns or self._session.session_id):
            return [], {}
        trace_id = (
            session_trace_id(self._session.session_id) if self._session.session_id else fallback_trace_id
        )
        return self._emit(trace_id)

    def _read(self, record: object) -> None:
        if not isinstance(record, dict):
            raise _BadLine(f"expected a JSON object, got {type(record).__name__}")
        kind, payload = record.get("type"), record.get("payload")
        if "payload" not in record:
            self._read_bare(record)
            return
        if not isinstance(kind, str) or not isinstance(payload, dict):
            raise _BadLine("not a rollout record: expected {timestamp, type, payload} with an object payload")
        self._tick(_time_ns(record.get("timestamp")))
        if kind == LINE_SESSION_META:
            self._read_session(payload)
        elif kind == LINE_TURN_CONTEXT:
            model = payload.get("model")
            if isinstance(model, str) and model:
                self._model = model
        elif kind == LINE_RESPONSE_ITEM:
            self._read_item(payload)
        elif kind == LINE_EVENT_MSG:
            self._read_event(payload)
        elif kind == LINE_TOKEN_USAGE:
            self._usage(payload.get("usage"))
        elif kind == LINE_COMPACTED:
            self._close_call()
            history = payload.get("replacement_history")
            self._history = len(history) if isinstance(history, list) else 1

    def _read_bare(self, record: dict[str, Any]) -> None:
        """The first rollout format: a bare session header, then bare items (no timestamps)."""
        if _str(record.get("type")) in _RESPONSE_ITEMS:
            self._tick(None)
            self._read_item(record)
        elif "id" in record and ("instructions" in record or "timestamp" in record):
            self._tick(_time_ns(record.get("timestamp")))
            self._read_session(record)
        elif "record_type" not in record:
            raise _BadLine("not a rollout record: expected {timestamp, type, payload}")

    def _tick(self, time_ns: int | None) -> None:
        # Lines are in the order things happened; timestamps are milliseconds and may tie or go
        # back, so each line gets a time strictly after the previous one.
        self._now = max(time_ns or 0, self._now + _MICROSECOND)
        self._end = self._now
        if self._turns:
            self._turns[-1].end_ns = self._now

    def _read_session(self, payload: Mapping[str, Any]) -> None:
        session = self._session
        if session.session_id:
            return  # a resumed or forked session repeats its header: the first one stands
        session.session_id = _str(payload.get("id")) or _str(payload.get("session_id"))
        session.cli_version = _str(payload.get("cli_version"))
        session.originator = _str(payload.get("originator"))
        session.provider = _str(payload.get("model_provider"))
        source = payload.get("source")
        session.source = source if isinstance(source, str) else ""
        instructions = payload.get("base_instructions")
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        session.instructions = _str(instructions) or _str(payload.get("instructions"))
        start = _time_ns(payload.get("timestamp"))
        session.start_ns = start if start else self._now

    def _read_item(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            raise _BadLine("response item without a type")
        if kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                raise _BadLine("message item without a role")
            text = _content_text(item.get("content"))
            if role == "assistant":
                self._output(_messages.text_part(text, _keep) if text else None)
            else:
                self._input_message(role, text)
        elif kind == "reasoning":
            texts = _reasoning_texts(item)
            self._output(_messages.reasoning_part("\n".join(texts), _keep) if texts else None)
        elif kind in _TOOL_CALL_ITEMS:
            self._tool_call(item)
        elif kind == "web_search_call":
            action = item.get("action")
            call = {"id": _str(item.get("id")), "name": "web_search", "arguments": action or {}}
            self._output(_messages.tool_call_part(call, _keep))
        elif kind in _TOOL_OUTPUT_ITEMS:
            self._tool_output(item)
        # other items (ghost snapshots, compaction markers, new kinds) carry no turn

    def _read_event(self, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            info = payload.get("info")
            self._usage(info.get("last_token_usage") if isinstance(info, dict) else None)
        elif kind == "task_complete" and self._turns:
            turn = self._turns[-1]
            turn.answer = turn.answer or _str(payload.get("last_agent_message"))
        elif kind in ("turn_aborted", "error") and self._turns:
            turn = self._turns[-1]
            turn.error = f"codex.{kind}"
            turn.error_message = _str(payload.get("reason")) or _str(payload.get("message"))

    # --- items -----------------------------------------------------------------------------
    def _input_message(self, role: str, text: str) -> None:
        self._close_call()
        self._history += 1
        if not text:
            return
        if role == "user" and (text.strip() in self._prompts or not _looks_injected(text)):
            self._turns.append(_Turn(self._span_id("turn"), self._now, self._now, text))
            self._pending.append(_user(text))
        else:  # developer instructions, injected context: what the system told the model
            self._pending.append({"role": "system", "parts": [_messages.text_part(text, _keep)]})

    def _output(self, part: _messages.Part | None) -> _Call:
        call = self._open
        if call is None:
            instructions = ""
            if not self._instructions_sent and self._session.instructions:
                instructions, self._instructions_sent = self._session.instructions, True
            call = _Call(
                span_id=self._span_id("chat"),
                parent=self._turns[-1].span_id if self._turns else "",
                start_ns=self._now - 1,
                end_ns=self._now,
                model=self._model,
                context_size=self._history,
                inputs=self._pending,
                system_instructions=instructions,
            )
            self._pending = []
            self._calls.append(call)
            self._open = call
        call.end_ns = self._now
        self._history += 1
        if part is not None:
            call.parts.append(part)
            if part.get("type") == sc.PART_TEXT and self._turns:
                self._turns[-1].answer = str(part.get("content", ""))
        return call

    def _tool_call(self, item: Mapping[str, Any]) -> None:
        call_id = _str(item.get("call_id")) or _str(item.get("id"))
        name = _str(item.get("name"))
        if item.get("type") == "local_shell_call":
            name = name or "local_shell"
            arguments = json.dumps(item.get("action") or {}, ensure_ascii=False)
        elif item.get("type") == "custom_tool_call":
            arguments = _str(item.get("input"))
        else:
            raw = item.get("arguments")
            arguments = raw if isinstance(raw, str) else json.dumps(raw or {}, ensure_ascii=False)
        if not name or not call_id:
            raise _BadLine(f"{item.get('type')} item without a name or call_id")
        call = self._output(
            _messages.tool_call_part({"id": call_id, "name": name, "arguments": arguments}, _keep)
        )
        tool = _Tool(call_id, name, arguments, call, call.requested_calls)
        self._tools.append(tool)
        self._awaiting[call_id] = tool
        call.requested_calls += 1

    def _tool_output(self, item: Mapping[str, Any]) -> None:
        self._close_call()
        self._history += 1
        call_id = _str(item.get("call_id"))
        if not call_id:
            raise _BadLine(f"{item.get('type')} item without a call_id")
        result, failed = _tool_result(item.get("output"))
        tool = self._awaiting.pop(call_id, None)
        if tool is None:  # its call is not in this file (or was answered already): keep the result
            self._pending.append(
                {"role": "tool", "parts": [_messages.tool_call_response_part(call_id, result, _keep)]}
            )
            return
        tool.span_id = self._span_id("tool")
        tool.end_ns = self._now
        tool.result = result
        tool.error = "tool_error" if failed else ""

    def _usage(self, usage: object) -> None:
        """A model response's token usage, which Codex records right after the response."""
        if not isinstance(usage, dict):
            return  # token_count events without usage only report rate limits
        self._close_call()  # whatever the model outputs next is another response
        # Newer Codex records each response's usage twice (token_usage_record, token_count): it
        # belongs to the latest response, once.
        if self._calls and self._calls[-1].usage is None:
            self._calls[-1].usage = (_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))

    def _close_call(self) -> None:
        self._open = None

    def _span_id(self, what: str) -> str:
        self._local_ids += 1
        return f"{what}:{self._local_ids}"  # the span id is derived from it and the trace id in _emit

    # --- spans -----------------------------------------------------------------------------
    def _emit(self, trace_id: str) -> tuple[list[Span], dict[str, int]]:
        session = self._session
        resource = _resource(session.originator or DEFAULT_SERVICE_NAME, session.cli_version)
        ids: dict[str, str] = {"": _span_id(trace_id, "session")}
        for local in [t.span_id for t in self._turns] + [c.span_id for c in self._calls]:
            ids[local] = _span_id(trace_id, local)
        for tool in self._tools:
            if tool.span_id:
                ids[tool.span_id] = _span_id(trace_id, tool.span_id)
        first_model = next((c.model for c in self._calls if c.model), self._model)
        start = min(session.start_ns or self._end, *(t.start_ns for t in self._turns), self._end)
        span = _SpanMaker(trace_id, resource, session.session_id)
        spans = [
            span.session(
                ids[""],
                start,
                self._end,
                model=first_model,
                provider=session.provider,
                extra=_codex_meta(session),
            )
        ]
        for turn in self._turns:
            spans.append(
                span.turn(
                    ids[turn.span_id],
                    ids[""],
                    turn.start_ns,
                    turn.end_ns,
                    prompt=turn.prompt,
                    answer=turn.answer,
                    error=turn.error,
                    error_message=turn.error_message,
                )
            )
        context_sizes: dict[str, int] = {}
        for call in self._calls:
            context_sizes[ids[call.span_id]] = call.context_size
            spans.append(
                span.chat(
                    ids[call.span_id],
                    ids[call.parent],
                    call.start_ns,
                    call.end_ns,
                    model=call.model or first_model,
                    provider=session.provider,
                    inputs=call.inputs,
                    system_instructions=call.system_instructions,
                    parts=call.parts,
                    usage=call.usage,
                )
            )
        for tool in self._tools:
            if not tool.span_id:
                continue  # requested, never answered: the chat span's tool_call part keeps it
            caller = tool.requested_by
            begin = caller.end_ns + 1 + tool.order  # after the response that asked for it
            spans.append(
                span.tool(
                    ids[tool.span_id],
                    ids[caller.parent],
                    begin,
                    max(begin, tool.end_ns),
                    name=tool.name,
                    call_id=tool.call_id,
                    arguments=tool.arguments,
                    result=tool.result,
                    error=tool.error,
                )
            )
        return spans, context_sizes


class _BadLine(ValueError):
    pass


def _human_prompts(records: Sequence[tuple[int, object]]) -> frozenset[str]:
    """What the human typed, as Codex's UI events record it (`user_message`, or a completed
    `UserMessage` item): a user-role item with this text is a prompt even if it looks injected."""
    prompts: set[str] = set()
    for _, record in records:
        if not isinstance(record, dict) or record.get("type") != LINE_EVENT_MSG:
            continue
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if payload.get("type") == "user_message":
            prompts.add(_str(payload.get("message")).strip())
        elif payload.get("type") == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "UserMessage":
                prompts.add(_content_text(item.get("content")).strip())
    prompts.discard("")
    return frozenset(prompts)


def _looks_injected(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.startswith(_INJECTED_PREFIXES) or _INJECTED_BLOCK.match(text) is not None


def _reasoning_texts(item: Mapping[str, Any]) -> list[str]:
    """The raw reasoning when the model shares it, else its summary."""
    for key in ("content", "summary"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts = [_str(p.get("text")) for p in parts if isinstance(p, dict)]
            texts = [t for t in texts if t]
            if texts:
                return texts
    return []


def _tool_result(output: object) -> tuple[str, bool]:
    """A tool output as text, and whether Codex marked it failed. Codex has written it as a string,
    as `{content, success}` and as a list of content items."""
    if isinstance(output, str):
        return output, False
    if isinstance(output, dict):
        failed = output.get("success") is False
        return _content_text(output.get("content", output.get("output"))), failed
    return _content_text(output), False


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            _str(part.get("text")) if isinstance(part, dict) else part if isinstance(part, str) else ""
            for part in content
        ]
        return "\n".join(t for t in texts if t)
    return json.dumps(content, ensure_ascii=False, default=str)


def _codex_meta(session: _Session) -> dict[str, AttributeValue]:
    meta = {
        "codex.cli_version": session.cli_version,
        "codex.originator": session.originator,
        "codex.source": session.source,
    }
    return {key: value for key, value in meta.items() if value}


# === OTLP log events =========================================================================


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One OTLP log record, decoded: what `log_spans` maps."""

    name: str  # the event name (Codex writes it as the `event.name` attribute)
    time_ns: int
    attributes: Mapping[str, AttributeValue]
    resource: Resource
    key: bytes  # identifies the record across retried exports (e.g. its serialized bytes)


@dataclass(frozen=True, slots=True)
class LogSpans:
    spans: tuple[Span, ...]
    unusable: int  # Codex events that name no conversation, so belong to no run


def log_spans(events: Iterable[LogEvent]) -> LogSpans:
    """The spans for Codex log events (others are ignored), one root per session they mention."""
    spans: list[Span] = []
    unusable = 0
    sessions: dict[str, list[LogEvent]] = {}
    for event in events:
        if not is_codex_event(event.name):
            continue
        conversation = _attr_text(event.attributes, ATTR_CONVERSATION_ID)
        if not conversation:
            unusable += 1
            continue
        if not event.time_ns:  # Codex leaves the record's time unset and says it in an attribute
            stamped = _time_ns(_attr_text(event.attributes, ATTR_EVENT_TIMESTAMP))
            event = replace(event, time_ns=stamped or 1)
        sessions.setdefault(conversation, []).append(event)
    for conversation, session_events in sessions.items():
        spans.extend(_session_log_spans(conversation, session_events))
    return LogSpans(tuple(spans), unusable)


def _session_log_spans(conversation: str, events: Sequence[LogEvent]) -> list[Span]:
    trace_id = session_trace_id(conversation)
    root_id = _span_id(trace_id, "session")
    starts = next((e for e in events if e.name == EVENT_CONVERSATION_STARTS), None)
    anchor = starts or min(events, key=lambda e: e.time_ns)
    resource = _log_resource(anchor.resource)
    span = _SpanMaker(trace_id, resource, conversation)
    attrs = anchor.attributes
    # Every export names the session's root (same id, so only the first one stored counts): a run is
    # whole whichever of its exports arrive, and its root lets assembly release it after the grace.
    out = [
        span.session(
            root_id,
            anchor.time_ns,
            anchor.time_ns,
            model=_attr_text(attrs, "model"),
            provider=_attr_text(attrs, "provider_name") if starts else "",
            extra=_log_session_meta(attrs, resource),
        )
    ]
    for event in events:
        span_id = _span_id(trace_id, hashlib.blake2b(event.key, digest_size=16).hexdigest())
        attrs = event.attributes
        model = _attr_text(attrs, "model")
        if event.name == EVENT_USER_PROMPT:
            out.append(
                span.turn(span_id, root_id, event.time_ns, event.time_ns, prompt=_attr_text(attrs, "prompt"))
            )
        elif event.name == EVENT_SSE and _attr_text(attrs, "event.kind") == _SSE_COMPLETED:
            if "input_token_count" not in attrs and "output_token_count" not in attrs:
                continue  # Codex logs each completion twice; the second carries the usage
            usage = (_int(attrs.get("input_token_count")), _int(attrs.get("output_token_count")))
            out.append(
                span.chat(
                    span_id, root_id, event.time_ns, event.time_ns, model=model, provider="", usage=usage
                )
            )
        elif event.name == EVENT_TOOL_RESULT:
            duration = _int(attrs.get("duration_ms")) * 1_000_000
            success = _attr_text(attrs, "success").lower()
            out.append(
                span.tool(
                    span_id,
                    root_id,
                    max(1, event.time_ns - duration),
                    event.time_ns,
                    name=_attr_text(attrs, "tool_name"),
                    call_id=_attr_text(attrs, "call_id"),
                    arguments=_attr_text(attrs, "arguments"),
                    result=_attr_text(attrs, "output") if "output" in attrs else None,
                    error="tool_error" if success in {"false", "0"} else "",
                )
            )
        elif event.name == EVENT_AGENT_RESPONSE:
            text = _attr_text(attrs, "response")
            if text:
                out.append(span.answer(span_id, root_id, event.time_ns, text))
    return out


def _log_resource(resource: Resource) -> Resource:
    attributes = dict(resource.attributes)
    env = attributes.get("env")  # Codex's `[otel] environment`
    if isinstance(env, str) and env:
        attributes.setdefault("deployment.environment.name", env)
    return Resource(attributes)


def _log_session_meta(attrs: Mapping[str, AttributeValue], resource: Resource) -> dict[str, AttributeValue]:
    meta = {
        "codex.cli_version": _attr_text(attrs, "app.version")
        or _attr_text(resource.attributes, "service.version"),
        "codex.originator": _attr_text(attrs, "originator"),
    }
    return {key: value for key, value in meta.items() if value}


# === spans ===================================================================================


class _SpanMaker:
    """The spans our SDK would emit for a Codex session, one method per kind."""

    def __init__(self, trace_id: str, resource: Resource, conversation_id: str) -> None:
        self._trace_id = trace_id
        self._resource = resource
        self._conversation = conversation_id

    def _span(
        self,
        span_id: str,
        parent: str,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: dict[str, AttributeValue],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        error: str = "",
        error_message: str = "",
    ) -> Span:
        if self._conversation:
            attributes[sc.GEN_AI_CONVERSATION_ID] = self._conversation
        if error:
            attributes[sc.ERROR_TYPE] = error
        return Span(
            trace_id=self._trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            start_ns=start_ns,
            end_ns=max(start_ns, end_ns),
            kind=kind,
            status=StatusCode.ERROR if error else StatusCode.UNSET,
            status_message=error_message or error,
            attributes=attributes,
            resource=self._resource,
            scope_name=SCOPE_NAME,
        )

    def session(
        self,
        span_id: str,
        start_ns: int,
        end_ns: int,
        *,
        model: str,
        provider: str,
        extra: Mapping[str, AttributeValue],
    ) -> Span:
        attributes: dict[str, AttributeValue] = {
            **extra,
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: AGENT_NAME,
        }
        _set_if(attributes, sc.GEN_AI_REQUEST_MODEL, model)
        _set_if(attributes, sc.GEN_AI_PROVIDER_NAME, provider)
        return self._span(span_id, "", f"{sc.OP_INVOKE_AGENT} {AGENT_NAME}", start_ns, end_ns, attributes)

    def turn(
        self,
        span_id: str,
        parent: str,
        start_ns: int,
        end_ns: int,
        *,
        prompt: str,
        answer: str = "",
        error: str = "",
        error_message: str = "",
    ) -> Span:
        attributes: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: AGENT_NAME,
            sc.GEN_AI_INPUT_MESSAGES: _messages.user_message_json(prompt, _keep),
        }
        if answer:
            attributes[sc.GEN_AI_OUTPUT_MESSAGES] = _messages.output_message_json(
                [_messages.text_part(answer, _keep)], "stop"
            )
        name = f"{sc.OP_INVOKE_AGENT} {AGENT_NAME}"
        return self._span(
            span_id, parent, name, start_ns, end_ns, attributes, error=error, error_message=error_message
        )

    def chat(
        self,
        span_id: str,
        parent: str,
        start_ns: int,
        end_ns: int,
        *,
        model: str,
        provider: str,
        inputs: Sequence[Mapping[str, object]] = (),
        system_instructions: str = "",
        parts: Sequence[_messages.Part] = (),
        usage: tuple[int, int] | None = None,
    ) -> Span:
        attributes: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
        _set_if(attributes, sc.GEN_AI_REQUEST_MODEL, model)
        _set_if(attributes, sc.GEN_AI_RESPONSE_MODEL, model)
        _set_if(attributes, sc.GEN_AI_PROVIDER_NAME, provider)
        if inputs:
            attributes[sc.GEN_AI_INPUT_MESSAGES] = _messages.input_messages_json(inputs, _keep)
        if system_instructions:
            attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = _messages.system_instructions_json(
                system_instructions, _keep
            )
        if parts:
            finish = "tool_call" if any(p.get("type") == sc.PART_TOOL_CALL for p in parts) else "stop"
            attributes[sc.GEN_AI_OUTPUT_MESSAGES] = _messages.output_message_json(parts, finish)
            attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (finish,)
        if usage is not None:
            attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = usage[0]
            attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = usage[1]
        name = f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT
        return self._span(span_id, parent, name, start_ns, end_ns, attributes, kind=SpanKind.CLIENT)

    def tool(
        self,
        span_id: str,
        parent: str,
        start_ns: int,
        end_ns: int,
        *,
        name: str,
        call_id: str,
        arguments: str,
        result: str | None,
        error: str = "",
    ) -> Span:
        attributes: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: name,
        }
        _set_if(attributes, sc.GEN_AI_TOOL_CALL_ID, call_id)
        _set_if(attributes, sc.GEN_AI_TOOL_CALL_ARGUMENTS, arguments)
        if result is not None:
            attributes[sc.GEN_AI_TOOL_CALL_RESULT] = result
        span_name = f"{sc.OP_EXECUTE_TOOL} {name}"
        return self._span(span_id, parent, span_name, start_ns, end_ns, attributes, error=error)

    def answer(self, span_id: str, parent: str, time_ns: int, text: str) -> Span:
        attributes: dict[str, AttributeValue] = {
            sc.MAST_STEP_KIND: sc.STEP_MESSAGE,
            sc.GEN_AI_OUTPUT_MESSAGES: _messages.output_message_json(
                [_messages.text_part(text, _keep)], "stop"
            ),
        }
        return self._span(span_id, parent, sc.SPAN_MESSAGE, time_ns, time_ns, attributes)


def _resource(service_name: str, version: str) -> Resource:
    attributes: dict[str, AttributeValue] = {"service.name": service_name}
    _set_if(attributes, "service.version", version)
    return Resource(attributes)


def _span_id(trace_id: str, what: str) -> str:
    """A stable, non-zero span id for `what` within a trace."""
    digest = hashlib.blake2b(f"{trace_id}/{what}".encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "parts": [_messages.text_part(text, _keep)]}


def _keep(text: str) -> str:
    return text  # the sender's own redaction applies; nothing is captured here that Codex didn't write


def _set_if(attributes: dict[str, AttributeValue], key: str, value: str) -> None:
    if value:
        attributes[key] = value


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _attr_text(attributes: Mapping[str, AttributeValue], key: str) -> str:
    value = attributes.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _int(value: object) -> int:
    """A count as Codex writes it: a number, or a number in a string; anything else is 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return max(0, int(value))
    if isinstance(value, str):
        try:
            return max(0, int(float(value)))
        except ValueError:
            return 0
    return 0


def _time_ns(value: object) -> int | None:
    """An RFC 3339 timestamp as Codex writes it (`2026-01-02T03:04:05.123Z`) -> Unix nanoseconds."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    fraction = _ISO_FRACTION.search(text)
    nanos = 0
    if fraction is not None:
        digits = fraction.group(1)
        nanos = int((digits + "000000000")[:9])
        text = text[: fraction.start()] + text[fraction.end() :]
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    seconds = int(parsed.timestamp())
    return seconds * 1_000_000_000 + nanos if 0 < seconds < _LAST_SECOND else None
