"""Rules and judge together, synchronously: the annotator `import` uses, and `build_annotator`.

`HybridAnnotator` runs the rules on every run and asks the judge about the runs that the sampling
policy and the token budget allow (a budget that runs out skips runs rather than blocking an import
for an hour: their usage rows say so). Findings of both come back side by side, each with its own
provenance ("rules/step_repetition", "llm/gpt-4o"), which is what `analyze --agreement` compares.
The judge never costs a run its rule findings: whatever goes wrong with it is logged and recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mast_otel.annotate.base import Annotator, Finding
from mast_otel.annotate.llm.config import JudgeConfig
from mast_otel.annotate.llm.judge import JudgeOutcome, LLMJudge
from mast_otel.annotate.llm.usage import JudgeStore, JudgeUsage, UsageStore
from mast_otel.conversation.model import Conversation

__all__ = ["HybridAnnotator", "build_annotator"]

log = logging.getLogger(__name__)


class HybridAnnotator:
    """An `Annotator`: the rules' findings plus, where sampled and affordable, the judge's."""

    def __init__(self, rules: Annotator, judge: LLMJudge, *, usage_store: UsageStore | None = None) -> None:
        self.rules = rules
        self.judge = judge
        self._usage_store = usage_store
        self.last_outcome: JudgeOutcome | None = None  # the latest run's judge outcome, for callers' reports

    @property
    def name(self) -> str:
        return f"{self.rules.name}+{self.judge.name}"

    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        rule_findings = tuple(self.rules.annotate(conversation))
        try:
            outcome = self.judge.assess(conversation, rule_findings)
        except Exception:
            log.exception("the judge failed on trace %s; keeping the rules' findings", conversation.trace_id)
            return rule_findings
        self.last_outcome = outcome
        self._record(outcome.usage)
        return rule_findings + outcome.findings

    def close(self) -> None:
        self.judge.close()

    def _record(self, usage: JudgeUsage) -> None:
        if self._usage_store is None:
            return
        try:
            self._usage_store.insert_judge_usage([usage])
        except Exception as exc:
            log.warning("could not store the judge usage of trace %s: %s", usage.trace_id, exc)


def build_annotator(
    judge_config: JudgeConfig | None,
    *,
    store: JudgeStore | None = None,
    rules: Annotator | None = None,
    env: Mapping[str, str] | None = None,
) -> Annotator:
    """The rules alone (no judge config), or rules + judge. With a `store`, the judge's verdict cache
    reads it and usage rows go to it; without one the cache lives in memory only."""
    from mast_otel.annotate.rules import RuleAnnotator

    rule_annotator = rules if rules is not None else RuleAnnotator()
    if judge_config is None:
        return rule_annotator
    return HybridAnnotator(rule_annotator, LLMJudge(judge_config, source=store, env=env), usage_store=store)
