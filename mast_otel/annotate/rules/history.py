"""FM-1.4 loss of conversation history: an agent acting as if earlier turns never happened.

Signals, strongest first:
- context drop (structural): a turn's `context_size` (input messages its LLM call saw) falls to
  <= `drop_ratio` (half) of the largest context an earlier turn of the same agent saw, and by at
  least `min_drop` (3) messages: the history was truncated or reset.
- rediscovery (structural): an agent re-runs one of its first `initial_calls` (2) calls, same tool
  and canonical arguments, at least `min_gap_steps` (6) steps and 2 other calls later, with no
  state-changing call anywhere in between (after a change, reading again is verification).
- re-asked question (lexical): an agent asks a prose question it already asked (same words, at
  least 4 of them; code is skipped) after the user or another agent has spoken since.

Evidence: the decisive turn (the shrunken call, the repeated discovery call or the repeated
question) first, then the turn it repeats or shrank from.

Confidence: 0.75 for a context drop (0.5 when the agent was handed control in between, since a
sub-agent invoked afresh legitimately starts small), 0.5 for a rediscovery, 0.45 for a re-asked
question; +0.1 when more than one kind of signal agrees.

How strong a proxy: the context drop is direct evidence of truncation when the instrumentation
records input messages, but frameworks that summarise or window history by design trip it too.
Rediscovery and re-asking are behavioural echoes of lost history and also fit an agent that
simply wants a fresh look; on their own they stay at 0.5 or below.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Conversation, Turn, TurnKind

from ._facts import RunFacts
from ._shared import Detector, make_finding
from ._text import ActionKind, CallKey, questions, render_call, words

_MIN_QUESTION_WORDS = 4


@dataclass(frozen=True, slots=True)
class HistoryLoss(Detector):
    drop_ratio: float = 0.5
    min_drop: int = 3
    initial_calls: int = 2
    min_gap_steps: int = 6

    @property
    def name(self) -> str:
        return "rules/history_loss"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        conversation = facts.conversation
        signals = [
            signal
            for signal in (
                self._context_drop(conversation),
                self._rediscovery(facts),
                _reasked_question(conversation),
            )
            if signal is not None
        ]
        if not signals:
            return ()
        signals.sort(key=lambda signal: (-signal[0], signal[1][0].index))
        confidence, turns, explanation = signals[0]
        if len(signals) > 1:
            confidence += 0.1
            explanation += f"; also {len(signals) - 1} other sign(s) of lost history"
        return (
            make_finding(
                "FM-1.4",
                [*turns, *(turn for _, others, _ in signals[1:] for turn in others)],
                confidence=confidence,
                explanation=explanation,
                annotator=self.name,
            ),
        )

    def _context_drop(self, conversation: Conversation) -> tuple[float, list[Turn], str] | None:
        largest: dict[str, Turn] = {}  # per agent, the turn that saw the most input messages so far
        handed_to: dict[str, int] = {}  # per agent, the last step that handed control to it
        for turn in conversation.turns:
            if turn.kind is TurnKind.HANDOFF and turn.target_agent:
                handed_to[turn.target_agent] = turn.index
            if turn.context_size <= 0:
                continue
            peak = largest.get(turn.agent)
            if peak is None or turn.context_size > peak.context_size:
                largest[turn.agent] = turn
                continue
            if (
                turn.context_size <= peak.context_size * self.drop_ratio
                and peak.context_size - turn.context_size >= self.min_drop
            ):
                reinvoked = handed_to.get(turn.agent, -1) > peak.index
                return (
                    0.5 if reinvoked else 0.75,
                    [turn, peak],
                    f"{turn.agent or 'the agent'}'s context fell from {peak.context_size} messages "
                    f"(step {peak.index}) to {turn.context_size} at step {turn.index}",
                )
        return None

    def _rediscovery(self, facts: RunFacts) -> tuple[float, list[Turn], str] | None:
        discovery: dict[tuple[str, CallKey], tuple[Turn, int]] = {}  # -> (turn, position among calls)
        calls_made: dict[str, int] = {}
        last_change = -1  # position of the latest state-changing call
        for position, (turn, call) in enumerate(facts.tool_turns):
            key = (turn.agent, facts.call_key(turn, call))
            made = calls_made.get(turn.agent, 0)
            calls_made[turn.agent] = made + 1
            if made < self.initial_calls:
                discovery.setdefault(key, (turn, position))
            elif key in discovery:
                first, first_position = discovery[key]
                if (
                    turn.index - first.index >= self.min_gap_steps
                    and position - first_position > 2
                    and last_change < first_position
                ):
                    return (
                        0.5,
                        [turn, first],
                        f"{turn.agent or 'the agent'} re-runs its initial {render_call(call, 50)} "
                        f"(step {first.index}) at step {turn.index} with nothing changed in between",
                    )
            if facts.action_kind(turn, call) is ActionKind.MUTATE:
                last_change = position
        return None


def _reasked_question(conversation: Conversation) -> tuple[float, list[Turn], str] | None:
    asked: dict[tuple[str, str], Turn] = {}
    last_spoke: dict[str, int] = {}  # per speaker (user or agent), the last step it said something
    for turn in conversation.turns:
        if turn.kind not in (TurnKind.USER, TurnKind.AGENT_MESSAGE):
            continue
        if turn.kind is TurnKind.AGENT_MESSAGE:
            for sentence in questions(turn.content):
                question = words(sentence)
                if len(question) < _MIN_QUESTION_WORDS:
                    continue
                key = (turn.agent, " ".join(question))
                earlier = asked.setdefault(key, turn)
                answered = any(
                    step > earlier.index for speaker, step in last_spoke.items() if speaker != turn.agent
                )
                if earlier is not turn and answered:
                    return (
                        0.45,
                        [turn, earlier],
                        f"{turn.agent or 'the agent'} asks again at step {turn.index} what it asked at "
                        f"step {earlier.index}: '{sentence.strip()[:60]}'",
                    )
        last_spoke[turn.agent] = turn.index
    return None
