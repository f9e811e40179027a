"""A scripted OpenAI Responses API server on a loopback socket, for driving the real Codex CLI.

Codex talks to a custom model provider (`wire_api = "responses"`) with `POST {base_url}/responses`
and reads the answer as server-sent events: `response.created`, then per output item
`response.output_item.added`, its deltas and `response.output_item.done`, then
`response.completed` with the usage. This server answers each request with the next `ModelTurn`
of its script (reasoning, text, function calls), in that shape, and records the request bodies, so
a test knows exactly what the model "said" and can check what Codex sent back (tool outputs).

No model runs here. Other requests Codex makes to its provider's base URL (usage analytics) get an
empty 200; once the script is used up, every answer is a final message saying so, which no test
expects, so a test that scripts too few turns fails on content instead of hanging in retries.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback_http import LoopbackServer, QuietHandler

EXHAUSTED = "(the model stub's script is used up)"
_ids = itertools.count(1)


@dataclass(frozen=True)
class ModelTurn:
    """One scripted model response: its output items in order, and the usage it reports."""

    items: tuple[dict[str, Any], ...]
    input_tokens: int = 100
    output_tokens: int = 20


def reasoning(summary: str, raw: str = "") -> dict[str, Any]:
    """A reasoning item: its summary, and the raw reasoning text that open models share."""
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": f"rs_{next(_ids)}",
        "summary": [{"type": "summary_text", "text": summary}],
    }
    if raw:
        item["content"] = [{"type": "reasoning_text", "text": raw}]
    return item


def function_call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A function call; the Responses API sends its arguments as a JSON string."""
    return {
        "type": "function_call",
        "id": f"fc_{next(_ids)}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def message(text: str, phase: str = "final_answer") -> dict[str, Any]:
    """An assistant message; `commentary` for progress notes, `final_answer` for the answer."""
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "phase": phase,
        "content": [{"type": "output_text", "text": text}],
    }


class ResponsesStub(LoopbackServer):
    """Start with `with ResponsesStub(script) as stub:`; point Codex at `stub.base_url`."""

    def __init__(self, script: Sequence[ModelTurn]) -> None:
        self.requests: list[dict[str, Any]] = []  # bodies of the /responses requests, in order
        self._script = list(script)
        self._lock = threading.Lock()
        super().__init__(self._handler(), "responses-stub")

    def _next(self, body: dict[str, Any]) -> tuple[int, ModelTurn]:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            if number <= len(self._script):
                return number, self._script[number - 1]
        return number, ModelTurn((message(EXHAUSTED),))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if not self.path.split("?")[0].endswith("/responses"):
                    self._send(200, b"{}", "application/json")
                    return
                number, turn = stub._next(json.loads(raw))
                self._send(200, _stream(f"resp_{number}", turn), "text/event-stream")

            def do_GET(self) -> None:
                self._send(404, b'{"error": {"message": "not scripted"}}', "application/json")

            def _send(self, status: int, data: bytes, content_type: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def _stream(response_id: str, turn: ModelTurn) -> bytes:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": response_id}}]
    for item in turn.items:
        events.append({"type": "response.output_item.added", "item": item})
        if item["type"] == "message":
            text = "".join(part["text"] for part in item["content"])
            events.append({"type": "response.output_text.delta", "delta": text})
        elif item["type"] == "reasoning":
            for index, part in enumerate(item["summary"]):
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "delta": part["text"],
                        "summary_index": index,
                    }
                )
        events.append({"type": "response.output_item.done", "item": item})
    usage = {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": None,
        "output_tokens": turn.output_tokens,
        "output_tokens_details": None,
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
    events.append({"type": "response.completed", "response": {"id": response_id, "usage": usage}})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
