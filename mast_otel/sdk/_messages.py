"""Conversion of chat messages to the JSON shape of the GenAI semantic conventions.

`gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions` are JSON strings
of role-tagged messages made of typed parts (`text`, `reasoning`, `tool_call`, `tool_call_response`).
Agent code usually holds OpenAI-style dicts (`{"role", "content"}`, assistant `tool_calls`, role
`tool` with `tool_call_id`); this module converts those, passes GenAI-shaped messages through, and
applies the redaction hook to every content string on the way.

Redaction works on string leaves of structured values (tool arguments, tool results), so the
JSON stays valid and object keys, which are structure rather than content, stay readable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypedDict

from mast_otel.semconv import PART_REASONING, PART_TEXT, PART_TOOL_CALL, PART_TOOL_CALL_RESPONSE

Redact = Callable[[str], str]


class TextPart(TypedDict):
    type: Literal["text"]
    content: str


class ReasoningPart(TypedDict):
    type: Literal["reasoning"]
    content: str


class ToolCallPart(TypedDict):
    type: Literal["tool_call"]
    id: str | None
    name: str
    arguments: object


class ToolCallResponsePart(TypedDict):
    type: Literal["tool_call_response"]
    id: str | None
    response: object


# Parts of types this module does not know (images, files...) travel as the caller gave them.
Part = TextPart | ReasoningPart | ToolCallPart | ToolCallResponsePart | dict[str, object]


def text_part(content: str, redact: Redact) -> TextPart:
    return {"type": PART_TEXT, "content": redact(content)}


def reasoning_part(content: str, redact: Redact) -> ReasoningPart:
    return {"type": PART_REASONING, "content": redact(content)}


def tool_call_part(call: Mapping[str, object], redact: Redact) -> ToolCallPart:
    """A tool call requested by a model: `{"id", "name", "arguments"}` or OpenAI's nested `function`."""
    function = call.get("function")
    source = function if isinstance(function, Mapping) else call
    call_id = call.get("id")
    return {
        "type": PART_TOOL_CALL,
        "id": None if call_id is None else str(call_id),
        "name": str(source.get("name", "")),
        "arguments": redact_value(_decoded(source.get("arguments")), redact),
    }


def tool_call_response_part(call_id: object, response: object, redact: Redact) -> ToolCallResponsePart:
    return {
        "type": PART_TOOL_CALL_RESPONSE,
        "id": None if call_id is None else str(call_id),
        "response": redact_value(response, redact),
    }


def input_messages_json(messages: Iterable[Mapping[str, object]], redact: Redact) -> str:
    return _dumps([_message(message, redact) for message in messages])


def output_message_json(parts: Sequence[Part], finish_reason: str) -> str:
    """One assistant output message; the spec requires `finish_reason` on output messages."""
    return _dumps([{"role": "assistant", "parts": list(parts), "finish_reason": finish_reason}])


def user_message_json(text: str, redact: Redact) -> str:
    return _dumps([{"role": "user", "parts": [text_part(text, redact)]}])


def system_instructions_json(instructions: str | Sequence[str | Mapping[str, object]], redact: Redact) -> str:
    """`gen_ai.system_instructions` is a list of parts, not of messages."""
    items: Sequence[str | Mapping[str, object]] = (
        [instructions] if isinstance(instructions, str) else instructions
    )
    return _dumps(
        [text_part(item, redact) if isinstance(item, str) else _part(item, redact) for item in items]
    )


def value_json(value: object, redact: Redact) -> str:
    """A tool's arguments or result as an attribute value: strings as given, anything else as JSON."""
    if isinstance(value, str):
        return redact(value)
    return _dumps(redact_value(value, redact))


def redact_value(value: object, redact: Redact) -> object:
    """`value` made JSON-native, with `redact` applied to every string leaf.

    Objects JSON cannot encode are rendered with `str()` first, so their text is redacted too
    instead of slipping out through a serializer fallback.
    """
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): redact_value(item, redact) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [redact_value(item, redact) for item in value]
    return redact(str(value))


def _message(message: Mapping[str, object], redact: Redact) -> dict[str, object]:
    role = str(message.get("role") or "user")
    raw_parts = message.get("parts")
    if isinstance(raw_parts, Sequence) and not isinstance(raw_parts, str):
        parts = [_part(part, redact) for part in raw_parts if isinstance(part, Mapping)]
    else:
        parts = _openai_style_parts(role, message, redact)
    converted: dict[str, object] = {"role": role, "parts": parts}
    for optional_key in ("name", "finish_reason"):
        if message.get(optional_key):
            converted[optional_key] = str(message[optional_key])
    return converted


def _openai_style_parts(role: str, message: Mapping[str, object], redact: Redact) -> list[Part]:
    parts: list[Part] = []
    # Reasoning models served through OpenAI-compatible APIs return their thinking beside the content.
    for reasoning_key in ("reasoning_content", "reasoning"):
        reasoning = message.get(reasoning_key)
        if isinstance(reasoning, str) and reasoning:
            parts.append(reasoning_part(reasoning, redact))
            break
    content = message.get("content")
    if role == "tool":
        parts.append(tool_call_response_part(message.get("tool_call_id"), content, redact))
    else:
        parts.extend(_content_parts(content, redact))
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, Sequence):
        parts.extend(tool_call_part(call, redact) for call in tool_calls if isinstance(call, Mapping))
    return parts


def _content_parts(content: object, redact: Redact) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content, redact)] if content else []
    if isinstance(content, Sequence):
        parts: list[Part] = []
        for item in content:
            if isinstance(item, str):
                parts.append(text_part(item, redact))
            elif isinstance(item, Mapping):
                parts.append(_part(item, redact))
        return parts
    return [text_part(str(content), redact)]


def _part(part: Mapping[str, object], redact: Redact) -> Part:
    part_type = part.get("type")
    if part_type == PART_TEXT:
        # OpenAI content parts carry the text under "text", GenAI parts under "content".
        text = part.get("content", part.get("text", ""))
        return text_part(str(text), redact)
    if part_type == PART_REASONING:
        return reasoning_part(str(part.get("content", "")), redact)
    if part_type == PART_TOOL_CALL:
        return tool_call_part(part, redact)
    if part_type == PART_TOOL_CALL_RESPONSE:
        return tool_call_response_part(part.get("id"), part.get("response"), redact)
    return {str(key): value if key == "type" else redact_value(value, redact) for key, value in part.items()}


def _decoded(arguments: object) -> object:
    """OpenAI sends tool arguments as a JSON string; the spec's part carries the object."""
    if isinstance(arguments, str):
        try:
            decoded: object = json.loads(arguments)
        except ValueError:
            return arguments
        return decoded
    return {} if arguments is None else arguments


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
