"""FM-2.2 fail to ask for clarification: an agent notices it lacks something and guesses instead of asking.

Signal (lexical, in one turn): an agent message or reasoning says that something it needs is
missing, unclear or out of reach ("the file was not provided", "the date is not specified", "I
cannot access the page", "ambiguous") *and*, in the same turn, goes ahead on an assumption or on
made-up inputs ("I'll assume", "let's suppose", "presumably", "best guess", "placeholder
values"), without asking anything (no prose question in the turn). Hedged phrases ("if the file
is missing", "instead of guessing") do not count.

Evidence: the first such turn, then later ones.

Confidence: 0.5, 0.55 when the agent does it more than once.

How strong a proxy: weak to moderate. The pairing "it is missing, so I assume" is the behaviour
MAST describes, but a reasonable documented assumption (a unit, a default) reads the same, and
an agent that guesses without saying what is missing is not seen. Whether anyone could have
answered a question (a human in the loop, another agent) is not known from the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Turn

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding, steps
from ._text import find_assumption, find_fabrication, find_missing_information, questions, shorten


@dataclass(frozen=True, slots=True)
class FailToAskForClarification(Detector):
    @property
    def name(self) -> str:
        return "rules/no_clarification"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        guesses: list[tuple[Turn, str]] = []
        for turn in facts.turns:
            if turn.kind not in SPEAKING_KINDS or not turn.content:
                continue
            missing = find_missing_information(turn.content)
            if missing is None:
                continue
            assumed = find_assumption(turn.content) or find_fabrication(turn.content)
            if assumed is None or questions(turn.content):
                continue
            guesses.append((turn, f"'{shorten(missing.group(0), 30)}' -> '{shorten(assumed.group(0), 30)}'"))
        if not guesses:
            return ()
        turn, what = guesses[0]
        explanation = (
            f"{turn.agent or 'an agent'} proceeds on a guess instead of asking at step {turn.index}: {what}"
            + (f" (again at steps {steps(t for t, _ in guesses[1:])})" if len(guesses) > 1 else "")
        )
        return (
            make_finding(
                "FM-2.2",
                [t for t, _ in guesses],
                confidence=0.55 if len(guesses) > 1 else 0.5,
                explanation=explanation,
                annotator=self.name,
            ),
        )
