"""FM-1.3 step repetition: the same step done again and again.

Signal (structural first): tool calls keyed by name + canonical arguments (JSON parsed, keys sorted,
whitespace collapsed). It fires when one key is called `min_repeats` (3) or more times in the run, or
when two consecutive calls share a key *and* came back with the same result (or the same error): the
second call learnt nothing. Lexically, it also fires when an agent says an (almost) identical message
again (same lower-cased words, or >= 90% word overlap with its own previous message) after a tool
call or another speaker came in between, ignoring messages shorter than `min_message_words` (an
agent's final output recorded twice, by its last LLM call and by its agent span, is no repeat).

Evidence: the most repeated call's steps (first one first), then the other repeated steps.

Confidence: 0.5 for a call seen 3 times, +0.05 per extra repeat, +0.15 when every repeat returned
the same result (no progress at all); 0.6 for a lone pair of identical consecutive calls; 0.5 (0.6
from three copies) for repeated messages; capped at 0.95.

How strong a proxy: strong for what it measures (the repeat is a fact), weak for whether it hurt:
polling a status until it changes is legitimate repetition, which is why changing results lower
the confidence. The reference study found this mode in >90% of one model's *successful* runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Conversation, ToolCall, Turn, TurnKind

from ._facts import RunFacts
from ._shared import Detector, make_finding, steps, unique, word_overlap
from ._text import MAX_SCAN_CHARS, CallKey, render_call, same_outcome, shorten

_MAX_MESSAGE_WORDS = 256  # near-duplicate comparison reads this many words of a message


@dataclass(frozen=True, slots=True)
class StepRepetition(Detector):
    min_repeats: int = 3
    min_message_words: int = 8
    near_duplicate_overlap: float = 0.9

    @property
    def name(self) -> str:
        return "rules/step_repetition"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        by_key: dict[CallKey, list[tuple[Turn, ToolCall]]] = {}
        stutters: list[Turn] = []  # both calls of each identical consecutive pair
        stutter_call: ToolCall | None = None
        previous: tuple[Turn, ToolCall, CallKey] | None = None
        for turn, call in facts.tool_turns:
            key = facts.call_key(turn, call)
            by_key.setdefault(key, []).append((turn, call))
            if previous is not None and previous[2] == key and same_outcome(previous[1], call):
                stutters.extend((previous[0], turn))
                stutter_call = stutter_call or call
            previous = (turn, call, key)

        repeated = sorted(
            (group for group in by_key.values() if len(group) >= self.min_repeats),
            key=lambda group: (-len(group), group[0][0].index),
        )
        echoes = self._repeated_messages(facts.conversation, facts.machinery)
        if not repeated and not stutters and not echoes:
            return ()

        evidence = [turn for group in repeated for turn, _ in group] + stutters + echoes
        if repeated:
            worst = repeated[0]
            first_call = worst[0][1]
            unchanged = all(same_outcome(first_call, call) for _, call in worst[1:])
            confidence = 0.5 + 0.05 * (len(worst) - self.min_repeats) + (0.15 if unchanged else 0.0)
            explanation = (
                f"{render_call(first_call, 50)} called {len(worst)} times "
                f"(steps {steps(turn for turn, _ in worst)})"
                + (", same result each time" if unchanged else "")
                + (f"; {len(repeated) - 1} other call(s) repeated too" if len(repeated) > 1 else "")
            )
        elif stutter_call is not None:
            first, second = stutters[0], stutters[1]
            confidence = 0.6
            explanation = (
                f"{render_call(stutter_call, 50)} called again at step {second.index} right after "
                f"step {first.index}, with the same result"
            )
        else:
            confidence = 0.5 if len(echoes) < 3 else 0.6
            explanation = (
                f"{echoes[0].agent or 'an agent'} repeats the message "
                f"'{shorten(echoes[0].content, 60)}' (steps {steps(echoes)})"
            )
        return (
            make_finding(
                "FM-1.3",
                evidence,
                confidence=min(confidence, 0.95),
                explanation=explanation,
                annotator=self.name,
            ),
        )

    def _repeated_messages(self, conversation: Conversation, machinery: frozenset[str]) -> list[Turn]:
        """Messages an agent already said: exact after normalisation, or near-identical to its last one.

        A copy counts only when something happened since the first one (a tool call, or another
        speaker): an agent's final output often shows up twice, from its last LLM call and from its
        agent span, with at most its own reasoning in between; that is not the agent repeating itself.
        The `machinery` (agents that only run tools for others) repeats its stock replies by design.
        """
        seen: dict[tuple[str, str], Turn] = {}
        last_message: dict[str, tuple[Turn, frozenset[str]]] = {}
        last_turn_of: dict[str, int] = {}  # per speaker, the step of its latest turn
        last_call = -1
        echoes: list[Turn] = []

        def happened_since(agent: str, step: int) -> bool:
            return last_call > step or any(
                index > step for speaker, index in last_turn_of.items() if speaker != agent
            )

        for turn in conversation.turns:
            if turn.tool is not None:
                last_call = turn.index
            elif turn.kind is TurnKind.AGENT_MESSAGE and turn.agent not in machinery:
                tokens = turn.content[:MAX_SCAN_CHARS].lower().split()
                if len(tokens) >= self.min_message_words:
                    vocabulary = frozenset(tokens[:_MAX_MESSAGE_WORDS])
                    original = seen.setdefault((turn.agent, " ".join(tokens)), turn)
                    previous = last_message.get(turn.agent)
                    last_message[turn.agent] = (turn, vocabulary)
                    if original is not turn and happened_since(turn.agent, original.index):
                        echoes.extend((original, turn))
                    elif (
                        previous is not None
                        and original is turn
                        and happened_since(turn.agent, previous[0].index)
                        and word_overlap(previous[1], vocabulary) >= self.near_duplicate_overlap
                    ):
                        echoes.extend((previous[0], turn))
            if turn.tool is None:
                last_turn_of[turn.agent] = turn.index
        return unique(echoes)
