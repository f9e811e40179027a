"""The annotate stage's interface: an `Annotator` turns a Conversation into Findings.

Every annotator (rule detectors, the LLM judge, their composition) implements the same narrow
protocol, so the pipeline, the importers and the benchmarks treat them alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mast_otel.conversation.model import Conversation
from mast_otel.taxonomy import FailureMode


@dataclass(frozen=True, slots=True)
class Evidence:
    """Where in the run a finding points: the steps, the spans that carry them, the agent."""

    step_indexes: tuple[int, ...]
    span_ids: tuple[str, ...] = ()
    agent: str = ""

    @property
    def first_step(self) -> int:
        return self.step_indexes[0] if self.step_indexes else -1


@dataclass(frozen=True, slots=True)
class Finding:
    """One detected failure mode in one run."""

    mode: FailureMode
    evidence: Evidence
    confidence: float  # in [0, 1]
    explanation: str  # one line, for humans
    annotator: str  # e.g. "rules/step_repetition", "llm/gpt-4o"

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], got {self.confidence}")


@runtime_checkable
class Annotator(Protocol):
    """Reads a conversation, returns the failure modes it detects (possibly none)."""

    @property
    def name(self) -> str: ...

    def annotate(self, conversation: Conversation) -> Sequence[Finding]: ...


@dataclass(frozen=True, slots=True)
class Blame:
    """Where a failed run most likely went wrong: the decisive error's agent and step.

    `mode` is the failure mode of the finding that points at that step, or None when the blame
    comes from the run's structure alone (e.g. the first failed tool call). `step_index` is -1 and
    `span_id` empty only when the run has no step to point at.
    """

    agent: str
    step_index: int
    span_id: str
    mode: FailureMode | None
    confidence: float  # in [0, 1]
    explanation: str  # one line, for humans

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], got {self.confidence}")


@dataclass(frozen=True, slots=True)
class AnnotatedRun:
    """A conversation with its findings, ready to store.

    `version` orders re-annotations of the same run (late spans, a new annotator): the store keeps
    the highest version and the analysis reads only that one, so replays never double-count.
    `blame` is set for failed runs (and for runs of unknown outcome that have findings).
    """

    conversation: Conversation
    findings: tuple[Finding, ...]
    version: int  # nanoseconds since the epoch at annotation time
    blame: Blame | None = None
