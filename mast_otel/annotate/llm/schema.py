"""The judge's answer format: its JSON schema, and the tolerant-but-strict reading of a reply.

The answer is compact: `detected`, a list of {mode, steps, explanation}, `not_detected`, a list of
the other codes, and `task_completed`. Naming the absent modes costs a few tokens per mode, and is
what keeps "unknown" meaningful: a mode in neither list was not answered, and stays UNKNOWN.

Servers that support structured outputs get `ANSWER_SCHEMA` as a JSON-schema response format. Others
may wrap the JSON in prose or code fences, answer in the older per-mode shape ({"modes": {"FM-1.3":
{"detected": ...}}}), key modes by "1.3" or "FM-1.3 Step repetition", use "yes"/"no" for booleans,
skip modes or repeat them: the reader finds the JSON object wherever it is and accepts those
spellings, but validates every entry. A mode with no valid entry, or with entries that contradict
each other (in both lists), is left out of the `ChunkAnswer` and so becomes UNKNOWN; nothing is ever
guessed to be "no". A reply without a usable JSON answer raises `AnswerError`, which the client
retries.

Unlike a regex over "2.5 Ignored Other Agent's Input: yes", the verdict is only ever read from which
list names a mode (or its `detected` field), so words inside mode names or explanations ("no",
"ignored") cannot flip it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Mapping
from typing import Any, Final

from mast_otel.annotate.llm.verdict import ChunkAnswer, Detection, ModeVerdict, clip_explanation
from mast_otel.taxonomy import BY_CODE, CODES, FailureMode

__all__ = ["ANSWER_SCHEMA", "AnswerError", "extract_json_object", "parse_answer", "response_format"]

SCHEMA_NAME: Final = "mast_annotation"
_MODE_CODE: Final[dict[str, Any]] = {"$ref": "#/$defs/code"}
# Strict-mode compatible (OpenAI structured outputs): every property required, no extra keys.
ANSWER_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "detected": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "mode": _MODE_CODE,
                    "steps": {"type": "array", "items": {"type": "integer"}},
                    "explanation": {"type": "string"},
                },
                "required": ["mode", "steps", "explanation"],
                "additionalProperties": False,
            },
        },
        "not_detected": {"type": "array", "items": _MODE_CODE},
        "task_completed": {"type": "string", "enum": ["yes", "no", "unknown"]},
    },
    "required": ["detected", "not_detected", "task_completed"],
    "additionalProperties": False,
    "$defs": {"code": {"type": "string", "enum": list(CODES)}},
}

_CODE = re.compile(r"^\s*(?:FM[-\s]?)?([1-3]\.[1-9])(?![\d.])", re.IGNORECASE)
_YES: Final = frozenset({"yes", "true", "y", "detected"})
_NO: Final = frozenset({"no", "false", "n", "not detected"})
_UNKNOWN: Final = frozenset({"unknown", "unsure", "n/a", "na", "unclear"})
_MAX_OBJECT_STARTS = 64  # how many "{" the extractor tries before giving up on a reply


class AnswerError(ValueError):
    """The reply holds no usable answer (no JSON object, or none of its entries valid)."""


def response_format(kind: str) -> dict[str, Any] | None:
    """The `response_format` request field for "json_schema", "json_object" or "text" (None)."""
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": ANSWER_SCHEMA},
        }
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def extract_json_object(text: str) -> dict[str, Any]:
    """The answer object in a reply: the whole reply, or the first JSON object inside prose or fences
    that looks like an answer (has "modes", or mode codes as keys)."""
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return whole
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    starts = [match.start() for match in re.finditer(r"\{", stripped)][:_MAX_OBJECT_STARTS]
    for start in starts:
        try:
            candidate, _ = decoder.raw_decode(stripped, start)
        except ValueError:
            continue
        if isinstance(candidate, dict):
            if _looks_like_answer(candidate):
                return candidate
            first = first or candidate
    if first is not None:
        return first
    raise AnswerError("the reply holds no JSON object")


def parse_answer(text: str, visible_steps: Container[int]) -> ChunkAnswer:
    """Read and validate one reply about a chunk whose steps are `visible_steps`; evidence citing
    any other step is dropped (a model citing steps it was not shown is making them up)."""
    answer = extract_json_object(text)
    visible = visible_steps
    problems: list[str] = []
    entries = _mode_entries(answer, problems)
    votes: dict[FailureMode, list[ModeVerdict]] = {}
    for key, value in entries:
        match = _CODE.match(key)
        mode = BY_CODE.get(f"FM-{match.group(1)}") if match else None
        if mode is None:
            problems.append(f"ignored an entry for unknown mode {key[:40]!r}")
            continue
        verdict = _mode_verdict(mode, value, visible, problems)
        if verdict is not None:
            votes.setdefault(mode, []).append(verdict)
    modes = []
    for mode, mode_votes in votes.items():
        detections = {vote.detection for vote in mode_votes}
        if len(detections) > 1:
            problems.append(f"{mode.code} answered more than once, with different verdicts")
            continue
        steps = sorted({step for vote in mode_votes for step in vote.steps})
        explanation = "; ".join(dict.fromkeys(vote.explanation for vote in mode_votes if vote.explanation))
        modes.append(ModeVerdict(mode, mode_votes[0].detection, tuple(steps), clip_explanation(explanation)))
    if not modes:
        raise AnswerError("no mode has a valid answer" + (f" ({problems[0]})" if problems else ""))
    missing = [code for code in CODES if all(verdict.mode.code != code for verdict in modes)]
    if missing:
        problems.append(f"no valid answer for {', '.join(missing)}")
    modes.sort(key=lambda verdict: CODES.index(verdict.mode.code))
    completed = _detection(answer.get("task_completed"))
    if completed is None:
        problems.append("task_completed is not yes, no or unknown")
        completed = Detection.UNKNOWN
    return ChunkAnswer(tuple(modes), completed, tuple(problems))


def _looks_like_answer(candidate: Mapping[str, Any]) -> bool:
    return bool({"modes", "detected", "not_detected"} & set(candidate)) or any(
        _CODE.match(str(key)) for key in candidate
    )


def _mode_entries(answer: Mapping[str, Any], problems: list[str]) -> list[tuple[str, Any]]:
    """(mode key, entry) pairs from the spellings models use: the compact {"detected": [{"mode":
    code, ...}], "not_detected": [code, ...]}, {"modes": {code: entry}}, {"modes": [{"mode": code,
    ...}]}, or the codes at the top level."""
    if "detected" in answer or "not_detected" in answer:
        return _compact_entries(answer, problems)
    modes = answer.get("modes", answer)
    if isinstance(modes, Mapping):
        return [(str(key), value) for key, value in modes.items() if key != "task_completed"]
    if isinstance(modes, list):
        entries = []
        for item in modes:
            key = item.get("mode", item.get("code")) if isinstance(item, Mapping) else None
            if key is None:
                problems.append("ignored a modes entry without a mode code")
                continue
            entries.append((str(key), item))
        return entries
    problems.append("modes is neither an object nor a list")
    return []


def _compact_entries(answer: Mapping[str, Any], problems: list[str]) -> list[tuple[str, Any]]:
    entries: list[tuple[str, Any]] = []
    detected = answer.get("detected", [])
    for item in detected if isinstance(detected, list) else [detected]:
        key = item.get("mode", item.get("code")) if isinstance(item, Mapping) else item
        if not isinstance(key, str):
            problems.append("ignored a detected entry without a mode code")
            continue
        entry = item if isinstance(item, Mapping) else {}
        entries.append((key, {**entry, "detected": True}))
    absent = answer.get("not_detected", [])
    for key in absent if isinstance(absent, list) else [absent]:
        if not isinstance(key, str):
            problems.append("ignored a not_detected entry that is not a mode code")
            continue
        entries.append((key, {"detected": False}))
    return entries


def _mode_verdict(
    mode: FailureMode, value: Any, visible: Container[int], problems: list[str]
) -> ModeVerdict | None:
    if isinstance(value, Mapping):
        detection = _detection(value.get("detected"))
        raw_steps = value.get("steps", [])
        explanation = value.get("explanation", "")
    else:  # "FM-1.3": "yes" / true
        detection, raw_steps, explanation = _detection(value), [], ""
    if detection is None:
        problems.append(f"{mode.code}: detected is not a yes/no answer")
        return None
    if detection is Detection.UNKNOWN:
        return None  # the model says it cannot tell: the mode stays unknown
    steps = []
    for step in raw_steps if isinstance(raw_steps, list) else [raw_steps]:
        number = _step_number(step)
        if number is None or number not in visible:
            problems.append(f"{mode.code}: dropped evidence step {str(step)[:20]!r} (not a step shown)")
            continue
        steps.append(number)
    if detection is Detection.NO:
        steps = []
    return ModeVerdict(mode, detection, tuple(sorted(set(steps))), clip_explanation(str(explanation or "")))


def _detection(value: Any) -> Detection | None:
    if isinstance(value, bool):
        return Detection.YES if value else Detection.NO
    if isinstance(value, str):
        word = value.strip().lower().rstrip(".")
        if word in _YES:
            return Detection.YES
        if word in _NO:
            return Detection.NO
        if word in _UNKNOWN:
            return Detection.UNKNOWN
    return None


def _step_number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("[").rstrip("]").isdigit():
        return int(value.strip().lstrip("[").rstrip("]"))
    return None
