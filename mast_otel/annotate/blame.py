"""Blame: for a failed run, the agent and step most likely to have caused the failure (the decisive error).

The decisive error is the earliest step that went wrong and that the rest of the run did not
recover from; human annotators of failure-attribution benchmarks (Who&When) point there, and it
is usually well before the step where the failure shows. So blame looks for the *causes* of the
trouble the run records, and picks the earliest one that carries enough weight:

- findings: each finding's decisive step (the first of its evidence), weighted by its confidence
  and by how much that mode's first step tends to be the origin rather than a late symptom
  (`MODE_ORIGIN_WEIGHTS`: made-up inputs and contradicted plans are origins; running into a step
  limit or stopping early are where failures end, not where they start);
- failed tool calls, and calls that came back empty: the cause is the step that decided the call
  (the message that wrote the code a code executor then ran, else the call itself). Failure words
  inside a result do not count: a diagnostic tool reporting "CrashLoopBackOff" or firing alerts
  is working, and what it reports is the incident, not the agent's error;
- reactions: an agent opening its message with a setback ("It seems the search returned nothing",
  "Unfortunately...", "There was an error...") or saying the team is stuck ("we are not making
  progress"): the cause is the step it reacts to, the latest one by somebody else.

When nothing points anywhere, blame falls back to the run's first step of work (the first tool call
or agent message that is not the task being restated), with a low confidence: early steps set the
course, and an unexplained failure most often started there.

Which runs get blame: every run whose outcome is failure. Runs whose outcome is not known yet get
blame only when some finding fired: live runs often arrive before their grader's verdict, and a
run with findings is worth pointing into; a clean run of unknown outcome is most likely fine.
Successful runs get none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mast_otel.annotate.base import Blame, Finding
from mast_otel.annotate.rules._facts import machinery, requester
from mast_otel.annotate.rules._text import (
    find_no_progress,
    find_setback,
    normalise_space,
    shorten,
    words,
)
from mast_otel.conversation.model import Conversation, Outcome, Turn, TurnKind
from mast_otel.taxonomy import FailureMode

# How much a finding's first step tends to be where the failure started, per mode (see above).
MODE_ORIGIN_WEIGHTS: dict[str, float] = {
    "FM-1.1": 1.0,
    "FM-1.2": 0.6,
    "FM-1.3": 0.4,
    "FM-1.4": 0.7,
    "FM-1.5": 0.3,
    "FM-2.1": 0.5,
    "FM-2.2": 0.9,
    "FM-2.3": 0.7,
    "FM-2.4": 0.6,
    "FM-2.5": 0.7,
    "FM-2.6": 0.8,
    "FM-3.1": 0.4,
    "FM-3.2": 0.6,
    "FM-3.3": 0.8,
}
# Structural trouble, weighted like findings.
FAILED_CALL_WEIGHT = 0.6
EMPTY_RESULT_WEIGHT = 0.45
SETBACK_WEIGHT = 0.45
NO_PROGRESS_WEIGHT = 0.4
# A cause must weigh at least this much to be blamed; below it, it is noise.
MIN_CAUSE_WEIGHT = 0.3
FALLBACK_CONFIDENCE = 0.15

_AGENT_KINDS = frozenset({TurnKind.AGENT_MESSAGE, TurnKind.REASONING, TurnKind.TOOL_CALL, TurnKind.HANDOFF})
_EMPTY_RESULTS = frozenset({"", "[]", "{}", "none", "null", "nan", "''", '""', "not found"})
_RESTATEMENT_OVERLAP = 0.6  # a first agent turn holding this much of the task restates it


@dataclass(frozen=True, slots=True)
class _Cause:
    turn: Turn
    weight: float
    why: str
    mode: FailureMode | None = None


def assign_blame(conversation: Conversation, findings: Sequence[Finding]) -> Blame | None:
    """The decisive error of a failed run (see the module doc), or None when the run gets no blame."""
    if conversation.outcome is Outcome.SUCCESS:
        return None
    if conversation.outcome is Outcome.UNKNOWN and not findings:
        return None
    turns = conversation.turns
    if not any(turn.kind in _AGENT_KINDS for turn in turns):
        return None
    system = machinery(turns)  # stock repliers: nobody's decision
    positions = {turn.index: position for position, turn in enumerate(turns)}
    causes = [
        *_finding_causes(findings, turns, positions, system),
        *_structural_causes(turns, system),
    ]
    strong = [cause for cause in causes if cause.weight >= MIN_CAUSE_WEIGHT]
    if strong:
        first_step = min(cause.turn.index for cause in strong)
        decisive = max((c for c in strong if c.turn.index == first_step), key=lambda c: c.weight)
        turn, confidence, why = decisive.turn, min(decisive.weight, 0.95), decisive.why
        mode = decisive.mode or _mode_pointing_at(turn, findings)
    else:
        turn = _first_work(conversation, system)
        confidence, mode = FALLBACK_CONFIDENCE, _mode_pointing_at(turn, findings)
        why = "nothing points elsewhere; the run's first step of work set its course"
    agent = turn.agent or conversation.root_agent
    return Blame(
        agent=agent,
        step_index=turn.index,
        span_id=turn.span_id,
        mode=mode,
        confidence=round(confidence, 2),
        explanation=shorten(f"{agent or 'the agent'} at step {turn.index}: {why}", 200),
    )


def _finding_causes(
    findings: Sequence[Finding],
    turns: Sequence[Turn],
    positions: dict[int, int],
    machinery: frozenset[str],
) -> list[_Cause]:
    causes = []
    for finding in findings:
        position = positions.get(finding.evidence.first_step)
        if position is None or turns[position].kind not in _AGENT_KINDS:
            continue
        turn = turns[position]
        if turn.tool is not None:
            turn = requester(turns, position)
        elif turn.agent in machinery:
            continue  # a finding on the machinery's stock replies points at nobody's decision
        weight = finding.confidence * MODE_ORIGIN_WEIGHTS.get(finding.mode.code, 0.5)
        why = f"{finding.mode.code} {finding.mode.name.lower()}: {finding.explanation}"
        causes.append(_Cause(turn, weight, why, finding.mode))
    return causes


def _structural_causes(turns: Sequence[Turn], machinery: frozenset[str]) -> list[_Cause]:
    """Trouble the run records, each traced back to the step that caused it; stops at the first."""
    for position, turn in enumerate(turns):
        cause = _trouble_at(turns, position, turn, machinery)
        if cause is not None:
            return [cause]  # only the earliest structural cause can win
    return []


def _trouble_at(turns: Sequence[Turn], position: int, turn: Turn, machinery: frozenset[str]) -> _Cause | None:
    if turn.tool is not None:
        call = turn.tool
        origin = requester(turns, position)
        if call.failed:
            return _Cause(
                origin, FAILED_CALL_WEIGHT, f"{call.name} at step {turn.index} failed: {call.error}"
            )
        if call.result is not None and normalise_space(call.result[:64]).lower() in _EMPTY_RESULTS:
            return _Cause(origin, EMPTY_RESULT_WEIGHT, f"{call.name} at step {turn.index} came back empty")
        return None
    if turn.kind is not TurnKind.AGENT_MESSAGE and turn.kind is not TurnKind.REASONING:
        return None
    if turn.agent in machinery:
        return None
    reaction = find_setback(turn.content)
    weight = SETBACK_WEIGHT
    if reaction is None:
        reaction = find_no_progress(turn.content)
        weight = NO_PROGRESS_WEIGHT
    if reaction is None:
        return None
    target = _reacted_to(turns, position, machinery)
    if target is None:
        return None
    said = shorten(turn.content[reaction.start() :], 60)
    return _Cause(target, weight, f"{turn.agent or 'the next agent'} reacts at step {turn.index}: '{said}'")


def _reacted_to(turns: Sequence[Turn], position: int, machinery: frozenset[str]) -> Turn | None:
    """The latest step before `position` by somebody other than its speaker (a tool call counts as
    its requester's step, the machinery's replies not at all); None when that is the user or nothing."""
    speaker = turns[position].agent
    for earlier in range(position - 1, -1, -1):
        turn = turns[earlier]
        if turn.kind is TurnKind.USER or turn.kind is TurnKind.SYSTEM:
            return None
        if turn.tool is not None:
            return requester(turns, earlier)
        if turn.agent != speaker and turn.agent not in machinery:
            return turn
    return None


def _first_work(conversation: Conversation, machinery: frozenset[str]) -> Turn:
    """The first tool call (as its requester's step) or agent message, unless that message opens
    the run by restating the task (as a manager's briefing does); else the first agent step."""
    task_words = frozenset(words(conversation.task[:4000]))
    turns = conversation.turns
    opening = True
    for position, turn in enumerate(turns):
        if turn.kind is TurnKind.TOOL_CALL:
            return requester(turns, position)
        if turn.kind is not TurnKind.AGENT_MESSAGE or turn.agent in machinery:
            continue
        if not (opening and _restates(turn, task_words, len(conversation.task))):
            return turn
        opening = False
    return next(turn for turn in turns if turn.kind in _AGENT_KINDS)


def _restates(turn: Turn, task_words: frozenset[str], task_chars: int) -> bool:
    if len(task_words) < 3:
        return False
    said = frozenset(words(turn.content[: 4 * task_chars + 200]))  # a restatement opens the message
    return len(task_words & said) >= _RESTATEMENT_OVERLAP * len(task_words)


def _mode_pointing_at(turn: Turn, findings: Sequence[Finding]) -> FailureMode | None:
    """The mode of the most confident finding whose evidence includes `turn`."""
    pointing = [f for f in findings if turn.index in f.evidence.step_indexes]
    return max(pointing, key=lambda f: f.confidence).mode if pointing else None
