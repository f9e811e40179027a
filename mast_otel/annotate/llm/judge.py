"""The LLM judge: an `Annotator` asking an OpenAI-compatible model about the 14 MAST modes.

`assess` is the whole decision for one run, in cost order: the verdict cache (free), the sampling
policy, the hourly token budget, and only then the model, one request per chunk. The chunks'
answers merge into one verdict; its detected modes become findings whose provenance is
"llm/<model>", and every assessment, judged or not, yields a `JudgeUsage` row saying what happened,
why, and what it cost. `annotate` (the `Annotator` protocol) judges a run unconditionally.

Runs are redacted before rendering (see `mast_otel.redact`): the model sees placeholders, and the
findings' explanations get back only what `redaction.restorable` allows.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from mast_otel.annotate.base import Evidence, Finding
from mast_otel.annotate.llm.cache import VerdictCache, content_hash, judge_identity
from mast_otel.annotate.llm.chunking import (
    MESSAGE_OVERHEAD_TOKENS,
    Chunk,
    RunView,
    TokenEstimator,
    render_run,
    split_steps,
)
from mast_otel.annotate.llm.client import ChatClient
from mast_otel.annotate.llm.config import JudgeConfig, JudgeConfigError, ResponseFormat
from mast_otel.annotate.llm.policy import Decision, HourlyTokenBudget, Reservation, SamplingPolicy
from mast_otel.annotate.llm.prompt import (
    FORMAT_NOTE,
    ChatMessage,
    chunk_message,
    few_shot_messages,
    header_text,
    system_prompt,
)
from mast_otel.annotate.llm.schema import AnswerError, parse_answer, response_format
from mast_otel.annotate.llm.usage import JudgeStatus, JudgeUsage
from mast_otel.annotate.llm.verdict import ChunkAnswer, RunVerdict, merge_answers
from mast_otel.conversation.model import Conversation
from mast_otel.redact import RedactionSession, Redactor
from mast_otel.store.base import QuerySource

__all__ = ["BudgetWait", "JudgeOutcome", "LLMJudge"]

log = logging.getLogger(__name__)

# Wait up to this many seconds for budget room; returns False when the waiting should end (shutdown).
BudgetWait = Callable[[float], bool]

_FRAMING_TOKENS: Final = 64  # the chunk message's own lines ("Run to annotate, part 2 of 5 ...")
_MIN_STEP_TOKENS: Final = 256  # a context that leaves less than this for steps is a config error
_MAX_REASON_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """What assessing one run produced: its status, the judge's findings, the usage row."""

    status: JudgeStatus
    findings: tuple[Finding, ...]
    usage: JudgeUsage
    verdict: RunVerdict | None = None

    @property
    def reason(self) -> str:
        return self.usage.reason


@dataclass(frozen=True, slots=True)
class _Plan:
    """A run made ready for the model: its redaction session, chunks and their messages."""

    session: RedactionSession
    view: RunView
    chunks: tuple[Chunk, ...]
    messages: tuple[tuple[ChatMessage, ...], ...]  # per chunk
    estimated_tokens: int  # input of every request + the output each may produce


