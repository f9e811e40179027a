"""FM-1.5 unaware of termination conditions and FM-3.1 premature termination: stopping wrong.

FM-1.5 (`UnawareOfTermination`) reads three signals:
- external limit (structural): the run's error, or the finish reason or tool error of one of its
  last `tail_turns` (3) turns, names a limit (max turns / iterations / steps, recursion limit,
  budget, timeout) or the finish reason says the model hit its token limit ("length"). Confidence
  0.85 for the run's own error, 0.75 for a limit in a finish reason, 0.55 for a "length" finish,
  0.6 for a limit in a final tool error, 0.45 when that limit is just the tool's own timeout.
- acting after "done": an agent declares the task complete ("final answer", "task complete",
  "TERMINATE"...) and then makes `min_calls_after_done` (2) or more tool calls itself. Confidence
  0.7, +0.05 per extra call, at most 0.85.
- ending in a loop: the run's last tool calls repeat a block of one or two calls at least 3 times
  with unchanged results, and no completion is declared after them. Confidence 0.6.

FM-3.1 (`PrematureTermination`) reads what is left hanging when the run ends:
- the last tool call never got a result nor an error, while the run does record results elsewhere
  (so content capture is on). Confidence 0.6.
- the last turn hands control to an agent that never acts. Confidence 0.55.
- the last turn is an agent announcing a next action ("let me check the logs", "next I will
  restart...") in its last two sentences, without declaring completion or asking a question.
  Confidence 0.6.
- an agent declares done or gives up after fewer tool calls (by anyone) than its last numbered
  plan listed tool-backed steps ("1. Check the pods", "2. Restart the deployment"). Confidence 0.5.
- the run ends on an agent message giving up ("I cannot proceed") without declaring completion.
  Confidence 0.45.
FM-3.1 stays silent when the run was stopped by an external limit: that cut-off is FM-1.5's.

Evidence: the decisive turn first (the last turn, the completion claim, the first looping call,
the hanging call, the announcing turn, the early close), then the turns that support it.

How strong a proxy: the external-limit signal is close to ground truth when frameworks report
their limits as errors; "acting after done" is a clear protocol breach. The FM-3.1 signals catch
visible loose ends only; a run that stops with a confident but wrong answer looks complete to
them. Neither detector reads the run's outcome, which the analysis compares findings against.
"""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import Conversation, ToolCall, Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding, steps
from ._text import (
    LENGTH_FINISH_REASONS,
    CallKey,
    count_tool_plan_items,
    find_completion,
    find_give_up,
    find_intent,
    find_limit,
    is_timeout_only,
    render_call,
    same_outcome,
    sentences,
    shorten,
)

_LOOP_MIN_REPEATS = 3
_LOOP_MAX_PERIOD = 2

Signal = tuple[float, list[Turn], str]


def _report(code: str, annotator: str, signals: list[Signal]) -> tuple[Finding, ...]:
    """One finding from the strongest signal, the others' turns appended as support."""
    if not signals:
        return ()
    signals.sort(key=lambda signal: -signal[0])
    confidence, turns, explanation = signals[0]
    if len(signals) > 1:
        explanation += "; also: " + "; ".join(other[2] for other in signals[1:])
    return (
        make_finding(
            code,
            [*turns, *(turn for _, others, _ in signals[1:] for turn in others)],
            confidence=confidence,
            explanation=explanation,
            annotator=annotator,
        ),
    )


def stopped_by_limit(conversation: Conversation) -> bool:
    return bool(conversation.error) and find_limit(conversation.error) is not None


