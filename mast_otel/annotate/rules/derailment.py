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
from mast_otel.conversation.model import Conversation, Turn, TurnKind

from ._shared import make_finding, steps
from ._text import argument_entities, entity_tokens, grounded, shorten

_GROUNDING_KINDS = frozenset({TurnKind.USER, TurnKind.SYSTEM})


@dataclass(frozen=True, slots=True)
class TaskDerailment:
    min_stretch: int = 3

    @property
    def name(self) -> str:
        return "rules/task_derailment"

    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        acting_on = {
            turn.index: entities
            for turn in conversation.turns
            if turn.tool is not None and (entities := argument_entities(turn.tool.arguments))
        }
        if len(acting_on) < self.min_stretch:
            return ()
        known = entity_tokens(conversation.task)
        stretch: list[tuple[Turn, list[str]]] = []
        worst: list[tuple[Turn, list[str]]] = []
        for turn in conversation.turns:
            if turn.kind in _GROUNDING_KINDS:
                known |= entity_tokens(turn.content)
                continue
            if turn.tool is None:
                continue
            if not known:
                return ()  # nothing says what the task is about: nothing to derail from
            entities = acting_on.get(turn.index, [])
            if entities:
                strays = [entity for entity in entities if not grounded(entity, known)]
                if 2 * len(strays) > len(entities):
                    stretch.append((turn, strays))
                else:
                    stretch = []
                if len(stretch) > len(worst):
                    # Shared, not copied: a reset binds `stretch` to a new list and leaves `worst` intact.
                    worst = stretch
            if turn.tool.result:
                known |= entity_tokens(turn.tool.result) - entity_tokens(" ".join(entities))
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
