"""Fitting a run into the judge's context: render each step, compact long text, split into chunks.

A run becomes numbered lines (`[12] triage called get_pods({"ns": "shop"})`), redacted before
anything else so that compaction can never cut a secret in half and leave a recognisable piece.
Long text keeps its head and its tail (errors and conclusions sit at the end of tool outputs). The
task and the agents' system instructions form a header repeated in every chunk. Steps are split
greedily into chunks that fit the token budget, each chunk starting with the last few steps of the
previous one; every step lands in at least one chunk and the last chunk always ends with the run's
last step, so the end of a run (where termination and verification show) is never what is dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mast_otel.annotate.llm.config import ContextConfig
from mast_otel.conversation.model import Conversation, Turn, TurnKind

__all__ = ["Chunk", "RenderedStep", "RunView", "TokenEstimator", "compact", "render_run", "split_steps"]

# Chat formats add a few tokens per message (role, separators).
MESSAGE_OVERHEAD_TOKENS: Final = 4
_HEAD_SHARE: Final = 0.6  # of a compacted text's kept characters, the share taken from its start
_MIN_KEPT_CHARS: Final = 80
_ERROR_CHARS: Final = 240
# Lines at least this long that an earlier step already showed are not sent again.
_MIN_REPEATED_CHARS: Final = 40
_ORDINARY_FINISH: Final = frozenset({"", "stop", "tool_calls", "end_turn", "function_call"})


@dataclass(frozen=True, slots=True)
class TokenEstimator:
    """Tokens from characters; deliberately simple (no tokenizer download), tuned low to be safe."""

    chars_per_token: float

    def tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def chars(self, tokens: int) -> int:
        return int(tokens * self.chars_per_token)


def compact(text: str, limit: int) -> str:
    """`text` tidied, and if still longer than `limit` characters, its head and tail around a marker
    that says how much was left out."""
    text = _tidy(text)
    if len(text) <= limit:
        return text
    kept = max(_MIN_KEPT_CHARS, limit - 40)  # the marker's own room
    head = int(kept * _HEAD_SHARE)
    tail = kept - head
    omitted = len(text) - head - tail
    return f"{text[:head]} [… {omitted:,} chars omitted …] {text[-tail:]}"


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


@dataclass(frozen=True, slots=True)
class RenderedStep:
    index: int  # Turn.index: what the judge cites and findings point at
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as the judge reads it: redacted, compacted, numbered."""

    task: str
    instructions: tuple[RenderedStep, ...]  # system instructions, shown in every chunk
    steps: tuple[RenderedStep, ...]  # every other turn, in order

    @property
    def visible_in_every_chunk(self) -> tuple[int, ...]:
        return tuple(step.index for step in self.instructions)


@dataclass(frozen=True, slots=True)
class Chunk:
    number: int  # 1-based
    total: int
    steps: tuple[RenderedStep, ...]

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(step.index for step in self.steps)

    @property
    def is_last(self) -> bool:
        return self.number == self.total

    @property
    def tokens(self) -> int:
        return sum(step.tokens for step in self.steps)


