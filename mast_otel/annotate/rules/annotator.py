"""`RuleAnnotator`: runs the offline rule detectors over a conversation and merges their findings.

A detector that raises is logged and skipped, so one bad rule (or one odd conversation) never
costs the run the other detectors' findings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mast_otel.annotate.base import Annotator, Finding
from mast_otel.conversation.model import Conversation

from ._facts import RunFacts
from ._shared import Detector
from .clarification import FailToAskForClarification
from .collaboration import IgnoredOtherAgentsInput, InformationWithholding
from .derailment import TaskDerailment
from .history import HistoryLoss
from .reasoning import ReasoningActionMismatch
from .repetition import StepRepetition
from .reset import ConversationReset
from .specification import DisobeyRoleSpecification, DisobeyTaskSpecification
from .termination import PrematureTermination, UnawareOfTermination
from .verification import IncorrectVerification, NoVerification

_log = logging.getLogger(__name__)


def default_detectors() -> tuple[Annotator, ...]:
    """One detector per MAST mode, in taxonomy order, with their default thresholds."""
    return (
        DisobeyTaskSpecification(),
        DisobeyRoleSpecification(),
        StepRepetition(),
        HistoryLoss(),
        UnawareOfTermination(),
        ConversationReset(),
        FailToAskForClarification(),
        TaskDerailment(),
        InformationWithholding(),
        IgnoredOtherAgentsInput(),
        ReasoningActionMismatch(),
        PrematureTermination(),
        NoVerification(),
        IncorrectVerification(),
    )


class RuleAnnotator:
    """All rule detectors as one `Annotator` named "rules"; findings sorted by their first step."""

    def __init__(self, detectors: Sequence[Annotator] | None = None) -> None:
        self.detectors: tuple[Annotator, ...] = default_detectors() if detectors is None else tuple(detectors)

    @property
    def name(self) -> str:
        return "rules"

    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        facts = RunFacts(conversation)  # shared: each fact about a turn is computed once per run
        findings: list[Finding] = []
        for detector in self.detectors:
            try:
                if isinstance(detector, Detector):
                    findings.extend(detector.detect(facts))
                else:
                    findings.extend(detector.annotate(conversation))
            except Exception:
                _log.exception(
                    "rule detector %s failed on trace %s; its findings are skipped",
                    detector.name,
                    conversation.trace_id,
                )
        findings.sort(key=lambda f: (f.evidence.first_step, f.mode.code, f.annotator))
        return tuple(findings)
