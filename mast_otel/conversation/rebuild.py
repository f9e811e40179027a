"""Rebuild stage, part 2: one trace's spans -> one `Conversation` of ordered turns.

Turns come from span views (see `normalize.py`): an agent's task and final answer, what each model
call added (new input messages, reasoning, text, requested tool calls), tool executions with their
results, reasoning and message steps, and handoffs. Model calls resend the whole history each time,
so only messages an agent has not seen yet become turns. A tool call requested by a model and
executed in an `execute_tool` span becomes one turn (at the execution), not two.

Turns are ordered by time, parents before children at equal times; the step index a finding points
at is the turn's position in that order.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mast_otel import semconv as sc
from mast_otel.conversation.model import Conversation, Outcome, OutcomeReport, ToolCall, Turn, TurnKind
from mast_otel.conversation.normalize import Message, Normalizer, Operation, SpanView, view_span
from mast_otel.spans import Span, SpanEvent

_AT_START, _AT_END = 0, 1  # turns made at a span's end sort after its children that end at the same instant


@dataclass(slots=True)
class _Draft:
    """A turn before its final index is known."""

    time_ns: int
    phase: int
    depth: int
    sequence: int
    kind: TurnKind
    agent: str
    content: str = ""
    span_id: str = ""
    tool: ToolCall | None = None
    target_agent: str = ""
    model: str = ""
    finish_reason: str = ""
    context_size: int = 0

    def sort_key(self) -> tuple[int, int, int, int]:
        return (
            self.time_ns,
            self.phase,
            self.depth if self.phase == _AT_START else -self.depth,
            self.sequence,
        )


class _Turns:
    """Collects turns while spans are read; orders and numbers them at the end."""

    def __init__(self, depth: dict[str, int], agent_of: dict[str, str]) -> None:
        self._depth = depth
        self._agent_of = agent_of
        self._drafts: list[_Draft] = []

    def add(
        self,
        view: SpanView,
        phase: int,
        kind: TurnKind,
        *,
        agent: str | None = None,
        content: str = "",
        tool: ToolCall | None = None,
        target_agent: str = "",
        model: str = "",
        finish_reason: str = "",
        context_size: int = 0,
    ) -> None:
        span = view.span
        self._drafts.append(
            _Draft(
                time_ns=span.start_ns if phase == _AT_START else span.end_ns,
                phase=phase,
                depth=self._depth[span.span_id],
                sequence=len(self._drafts),
                kind=kind,
                agent=self._agent_of[span.span_id] if agent is None else agent,
                content=content,
                span_id=span.span_id,
                tool=tool,
                target_agent=target_agent,
                model=model,
                finish_reason=finish_reason,
                context_size=context_size,
            )
        )

    def ordered(self) -> tuple[Turn, ...]:
        drafts = sorted(self._drafts, key=_Draft.sort_key)
        return tuple(
            Turn(
                index=i,
                kind=d.kind,
                agent=d.agent,
                content=d.content,
                span_id=d.span_id,
                time_ns=d.time_ns,
                tool=d.tool,
                target_agent=d.target_agent,
                model=d.model,
                finish_reason=d.finish_reason,
                context_size=d.context_size,
            )
            for i, d in enumerate(drafts)
        )


@dataclass
class _AgentMemory:
    # Messages this agent has seen, by content: how many copies of each at most one context held
    # (a human who says "continue" twice put two copies in the history, and both are turns).
    seen: Counter[str] = field(default_factory=Counter)
    system_seen: bool = False


def is_outcome_only(spans: Sequence[Span]) -> bool:
    """True when a trace holds nothing but outcome reports (a grader's late verdict)."""
    return bool(spans) and all(s.text(sc.MAST_STEP_KIND) == sc.STEP_OUTCOME for s in spans)


def outcome_reports(spans: Sequence[Span]) -> list[OutcomeReport]:
    """The outcome reports carried by `mast.task.outcome` spans (not the root's own outcome)."""
    reports = []
    for span in spans:
        if span.text(sc.MAST_STEP_KIND) != sc.STEP_OUTCOME:
            continue
        score = span.number(sc.MAST_TASK_SCORE)
        reports.append(
            OutcomeReport(
                trace_id=span.trace_id,
                outcome=Outcome.parse(span.attributes.get(sc.MAST_TASK_OUTCOME)),
                score=score if score is not None and 0.0 <= score <= 1.0 else None,
                time_ns=span.end_ns,
                source=span.span_id,
            )
        )
    return reports


def rebuild(spans: Sequence[Span], normalizers: Sequence[Normalizer] | None = None) -> Conversation:
    """Rebuild one trace. `spans` must share one trace id and be non-empty."""
    if not spans:
        raise ValueError("cannot rebuild a conversation from no spans")
    trace_id = spans[0].trace_id
    spans = _with_logged_events(spans)
    views = {s.span_id: view_span(s, normalizers) for s in spans}
    parents = {s.span_id: s.parent_span_id for s in spans}
    depth = {span_id: _depth(span_id, parents) for span_id in views}
    agent_of = {span_id: _agent(span_id, views, parents) for span_id in views}
    root = _root(views, parents)

    executed_call_ids = {v.tool.call_id for v in views.values() if v.tool is not None and v.tool.call_id}
    memories: dict[str, _AgentMemory] = {}
    turns = _Turns(depth, agent_of)
    add = turns.add
    final_answers: list[SpanView] = []  # agent outputs, taken once everything else was read

    for view in sorted(views.values(), key=lambda v: (v.span.start_ns, depth[v.span.span_id])):
        agent = agent_of[view.span.span_id]
        memory = memories.setdefault(agent, _AgentMemory())
        op = view.operation
        if op is Operation.AGENT:
            is_root = view.span.span_id == root.span.span_id
            for message in view.input_messages:
                text = message.text
                if text and _remember(memory, message.role, text):
                    parent_agent = agent_of.get(parents[view.span.span_id], "") if not is_root else ""
                    if parent_agent and parent_agent != agent:
                        add(
                            view,
                            _AT_START,
                            TurnKind.AGENT_MESSAGE,
                            agent=parent_agent,
                            content=text,
                            target_agent=agent,
                        )
                    else:
                        add(
                            view,
                            _AT_START,
                            _input_kind(message.role),
                            agent=_speaker(message.role, agent),
                            content=text,
                        )
            if view.output_messages:
                final_answers.append(view)  # after its model calls, which usually said it first
        elif op is Operation.LLM:
            if view.system_instructions and not memory.system_seen:
                memory.system_seen = True
                add(view, _AT_START, TurnKind.SYSTEM, agent="system", content=view.system_instructions)
            context_size = len(view.input_messages)
            copies: Counter[str] = Counter()  # of each human message in this context so far
            for message in view.input_messages:
                _input_turns(view, message, memory, executed_call_ids, turns, copies)
            finish = view.finish_reasons[0] if view.finish_reasons else ""
            for message in view.output_messages:
                for part in message.parts:
                    if part.type == sc.PART_REASONING and part.content:
                        _remember(memory, "reasoning", part.content)
                        add(
                            view,
                            _AT_END,
                            TurnKind.REASONING,
                            content=part.content,
                            model=view.model,
                            finish_reason=message.finish_reason or finish,
                            context_size=context_size,
                        )
                    elif part.type == sc.PART_TEXT and part.content:
                        _remember(memory, "assistant", part.content)
                        add(
                            view,
                            _AT_END,
                            TurnKind.AGENT_MESSAGE,
                            content=part.content,
                            model=view.model,
                            finish_reason=message.finish_reason or finish,
                            context_size=context_size,
                        )
                    elif part.type == sc.PART_TOOL_CALL and part.id not in executed_call_ids:
                        # Requested but never executed (or executed without a span): still a step.
                        add(
                            view,
                            _AT_END,
                            TurnKind.TOOL_CALL,
                            content=_render_call(part.name, part.arguments),
                            tool=ToolCall(part.name, part.id, part.arguments),
                            model=view.model,
                            finish_reason=message.finish_reason or finish,
                            context_size=context_size,
                        )
            if not view.output_messages and finish:
                # No content captured: keep the finish reason visible (e.g. "length") as an empty message.
                add(
                    view,
                    _AT_END,
                    TurnKind.AGENT_MESSAGE,
                    model=view.model,
                    finish_reason=finish,
                    context_size=context_size,
                )
        elif op is Operation.TOOL and view.tool is not None:
            add(
                view,
                _AT_START,
                TurnKind.TOOL_CALL,
                content=_render_call(view.tool.name, view.tool.arguments),
                tool=view.tool,
            )
        elif op is Operation.REASONING:
            for message in view.output_messages:
                for part in message.parts:
                    if part.content and _remember(memory, "reasoning", part.content):
                        add(view, _AT_START, TurnKind.REASONING, content=part.content)
        elif op is Operation.MESSAGE:
            for message in view.output_messages:
                if message.text and _remember(memory, "assistant", message.text):
                    add(view, _AT_START, TurnKind.AGENT_MESSAGE, content=message.text)
        elif op is Operation.HANDOFF:
            reason = "\n".join(m.text for m in view.output_messages if m.text)
            add(
                view,
                _AT_START,
                TurnKind.HANDOFF,
                agent=view.span.text(sc.MAST_HANDOFF_SOURCE) or agent,
                target_agent=view.handoff_target,
                content=reason,
            )

    for view in final_answers:
        memory = memories.setdefault(agent_of[view.span.span_id], _AgentMemory())
        for message in view.output_messages:
            if message.text and _remember(memory, "assistant", message.text):
                add(view, _AT_END, TurnKind.AGENT_MESSAGE, content=message.text, model=view.model)

    ordered = turns.ordered()
    return _conversation(trace_id, spans, views, root, ordered, agent_of)


def _with_logged_events(spans: Sequence[Span]) -> Sequence[Span]:
    """Events that arrived as log records (carried by spans marked `mast.events.for_span`, see
    `collector/logs.py`) moved onto the span they describe, after its own, in arrival order. A
    carrier whose span is not in the trace stays: read on its own, as the model call it describes."""
    carried: dict[str, list[SpanEvent]] = {}
    present = {s.span_id for s in spans}
    carriers = set()
    for span in sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        target = span.text(sc.MAST_EVENTS_FOR_SPAN)
        if target and target in present:
            carried.setdefault(target, []).extend(span.events)
            carriers.add(span.span_id)
    if not carried:
        return spans
    return [
        replace(span, events=(*span.events, *carried[span.span_id])) if span.span_id in carried else span
        for span in spans
        if span.span_id not in carriers
    ]


def _input_turns(
    view: SpanView,
    message: Message,
    memory: _AgentMemory,
    executed_call_ids: set[str],
    turns: _Turns,
    copies: Counter[str],
) -> None:
    """Turns for input messages the agent has not seen: a human's follow-up, a tool result without a span."""
    add = turns.add
    for part in message.parts:
        if part.type == sc.PART_TOOL_CALL_RESPONSE:
            if part.id in executed_call_ids or not _remember(memory, "tool:" + part.id, part.content):
                continue
            add(
                view,
                _AT_START,
                TurnKind.TOOL_CALL,
                content=_render_call("", ""),
                tool=ToolCall(name="", call_id=part.id, result=part.content),
            )
        elif (
            part.type == sc.PART_TEXT
            and part.content
            and _remember(
                memory, message.role, part.content, _copy_number(copies, message.role, part.content)
            )
        ):
            if message.name and message.role in {"user", "human", "assistant"}:
                # Group-chat convention: another participant speaking into this agent's context.
                add(view, _AT_START, TurnKind.AGENT_MESSAGE, agent=message.name, content=part.content)
            elif message.role in {"user", "human"}:
                add(view, _AT_START, TurnKind.USER, agent="user", content=part.content)
            elif message.role == "system":
                add(view, _AT_START, TurnKind.SYSTEM, agent="system", content=part.content)
            elif message.role in {"assistant", "model"}:
                add(view, _AT_START, TurnKind.AGENT_MESSAGE, content=part.content)
            else:  # another agent speaking into this agent's context
                add(view, _AT_START, TurnKind.AGENT_MESSAGE, agent=message.role, content=part.content)


def _remember(memory: _AgentMemory, role: str, text: str, copy: int = 1) -> bool:
    """Record the `copy`-th copy of a message as seen by this agent; False when it already was."""
    key = _message_key(role, text)
    if memory.seen[key] >= copy:
        return False
    memory.seen[key] = copy
    return True


def _copy_number(copies: Counter[str], role: str, text: str) -> int:
    """Which copy of this message within one context this is; 1 for anything but a human's words:
    a model saying the same thing twice is one thing said, replayed in every later context."""
    if role not in {"user", "human"}:
        return 1
    key = _message_key(role, text)
    copies[key] += 1
    return copies[key]


def _message_key(role: str, text: str) -> str:
    key = hashlib.blake2b(f"{role}\x00{text}".encode("utf-8", "replace"), digest_size=12).hexdigest()
    return "assistant:" + key if role in {"assistant", "model"} else key


def _input_kind(role: str) -> TurnKind:
    if role == "system":
        return TurnKind.SYSTEM
    if role in {"assistant", "model"}:
        return TurnKind.AGENT_MESSAGE
    return TurnKind.USER


def _speaker(role: str, agent: str) -> str:
    if role in {"assistant", "model"}:
        return agent
    return "system" if role == "system" else "user"


def _render_call(name: str, arguments: str) -> str:
    return f"{name}({arguments})" if name else "tool result"


def _depth(span_id: str, parents: dict[str, str]) -> int:
    depth, seen = 0, {span_id}
    parent = parents.get(span_id, "")
    while parent in parents and parent not in seen:  # cycles in hostile input must not hang us
        seen.add(parent)
        depth += 1
        parent = parents[parent]
    return depth


def _agent(span_id: str, views: dict[str, SpanView], parents: dict[str, str]) -> str:
    """The span's own agent name, else its nearest ancestor's, else the service name."""
    seen: set[str] = set()
    current = span_id
    while current in views and current not in seen:
        seen.add(current)
        if views[current].agent:
            return views[current].agent
        current = parents.get(current, "")
    return views[span_id].span.service_name


def _root(views: dict[str, SpanView], parents: dict[str, str]) -> SpanView:
    """The run's root: the earliest agent span without a parent in the trace, else the earliest span."""
    candidates = [
        v
        for v in views.values()
        if parents[v.span.span_id] not in views and v.operation is not Operation.OUTCOME
    ]
    if not candidates:
        candidates = list(views.values())
    agents = [v for v in candidates if v.operation is Operation.AGENT]
    pool = agents or candidates
    return min(pool, key=lambda v: (v.span.start_ns, v.span.span_id))


def _conversation(
    trace_id: str,
    spans: Sequence[Span],
    views: dict[str, SpanView],
    root: SpanView,
    turns: tuple[Turn, ...],
    agent_of: dict[str, str],
) -> Conversation:
    ordered = sorted(views.values(), key=lambda v: v.span.start_ns)
    agents = _unique(t.agent for t in turns if t.agent not in {"user", "system"})
    if not agents:
        agents = _unique(agent_of[v.span.span_id] for v in ordered if v.operation is Operation.AGENT)
    models = _unique([root.model] + [v.model for v in ordered if v.operation is Operation.LLM])
    llm_views = [v for v in ordered if v.operation is Operation.LLM]
    token_views = llm_views or [v for v in ordered if v.operation is Operation.AGENT]

    outcome, score = root.outcome or Outcome.UNKNOWN, root.score
    for report in sorted(outcome_reports(spans), key=lambda r: r.time_ns):
        outcome, score = report.outcome, report.score if report.score is not None else score

    task = next((t.content for t in turns if t.kind is TurnKind.USER and t.content), "")
    resource = root.span.resource.attributes
    attributes = {
        k: str(resource[k])
        for k in ("service.version", "deployment.environment.name", "deployment.environment")
        if k in resource
    }
    return Conversation(
        trace_id=trace_id,
        turns=turns,
        service_name=root.span.service_name,
        conversation_id=root.conversation_id
        or next((v.conversation_id for v in ordered if v.conversation_id), ""),
        task_id=root.task_id or next((v.task_id for v in ordered if v.task_id), ""),
        task=task,
        root_agent=agent_of[root.span.span_id],
        agents=agents,
        models=models,
        start_ns=min(s.start_ns for s in spans),
        end_ns=max(s.end_ns for s in spans),
        outcome=outcome,
        score=score,
        input_tokens=sum(v.input_tokens for v in token_views),
        output_tokens=sum(v.output_tokens for v in token_views),
        span_count=len(spans),
        error=root.error,
        root_span_id=root.span.span_id,
        attributes=attributes,
    )


def _unique(values: object) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:  # type: ignore[attr-defined]
        if value:
            seen.setdefault(str(value), None)
    return tuple(seen)
