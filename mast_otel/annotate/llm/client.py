"""One robust question to an OpenAI-compatible chat endpoint, through the `openai` client.

`ChatClient.ask` sends a chat completion and reads the reply with the caller's parser. It retries,
with exponential backoff and jitter (honouring Retry-After), on 408/409/429/5xx, timeouts,
connection errors and replies the parser rejects, up to `request.max_attempts` per question; other
errors (401, 403, 404, a 400 that is not about the response format) end the question at once. With
`response_format: auto` it starts with a JSON-schema response format and steps down to JSON mode,
then to plain text, the first time the server refuses one; the step down sticks for the client.
The openai client's own retries are off so that every request is counted and bounded here, and a
semaphore caps the requests in flight across all threads sharing the client.

`openai` is imported when a client is built, not when this module is: the collector and `analyze`
never pay for it unless a judge is configured.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from mast_otel.annotate.llm.chunking import MESSAGE_OVERHEAD_TOKENS, TokenEstimator
from mast_otel.annotate.llm.config import JudgeConfig, JudgeConfigError, ResponseFormat
from mast_otel.annotate.llm.prompt import ChatMessage
from mast_otel.annotate.llm.schema import AnswerError, response_format

if TYPE_CHECKING:
    import openai

__all__ = ["ChatClient", "Exchange"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_RETRYABLE_STATUS: Final = frozenset({408, 409, 429})
_FORMAT_WORDS: Final = (
    "response_format",
    "response format",
    "json_schema",
    "json_object",
    "structured output",
)
_DOWNGRADE: Final = {
    ResponseFormat.JSON_SCHEMA: ResponseFormat.JSON_OBJECT,
    ResponseFormat.JSON_OBJECT: ResponseFormat.TEXT,
}
# A server without a key (vLLM, Ollama) ignores it; the openai client refuses to start without one.
_NO_KEY: Final = "unused"


@dataclass(frozen=True, slots=True)
class Exchange(Generic[_T]):
    """How one question went: the parsed answer (or why there is none) and what it cost."""

    value: _T | None
    failure: str  # "" when value is set
    requests: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class _Reply:
    """What a completion said and what the server counted (None when it did not say)."""

    text: str
    finish_reason: str
    input_tokens: int | None
    output_tokens: int | None

    @classmethod
    def of(cls, completion: Any) -> _Reply:
        """Read defensively: OpenAI-compatible servers differ, and some send less than the spec."""
        choices = completion.choices or []
        choice = choices[0] if choices else None
        text = choice.message.content if choice is not None and choice.message is not None else None
        usage = completion.usage
        return cls(
            text=text if isinstance(text, str) else "",
            finish_reason=str(choice.finish_reason or "") if choice is not None else "",
            input_tokens=_count(getattr(usage, "prompt_tokens", None)),
            output_tokens=_count(getattr(usage, "completion_tokens", None)),
        )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ChatClient:
    """Thread-safe; share one per judge. `close()` interrupts backoff waits and closes connections."""

    def __init__(self, config: JudgeConfig, *, env: Mapping[str, str] | None = None) -> None:
        import openai

        self.config = config
        self._openai = openai
        key = config.api_key(env)
        if key is None and not config.base_url:
            raise JudgeConfigError(
                f"no API key for {config.endpoint}: set {config.api_key_env} or judge.api_key_file"
            )
        options: dict[str, Any] = {
            "api_key": key or _NO_KEY,
            "timeout": config.request.timeout_s,
            "max_retries": 0,  # retried here, where every request is counted and bounded
        }
        self._client: openai.OpenAI
        if config.api_version:
            self._client = openai.AzureOpenAI(
                azure_endpoint=config.base_url, api_version=config.api_version, **options
            )
        else:
            self._client = openai.OpenAI(base_url=config.base_url or None, **options)
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._closing = threading.Event()
        self._format_lock = threading.Lock()
        configured = config.request.format
        self._negotiate = configured is ResponseFormat.AUTO
        self._format = ResponseFormat.JSON_SCHEMA if self._negotiate else configured
        self._estimator = TokenEstimator(config.context.chars_per_token)

    def __repr__(self) -> str:
        return f"ChatClient({self.config.endpoint!r}, model={self.config.model!r})"

    @property
    def response_format(self) -> ResponseFormat:
        """The format requests use now (after any step down)."""
        return self._format

    def close(self) -> None:
        self._closing.set()
        self._client.close()

    def ask(
        self, messages: Sequence[ChatMessage], parse: Callable[[str], _T], *, format_note: str = ""
    ) -> Exchange[_T]:
        """Ask until `parse` accepts a reply or the attempts run out; never raises for endpoint trouble.

        `format_note` (the answer's shape in words) is appended to the first message whenever the
        request goes without a JSON schema: with one, the schema says it and the note is not sent."""
        openai = self._openai
        attempts = requests = input_tokens = output_tokens = 0
        failure = ""
        while attempts < self.config.request.max_attempts and not self._closing.is_set():
            used_format = self._format
            sent = _with_note(messages, format_note, used_format)
            retry_after: float | None = None
            requests += 1
            try:
                with self._slots:
                    completion = self._client.chat.completions.create(**self._request(sent, used_format))
                reply = _Reply.of(completion)
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if self._negotiate and used_format in _DOWNGRADE and _about_format(exc):
                    self._step_down(used_format, exc)
                    continue  # not an attempt: the question was never asked in a form it takes
                return Exchange(None, _describe(exc), requests, input_tokens, output_tokens)
            except openai.APIStatusError as exc:
                if exc.status_code not in _RETRYABLE_STATUS and exc.status_code < 500:
                    return Exchange(None, _describe(exc), requests, input_tokens, output_tokens)
                failure, retry_after = _describe(exc), _retry_after(exc)
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                failure = _describe(exc)
            except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError) as exc:
                # A 200 whose body is not a chat completion (a proxy's error page, truncated JSON).
                failure = f"malformed response: {_describe(exc)}"
            else:
                input_tokens += reply.input_tokens if reply.input_tokens is not None else self._estimate(sent)
                output_tokens += (
                    reply.output_tokens
                    if reply.output_tokens is not None
                    else self._estimator.tokens(reply.text)
                )
                try:
                    return Exchange(parse(reply.text), "", requests, input_tokens, output_tokens)
                except AnswerError as exc:
                    stopped = f" (generation stopped: {reply.finish_reason})" if reply.finish_reason else ""
                    failure = f"invalid answer: {exc}{stopped}"
            attempts += 1
            if attempts < self.config.request.max_attempts:
                self._closing.wait(self._backoff(attempts, retry_after))
        if self._closing.is_set() and not failure:
            failure = "the judge was stopped"
        return Exchange(None, f"{failure} (after {attempts} attempts)", requests, input_tokens, output_tokens)

    def _request(self, messages: Sequence[ChatMessage], used_format: ResponseFormat) -> dict[str, Any]:
        request = self.config.request
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            request.max_tokens_field: request.max_output_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        format_field = response_format(used_format.value)
        if format_field is not None:
            body["response_format"] = format_field
        if request.extra_body:
            body["extra_body"] = dict(request.extra_body)
        return body

    def _step_down(self, refused: ResponseFormat, exc: Exception) -> None:
        with self._format_lock:
            if self._format is refused:
                self._format = _DOWNGRADE[refused]
                log.info(
                    "%s refused response_format %s (%s); using %s from now on",
                    self.config.endpoint,
                    refused.value,
                    _describe(exc),
                    self._format.value,
                )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        request = self.config.request
        if retry_after is not None:
            return min(request.backoff_max_s, retry_after)
        ceiling = min(request.backoff_max_s, request.backoff_initial_s * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)  # jitter: replicas that failed together spread out

    def _estimate(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self._estimator.tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def _with_note(
    messages: Sequence[ChatMessage], note: str, used_format: ResponseFormat
) -> Sequence[ChatMessage]:
    if not note or not messages or used_format is ResponseFormat.JSON_SCHEMA:
        return messages
    first = messages[0]
    return [{**first, "content": f"{first['content']}\n{note}"}, *messages[1:]]


def _about_format(exc: openai.APIStatusError) -> bool:
    text = f"{exc.message} {exc.body}".lower()
    return any(word in text for word in _FORMAT_WORDS)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                return None  # an HTTP date: fall back to the exponential backoff
    return None


def _describe(exc: Exception) -> str:
    """A short reason for the usage row: status and the server's message, never request headers."""
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", "") or exc).strip().replace("\n", " ")
    kind = type(exc).__name__
    return f"{kind} {status}: {message[:200]}" if status else f"{kind}: {message[:200]}"