@dataclass(frozen=True, slots=True)
class UnawareOfTermination(Detector):
    tail_turns: int = 3
    min_calls_after_done: int = 2

    @property
    def name(self) -> str:
        return "rules/termination_unaware"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        conversation = facts.conversation
        if not conversation.turns:
            return ()
        signals = [
            *self._external_limit(conversation),
            *self._acting_after_done(facts),
            *_terminal_loop(facts),
        ]
        return _report("FM-1.5", self.name, signals)

    def _external_limit(self, conversation: Conversation) -> list[Signal]:
        last = conversation.turns[-1]
        if stopped_by_limit(conversation):
            return [(0.85, [last], f"run stopped by a limit: {shorten(conversation.error, 80)}")]
        for turn in reversed(conversation.turns[-self.tail_turns :]):
            reason = turn.finish_reason.strip().lower()
            if reason and find_limit(reason) is not None:
                return [(0.75, [turn], f"step {turn.index} finished with '{shorten(reason, 40)}'")]
            if reason in LENGTH_FINISH_REASONS:
                return [(0.55, [turn], f"step {turn.index} was cut off by the token limit ('{reason}')")]
            if turn.tool is not None and turn.tool.error and find_limit(turn.tool.error) is not None:
                # A tool's own timeout says less about the run's limits than "max retries exceeded".
                return [
                    (
                        0.45 if is_timeout_only(turn.tool.error) else 0.6,
                        [turn],
                        f"run ends on {turn.tool.name} hitting a limit at step {turn.index} "
                        f"({shorten(turn.tool.error, 40)})",
                    )
                ]
        return []

    def _acting_after_done(self, facts: RunFacts) -> list[Signal]:
        conversation = facts.conversation
        calls_ahead = _calls_ahead(conversation)
        declared: dict[str, tuple[Turn, list[Turn]]] = {}  # per agent: its first "done", calls after it
        breaches: list[tuple[Turn, list[Turn]]] = []
        for position, turn in enumerate(conversation.turns):
            if turn.kind is TurnKind.USER:
                # A new request reopens the task: earlier declarations are settled.
                breaches += [
                    entry for entry in declared.values() if len(entry[1]) >= self.min_calls_after_done
                ]
                declared.clear()
            elif (
                turn.kind is TurnKind.AGENT_MESSAGE
                and turn.agent not in declared
                and calls_ahead[position].get(turn.agent, 0) >= self.min_calls_after_done
                and facts.completion(turn) is not None
            ):
                declared[turn.agent] = (turn, [])
            elif turn.tool is not None and turn.agent in declared:
                declared[turn.agent][1].append(turn)
        breaches += [entry for entry in declared.values() if len(entry[1]) >= self.min_calls_after_done]
        if not breaches:
            return []
        claim, calls = min(breaches, key=lambda entry: entry[0].index)
        extra = len(calls) - self.min_calls_after_done
        return [
            (
                min(0.7 + 0.05 * extra, 0.85),
                [claim, *calls],
                f"{claim.agent or 'the agent'} declares completion at step {claim.index}, then makes "
                f"{len(calls)} more tool calls (steps {steps(calls)})",
            )
        ]


def _calls_ahead(conversation: Conversation) -> list[dict[str, int]]:
    """For each turn position, how many tool calls each agent makes after it.

    Lets the detector skip reading messages that could not be followed by enough calls; the dicts
    are shared between positions until a call changes them, so this stays linear in turns.
    """
    ahead: list[dict[str, int]] = [{}] * len(conversation.turns)
    counts: dict[str, int] = {}
    for position in range(len(conversation.turns) - 1, -1, -1):
        ahead[position] = counts
        turn = conversation.turns[position]
        if turn.tool is not None:
            counts = {**counts, turn.agent: counts.get(turn.agent, 0) + 1}
    return ahead


def _terminal_loop(facts: RunFacts) -> list[Signal]:
    calls = facts.tool_turns
    if len(calls) < _LOOP_MIN_REPEATS:
        return []
    keys = [facts.call_key(turn, call) for turn, call in calls[-_LOOP_MAX_PERIOD * 8 :]]
    for period in range(1, _LOOP_MAX_PERIOD + 1):
        repeats = _tail_repeats(keys, period)
        if repeats < _LOOP_MIN_REPEATS:
            continue
        loop = calls[-period * repeats :]
        if not _unchanged(loop, period):
            continue
        last_call_index = loop[-1][0].index
        if any(
            turn.kind is TurnKind.AGENT_MESSAGE and turn.index > last_call_index and facts.completion(turn)
            for turn in facts.turns[-8:]
        ):
            return []
        names = " → ".join(call.name for _, call in loop[:period])
        return [
            (
                0.6,
                [turn for turn, _ in loop],
                f"run ends looping on {names} ({repeats} times, steps {steps(turn for turn, _ in loop)})",
            )
        ]
    return []


