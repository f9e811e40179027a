"""The judge's verdicts: one chunk's answer, a whole run's merged verdict, and its stored JSON form.

A mode the judge did not answer validly is UNKNOWN, never NO: a missing, duplicated-and-conflicting
or malformed answer must not read as "this run does not show the mode". Merging the chunks of a long
run follows the same rule: a mode is detected when any chunk shows it (evidence from every such
chunk), absent only when every chunk answered "no", and unknown otherwise. The task-completion
verdict comes from the last chunk, the only one that sees how the run ended.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from mast_otel.taxonomy import BY_CODE, MODES, FailureMode

__all__ = ["ChunkAnswer", "Detection", "ModeVerdict", "RunVerdict", "clip_explanation", "merge_answers"]

MAX_EXPLANATION_CHARS: Final = 300
MAX_EVIDENCE_STEPS: Final = 32


class Detection(str, Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ModeVerdict:
    mode: FailureMode
    detection: Detection
    steps: tuple[int, ...] = ()  # evidence, in run order
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class ChunkAnswer:
    """What one reply said about one chunk: the modes it answered validly, the rest is unknown."""

    modes: tuple[ModeVerdict, ...]
    task_completed: Detection
    problems: tuple[str, ...] = ()  # what was wrong with the reply, for the usage row's reason

    def get(self, mode: FailureMode) -> ModeVerdict | None:
        return next((answer for answer in self.modes if answer.mode == mode), None)


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """A run's verdict on all 14 modes (taxonomy order) and on task completion."""

    modes: tuple[ModeVerdict, ...]
    task_completed: Detection
    chunks: int
    chunks_answered: int
    problems: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every chunk got a valid reply (modes may still be unknown if the replies skipped them)."""
        return self.chunks_answered == self.chunks

    @property
    def detected(self) -> tuple[ModeVerdict, ...]:
        return tuple(verdict for verdict in self.modes if verdict.detection is Detection.YES)

    @property
    def unknown_codes(self) -> tuple[str, ...]:
        return tuple(v.mode.code for v in self.modes if v.detection is Detection.UNKNOWN)

    def mode(self, code: str) -> ModeVerdict:
        wanted = BY_CODE[code]
        return next(verdict for verdict in self.modes if verdict.mode == wanted)

    def to_json(self) -> str:
        """The compact form kept in ClickHouse (the verdict cache): placeholders, never originals."""
        return json.dumps(
            {
                "modes": {
                    v.mode.code: {"d": v.detection.value, "s": list(v.steps), "e": v.explanation}
                    for v in self.modes
                },
                "task_completed": self.task_completed.value,
                "chunks": self.chunks,
                "answered": self.chunks_answered,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> RunVerdict:
        """Inverse of `to_json`; raises ValueError on anything else."""
        try:
            data: Any = json.loads(text)
            modes = tuple(
                ModeVerdict(
                    mode=BY_CODE[code],
                    detection=Detection(entry["d"]),
                    steps=tuple(int(step) for step in entry["s"]),
                    explanation=str(entry["e"]),
                )
                for code, entry in data["modes"].items()
            )
            verdict = cls(
                modes=tuple(sorted(modes, key=lambda v: MODES.index(v.mode))),
                task_completed=Detection(data["task_completed"]),
                chunks=int(data["chunks"]),
                chunks_answered=int(data["answered"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a stored judge verdict: {exc}") from None
        if len(verdict.modes) != len(MODES):
            raise ValueError("not a stored judge verdict: it does not cover the 14 modes")
        return verdict


def merge_answers(answers: Sequence[ChunkAnswer | None]) -> RunVerdict:
    """The run's verdict from its chunks' answers, in chunk order (None: the chunk got no valid reply)."""
    answered = [answer for answer in answers if answer is not None]
    modes = tuple(_merge_mode(mode, answers) for mode in MODES)
    last = answers[-1] if answers else None
    problems = tuple(dict.fromkeys(p for answer in answered for p in answer.problems))
    return RunVerdict(
        modes=modes,
        task_completed=last.task_completed if last is not None else Detection.UNKNOWN,
        chunks=len(answers),
        chunks_answered=len(answered),
        problems=problems,
    )


def _merge_mode(mode: FailureMode, answers: Sequence[ChunkAnswer | None]) -> ModeVerdict:
    votes = [answer.get(mode) if answer is not None else None for answer in answers]
    positive = [vote for vote in votes if vote is not None and vote.detection is Detection.YES]
    if positive:
        steps = sorted({step for vote in positive for step in vote.steps})[:MAX_EVIDENCE_STEPS]
        explanation = "; ".join(dict.fromkeys(vote.explanation for vote in positive if vote.explanation))
        return ModeVerdict(mode, Detection.YES, tuple(steps), clip_explanation(explanation))
    if votes and all(vote is not None and vote.detection is Detection.NO for vote in votes):
        return ModeVerdict(mode, Detection.NO)
    return ModeVerdict(mode, Detection.UNKNOWN)


def clip_explanation(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXPLANATION_CHARS else text[: MAX_EXPLANATION_CHARS - 1].rstrip() + "…"
