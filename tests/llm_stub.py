"""A small OpenAI-compatible chat-completions server on a loopback socket, for the judge's tests.

Real HTTP (`http.server`, one thread per request) speaking `POST /v1/chat/completions`: every request
body is recorded (parsed, and as raw bytes) for assertions, and replies come from a script (a queue
of `Reply`, consumed first) or from a responder function of the request body. By default it answers
every request with a well-formed verdict: no mode detected, task completion unknown.

No LLM runs here: this stands in for one so that the judge's real `openai` client, its retries,
timeouts, response-format negotiation, chunking and parsing are exercised over real HTTP.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback_http import LoopbackServer, QuietHandler

from mast_otel.taxonomy import CODES

CHARS_PER_TOKEN = 4  # the stub's usage accounting: a deterministic estimate


@dataclass(frozen=True)
class Reply:
    """One scripted reply: an assistant message (status 200), or an error status with a JSON body."""

    content: str | None = None
    status: int = 200
    error: str = ""  # the error message of a non-200 reply
    delay_s: float = 0.0  # sleep before answering (timeouts)
    headers: Mapping[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    raw_body: bytes | None = None  # sent verbatim instead of a chat completion (garbage tests)


Responder = Callable[[dict[str, Any]], Reply]


def answer(
    detected: Mapping[str, Iterable[int]] | None = None,
    *,
    task_completed: str = "unknown",
    explanations: Mapping[str, str] | None = None,
) -> str:
    """A well-formed answer as a JSON-schema-following model gives it: all 14 modes, `detected`
    ones (code -> evidence steps) true."""
    detected = detected or {}
    explanations = explanations or {}
    modes = {
        code: {
            "detected": code in detected,
            "steps": sorted(detected.get(code, ())),
            "explanation": explanations.get(code, f"{code} at the cited steps" if code in detected else ""),
        }
        for code in CODES
    }
    return json.dumps({"modes": modes, "task_completed": task_completed})


def user_message(body: Mapping[str, Any]) -> str:
    """The run's message in a request: its last user message."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def steps_shown(body: Mapping[str, Any]) -> list[int]:
    """The step numbers of the lines under "Steps:" in a request's run message."""
    _, _, steps = user_message(body).partition("\nSteps:\n")
    return [int(n) for n in re.findall(r"^\[(\d+)\]", steps, flags=re.MULTILINE)]


def response_format_type(body: Mapping[str, Any]) -> str:
    fmt = body.get("response_format")
    return fmt["type"] if isinstance(fmt, dict) else "text"


def well_formed(_body: Mapping[str, Any]) -> Reply:
    return Reply(answer())


class ChatStub(LoopbackServer):
    """Start with `with ChatStub() as stub:`; point the judge at `stub.base_url`."""

    def __init__(self, responder: Responder = well_formed) -> None:
        self.responder = responder
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__(self._handler(), "chat-stub")

    def script(self, *replies: Reply) -> None:
        """Replies for the next requests, in order, before the responder takes over again."""
        with self._lock:
            self._script.extend(replies)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.bodies.append(body)
            if self._script:
                return self._script.popleft()
        return self.responder(body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with stub._lock:
                    stub.raw.append(raw)
                    stub.headers.append(dict(self.headers))
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                body = json.loads(raw)
                reply = stub._next_reply(body)
                if reply.delay_s and stub.closing.wait(reply.delay_s):
                    return
                if reply.raw_body is not None:
                    self._send_bytes(reply.status, reply.raw_body, reply.headers)
                    return
                if reply.status != 200:
                    error = {"message": reply.error or f"status {reply.status}", "type": "stub_error"}
                    self._send(reply.status, {"error": error}, reply.headers)
                    return
                content = reply.content or ""
                prompt_chars = sum(len(m.get("content") or "") for m in body["messages"])
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-stub-{len(stub.bodies)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": reply.finish_reason,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_chars // CHARS_PER_TOKEN,
                            "completion_tokens": len(content) // CHARS_PER_TOKEN,
                            "total_tokens": (prompt_chars + len(content)) // CHARS_PER_TOKEN,
                        },
                    },
                    reply.headers,
                )

            def _send(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
                self._send_bytes(status, json.dumps(payload).encode(), headers)

            def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
