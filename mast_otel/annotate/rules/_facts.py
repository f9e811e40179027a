"""What the detectors read of one run, each fact computed once on first use and shared by all of them.

Several detectors ask the same questions of the same turns (is this call state-changing, does its
result contradict a success claim, does this message claim success). `RunFacts` answers each
question once per turn and remembers the answer, so adding a detector costs its own logic, not
another pass of every regular expression over every result. Two facts about who acts, which
blame reads too, live here as plain functions: `requester` (which step decided a tool call) and
`machinery` (speakers that are stock replies, not participants).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from mast_otel.conversation.model import Conversation, ToolCall, Turn, TurnKind

from ._text import (
    ActionKind,
    CallKey,
    call_key,
    classify_call,
    contradicting_outcome,
    find_completion,
    find_success_claim,
    words,
)

_T = TypeVar("_T")
_NOTHING = object()
_SPEAKING = frozenset({TurnKind.AGENT_MESSAGE, TurnKind.REASONING})
_AUTHOR_LOOKBACK = 8  # turns searched for the message that wrote what a call ran
_AUTHORED_PREFIX = 200


def requester(turns: Sequence[Turn], position: int) -> Turn:
    """The step that decided the tool call at `position`: the message of the same agent, a few turns
    back, that wrote what the call ran (code a code executor then ran, a command quoted before
    running it); else the call itself."""
    call = turns[position]
    written = call.tool.arguments.strip()[:_AUTHORED_PREFIX] if call.tool is not None else ""
    if written:
        for earlier in range(position - 1, max(-1, position - 1 - _AUTHOR_LOOKBACK), -1):
            turn = turns[earlier]
            if turn.kind in _SPEAKING and turn.agent == call.agent and written in turn.content:
                return turn
    return call


def machinery(turns: Sequence[Turn]) -> frozenset[str]:
    """Speakers that only ever say one stock reply, at least twice ("There is no code for me to
    execute"): the system's machinery talking, not a participant."""
    replies: dict[str, set[tuple[int, str]]] = {}
    said: Counter[str] = Counter()
    for turn in turns:
        if turn.kind is TurnKind.AGENT_MESSAGE:
            # Length and opening tell stock replies apart without copying whole messages.
            replies.setdefault(turn.agent, set()).add((len(turn.content), turn.content[:256]))
            said[turn.agent] += 1
    return frozenset(agent for agent, texts in replies.items() if len(texts) == 1 and said[agent] >= 2)


class RunFacts:
    """Lazily computed, memoised facts about one conversation's turns."""

    __slots__ = ("_machinery", "_memo", "_tool_turns", "conversation", "turns")

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.turns = conversation.turns
        self._tool_turns: list[tuple[Turn, ToolCall]] | None = None
        self._machinery: frozenset[str] | None = None
        # (question, id of the turn) -> answer; turns live as long as the conversation, so ids are stable.
        self._memo: dict[tuple[str, int], object] = {}

    def _remember(self, question: str, turn: Turn, compute: Callable[[], _T]) -> _T:
        key = (question, id(turn))
        found = self._memo.get(key, _NOTHING)
        if found is _NOTHING:
            found = self._memo[key] = compute()
        return found  # type: ignore[return-value]

    @property
    def tool_turns(self) -> list[tuple[Turn, ToolCall]]:
        """The run's tool-call turns with their calls, in order."""
        if self._tool_turns is None:
            self._tool_turns = [(turn, turn.tool) for turn in self.turns if turn.tool is not None]
        return self._tool_turns

    @property
    def machinery(self) -> frozenset[str]:
        """Agents that are machinery, not participants (see `machinery`): their stock replies are
        neither repetition, nor corrections, nor anybody's decision."""
        if self._machinery is None:
            self._machinery = machinery(self.turns)
        return self._machinery

    def call_key(self, turn: Turn, call: ToolCall) -> CallKey:
        return self._remember("key", turn, lambda: call_key(call))

    def action_kind(self, turn: Turn, call: ToolCall) -> ActionKind:
        return self._remember("kind", turn, lambda: classify_call(call))

    def contradiction(self, turn: Turn, call: ToolCall) -> str | None:
        """What in the call's outcome contradicts success (its error or a failure marker), if anything."""
        return self._remember("contradiction", turn, lambda: contradicting_outcome(call))

    def success_claim(self, turn: Turn) -> re.Match[str] | None:
        return self._remember("claim", turn, lambda: find_success_claim(turn.content))

    def completion(self, turn: Turn) -> re.Match[str] | None:
        return self._remember("completion", turn, lambda: find_completion(turn.content))

    def words(self, turn: Turn) -> list[str]:
        return self._remember("words", turn, lambda: words(turn.content))
