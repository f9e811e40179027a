"""FM-3.2 no or incomplete verification and FM-3.3 incorrect verification: claims versus checks.

Both read the run's tool calls, classified from their names (else their arguments) as
state-changing (restart, delete, scale, apply, patch...), read-only (get, list, describe, check,
query, verify...) or unknown, and the agents' claims of success (see `_text.find_success_claim`
and `_text.find_completion`; hedged phrases such as "once it is healthy" or "not yet verified" do
not count).

FM-3.2 (`NoVerification`): after the run's last state-changing call, an agent message declares
success or completion and no read-only call follows that change anywhere in the rest of the run.
Evidence: the first such claim, then the unverified change. Confidence 0.65, 0.7 when the change
itself failed or never returned a result.
How strong a proxy: it sees that nothing was read after a change, not whether the claim needed
it; it misses verification done by a call whose name and arguments carry no reading verb, and a
check of the wrong thing (right verb, wrong target) still passes as verification.

FM-3.3 (`IncorrectVerification`): an agent claims verification or success (message or reasoning)
within `max_turns_after_check` (4) steps of the run's most recent tool call, and that call
contradicts it: the call failed, or its result carries a failure marker that is not negated
(error, failed, CrashLoopBackOff, OOMKilled, unhealthy, not ready, firing, 5xx status, exception,
timeout, non-zero exit code...). A claim sentence that itself reports a failure ("confirmed: the
pod is in CrashLoopBackOff") acknowledges it and does not count. Evidence: the first such claim,
then the contradicting call, then later ones. Confidence 0.8 when the call failed, 0.65 for a
marker in its result; +0.05 when the claim is an explicit "verified / confirmed / validated".
How strong a proxy: a failed call followed by a success claim is a strong signal; result markers
are lexical, and logs that mention old errors while the service is now healthy can trip them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.conversation.model import ToolCall, Turn, TurnKind

from ._facts import RunFacts
from ._shared import SPEAKING_KINDS, Detector, make_finding
from ._text import ActionKind, render_call, shorten

_EXPLICIT_VERIFICATION = re.compile(r"verified|confirmed|validated", re.IGNORECASE)


def _claim_text(facts: RunFacts, turn: Turn) -> str | None:
    match = facts.success_claim(turn) or facts.completion(turn)
    return None if match is None else match.group(0)


@dataclass(frozen=True, slots=True)
class NoVerification(Detector):
    @property
    def name(self) -> str:
        return "rules/no_verification"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        change: tuple[Turn, ToolCall] | None = None  # the latest state-changing call
        verified = False
        claim: tuple[Turn, str] | None = None  # the first success claim after it
        for turn in facts.turns:
            if turn.tool is not None:
                kind = facts.action_kind(turn, turn.tool)
                if kind is ActionKind.MUTATE:
                    change, verified, claim = (turn, turn.tool), False, None
                elif kind is ActionKind.READ and change is not None:
                    verified = True
            elif change is not None and claim is None and turn.kind is TurnKind.AGENT_MESSAGE:
                said = _claim_text(facts, turn)
                if said is not None:
                    claim = (turn, said)
        if change is None or claim is None or verified:
            return ()
        (changed, call), (claimed, said) = change, claim
        unsure = call.failed or call.result is None
        return (
            make_finding(
                "FM-3.2",
                [claimed, changed],
                confidence=0.7 if unsure else 0.65,
                explanation=(
                    f"step {claimed.index} claims '{shorten(said, 40)}' after {render_call(call, 50)} "
                    f"at step {changed.index}; no check call follows the change"
                ),
                annotator=self.name,
            ),
        )


@dataclass(frozen=True, slots=True)
class IncorrectVerification(Detector):
    max_turns_after_check: int = 4  # a later claim is about something else, not this check

    @property
    def name(self) -> str:
        return "rules/incorrect_verification"

    def detect(self, facts: RunFacts) -> tuple[Finding, ...]:
        latest: tuple[Turn, ToolCall] | None = None
        contradictions: list[tuple[float, Turn, Turn, str]] = []
        for turn in facts.turns:
            if turn.tool is not None:
                latest = (turn, turn.tool)
                continue
            if (
                latest is None
                or turn.kind not in SPEAKING_KINDS
                or turn.index - latest[0].index > self.max_turns_after_check
            ):
                continue
            # The claim first: most turns claim nothing, and reading a long result costs more.
            match = facts.success_claim(turn)
            if match is None:
                continue
            checked, call = latest
            why = facts.contradiction(checked, call)
            if why is None:
                continue
            confidence = (0.8 if call.failed else 0.65) + (
                0.05 if _EXPLICIT_VERIFICATION.search(match.group(0)) else 0.0
            )
            contradictions.append(
                (
                    confidence,
                    turn,
                    checked,
                    f"step {turn.index} claims '{shorten(match.group(0), 30)}' but {call.name} at step "
                    f"{checked.index} " + (f"failed ({why})" if call.failed else f"returned '{why}'"),
                )
            )
        if not contradictions:
            return ()
        confidence, claimed, checked, explanation = contradictions[0]
        others = [turn for _, said, call, _ in contradictions[1:] for turn in (said, call)]
        if len(contradictions) > 1:
            explanation += f"; {len(contradictions) - 1} more such claim(s)"
        return (
            make_finding(
                "FM-3.3",
                [claimed, checked, *others],
                confidence=confidence,
                explanation=explanation,
                annotator=self.name,
            ),
        )
