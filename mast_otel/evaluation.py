"""Blame measured against human labels: Who&When failure attribution, with random baselines.

Each labelled log is annotated exactly as an import would (`annotate_run`: findings, then blame)
and the blame is compared with the label:

- agent accuracy: the blamed agent is the labelled one (bare names, case-insensitive:
  `Orchestrator (thought)` and `orchestrator` are the same agent);
- step accuracy: the blamed step is the labelled one, compared as numbers (the benchmark's own
  evaluator compares them as substrings, so "1" would match "12"; this one does not);
- step accuracy within 1: the blamed step is the labelled one or a neighbour.

Random baselines come from the same logs: guessing a speaker uniformly is right with probability
1 / (distinct speakers, as the log writes them), guessing a step with 1 / (steps); their means over
the logs are the expected accuracies of random attribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mast_otel.annotate.base import Annotator, Blame
from mast_otel.annotate.run import annotate_run
from mast_otel.importers.base import ImportFileError, expand_paths
from mast_otel.importers.who_and_when import AttributionLabel, WhoAndWhenReader, bare_agent, read_log
from mast_otel.taxonomy import CODES


@dataclass(frozen=True, slots=True)
class AttributionCase:
    """One labelled log: the label, the blame, and what random guessing would score on it."""

    path: Path
    label: AttributionLabel
    blame: Blame | None
    distinct_speakers: int
    steps: int
    modes: tuple[str, ...]

    @property
    def agent_correct(self) -> bool:
        return self.blame is not None and same_agent(self.blame.agent, self.label.agent)

    @property
    def step_correct(self) -> bool:
        return self.blame is not None and self.blame.step_index == self.label.step

    @property
    def step_within_1(self) -> bool:
        return self.blame is not None and abs(self.blame.step_index - self.label.step) <= 1


@dataclass(frozen=True, slots=True)
class AttributionScores:
    cases: tuple[AttributionCase, ...]
    skipped: tuple[ImportFileError, ...] = ()
    mode_runs: dict[str, int] = field(default_factory=dict)  # runs in which each mode was detected

    @property
    def runs(self) -> int:
        return len(self.cases)

    def _mean(self, values: Iterable[float]) -> float:
        items = list(values)
        return sum(items) / len(items) if items else 0.0

    @property
    def agent_accuracy(self) -> float:
        return self._mean(case.agent_correct for case in self.cases)

    @property
    def step_accuracy(self) -> float:
        return self._mean(case.step_correct for case in self.cases)

    @property
    def step_accuracy_within_1(self) -> float:
        return self._mean(case.step_within_1 for case in self.cases)

    @property
    def random_agent_accuracy(self) -> float:
        return self._mean(1 / case.distinct_speakers for case in self.cases)

    @property
    def random_step_accuracy(self) -> float:
        return self._mean(1 / case.steps for case in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "agent_accuracy": round(self.agent_accuracy, 4),
            "step_accuracy": round(self.step_accuracy, 4),
            "step_accuracy_within_1": round(self.step_accuracy_within_1, 4),
            "random_agent_accuracy": round(self.random_agent_accuracy, 4),
            "random_step_accuracy": round(self.random_step_accuracy, 4),
        }


def same_agent(blamed: str, labelled: str) -> bool:
    return bare_agent(blamed).casefold() == bare_agent(labelled).casefold()


def evaluate_who_and_when(paths: Iterable[Path | str], annotator: Annotator) -> AttributionScores:
    """Annotate every labelled Who&When log in `paths` and score its blame; unusable files are skipped
    and reported (unreadable, not Who&When, or without a usable label)."""
    cases: list[AttributionCase] = []
    skipped: list[ImportFileError] = []
    mode_runs: Counter[str] = Counter()
    for path in expand_paths(paths, WhoAndWhenReader.suffixes):
        try:
            log = read_log(path)
        except ImportFileError as exc:
            skipped.append(exc)
            continue
        if log.label is None:
            skipped.append(ImportFileError(path, f"no usable label: {log.label_problem}"))
            continue
        run = annotate_run(log.conversation, annotator)
        modes = tuple(sorted({finding.mode.code for finding in run.findings}))
        mode_runs.update(modes)
        cases.append(
            AttributionCase(
                path=path,
                label=log.label,
                blame=run.blame,
                distinct_speakers=len(set(log.speakers)),
                steps=len(log.speakers),
                modes=modes,
            )
        )
    ordered = {code: mode_runs[code] for code in CODES}
    return AttributionScores(tuple(cases), tuple(skipped), ordered)
