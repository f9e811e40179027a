"""The judge's prompt: MAST definitions from `taxonomy.py`, the answer format, few-shot examples, and
one user message per chunk (task and system instructions first, then the chunk's steps).

`PROMPT_VERSION` is part of the verdict cache's key: change the wording, bump it, and cached verdicts
of the old prompt stop being reused.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Final

from mast_otel.annotate.llm.chunking import Chunk, RunView
from mast_otel.annotate.llm.config import FewShotExample
from mast_otel.taxonomy import MODES, Category

__all__ = ["PROMPT_VERSION", "ChatMessage", "chunk_message", "few_shot_messages", "system_prompt"]

PROMPT_VERSION: Final = "mast-judge/1"

ChatMessage = dict[str, str]  # {"role": ..., "content": ...}, what the chat API takes

_INSTRUCTIONS: Final = """\
How to annotate:
- Judge only from the steps shown. Steps are numbered [n]; cite those numbers as evidence.
- Mark a mode detected only if at least one shown step exhibits it; otherwise detected is false.
- Values like <EMAIL_1> or <SECRET_2> were redacted: treat them as opaque values, not as failures.
- "[… N chars omitted …]" marks text shortened for length, "[… N lines as in step k …]" text \
identical to what step k showed: neither is a failure by itself.
- explanation: one short line saying what happened at the cited steps ("" when not detected).
- task_completed: "yes" or "no" when the run's last step is shown and shows whether the task was \
done, "unknown" otherwise.

Answer with one JSON object and nothing else:
{"modes": {"FM-1.1": {"detected": false, "steps": [], "explanation": ""}, \
"FM-1.2": {...}, ... one entry for each of the 14 codes ...}, "task_completed": "yes" | "no" | "unknown"}"""


@functools.lru_cache(maxsize=1)
def system_prompt() -> str:
    """Role, the 14 definitions (grouped by category) and the answer format."""
    lines = [
        "You annotate runs of LLM agent systems with the failure modes of MAST, the Multi-Agent "
        "System Failure Taxonomy (Cemri et al., 2025). The failure modes:",
    ]
    for category in Category:
        lines.append(f"{category.value} {category.label}:")
        lines.extend(
            f"{mode.code} {mode.name}: {mode.definition}" for mode in MODES if mode.category is category
        )
    lines.append("")
    lines.append(_INSTRUCTIONS)
    return "\n".join(lines)


def few_shot_messages(examples: Sequence[FewShotExample]) -> list[ChatMessage]:
    """Each example as a user turn (the run) and an assistant turn (its answer, compact JSON)."""
    messages: list[ChatMessage] = []
    for example in examples:
        answer = json.dumps(json.loads(example.answer), separators=(",", ":"), ensure_ascii=False)
        messages.append({"role": "user", "content": f"Example run:\n{example.run}"})
        messages.append({"role": "assistant", "content": answer})
    return messages


def header_text(view: RunView) -> str:
    """Task and system instructions: the part of the message every chunk repeats."""
    parts = [f"Task: {view.task}" if view.task else "Task: (not recorded)"]
    if view.instructions:
        parts.append("System instructions:")
        parts.extend(step.text for step in view.instructions)
    return "\n".join(parts)


def chunk_message(header: str, chunk: Chunk, first_step: int, last_step: int) -> str:
    """The user message for one chunk of a run whose steps run from `first_step` to `last_step`."""
    lines = [f"Run to annotate{_part(chunk, first_step, last_step)}", header, "Steps:"]
    lines.extend(step.text for step in chunk.steps)
    if chunk.total > 1:
        lines.append(
            "Other parts of this run are annotated separately: judge only the steps above."
            + (" This part ends the run." if chunk.is_last else " The run continues after this part.")
        )
    return "\n".join(lines)


def _part(chunk: Chunk, first_step: int, last_step: int) -> str:
    if chunk.total == 1:
        return ":"
    shown = f"{chunk.indexes[0]}-{chunk.indexes[-1]}" if chunk.indexes else "none"
    return f", part {chunk.number} of {chunk.total} (steps {shown} of {first_step}-{last_step}):"
