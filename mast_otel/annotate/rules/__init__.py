"""Offline rule detectors, one per MAST mode: the annotator that runs on every run, at line rate.

Each detector is an `Annotator` (mast_otel/annotate/base.py) for one mode, reading only the
Conversation: structure first (tool names, arguments, results, errors, finish reasons, context
sizes, the kinds and order of turns), generic English cues second (all in `_text`). They never
read the run's outcome, which the analysis compares their findings against. Each runs in
O(turns) on bounded prefixes of text; `RuleAnnotator` shares one `RunFacts` between them, so a
fact several need (a call's key, a result's failure marker, a success claim) is computed once.
Every module says what signal it reads, its evidence and confidence, and how strong a proxy it is:
the structural ones (1.3, 1.4, 1.5, 2.6, 3.1, 3.2, 3.3) are precise, the others are weaker.

- FM-1.1 `DisobeyTaskSpecification`  a call the task forbids; made-up inputs
- FM-1.2 `DisobeyRoleSpecification`  an agent speaking as another participant
- FM-1.3 `StepRepetition`            repeated identical tool calls / messages
- FM-1.4 `HistoryLoss`               context size drops, rediscovery calls, re-asked questions
- FM-1.5 `UnawareOfTermination`      external limits, acting after "done", ending in a loop
- FM-2.1 `ConversationReset`         the task restated after work, "let's start over"
- FM-2.2 `FailToAskForClarification` "X is missing, so I'll assume..." without a question
- FM-2.3 `TaskDerailment`            a stretch of calls on entities nothing in the run mentioned
- FM-2.4 `InformationWithholding`    a failure the agent saw, left out of its report to the others
- FM-2.5 `IgnoredOtherAgentsInput`   the same call / message again right after being corrected
- FM-2.6 `ReasoningActionMismatch`   the next call contradicts the tool intent just stated
- FM-3.1 `PrematureTermination`      hanging calls, dangling handoffs, announced steps never taken
- FM-3.2 `NoVerification`            success claimed after a change with no check call after it
- FM-3.3 `IncorrectVerification`     success claimed while the latest call failed or reports failure
"""

from __future__ import annotations

from ._facts import RunFacts
from ._shared import Detector
from .annotator import RuleAnnotator, default_detectors
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

__all__ = [
    "ConversationReset",
    "Detector",
    "DisobeyRoleSpecification",
    "DisobeyTaskSpecification",
    "FailToAskForClarification",
    "HistoryLoss",
    "IgnoredOtherAgentsInput",
    "IncorrectVerification",
    "InformationWithholding",
    "NoVerification",
    "PrematureTermination",
    "ReasoningActionMismatch",
    "RuleAnnotator",
    "RunFacts",
    "StepRepetition",
    "TaskDerailment",
    "UnawareOfTermination",
    "default_detectors",
]
