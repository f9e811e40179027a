"""The judge's prompt: MAST definitions from `taxonomy.py`, the answer format, few-shot examples, and
one user message per chunk (task and system instructions first, then the chunk's steps).

Short by design: on short runs the fixed part (role, definitions, rules) is most of what a request
sends, so the default names each mode with its `gist` from `taxonomy.py`; `definitions="full"` gives
the paper's definitions instead, at about three times the tokens. The answer lists detected modes with
evidence and the others compactly under `not_detected`: every mode must still be named, and a mode in
neither list is unknown, never "no". The answer's shape is spelled out (`FORMAT_NOTE`) only when the
server does not take the JSON schema as its response format: otherwise the schema says it.

`PROMPT_VERSION` is part of the verdict cache's key: change the wording, bump it, and cached verdicts
of the old prompt stop being reused.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Final, Literal

from mast_otel.annotate.llm.chunking import Chunk, RunView
from mast_otel.annotate.llm.config import FewShotExample
from mast_otel.taxonomy import MODES, Category

__all__ = [
    "FORMAT_NOTE",
    "PROMPT_VERSION",
    "ChatMessage",
    "chunk_message",
    "few_shot_messages",
    "system_prompt",
]

PROMPT_VERSION: Final = "mast-judge/2"

ChatMessage = dict[str, str]  # {"role": ..., "content": ...}, what the chat API takes

_INSTRUCTIONS: Final = (
    "Rules: judge only the steps shown, numbered [n]; cite those numbers as evidence. A mode is "
    "detected only if a shown step exhibits it. Placeholders like <EMAIL_1> are redacted values; "
    '"[… N chars omitted …]" and "[… N lines as in step k …]" mark shortened text: none of these is '
    "a failure.\n"
    "Answer: name every mode once, either under detected (with evidence steps and a one-line "
    "explanation) or under not_detected. task_completed: yes or no when the run's last step is shown "
    "and tells, else unknown."
)

# The answer's shape, for servers that do not take the JSON schema (JSON mode, plain text).
FORMAT_NOTE: Final = (
    'Reply with one JSON object only: {"detected": [{"mode": "FM-1.3", "steps": [4, 7], '
    '"explanation": "..."}], "not_detected": ["FM-1.1", ...], "task_completed": "yes" | "no" | "unknown"}'
)


@functools.lru_cache(maxsize=2)
def system_prompt(definitions: Literal["gist", "full"] = "gist") -> str:
    """Role, the 14 modes (grouped by category, with their gist or full definition) and the rules."""
    lines = ["You annotate LLM agent runs with the 14 MAST failure modes (Cemri et al., 2025):"]
    for category in Category:
        lines.append(f"{category.value} {category.label}:")
        lines.extend(
            f"{mode.code} {mode.name}: {mode.gist if definitions == 'gist' else mode.definition}"
            for mode in MODES
            if mode.category is category
        )
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
