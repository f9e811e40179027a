"""FM-2.1 conversation reset: the dialogue starts over part-way, dropping the progress made so far.

Signals:
- restated task (structural): after at least `min_progress` (3) agent turns of work, an agent
  message or reasoning states the task again, nearly word for word (>= 80% of the task's distinct
  words of three letters or more, the task having at least 6 of them, read in the turn's opening):
  the team went back to square one, as a planner that replans "from the original request" does.
  Delegations (messages addressed to another agent) do not count: handing the task down is not
  starting over. Confidence 0.55.
- announced restart (lexical): after the same amount of work, an agent says it starts over
  ("let's start over", "from scratch", "replanning", "new plan", "reset the conversation").
  Confidence 0.4.
Both together: 0.65. The task is the run's task, else its first user message.

Evidence: the turn that restarts, then the other signal's turn.

How strong a proxy: a restated task after work is a strong sign that context was dropped, but
some frameworks restate the task on purpose at each round (a ledger that quotes the request);
such runs show it on every round and this detector flags them all. The lexical signal is weak: a
planned "new plan" after a real dead end is a reset the MAST definition calls unwarranted only
sometimes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding
from ._text import MAX_SCAN_CHARS, find_restart, lowered, shorten, words

_MIN_WORD_CHARS = 3
_OPENING_CHARS = 4000  # a restatement comes first; reports that quote the task deep inside do not count


@dataclass(frozen=True, slots=True)
class ConversationReset(Detector):
    min_progress: int = 3
    min_overlap: float = 0.8
    min_task_words: int = 6

    @property
    def name(self) -> str:
        return "rules/conversation_reset"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        task = facts.conversation.task or next(
            (turn.content for turn in facts.turns if turn.kind is TurnKind.USER), ""
        )
        task_words = _content_words(task[:_OPENING_CHARS])
        if len(task_words) < self.min_task_words:
            task_words = frozenset()
        probes = sorted(task_words, key=len, reverse=True)[:3]  # cheap pre-test: the longest words
        progress = 0
        restated: Turn | None = None
        announced: tuple[Turn, str] | None = None
        for turn in facts.turns:
            if turn.kind not in SPEAKING_KINDS and turn.tool is None:
                continue
            if turn.tool is not None or turn.target_agent:
                progress += 1
                continue
            if announced is None and progress >= self.min_progress:
                match = find_restart(turn.content)
                if match is not None:
                    announced = (turn, match.group(0))
            if task_words and self._restates(turn, task, task_words, probes):
                if progress >= self.min_progress and restated is None:
                    restated = turn
                progress = 0  # the restatement starts a new round of work
            else:
                progress += 1
        return self._report(restated, announced)

    def _restates(self, turn: Turn, task: str, task_words: frozenset[str], probes: list[str]) -> bool:
        if not all(probe in lowered(turn.content[:MAX_SCAN_CHARS]) for probe in probes):
            return False  # cheap: the task's longest words are not even there
        opening = turn.content[: max(_OPENING_CHARS, 3 * len(task))]
        return len(task_words & _content_words(opening)) >= self.min_overlap * len(task_words)

    def _report(self, restated: Turn | None, announced: tuple[Turn, str] | None) -> tuple[Finding, ...]:
        if restated is not None:
            turns = [restated] + ([announced[0]] if announced else [])
            confidence = 0.65 if announced else 0.55
            explanation = (
                f"{restated.agent or 'an agent'} restates the whole task at step {restated.index}, "
                f"after the team had worked on it: the conversation starts over"
            )
        elif announced is not None:
            turn, said = announced
            turns, confidence = [turn], 0.4
            explanation = (
                f"{turn.agent or 'an agent'} starts over at step {turn.index}: '{shorten(said, 40)}'"
            )
        else:
            return ()
        return (
            make_finding(
                "FM-2.1", turns, confidence=confidence, explanation=explanation, annotator=self.name
            ),
        )


def _content_words(text: str) -> frozenset[str]:
    return frozenset(word for word in words(text) if len(word) >= _MIN_WORD_CHARS)
