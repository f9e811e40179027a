"""FM-2.6 reasoning-action mismatch: an agent says one thing and does another.

Signal: a REASONING turn (or, weaker, an agent message) that mentions tools known in the run, each
mention read for its polarity from the words just before it in its clause: intent ("I will call
get_logs", "next: query metrics", "let me get the logs") or refusal ("we should NOT restart the
pod", "instead of restarting"). Sentences stating a condition ("if get_logs fails, restart") count
as neither. Tool names match as word sequences, so `query_metrics` matches "query the metrics";
one-word names only count next to "call/use/run/invoke" or "tool", as they are often plain words.
The agent's next tool calls (up to 3, before it speaks again or a user turn arrives) then
contradict it when one of them is a tool it refused, or when it announced tools and the first of
them is a tool its reasoning did not mention at all (mentioned ones pass, so that "I'll get the
logs and the metrics" is not contradicted by calling the metrics first).

Evidence: the contradicting call first, then the reasoning turn.

Confidence: 0.8 for calling a refused tool, 0.6 for calling an unannounced one; 0.1 less when the
intent came from a plain message rather than a reasoning turn.

How strong a proxy: strong when the reasoning names tools, as ReAct-style agents do; blind to
intents phrased without a tool's words ("I'll look at what the service logged") and to mismatches in
arguments (right tool, wrong target). Plans revised silently between reasoning and action (parallel
tool calls, framework retries) can look like mismatches.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import Enum

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import ToolCall, Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding
from ._text import (
    CLAUSE_BREAKS,
    CONDITIONAL_WORDS,
    INTENT_WORDS,
    MAX_SCAN_CHARS,
    NEGATING_PAIRS,
    NEGATION_WORDS,
    lowered,
    sentence_words,
    stem,
    words,
)

_LOOKBACK_WORDS = 6
_MAX_GAP_WORDS = 2  # "query the metrics" still mentions query_metrics
_CALLS_COMPARED = 3
# Next to a one-word tool name, these make it a mention of the tool rather than a plain word.
_TOOL_CONTEXT_BEFORE = frozenset({"call", "use", "run", "invoke", "execute"})
_TOOL_CONTEXT_AFTER = frozenset({"tool", "function", "command"})


class _Polarity(Enum):
    INTENT = "intent"
    REFUSAL = "refusal"
    NEUTRAL = "neutral"


@dataclass(frozen=True, slots=True)
class _Stance:
    """What a reasoning turn says about the run's tools."""

    turn: Turn
    announced: tuple[str, ...]
    refused: frozenset[str]
    mentioned: frozenset[str]


@dataclass(slots=True)
class _Pending:
    stance: _Stance
    calls: list[tuple[Turn, ToolCall]] = field(default_factory=list)


class _ToolLexicon:
    """Finds mentions of the run's tool names in text, as (stemmed) word sequences."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        self._by_first_word: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name in sorted(tool_names):
            name_words = tuple(stem(word) for word in words(name))
            if name_words:
                entry = (name, name_words)
                # Keyed by the plain and the plural form, so that text words need no stemming to look up.
                for form in {name_words[0], name_words[0] + "s"}:
                    self._by_first_word.setdefault(form, []).append(entry)
        firsts = sorted(self._by_first_word, key=lambda word: (-len(word), word))
        self._first_word = re.compile("|".join(map(re.escape, firsts))) if firsts else None
        self._first_words = frozenset(firsts)

    def __bool__(self) -> bool:
        return bool(self._by_first_word)

    def may_mention(self, lower: str) -> bool:
        """A cheap pre-test on lower-cased text (one search in C): does it hold a tool's first word?"""
        return self._first_word is not None and self._first_word.search(lower) is not None

    def mentions(self, raw: list[str]) -> list[tuple[int, str]]:
        """(position, tool name) for each tool mentioned in the words `raw`."""
        found: list[tuple[int, str]] = []
        if self._first_words.isdisjoint(raw):  # in C: most sentences name no tool at all
            return found
        for position, word in enumerate(raw):
            candidates = self._by_first_word.get(word)
            if not candidates:
                continue
            for name, name_words in candidates:
                if len(name_words) == 1:
                    if _framed_as_tool(raw, position):
                        found.append((position, name))
                elif _follows(raw, position, name_words):
                    found.append((position, name))
        return found


@functools.lru_cache(maxsize=64)
def _lexicon(tool_names: frozenset[str]) -> _ToolLexicon:
    """The lexicon of a set of tools, built once: an agent's runs call the same tools over and over."""
    return _ToolLexicon(tool_names)


def _framed_as_tool(raw: list[str], position: int) -> bool:
    before = raw[max(0, position - 2) : position]
    after = raw[position + 1 : position + 2]
    return any(w in _TOOL_CONTEXT_BEFORE for w in before) or any(w in _TOOL_CONTEXT_AFTER for w in after)


def _follows(raw: list[str], position: int, name_words: tuple[str, ...]) -> bool:
    """Whether the rest of a tool name's (stemmed) words follow `position`, a few words apart at most."""
    cursor = position
    for word in name_words[1:]:
        window = [stem(w) for w in raw[cursor + 1 : cursor + 2 + _MAX_GAP_WORDS]]
        if word not in window:
            return False
        cursor += 1 + window.index(word)
    return True