def render_run(
    conversation: Conversation,
    *,
    redact: Callable[[str], str],
    limits: ContextConfig,
    estimator: TokenEstimator,
    header_token_limit: int,
) -> RunView:
    """The run's view; the header (task + instructions) is squeezed to `header_token_limit` if needed."""
    task_text = redact(conversation.task)
    system_turns = [turn for turn in conversation.turns if turn.kind is TurnKind.SYSTEM]
    task_limit, system_limit = limits.task_chars, limits.system_chars
    header_chars = estimator.chars(header_token_limit)
    full = min(len(task_text), task_limit) + sum(min(len(t.content), system_limit) + 60 for t in system_turns)
    if full > header_chars:
        # Share what the header may hold equally; the rendering keeps each one's head and tail.
        share = max(_MIN_KEPT_CHARS, header_chars // (1 + len(system_turns)) - 60)
        task_limit, system_limit = min(task_limit, share), min(system_limit, share)
    instructions = tuple(
        _step(
            turn.index,
            f"[{turn.index}] system instructions for {_agent(turn, redact)}: "
            f"{compact(redact(turn.content), system_limit)}",
            estimator,
        )
        for turn in system_turns
    )
    renderer = _StepRenderer(redact, limits, task_text)
    steps = tuple(
        _step(turn.index, renderer.render(turn), estimator)
        for turn in conversation.turns
        if turn.kind is not TurnKind.SYSTEM
    )
    return RunView(task=compact(task_text, task_limit), instructions=instructions, steps=steps)


def split_steps(
    steps: Sequence[RenderedStep], *, budget_tokens: int, overlap_steps: int, estimator: TokenEstimator
) -> tuple[Chunk, ...]:
    """Consecutive chunks of at most `budget_tokens`, overlapping by up to `overlap_steps` steps.

    A step longer than the budget on its own is compacted to fit. Every step is in some chunk, and
    the last chunk ends with the last step.
    """
    if budget_tokens < 1:
        raise ValueError("budget_tokens must be >= 1")
    fitted = [
        step
        if step.tokens <= budget_tokens
        else _step(step.index, compact(step.text, estimator.chars(max(1, budget_tokens - 2))), estimator)
        for step in steps
    ]
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        used, end = 0, start
        while end < len(fitted) and used + fitted[end].tokens <= budget_tokens:
            used += fitted[end].tokens
            end += 1
        end = max(end, min(start + 1, len(fitted)))  # progress even if rounding left no room
        spans.append((start, end))
        if end >= len(fitted):
            break
        following = max(end - overlap_steps, start + 1)
        # The overlap must leave room for at least the next new step.
        while (
            following < end
            and sum(s.tokens for s in fitted[following:end]) + fitted[end].tokens > budget_tokens
        ):
            following += 1
        start = following
    return tuple(
        Chunk(number=number, total=len(spans), steps=tuple(fitted[first:last]))
        for number, (first, last) in enumerate(spans, 1)
    )


def _step(index: int, text: str, estimator: TokenEstimator) -> RenderedStep:
    return RenderedStep(index, text, estimator.tokens(text) + 1)  # + the newline joining steps


def _agent(turn: Turn, redact: Callable[[str], str]) -> str:
    return redact(turn.agent) or "unknown agent"


class _StepRenderer:
    """Renders a run's steps in order. Text goes redacted, then freed of what the run already showed
    (the task, lines an earlier step carried: agents re-send plans and tools repeat outputs), then
    compacted: what is left is what the step adds."""

    def __init__(self, redact: Callable[[str], str], limits: ContextConfig, task: str) -> None:
        self._redact = redact
        self._limits = limits
        self._task = task.strip()
        self._first_seen: dict[str, int] = {}  # a long line -> the step that showed it first

    def render(self, turn: Turn) -> str:
        prefix = f"[{turn.index}]"
        agent = _agent(turn, self._redact)
        limits = self._limits
        if turn.kind is TurnKind.TOOL_CALL and turn.tool is not None:
            tool = turn.tool
            arguments = self._text(tool.arguments, limits.tool_arguments_chars, turn.index)
            text = f"{prefix} {agent} called {self._redact(tool.name)}({arguments})"
            if tool.error:
                text += f" -> error: {compact(self._redact(tool.error), _ERROR_CHARS)}"
            if tool.result is None:
                text += "" if tool.error else " -> no result came back"
            elif tool.result.strip():
                text += f"\n    -> {self._text(tool.result, limits.tool_output_chars, turn.index)}"
            else:
                text += " -> (empty result)"
        elif turn.kind is TurnKind.USER:
            speaker = "user" if turn.agent in ("", "user") else f"user {agent}"
            text = f"{prefix} {speaker}: {self._text(turn.content, limits.message_chars, turn.index)}"
        elif turn.kind is TurnKind.HANDOFF:
            target = self._redact(turn.target_agent) or "unknown agent"
            text = f"{prefix} {agent} hands off to {target}"
            if turn.content.strip():
                text += f": {self._text(turn.content, limits.message_chars, turn.index)}"
        else:
            label = " (reasoning)" if turn.kind is TurnKind.REASONING else ""
            text = f"{prefix} {agent}{label}: {self._text(turn.content, limits.message_chars, turn.index)}"
        if turn.finish_reason not in _ORDINARY_FINISH:
            text += f" (generation stopped: {turn.finish_reason})"
        return text

    def _text(self, raw: str, limit: int, step: int) -> str:
        text = self._redact(raw)
        if len(self._task) >= _MIN_REPEATED_CHARS:
            if text.strip() == self._task:
                return "(the task above)"
            text = text.replace(self._task, "(the task above)")
        return compact(self._without_repeats(text, step), limit)

    def _without_repeats(self, text: str, step: int) -> str:
        kept: list[str] = []
        repeated, source = 0, -1
        for line in text.split("\n"):
            key = line.strip()
            if repeated and not key:
                continue  # a blank line inside a repeated stretch belongs to it
            first = self._first_seen.get(key, step) if len(key) >= _MIN_REPEATED_CHARS else step
            if first != step:
                repeated, source = repeated + 1, source if repeated else first
                continue
            if repeated:
                kept.append(_repeat_marker(repeated, source))
                repeated = 0
            kept.append(line)
            if len(key) >= _MIN_REPEATED_CHARS:
                self._first_seen.setdefault(key, step)
        if repeated:
            kept.append(_repeat_marker(repeated, source))
        return "\n".join(kept)


def _repeat_marker(lines: int, step: int) -> str:
    return f"[… {lines} line{'s' if lines > 1 else ''} as in step {step} …]"