def _tail_repeats(keys: list[CallKey], period: int) -> int:
    """How many times the last `period` keys repeat back to back at the end of `keys`."""
    if len(keys) < period:
        return 0
    block = keys[-period:]
    repeats = 0
    end = len(keys)
    while end - period >= 0 and keys[end - period : end] == block:
        repeats += 1
        end -= period
    return repeats


def _unchanged(loop: list[tuple[Turn, ToolCall]], period: int) -> bool:
    """No progress: every call returned what the same call returned one period earlier."""
    comparable = [
        (loop[i][1], loop[i + period][1])
        for i in range(len(loop) - period)
        if loop[i][1].result is not None or loop[i][1].error
    ]
    return all(same_outcome(a, b) for a, b in comparable)


@dataclass(frozen=True, slots=True)
class PrematureTermination(Detector):
    @property
    def name(self) -> str:
        return "rules/premature_termination"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        conversation = facts.conversation
        if not conversation.turns or stopped_by_limit(conversation):
            return ()
        signals = [
            *_hanging_call(facts),
            *_dangling_handoff(conversation),
            *_announced_next_step(conversation),
            *_unfinished_plan(conversation),
            *_gave_up(conversation),
        ]
        return _report("FM-3.1", self.name, signals)


def _hanging_call(facts: RunFacts) -> list[Signal]:
    calls = facts.tool_turns
    if not calls:
        return []
    turn, call = calls[-1]
    if call.result is not None or call.failed:
        return []
    if not any(other.result is not None for _, other in calls[:-1]):
        return []  # no results recorded at all: content capture is off, not a hanging call
    return [
        (0.6, [turn], f"{render_call(call, 50)} at step {turn.index} never returned before the run ended")
    ]


def _dangling_handoff(conversation: Conversation) -> list[Signal]:
    last = conversation.turns[-1]
    if last.kind is not TurnKind.HANDOFF:
        return []
    target = last.target_agent or "another agent"
    return [(0.55, [last], f"run ends on a handoff to {target} at step {last.index}; {target} never acts")]


def _announced_next_step(conversation: Conversation) -> list[Signal]:
    last = conversation.turns[-1]
    if last.kind not in SPEAKING_KINDS or find_completion(last.content) is not None:
        return []
    ending = " ".join(sentences(last.content)[-2:])
    if "?" in ending:
        return []  # a run that ends asking a question hands control back; it does not drop work
    intent = find_intent(ending)
    if intent is None:
        return []
    announced = shorten(ending[intent.start() :], 60)
    return [(0.6, [last], f"the run ends on step {last.index} announcing '{announced}', which never happens")]


def _unfinished_plan(conversation: Conversation) -> list[Signal]:
    """An agent closed the task after fewer tool calls than its last numbered plan listed tool steps."""
    plans: dict[str, tuple[Turn, int, int]] = {}  # per agent: last plan, its tool steps, calls before it
    calls_made = 0
    for turn in conversation.turns:
        if turn.tool is not None:
            calls_made += 1
        elif turn.kind in SPEAKING_KINDS:
            items = count_tool_plan_items(turn.content)
            plan = plans.get(turn.agent)
            if items >= 2:
                plans[turn.agent] = (turn, items, calls_made)
            elif plan is not None and _closes(turn.content):
                announced, items, calls_before = plan
                made = calls_made - calls_before
                if made < items:
                    return [
                        (
                            0.5,
                            [turn, announced],
                            f"step {turn.index} closes the task after {made} tool call(s), but the plan "
                            f"at step {announced.index} listed {items} tool steps",
                        )
                    ]
                del plans[turn.agent]
    return []


def _closes(text: str) -> bool:
    return find_completion(text) is not None or find_give_up(text) is not None


def _gave_up(conversation: Conversation) -> list[Signal]:
    last = conversation.turns[-1]
    if last.kind is not TurnKind.AGENT_MESSAGE or find_completion(last.content) is not None:
        return []
    give_up = find_give_up(last.content)
    if give_up is None:
        return []
    return [(0.45, [last], f"step {last.index} gives up: '{shorten(last.content[give_up.start() :], 60)}'")]