def _polarity(raw: list[str], position: int) -> _Polarity:
    """Read the words before a mention, nearest first, until a cue or the clause's start."""
    for back in range(position - 1, max(-1, position - 1 - _LOOKBACK_WORDS), -1):
        word = raw[back]
        following = raw[back + 1] if back + 1 < len(raw) else ""
        if word in NEGATION_WORDS or (word, following) in NEGATING_PAIRS:
            return _Polarity.REFUSAL
        if word in INTENT_WORDS:
            return _Polarity.INTENT
        if word in CLAUSE_BREAKS:
            break
    return _Polarity.NEUTRAL


def _stance(turn: Turn, lexicon: _ToolLexicon) -> _Stance | None:
    announced: list[str] = []
    refused: set[str] = set()
    mentioned: set[str] = set()
    if not lexicon.may_mention(lowered(turn.content[:MAX_SCAN_CHARS])):
        return None
    for raw in sentence_words(turn.content):
        mentions = lexicon.mentions(raw)
        if not mentions:
            continue
        conditional = any(word in CONDITIONAL_WORDS for word in raw)
        for position, name in mentions:
            mentioned.add(name)
            polarity = _Polarity.NEUTRAL if conditional else _polarity(raw, position)
            if polarity is _Polarity.INTENT and name not in announced:
                announced.append(name)
            elif polarity is _Polarity.REFUSAL:
                refused.add(name)
    if not announced and not refused:
        return None
    return _Stance(turn, tuple(announced), frozenset(refused - set(announced)), frozenset(mentioned))


@dataclass(frozen=True, slots=True)
class ReasoningActionMismatch(Detector):
    @property
    def name(self) -> str:
        return "rules/reasoning_action_mismatch"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        conversation = facts.conversation
        lexicon = _lexicon(frozenset(call.name for _, call in facts.tool_turns))
        if not lexicon:
            return ()
        pending: dict[str, _Pending] = {}
        mismatches: list[tuple[float, Turn, Turn, str]] = []

        def settle(agent: str) -> None:
            entry = pending.pop(agent, None)
            if entry is not None:
                mismatch = _judge(entry)
                if mismatch is not None:
                    mismatches.append(mismatch)

        acts_next = _acts_before_speaking_again(conversation.turns)
        for position, turn in enumerate(conversation.turns):
            if turn.kind is TurnKind.USER:
                for agent in list(pending):
                    settle(agent)
            elif turn.kind in SPEAKING_KINDS:
                settle(turn.agent)
                # What an agent says matters here only if it calls a tool before it speaks again.
                stance = _stance(turn, lexicon) if acts_next[position] else None
                if stance is not None:
                    pending[turn.agent] = _Pending(stance)
            elif turn.tool is not None and turn.agent in pending:
                calls = pending[turn.agent].calls
                calls.append((turn, turn.tool))
                if len(calls) == _CALLS_COMPARED:
                    settle(turn.agent)
        for agent in list(pending):
            settle(agent)
        if not mismatches:
            return ()
        mismatches.sort(key=lambda mismatch: mismatch[1].index)
        confidence, action, reasoning, explanation = mismatches[0]
        others = [turn for _, act, said, _ in mismatches[1:] for turn in (act, said)]
        if len(mismatches) > 1:
            explanation += f"; {len(mismatches) - 1} more mismatch(es)"
        return (
            make_finding(
                "FM-2.6",
                [action, reasoning, *others],
                confidence=confidence,
                explanation=explanation,
                annotator=self.name,
            ),
        )


def _acts_before_speaking_again(turns: tuple[Turn, ...]) -> list[bool]:
    """Per turn: whether its agent makes a tool call after it, before it speaks again or the user does."""
    acts = [False] * len(turns)
    calls_ahead: dict[str, bool] = {}  # per agent, read backwards: a call comes before its next words
    for position in range(len(turns) - 1, -1, -1):
        turn = turns[position]
        if turn.kind is TurnKind.USER:
            calls_ahead.clear()
        elif turn.tool is not None:
            calls_ahead[turn.agent] = True
        elif turn.kind in SPEAKING_KINDS:
            acts[position] = calls_ahead.get(turn.agent, False)
            calls_ahead[turn.agent] = False
    return acts


def _judge(entry: _Pending) -> tuple[float, Turn, Turn, str] | None:
    stance, calls = entry.stance, entry.calls
    if not calls:
        return None
    said = stance.turn
    weaker = 0.0 if said.kind is TurnKind.REASONING else 0.1
    for turn, call in calls:
        if call.name in stance.refused:
            return (
                0.8 - weaker,
                turn,
                said,
                f"step {turn.index} calls {call.name} although step {said.index} says not to",
            )
    turn, call = calls[0]
    if stance.announced and call.name not in stance.mentioned:
        return (
            0.6 - weaker,
            turn,
            said,
            f"step {said.index} announces {', '.join(stance.announced)}, but the next call "
            f"(step {turn.index}) is {call.name}",
        )
    return None
