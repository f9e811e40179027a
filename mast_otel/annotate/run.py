"""Annotating one run: the step shared by the collector's pipeline and the file importers."""

from __future__ import annotations

import time

from mast_otel.annotate.base import AnnotatedRun, Annotator
from mast_otel.annotate.blame import assign_blame
from mast_otel.conversation.model import Conversation


def annotate_run(
    conversation: Conversation, annotator: Annotator, *, version: int | None = None
) -> AnnotatedRun:
    """Run the annotator over one conversation and blame the decisive error of a failed run.

    Errors propagate: callers decide what a failure costs.
    """
    findings = tuple(annotator.annotate(conversation))
    return AnnotatedRun(
        conversation,
        findings,
        version=time.time_ns() if version is None else version,
        blame=assign_blame(conversation, findings),
    )
