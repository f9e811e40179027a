"""Fitting a run into the judge's context: render each step, compact long text, split into chunks.

A run becomes numbered lines (`[12] triage called get_pods({"ns": "shop"})`), redacted before
anything else so that compaction can never cut a secret in half and leave a recognisable piece.
Then each step is compacted, cheapest loss first:

1. whitespace collapsed (indentation, blank lines, `-----` rules): nothing a judge reads is lost;
2. what the run already showed is replaced by a pointer: the task, and lines an earlier step
   displayed (agents re-send plans, tools repeat outputs) become `[… 3 lines as in step 4 …]`;
3. text still longer than its limit keeps its head and its tail (errors, conclusions and verdicts
   sit at the end of outputs): per part (`tool_output_chars`, `message_chars`...), then per step
   (`step_chars`), with a larger allowance (`end_step_chars`) for the run's last `end_steps` steps,
   where termination and verification show.

Every step stays visible, whatever the limits: its number, its speaker and what is left of its text,
so a judge can still cite it and see the run's shape. The trade-off is in what it can quote: a
mistake in the middle of a long output is what compaction drops first.

The task and the agents' system instructions form a header repeated in every chunk. Steps are split
greedily into chunks that fit the token budget, each chunk starting with the last few steps of the
previous one; every step lands in at least one chunk and the last chunk always ends with the run's
last step, so the end of a run is never what is dropped.
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
_MIN_REPEATED_CHARS: Final = 30
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
    """Whitespace collapsed: runs of blanks (indentation too) to one space, no blank lines, and
    decoration (`-----`, `=====`) shortened. Layout costs tokens and tells a judge little."""
    text = _BLANKS.sub(" ", text.replace("\r\n", "\n"))
    text = _LINE_BREAKS.sub("\n", text)
    return _DECORATION.sub(r"\1\1\1", text).strip()


_BLANKS: Final = re.compile(r"[ \t\f\v\u00a0]+")
_LINE_BREAKS: Final = re.compile(r" ?\n[ \n]*")
_DECORATION: Final = re.compile(r"([-=_*#~+.])\1{3,}")


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
    turns = [turn for turn in conversation.turns if turn.kind is not TurnKind.SYSTEM]
    first_end_step = len(turns) - limits.end_steps
    steps = tuple(
        _step(
            turn.index,
            renderer.render(turn, limits.end_step_chars if position >= first_end_step else limits.step_chars),
            estimator,
        )
        for position, turn in enumerate(turns)
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
    (the task, lines an earlier step displayed), then compacted: what is left is what the step adds.
    A line counts as shown only if it survived compaction, so a pointer never leads to text the judge
    was not given."""

    def __init__(self, redact: Callable[[str], str], limits: ContextConfig, task: str) -> None:
        self._redact = redact
        self._limits = limits
        self._task = _tidy(task)
        self._first_seen: dict[str, int] = {}  # a long line -> the step that showed it first

    def render(self, turn: Turn, step_limit: int) -> str:
        """`[n] speaker` and the step's text, at most `step_limit` characters of it."""
        prefix = f"[{turn.index}]"
        agent = _agent(turn, self._redact)
        limits = self._limits
        shown: list[str] = []  # this step's long lines, candidates for later pointers
        if turn.kind is TurnKind.TOOL_CALL and turn.tool is not None:
            tool = turn.tool
            label = f"{prefix} {agent} called {self._redact(tool.name)}"
            arguments = self._text(tool.arguments, min(limits.tool_arguments_chars, step_limit), turn, shown)
            body = f"({arguments})"
            if tool.error:
                body += f" -> error: {compact(self._redact(tool.error), _ERROR_CHARS)}"
            if tool.result is None:
                body += "" if tool.error else " -> no result came back"
            elif tool.result.strip():
                result = self._text(tool.result, min(limits.tool_output_chars, step_limit), turn, shown)
                body += f"\n-> {result}"
            else:
                body += " -> (empty result)"
        else:
            message_limit = min(limits.message_chars, step_limit)
            if turn.kind is TurnKind.USER:
                label = f"{prefix} {'user' if turn.agent in ('', 'user') else f'user {agent}'}: "
            elif turn.kind is TurnKind.HANDOFF:
                label = f"{prefix} {agent} hands off to {self._redact(turn.target_agent) or 'unknown agent'}"
                label += ": " if turn.content.strip() else ""
            else:
                label = f"{prefix} {agent}{' (reasoning)' if turn.kind is TurnKind.REASONING else ''}: "
            body = self._text(turn.content, message_limit, turn, shown) if turn.content.strip() else ""
        body = compact(body, step_limit) if len(body) > step_limit else body
        for line in shown:
            if line in body:
                self._first_seen.setdefault(line, turn.index)
        text = label + body
        if turn.finish_reason not in _ORDINARY_FINISH:
            text += f" (generation stopped: {turn.finish_reason})"
        return text

    def _text(self, raw: str, limit: int, turn: Turn, shown: list[str]) -> str:
        text = _tidy(self._redact(raw))
        if len(self._task) >= _MIN_REPEATED_CHARS:
            if text == self._task:
                return "(the task above)"
            text = text.replace(self._task, "(the task above)")
        return compact(self._without_repeats(text, turn.index, shown), limit)

    def _without_repeats(self, text: str, step: int, shown: list[str]) -> str:
        kept: list[str] = []
        repeated, source = 0, -1
        for line in text.split("\n"):
            key = line.strip()
            first = self._first_seen.get(key, step) if len(key) >= _MIN_REPEATED_CHARS else step
            if first != step:
                repeated, source = repeated + 1, source if repeated else first
                continue
            if repeated:
                kept.append(_repeat_marker(repeated, source))
                repeated = 0
            kept.append(line)
            if len(key) >= _MIN_REPEATED_CHARS:
                shown.append(key)
        if repeated:
            kept.append(_repeat_marker(repeated, source))
        return "\n".join(kept)


def _repeat_marker(lines: int, step: int) -> str:
    return f"[… {lines} line{'s' if lines > 1 else ''} as in step {step} …]"
