"""FM-2.3 task derailment: the agents work on things the task never led them to.

Signal: the identifier-like values in JSON tool arguments (service, namespace, host, file names...;
not free text, numbers or generic values like "default") are checked against what the run has been
told so far: the task, user and system turns, and the results of earlier tool calls. A call is off
the task when more than half of its values appear in none of these. A result does not ground the
values of the call that produced it (a tool echoing the name it was asked about proves nothing).
Calls without such values are skipped; a grounded call ends a stretch. It fires on a stretch of
`min_stretch` (3) or more off-task calls. Runs with no task text at all are not judged.

Evidence: the stretch's calls, first one first.

Confidence: 0.4 for three calls, +0.05 for each further call, at most 0.6.

How strong a proxy: weak, hence the low confidence. It is blind to derailment on grounded entities
(the right service, the wrong question), to non-JSON arguments, and it flags legitimate
exploration of names the agent knows from its own instructions or training ("kube-system").
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Turn, TurnKind

from ._facts import RunFacts
from ._shared import Detector, make_finding, steps
from ._text import EntityFinder, argument_entities, entity_parts, shorten

_GROUNDING_KINDS = frozenset({TurnKind.USER, TurnKind.SYSTEM})


@dataclass(frozen=True, slots=True)
class TaskDerailment(Detector):
    min_stretch: int = 3

    @property
    def name(self) -> str:
        return "rules/task_derailment"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        conversation = facts.conversation
        acting_on = {
            turn.index: entities
            for turn in conversation.turns
            if turn.tool is not None and (entities := argument_entities(turn.tool.arguments))
        }
        if len(acting_on) < self.min_stretch:
            return ()
        parts = {entity: entity_parts(entity) for entities in acting_on.values() for entity in entities}
        finder = EntityFinder(part for found in parts.values() for part in found)
        known = finder.find(conversation.task, set())  # the parts of those entities the run was told about
        told = _says_something(conversation.task)
        stretch: list[tuple[Turn, list[str]]] = []
        worst: list[tuple[Turn, list[str]]] = []
        for turn in conversation.turns:
            if turn.kind in _GROUNDING_KINDS:
                known |= finder.find(turn.content, known)
                told = told or _says_something(turn.content)
                continue
            if turn.tool is None:
                continue
            if not told:
                return ()  # nothing says what the task is about: nothing to derail from
            entities = acting_on.get(turn.index, ())
            if entities:
                strays = [entity for entity in entities if not parts[entity] <= known]
                if 2 * len(strays) > len(entities):
                    stretch.append((turn, strays))
                else:
                    stretch = []
                if len(stretch) > len(worst):
                    # Shared, not copied: a reset binds `stretch` to a new list and leaves `worst` intact.
                    worst = stretch
            if turn.tool.result:
                echoed = {part for entity in entities for part in parts[entity]}
                known |= finder.find(turn.tool.result, known) - echoed
        if len(worst) < self.min_stretch:
            return ()
        strays = list(dict.fromkeys(entity for _, found in worst for entity in found))
        return (
            make_finding(
                "FM-2.3",
                [turn for turn, _ in worst],
                confidence=min(0.4 + 0.05 * (len(worst) - self.min_stretch), 0.6),
                explanation=(
                    f"steps {steps(turn for turn, _ in worst)} act on "
                    f"{', '.join(repr(shorten(entity, 30)) for entity in strays[:3])}, found neither in "
                    f"the task nor in earlier tool results"
                ),
                annotator=self.name,
            ),
        )


def _says_something(text: str) -> bool:
    return any(character.isalnum() for character in text[:256])