class LLMJudge:
    """Thread-safe: the collector's judge service calls `assess` from several workers at once."""

    def __init__(
        self,
        config: JudgeConfig,
        *,
        source: QuerySource | None = None,
        env: Mapping[str, str] | None = None,
        client: ChatClient | None = None,
        budget: HourlyTokenBudget | None = None,
    ) -> None:
        """`source` backs the verdict cache with the store's `mast_judge_usage` (None: memory only)."""
        self.config = config
        self._client = client or ChatClient(config, env=env)
        self._identity = judge_identity(config)
        self.cache = VerdictCache(config.cache_size, source)
        self.sampling = SamplingPolicy(config.sampling)
        self.budget = budget or HourlyTokenBudget(config.budget.hourly_tokens)
        self._redactor = Redactor(config.redaction)
        self._estimator = TokenEstimator(config.context.chars_per_token)
        examples = config.all_few_shot()
        for number, example in enumerate(examples, 1):
            try:
                parse_answer(example.answer, range(1_000_000))
            except AnswerError as exc:
                raise JudgeConfigError(
                    f"judge few-shot example {number}: its answer is unusable: {exc}"
                ) from None
        self._prefix: tuple[ChatMessage, ...] = (
            {"role": "system", "content": system_prompt(config.definitions)},
            *few_shot_messages(examples),
        )
        self._window = self._input_window()
        self._lock = threading.Lock()
        self._in_progress: dict[str, threading.Event] = {}

    def __repr__(self) -> str:
        return f"LLMJudge({self.config.endpoint!r}, model={self.config.model!r})"

    @property
    def name(self) -> str:
        return self.config.annotator

    def close(self) -> None:
        self._client.close()

    # --- the Annotator protocol -------------------------------------------------------------------
    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        """The judge's findings for a run (cached verdicts reused); no sampling, no budget."""
        return self.assess(conversation, sample=False, use_budget=False).findings

    # --- the full decision ------------------------------------------------------------------------
    def content_hash(self, conversation: Conversation) -> str:
        return content_hash(conversation, self._identity)

    def decide(
        self, conversation: Conversation, rule_findings: Sequence[Finding], key: str | None = None
    ) -> Decision:
        """The sampling decision alone: cheap, safe on a pipeline thread."""
        return self.sampling.decide(conversation, rule_findings, key or self.content_hash(conversation))

    def assess(
        self,
        conversation: Conversation,
        rule_findings: Sequence[Finding] = (),
        *,
        sample: bool = True,
        use_budget: bool = True,
        wait_for_budget: BudgetWait | None = None,
    ) -> JudgeOutcome:
        """Cache, then sampling (`sample`), then budget (`use_budget`; waits through
        `wait_for_budget` when given, else skips), then the model. Never raises for endpoint trouble."""
        key = self.content_hash(conversation)
        with self._exclusive(key):  # the same content twice at once: the second one gets the cache
            cached = self.cache.get(key)
            if cached is not None:
                session = self._plan(conversation).session if self.config.redaction.restorable else None
                return self._outcome(
                    conversation,
                    key,
                    JudgeStatus.CACHED,
                    "same content judged before",
                    verdict=cached,
                    session=session,
                )
            if sample:
                decision = self.sampling.decide(conversation, rule_findings, key)
                if not decision.judge:
                    return self._outcome(conversation, key, JudgeStatus.SKIPPED_SAMPLING, decision.reason)
            plan = self._plan(conversation)
            reservation: Reservation | None = None
            if use_budget:
                reservation, refusal = self._reserve(plan.estimated_tokens, wait_for_budget)
                if reservation is None:
                    return self._outcome(
                        conversation, key, JudgeStatus.SKIPPED_BUDGET, refusal, chunks=len(plan.chunks)
                    )
            return self._judge(conversation, key, plan, reservation)

    # --- internals ------------------------------------------------------------------------------------
    def _judge(
        self, conversation: Conversation, key: str, plan: _Plan, reservation: Reservation | None
    ) -> JudgeOutcome:
        answers: list[ChunkAnswer | None] = []
        failures: list[str] = []
        requests = input_tokens = output_tokens = 0
        always_visible = plan.view.visible_in_every_chunk
        for chunk, messages in zip(plan.chunks, plan.messages, strict=True):
            visible = frozenset(chunk.indexes) | frozenset(always_visible)
            exchange = self._client.ask(
                messages, functools.partial(parse_answer, visible_steps=visible), format_note=FORMAT_NOTE
            )
            requests += exchange.requests
            input_tokens += exchange.input_tokens
            output_tokens += exchange.output_tokens
            answers.append(exchange.value)
            if exchange.value is None:
                failures.append(f"chunk {chunk.number}/{chunk.total}: {exchange.failure}")
        if reservation is not None:
            reservation.settle(input_tokens + output_tokens)
        verdict = merge_answers(answers)
        if verdict.complete:
            status = JudgeStatus.JUDGED
            self.cache.put(key, verdict)
        else:
            status = JudgeStatus.PARTIAL if verdict.chunks_answered else JudgeStatus.FAILED
        if status is JudgeStatus.FAILED:
            log.warning("judging trace %s failed: %s", conversation.trace_id, "; ".join(failures))
        return self._outcome(
            conversation,
            key,
            status,
            "; ".join([*failures, *verdict.problems]),
            verdict=verdict,  # all unknown when it failed: never read as "no"
            session=plan.session,
            requests=requests,
            chunks=len(plan.chunks),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )

    def _plan(self, conversation: Conversation) -> _Plan:
        context = self.config.context
        session = self._redactor.session()
        view = render_run(
            conversation,
            redact=session.redact,
            limits=context,
            estimator=self._estimator,
            header_token_limit=self._window // 3,
        )
        header = header_text(view)
        step_budget = self._window - self._estimator.tokens(header) - _FRAMING_TOKENS
        chunks = split_steps(
            view.steps,
            budget_tokens=step_budget,
            overlap_steps=context.overlap_steps,
            estimator=self._estimator,
        )
        indexes = [turn.index for turn in conversation.turns] or [0]
        first, last = min(indexes), max(indexes)
        messages = tuple(
            (*self._prefix, {"role": "user", "content": chunk_message(header, chunk, first, last)})
            for chunk in chunks
        )
        estimated = sum(self._request_tokens(chunk_messages) for chunk_messages in messages)
        return _Plan(
            session, view, chunks, messages, estimated + len(chunks) * self.config.request.max_output_tokens
        )

    def _input_window(self) -> int:
        """Tokens a request may spend on the run itself (header and steps), after the fixed prefix,
        the answer's format (the schema, or the note spelling it out), the reserved output and the
        safety margin."""
        context, request = self.config.context, self.config.request
        fixed = self._request_tokens(self._prefix) + MESSAGE_OVERHEAD_TOKENS
        schema = self._estimator.tokens(json.dumps(response_format(ResponseFormat.JSON_SCHEMA.value)))
        note = self._estimator.tokens(FORMAT_NOTE) + 1
        fixed += {ResponseFormat.AUTO: max(schema, note), ResponseFormat.JSON_SCHEMA: schema}.get(
            request.format, note
        )
        window = int(context.max_tokens * (1 - context.safety_margin)) - request.max_output_tokens - fixed
        if window - window // 3 - _FRAMING_TOKENS < _MIN_STEP_TOKENS:
            raise JudgeConfigError(
                f"judge.context.max_tokens={context.max_tokens} leaves no room for a run after the prompt "
                f"(~{fixed} tokens) and the output ({request.max_output_tokens}): raise it, or lower "
                "request.max_output_tokens or the few-shot examples"
            )
        return window

    def _request_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self._estimator.tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    def _reserve(self, tokens: int, wait: BudgetWait | None) -> tuple[Reservation | None, str]:
        budget = self.budget
        if not budget.unlimited and tokens > budget.limit:
            return None, f"the run needs ~{tokens:,} tokens, more than the hourly budget of {budget.limit:,}"
        while True:
            reservation = budget.reserve(tokens)
            if reservation is not None:
                return reservation, ""
            refusal = f"hourly token budget exhausted ({budget.describe()}); the run needs ~{tokens:,}"
            if wait is None:
                return None, refusal
            if not wait(min(max(budget.seconds_until_room(tokens), 0.05), 5.0)):
                return None, f"{refusal}; stopped while waiting for room"

    @contextmanager
    def _exclusive(self, key: str) -> Iterator[None]:
        while True:
            with self._lock:
                running = self._in_progress.get(key)
                if running is None:
                    mine = self._in_progress[key] = threading.Event()
                    break
            running.wait()
        try:
            yield
        finally:
            with self._lock:
                del self._in_progress[key]
            mine.set()

    def _outcome(
        self,
        conversation: Conversation,
        key: str,
        status: JudgeStatus,
        reason: str,
        *,
        verdict: RunVerdict | None = None,
        session: RedactionSession | None = None,
        requests: int = 0,
        chunks: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> JudgeOutcome:
        findings = self._findings(conversation, verdict, session) if verdict is not None else ()
        usage = JudgeUsage(
            time_ns=time.time_ns(),
            content_hash=key,
            trace_id=conversation.trace_id,
            service_name=conversation.service_name,
            run_model=conversation.model,
            judge_model=self.config.model,
            status=status,
            reason=_clip(reason),
            requests=requests,
            chunks=chunks,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.config.pricing.cost(input_tokens, output_tokens),
            unknown_modes=verdict.unknown_codes if verdict is not None else (),
            verdict=verdict.to_json() if verdict is not None and status is JudgeStatus.JUDGED else "",
        )
        return JudgeOutcome(status, findings, usage, verdict)

    def _findings(
        self, conversation: Conversation, verdict: RunVerdict, session: RedactionSession | None
    ) -> tuple[Finding, ...]:
        turns = {turn.index: turn for turn in conversation.turns}
        findings = []
        for mode_verdict in verdict.detected:
            steps = tuple(step for step in mode_verdict.steps if step in turns)
            span_ids = tuple(dict.fromkeys(turns[step].span_id for step in steps if turns[step].span_id))
            explanation = mode_verdict.explanation
            if session is not None:
                explanation = session.restore(explanation)
            findings.append(
                Finding(
                    mode=mode_verdict.mode,
                    evidence=Evidence(steps, span_ids, turns[steps[0]].agent if steps else ""),
                    confidence=self.config.confidence,
                    explanation=explanation or f"the judge found {mode_verdict.mode.name.lower()}",
                    annotator=self.name,
                )
            )
        return tuple(findings)


def _clip(reason: str) -> str:
    return reason if len(reason) <= _MAX_REASON_CHARS else reason[: _MAX_REASON_CHARS - 1] + "…"
