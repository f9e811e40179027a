"""Offline rule detectors for the MAST modes that leave visible traces in a run.

Each detector is an `Annotator` (mast_otel/annotate/base.py) for one mode, reading only the
Conversation: structure first (tool names, arguments, results, errors, finish reasons, context
sizes, the kinds and order of turns), generic English cues second (all in `_text`). They never
read the run's outcome, which the analysis compares their findings against. Each runs in
O(turns) on bounded prefixes of text, cheap enough for every run at line rate.

- FM-1.3 `StepRepetition`          repeated identical tool calls / messages
- FM-1.4 `HistoryLoss`             context size drops, rediscovery calls, re-asked questions
- FM-1.5 `UnawareOfTermination`    external limits, acting after "done", ending in a loop
- FM-2.3 `TaskDerailment`          a stretch of calls on entities nothing in the run mentioned
- FM-2.6 `ReasoningActionMismatch` the next call contradicts the tool intent just stated
- FM-3.1 `PrematureTermination`    hanging calls, dangling handoffs, announced steps never taken
- FM-3.2 `NoVerification`          success claimed after a change with no check call after it
- FM-3.3 `IncorrectVerification`   success claimed while the latest call failed or reports failure
"""

from __future__ import annotations

from .annotator import RuleAnnotator, default_detectors
from .derailment import TaskDerailment
from .history import HistoryLoss
from .reasoning import ReasoningActionMismatch
from .repetition import StepRepetition
from .termination import PrematureTermination, UnawareOfTermination
from .verification import IncorrectVerification, NoVerification

__all__ = [
    "HistoryLoss",
    "IncorrectVerification",
    "NoVerification",
    "PrematureTermination",
    "ReasoningActionMismatch",
    "RuleAnnotator",
    "StepRepetition",
    "TaskDerailment",
    "UnawareOfTermination",
    "default_detectors",
]
