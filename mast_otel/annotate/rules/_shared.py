"""Plumbing every rule detector shares: the `Detector` base, reading tool turns, building its one,
bounded Finding."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from mast_otel.annotate.base import Evidence, Finding
from mast_otel.conversation.model import Conversation, ToolCall, Turn, TurnKind
from mast_otel.taxonomy import mode

from ._facts import RunFacts
from ._text import normalise_space

# A loop of hundreds of identical calls must not turn into a row of hundreds of step indexes.
MAX_EVIDENCE_STEPS = 32
MAX_EXPLANATION_CHARS = 200

# Turns in which an agent speaks (as opposed to acting through a tool or handing off).
SPEAKING_KINDS = frozenset({TurnKind.AGENT_MESSAGE, TurnKind.REASONING})


class Detector(ABC):
    """A rule detector: an `Annotator` on its own, and `detect` on facts shared with the others.

    `RuleAnnotator` builds one `RunFacts` per run and hands it to every detector, so what several
    detectors need (call keys, failure markers in results, success claims) is computed once.
    """

    __slots__ = ()

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def detect(self, facts: RunFacts) -> tuple[Finding, ...]: ...

    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        return self.detect(RunFacts(conversation))


def tool_turns(conversation: Conversation) -> list[tuple[Turn, ToolCall]]:
    """The run's tool-call turns with their calls, in order."""
    return [(turn, turn.tool) for turn in conversation.turns if turn.tool is not None]


def unique(turns: Iterable[Turn]) -> list[Turn]:
    """Turns without repeats, first occurrence kept, order kept."""
    seen: set[int] = set()
    kept: list[Turn] = []
    for turn in turns:
        if turn.index not in seen:
            seen.add(turn.index)
            kept.append(turn)
    return kept


def word_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two vocabularies: 1.0 for the same words, 0.0 for none in common."""
    return len(a & b) / len(a | b) if a or b else 0.0


def steps(turns: Iterable[Turn], limit: int = 6) -> str:
    """Step numbers for an explanation: "3, 7, 9", or "3, 7, 9, … (12 steps)" past `limit`."""
    indexes = [str(turn.index) for turn in turns]
    if len(indexes) <= limit:
        return ", ".join(indexes)
    return f"{', '.join(indexes[:limit])}, … ({len(indexes)} steps)"


def make_finding(
    code: str,
    turns: Iterable[Turn],
    *,
    confidence: float,
    explanation: str,
    annotator: str,
) -> Finding:
    """A Finding whose evidence lists `turns` in order (the decisive one first), without repeats.

    The acting agent is the decisive turn's; span ids skip turns that have none (imported logs).
    """
    ordered = unique(turns)[:MAX_EVIDENCE_STEPS]
    line = normalise_space(explanation)
    if len(line) > MAX_EXPLANATION_CHARS:
        line = line[: MAX_EXPLANATION_CHARS - 1].rstrip() + "…"
    return Finding(
        mode=mode(code),
        evidence=Evidence(
            step_indexes=tuple(turn.index for turn in ordered),
            span_ids=tuple(turn.span_id for turn in ordered if turn.span_id),
            agent=ordered[0].agent if ordered else "",
        ),
        confidence=round(min(max(confidence, 0.0), 1.0), 2),
        explanation=line,
        annotator=annotator,
    )
