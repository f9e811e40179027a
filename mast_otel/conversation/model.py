"""The Conversation: what rebuild produces from a trace (or an importer from a log) and annotators read.

A conversation is an ordered list of turns. `Turn.index` is the step index that findings and blame
point at; `Turn.span_id` ties a turn back to the span it came from (empty for imported logs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class TurnKind(str, Enum):
    SYSTEM = "system"  # system instructions
    USER = "user"  # the task, or a human's message
    AGENT_MESSAGE = "agent_message"  # text an agent said
    REASONING = "reasoning"  # an agent's reasoning / thinking
    TOOL_CALL = "tool_call"  # a tool call, with its result when known
    HANDOFF = "handoff"  # control passed from one agent to another


class Outcome(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> Outcome:
        """Lenient parsing of what graders send: "success", "failed", True, "pass"... -> Outcome."""
        if isinstance(value, bool):
            return cls.SUCCESS if value else cls.FAILURE
        text = str(value or "").strip().lower()
        if text in {"success", "succeeded", "successful", "pass", "passed", "ok", "true", "resolved"}:
            return cls.SUCCESS
        if text in {"failure", "failed", "fail", "error", "false", "unresolved"}:
            return cls.FAILURE
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    call_id: str = ""
    arguments: str = ""  # as sent, usually JSON
    result: str | None = None  # None when the result never came back
    error: str = ""  # error.type / status message when the call failed

    @property
    def failed(self) -> bool:
        return bool(self.error)


@dataclass(frozen=True, slots=True)
class Turn:
    index: int
    kind: TurnKind
    agent: str  # who acted: agent name, "user", or the tool's caller
    content: str = ""  # text of a message / reasoning; for tool calls a short rendering
    span_id: str = ""
    time_ns: int = 0
    tool: ToolCall | None = None  # set for TOOL_CALL turns
    target_agent: str = ""  # set for HANDOFF turns
    model: str = ""  # the model that produced this turn, when known
    finish_reason: str = ""  # of the LLM call that produced this turn, when known
    # How many input messages the LLM call that produced this turn saw (0 = unknown). A later call of
    # the same agent seeing far fewer than an earlier one is the structural sign of lost history.
    context_size: int = 0


@dataclass(frozen=True, slots=True)
class Conversation:
    """One agent run, rebuilt. Frozen: annotators read it, they never change it."""

    trace_id: str
    turns: tuple[Turn, ...]
    service_name: str = "unknown_service"
    conversation_id: str = ""
    task_id: str = ""
    task: str = ""  # the task as given, when known
    root_agent: str = ""
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    start_ns: int = 0
    end_ns: int = 0
    outcome: Outcome = Outcome.UNKNOWN
    score: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    span_count: int = 0
    error: str = ""  # error.type / status of the root span when the run itself failed
    root_span_id: str = ""
    attributes: dict[str, str] = field(default_factory=dict)  # e.g. service.version, deployment

    @property
    def model(self) -> str:
        """The run's primary model: the first one it used."""
        return self.models[0] if self.models else ""

    @property
    def tool_calls(self) -> tuple[Turn, ...]:
        return tuple(t for t in self.turns if t.kind is TurnKind.TOOL_CALL)


@dataclass(frozen=True, slots=True)
class OutcomeReport:
    """A run's outcome as reported by the agent or, often later, by a grader (`mast.task.outcome`)."""

    trace_id: str
    outcome: Outcome
    score: float | None = None
    time_ns: int = 0
    source: str = ""  # e.g. the reporting span's id, or "import"
