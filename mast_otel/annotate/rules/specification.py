"""FM-1.1 disobey task specification and FM-1.2 disobey role specification: agents leaving their brief.

FM-1.1 (`DisobeyTaskSpecification`) reads two signals:
- forbidden action (structural): the task forbids a verb ("do not restart anything", "without
  deleting", "never scale") and a tool call whose name carries that verb (`restart_pod`) is made
  anyway. Confidence 0.75.
- made-up inputs (lexical): an agent message or reasoning announces working on invented inputs
  instead of the real ones the task is about ("let's assume we have the file", "placeholder
  values", "hypothetical data", "for demonstration purposes"); refusals ("instead of placeholder
  values", "we should not assume") do not count. Confidence 0.55, 0.6 when the agent does it more
  than once.
Evidence: the violating call or the first fabricating turn, then the others.

FM-1.2 (`DisobeyRoleSpecification`) reads who speaks as whom, in runs with two or more agents:
- an agent writes a line in another participant's name, in the first person ("Reviewer: I agree...",
  at the start of a line; a roster line "Reviewer: an agent that reviews" does not count), i.e.
  plays the other agent's part. Confidence 0.6.
- an agent presents itself as another participant ("As the Translation Expert, I confirm"): the
  words after "as the" match the last two or more words of another participant's name and not
  its own. Confidence 0.5.
Evidence: the speaking turn.

How strong a proxy: the forbidden action is close to a fact when the task states the prohibition
in plain words; everything else is lexical and weak. Fabrication cues catch the common "assume we
have the data" shortcut, not an agent that silently invents a number; role checks see
impersonation, not an agent quietly doing another's job, and know nothing of the roles' written
specifications (system prompts are not compared).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding, steps
from ._text import MAX_SCAN_CHARS, call_verbs, find_fabrication, forbidden_verbs, render_call, shorten, words

_NOT_PARTICIPANTS = frozenset({"", "user", "system", "human", "assistant", "tool"})
_FIRST_PERSON = r"(?:(?:\w+[,:]?\s+){0,3})\b(?:i|i['’]m|i['’]ll|i['’]ve|we|we['’]ll|my|our|me)\b"


@dataclass(frozen=True, slots=True)
class DisobeyTaskSpecification(Detector):
    @property
    def name(self) -> str:
        return "rules/task_specification"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        signals = [signal for signal in (_forbidden_call(facts), _fabrication(facts)) if signal is not None]
        if not signals:
            return ()
        signals.sort(key=lambda signal: -signal[0])
        confidence, turns, explanation = signals[0]
        for _, others, other_explanation in signals[1:]:
            turns = [*turns, *others]
            explanation += f"; also: {other_explanation}"
        return (
            make_finding(
                "FM-1.1", turns, confidence=confidence, explanation=explanation, annotator=self.name
            ),
        )


def _forbidden_call(facts: RunFacts) -> tuple[float, list[Turn], str] | None:
    forbidden = forbidden_verbs(facts.conversation.task or _first_user_text(facts))
    if not forbidden:
        return None
    for turn, call in facts.tool_turns:
        broken = forbidden & call_verbs(call)
        if broken:
            return (
                0.75,
                [turn],
                f"the task says not to {sorted(broken)[0]}, yet step {turn.index} calls "
                f"{render_call(call, 50)}",
            )
    return None


def _first_user_text(facts: RunFacts) -> str:
    return next((turn.content for turn in facts.turns if turn.kind is TurnKind.USER), "")


def _fabrication(facts: RunFacts) -> tuple[float, list[Turn], str] | None:
    made_up = [
        (turn, match)
        for turn in facts.turns
        if turn.kind in SPEAKING_KINDS and (match := find_fabrication(turn.content)) is not None
    ]
    if not made_up:
        return None
    turn, match = made_up[0]
    return (
        0.6 if len(made_up) > 1 else 0.55,
        [turn for turn, _ in made_up],
        f"{turn.agent or 'an agent'} works on made-up inputs at step {turn.index}: "
        f"'{shorten(turn.content[match.start() :], 60)}'"
        + (f" (also steps {steps(t for t, _ in made_up[1:])})" if len(made_up) > 1 else ""),
    )


@dataclass(frozen=True, slots=True)
class DisobeyRoleSpecification(Detector):
    @property
    def name(self) -> str:
        return "rules/role_specification"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        participants = _participants(facts)
        if len(participants) < 2:
            return ()
        # "Reviewer: I agree..." speaks for the reviewer; "Reviewer: an agent that reviews" (a roster)
        # describes it. Only a line in the first person counts.
        speaker_lines = {
            name: re.compile(
                rf"^[\W_]{{0,4}}{re.escape(name)}[\W_]{{0,4}}:[\W_]{{0,4}}{_FIRST_PERSON}",
                re.MULTILINE | re.IGNORECASE,
            )
            for name in participants
        }
        titles = {name: _title(name) for name in participants}
        for turn in facts.turns:
            if turn.kind not in SPEAKING_KINDS or turn.agent not in participants:
                continue
            text = turn.content[:MAX_SCAN_CHARS]
            lowered = text.lower()
            guises = _guises(lowered) if "as " in lowered else ()
            for other in participants:
                if other == turn.agent:
                    continue
                if other.lower() in lowered and speaker_lines[other].search(text):
                    return self._found(turn, 0.6, f"writes a line as {other}")
                title = titles[other]
                if title and title != titles[turn.agent] and any(title in guise for guise in guises):
                    return self._found(turn, 0.5, f"speaks as the {title}, which is {other}'s role")
        return ()

    def _found(self, turn: Turn, confidence: float, what: str) -> tuple[Finding, ...]:
        explanation = f"{turn.agent} {what} at step {turn.index}"
        return (
            make_finding(
                "FM-1.2", [turn], confidence=confidence, explanation=explanation, annotator=self.name
            ),
        )


def _participants(facts: RunFacts) -> set[str]:
    """Agents that speak in the run (tool executors and the user are not participants)."""
    return {
        turn.agent
        for turn in facts.turns
        if turn.kind in SPEAKING_KINDS
        and turn.agent.lower() not in _NOT_PARTICIPANTS
        and turn.agent not in facts.machinery
    }


_GUISE = re.compile(r"\bas (?:the|an?) ((?:[a-z]+[ _-]?){1,5})")


def _guises(lowered: str) -> list[str]:
    """What a text presents its speaker as: the words after each "as the" / "as a(n)"."""
    return [" ".join(words(match.group(1))) for match in _GUISE.finditer(lowered)]


def _title(name: str) -> str:
    """The last two words of a multi-word agent name, as a role title: `Tizin_Translation_Expert` ->
    "translation expert". Single-word names give none: "as the planner" is too common a phrase."""
    parts = words(name)
    return " ".join(parts[-2:]) if len(parts) >= 2 else ""
