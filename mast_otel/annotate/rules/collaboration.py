"""FM-2.4 information withholding and FM-2.5 ignored other agent's input: agents not passing, or not
taking, what the others need.

FM-2.4 (`InformationWithholding`), in runs where two or more agents speak: an agent's own tool call
fails (an error, not failure words in a result: a diagnostic tool reporting a crash is working),
and the agent's next message, the one the others get (another agent acts next, or it hands off),
mentions no trouble at all: no failure marker, no "unable / could not / unfortunately / issue /
partial...". A report that claims success is left to FM-3.3 (incorrect verification). A "tool"
that is itself a participant (a code executor answering in a group chat) hides nothing. Evidence:
the report, then the failing call. Confidence 0.4.

FM-2.5 (`IgnoredOtherAgentsInput`): another agent (not the user) addresses a correction or a
suggestion to the agent that spoke last ("you should...", "please use...", "that is wrong",
"I suggest..."), and that agent's next action repeats what it did before the correction: the
same tool call (name and canonical arguments), or a near-identical message (>= 80% of the same
words, at least 8 of them). Evidence: the repeated action, the correction, the action it repeats.
Confidence 0.5 for a repeated call, 0.45 for a repeated message.

How strong a proxy: both are weak. Withholding is seen only as a failure that goes unmentioned in
the very next report; whether that failure mattered, and information kept back in any other way,
is not. Ignoring input is seen only as doing the same thing again right after being told
otherwise; an agent that half-follows advice, or acts on other advice, passes. Neither reads
who can see what (a shared group chat has nothing to withhold), so both fire only on behaviour
the run shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import ToolCall, Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding, word_overlap
from ._text import (
    find_correction,
    find_failure_marker,
    find_inability,
    render_call,
    shorten,
)

_TROUBLE_WORDS = re.compile(
    r"\b(?:unable|could ?n[o'’]t|cannot|can['’]t|problems?|issues?|unfortunately|however|partial(?:ly)?"
    r"|incomplete|unknown|unclear|unsuccessful|did ?n[o'’]t|not (?:work|succeed|complete))\b",
    re.IGNORECASE,
)
_MIN_ECHO_WORDS = 8
_MAX_ECHO_WORDS = 256  # a message is compared on its first words


def _acknowledges_trouble(text: str) -> bool:
    return bool(
        _TROUBLE_WORDS.search(text[:8192])
        or find_failure_marker(text) is not None
        or find_inability(text) is not None
    )


@dataclass(frozen=True, slots=True)
class InformationWithholding(Detector):
    @property
    def name(self) -> str:
        return "rules/information_withholding"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        speakers = {turn.agent for turn in facts.turns if turn.kind in SPEAKING_KINDS}
        if len(speakers) < 2 or not facts.tool_turns:
            return ()
        turns = facts.turns
        # Per agent, its own calls since it last reported.
        unreported: dict[str, list[Turn]] = {}
        for position, turn in enumerate(turns):
            if turn.tool is not None:
                # A "tool" that is itself a participant (a code executor in a group chat) answers
                # in front of everyone: its result is nobody's to withhold.
                if turn.tool.name not in facts.conversation.agents:
                    unreported.setdefault(turn.agent, []).append(turn)
                continue
            calls = unreported.get(turn.agent)
            if not calls or turn.kind is not TurnKind.AGENT_MESSAGE or not _passes_on(turns, position):
                continue
            del unreported[turn.agent]
            if facts.success_claim(turn) is not None or _acknowledges_trouble(turn.content):
                continue  # reported, or claimed as success (FM-3.3's finding)
            failing = _last_failing(calls)
            if failing is not None:
                call_turn, call, why = failing
                return (
                    make_finding(
                        "FM-2.4",
                        [turn, call_turn],
                        confidence=0.4,
                        explanation=(
                            f"{turn.agent or 'an agent'} reports at step {turn.index} without mentioning "
                            f"that {call.name} at step {call_turn.index} failed ('{shorten(why, 50)}')"
                        ),
                        annotator=self.name,
                    ),
                )
        return ()


def _last_failing(calls: list[Turn]) -> tuple[Turn, ToolCall, str] | None:
    for turn in reversed(calls):
        if turn.tool is not None and turn.tool.failed:
            return turn, turn.tool, turn.tool.error
    return None


def _passes_on(turns: tuple[Turn, ...], position: int) -> bool:
    """Whether the message at `position` is what the others get: its agent hands off, or another
    agent acts next (tool calls by the same agent in between mean it is still working)."""
    speaker = turns[position].agent
    for turn in turns[position + 1 :]:
        if turn.kind is TurnKind.HANDOFF:
            return turn.agent == speaker
        if turn.agent != speaker and turn.kind is not TurnKind.USER:
            return True
        if turn.agent == speaker and turn.kind is not TurnKind.REASONING:
            return False
    return False


@dataclass(frozen=True, slots=True)
class IgnoredOtherAgentsInput(Detector):
    min_overlap: float = 0.8

    @property
    def name(self) -> str:
        return "rules/ignored_input"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        last_call: dict[str, Turn] = {}
        last_message: dict[str, Turn] = {}
        # per addressed agent: the correction, and its last call and message before it
        told: dict[str, tuple[Turn, Turn | None, Turn | None]] = {}
        last_speaker = ""
        for turn in facts.turns:
            if turn.tool is not None:
                pending = told.pop(turn.agent, None)
                before = pending[1] if pending is not None else None
                if (
                    pending is not None
                    and before is not None
                    and before.tool is not None
                    and facts.call_key(before, before.tool) == facts.call_key(turn, turn.tool)
                ):
                    what = f"calls {render_call(turn.tool, 40)} again"
                    return self._found(turn, pending[0], before, 0.5, what)
                last_call[turn.agent] = turn
                continue
            if turn.kind is not TurnKind.AGENT_MESSAGE:
                continue  # reasoning neither answers a correction nor makes one
            pending = told.pop(turn.agent, None)
            said = pending[2] if pending is not None else None
            if pending is not None and said is not None and self._echoes(facts, said, turn):
                return self._found(turn, pending[0], said, 0.45, "says the same thing again")
            if turn.agent in facts.machinery:
                continue  # the machinery's stock replies neither correct nor get corrected
            addressed = last_speaker
            if addressed and addressed != turn.agent and find_correction(turn.content) is not None:
                told[addressed] = (turn, last_call.get(addressed), last_message.get(addressed))
            last_message[turn.agent] = turn
            last_speaker = turn.agent
        return ()

    def _echoes(self, facts: RunFacts, earlier: Turn, later: Turn) -> bool:
        before = frozenset(facts.words(earlier)[:_MAX_ECHO_WORDS])
        after = frozenset(facts.words(later)[:_MAX_ECHO_WORDS])
        return (
            min(len(before), len(after)) >= _MIN_ECHO_WORDS
            and word_overlap(before, after) >= self.min_overlap
        )

    def _found(
        self, repeated: Turn, correction: Turn, before: Turn, confidence: float, what: str
    ) -> tuple[Finding, ...]:
        return (
            make_finding(
                "FM-2.5",
                [repeated, correction, before],
                confidence=confidence,
                explanation=(
                    f"{repeated.agent or 'an agent'} {what} at step {repeated.index} although "
                    f"{correction.agent or 'another agent'} corrected it at step {correction.index}"
                ),
                annotator=self.name,
            ),
        )
