"""Tests of mast_otel.sdk: the spans it emits (names, kinds, parents, attributes, message JSON),
content capture and redaction, errors, step numbering, late outcomes, the backpressure processor,
and one export over real OTLP/gRPC."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mast_otel import __version__, sdk
from mast_otel import semconv as sc
from mast_otel.conversation.model import Outcome

_ENV_VARS = (
    "MAST_OTEL_CAPTURE_CONTENT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_INSECURE",
    "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    yield
    sdk.shutdown()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    sdk.configure(service_name="test-agent", exporter=memory, set_global=False)
    return memory


def finished(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ...]:
    assert sdk.force_flush()
    return exporter.get_finished_spans()


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    named = {span.name: span for span in spans}
    assert len(named) == len(spans), "span names are not unique in this test"
    return named


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def decoded(span: ReadableSpan, key: str) -> object:
    value = attributes(span)[key]
    assert isinstance(value, str)
    return json.loads(value)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def context_of(span: ReadableSpan) -> trace.SpanContext:
    context = span.get_span_context()
    assert context is not None
    return context


def span_id(span: ReadableSpan) -> int:
    return context_of(span).span_id


def text(content: str) -> dict[str, object]:
    return {"type": "text", "content": content}


# --- wire format ------------------------------------------------------------------------------


def test_a_full_run_emits_genai_spans_with_exact_attributes(exporter: InMemorySpanExporter) -> None:
    with sdk.agent_run(
        "triage",
        model="gpt-4o",
        task="Triage incident INC-42",
        task_id="INC-42",
        conversation_id="conv-1",
        provider_name="openai",
        agent_id="agent-7",
        attributes={"deployment": "blue"},
    ) as run:
        with run.chat(
            input_messages=[{"role": "user", "content": "Triage incident INC-42"}],
            system_instructions="You are an SRE.",
        ) as call:
            call.set_response(
                text="Let me look at the pods.",
                reasoning="Pods first.",
                tool_calls=[{"id": "c1", "name": "get_pods", "arguments": {"namespace": "shop"}}],
                finish_reason="tool_call",
                input_tokens=120,
                output_tokens=40,
                response_model="gpt-4o-2024-08-06",
            )
        run.reasoning("The alert says checkout is down, so I will query the pods next.")
        with run.tool_call("get_pods", arguments={"namespace": "shop"}, call_id="c1") as tool:
            tool.set_result({"pods": ["checkout-1"]})
        run.message("Root cause: checkout-1 is crash looping.")
        run.handoff("remediator", reason="needs a restart")
        run.set_outcome(Outcome.SUCCESS, score=0.9)
        run.set_final_answer("Restarted checkout-1.")
        root_trace_id = run.trace_id
        root_span_id = run.span_id

    spans = by_name(finished(exporter))
    assert set(spans) == {
        "invoke_agent triage",
        "chat gpt-4o",
        "reasoning",
        "execute_tool get_pods",
        "message",
        "handoff",
    }
    root = spans["invoke_agent triage"]
    assert trace.format_trace_id(context_of(root).trace_id) == root_trace_id
    assert trace.format_span_id(span_id(root)) == root_span_id
    assert root.parent is None
    assert root.kind is SpanKind.INTERNAL
    assert root.status.status_code is StatusCode.UNSET
    assert attributes(root) == {
        "deployment": "blue",
        sc.MAST_STEP_INDEX: 0,
        sc.GEN_AI_OPERATION_NAME: "invoke_agent",
        sc.GEN_AI_AGENT_NAME: "triage",
        sc.GEN_AI_AGENT_ID: "agent-7",
        sc.GEN_AI_CONVERSATION_ID: "conv-1",
        sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.MAST_TASK_ID: "INC-42",
        sc.GEN_AI_INPUT_MESSAGES: root.attributes[sc.GEN_AI_INPUT_MESSAGES],  # type: ignore[index]
        sc.GEN_AI_OUTPUT_MESSAGES: root.attributes[sc.GEN_AI_OUTPUT_MESSAGES],  # type: ignore[index]
        sc.MAST_TASK_OUTCOME: "success",
        sc.MAST_TASK_SCORE: 0.9,
    }
    assert decoded(root, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [text("Triage incident INC-42")]}
    ]
    assert decoded(root, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {"role": "assistant", "parts": [text("Restarted checkout-1.")], "finish_reason": "stop"}
    ]

    chat = spans["chat gpt-4o"]
    assert chat.kind is SpanKind.CLIENT
    assert parent_id(chat) == span_id(root)
    chat_attributes = attributes(chat)
    for content_key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS):
        chat_attributes.pop(content_key)
    assert chat_attributes == {
        sc.MAST_STEP_INDEX: 1,
        sc.GEN_AI_AGENT_NAME: "triage",
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_CONVERSATION_ID: "conv-1",
        sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024-08-06",
        sc.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_call",),
        sc.GEN_AI_USAGE_INPUT_TOKENS: 120,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: 40,
    }
    assert decoded(chat, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [text("Triage incident INC-42")]}
    ]
    assert decoded(chat, sc.GEN_AI_SYSTEM_INSTRUCTIONS) == [text("You are an SRE.")]
    assert decoded(chat, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Pods first."},
                text("Let me look at the pods."),
                {"type": "tool_call", "id": "c1", "name": "get_pods", "arguments": {"namespace": "shop"}},
            ],
            "finish_reason": "tool_call",
        }
    ]

    reasoning = spans["reasoning"]
    assert reasoning.kind is SpanKind.INTERNAL
    assert parent_id(reasoning) == span_id(root)
    assert attributes(reasoning) == {
        sc.MAST_STEP_INDEX: 2,
        sc.GEN_AI_AGENT_NAME: "triage",
        sc.MAST_STEP_KIND: "reasoning",
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "reasoning",
                            "content": "The alert says checkout is down, so I will query the pods next.",
                        }
                    ],
                    "finish_reason": "stop",
                }
            ],
            separators=(",", ":"),
        ),
    }

    tool_span = spans["execute_tool get_pods"]
    assert tool_span.kind is SpanKind.INTERNAL
    assert parent_id(tool_span) == span_id(root)
    assert tool_span.status.status_code is StatusCode.UNSET
    assert attributes(tool_span) == {
        sc.MAST_STEP_INDEX: 3,
        sc.GEN_AI_AGENT_NAME: "triage",
        sc.GEN_AI_OPERATION_NAME: "execute_tool",
        sc.GEN_AI_TOOL_NAME: "get_pods",
        sc.GEN_AI_TOOL_CALL_ID: "c1",
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: '{"namespace":"shop"}',
        sc.GEN_AI_TOOL_CALL_RESULT: '{"pods":["checkout-1"]}',
    }

    message = spans["message"]
    assert parent_id(message) == span_id(root)
    assert attributes(message)[sc.MAST_STEP_INDEX] == 4
    assert attributes(message)[sc.MAST_STEP_KIND] == "message"
    assert attributes(message)[sc.GEN_AI_AGENT_NAME] == "triage"
    assert decoded(message, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [text("Root cause: checkout-1 is crash looping.")],
            "finish_reason": "stop",
        }
    ]

    handoff = spans["handoff"]
    assert parent_id(handoff) == span_id(root)
    handoff_attributes = attributes(handoff)
    handoff_attributes.pop(sc.GEN_AI_OUTPUT_MESSAGES)
    assert handoff_attributes == {
        sc.MAST_STEP_INDEX: 5,
        sc.GEN_AI_AGENT_NAME: "triage",
        sc.MAST_STEP_KIND: "handoff",
        sc.MAST_HANDOFF_SOURCE: "triage",
        sc.MAST_HANDOFF_TARGET: "remediator",
    }
    assert decoded(handoff, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {"role": "assistant", "parts": [text("needs a restart")], "finish_reason": "stop"}
    ]

    for span in spans.values():
        assert context_of(span).trace_id == context_of(root).trace_id
        scope = span.instrumentation_scope
        assert scope is not None
        assert (scope.name, scope.version, scope.schema_url) == ("mast_otel.sdk", __version__, sc.SCHEMA_URL)
        assert span.resource.attributes["service.name"] == "test-agent"


def test_openai_style_messages_are_converted_to_genai_parts(exporter: InMemorySpanExporter) -> None:
    history: list[dict[str, object]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Why is checkout down?"}]},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Check the pods.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_pods", "arguments": '{"namespace": "shop"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "checkout-1 CrashLoopBackOff"},
        {"role": "assistant", "parts": [text("Already GenAI-shaped.")], "finish_reason": "stop"},
    ]
    with sdk.agent_run("triage", model="m") as run, run.chat(input_messages=history):
        pass

    chat = by_name(finished(exporter))["chat m"]
    assert decoded(chat, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "system", "parts": [text("Be brief.")]},
        {"role": "user", "parts": [text("Why is checkout down?")]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Check the pods."},
                {"type": "tool_call", "id": "call_1", "name": "get_pods", "arguments": {"namespace": "shop"}},
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "call_1", "response": "checkout-1 CrashLoopBackOff"}
            ],
        },
        {"role": "assistant", "parts": [text("Already GenAI-shaped.")], "finish_reason": "stop"},
    ]
    assert sc.GEN_AI_OUTPUT_MESSAGES not in attributes(chat)  # no response was reported


def test_sub_agents_share_trace_conversation_and_step_numbering(exporter: InMemorySpanExporter) -> None:
    with sdk.agent_run("lead", model="gpt-4o", provider_name="openai") as lead:
        with lead.tool_call("delegate") as delegate, lead.sub_agent("worker", task="Restart it") as worker:
            assert sdk.current_run() is worker
            worker.reasoning("restart now")
            with worker.tool_call("restart_pod", arguments={"pod": "checkout-1"}):
                pass
        assert delegate.name == "delegate"
        assert sdk.current_run() is lead
        lead.message("done")
    assert sdk.current_run() is None

    spans = by_name(finished(exporter))
    lead_span, worker_span = spans["invoke_agent lead"], spans["invoke_agent worker"]
    assert parent_id(worker_span) == span_id(spans["execute_tool delegate"])  # child of the current span
    assert parent_id(spans["reasoning"]) == span_id(worker_span)
    assert parent_id(spans["execute_tool restart_pod"]) == span_id(worker_span)
    assert parent_id(spans["message"]) == span_id(lead_span)
    assert (
        attributes(worker_span)[sc.GEN_AI_CONVERSATION_ID] == attributes(lead_span)[sc.GEN_AI_CONVERSATION_ID]
    )
    assert attributes(worker_span)[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o"  # inherited
    assert attributes(spans["execute_tool restart_pod"])[sc.GEN_AI_AGENT_NAME] == "worker"
    assert {name: attributes(span)[sc.MAST_STEP_INDEX] for name, span in spans.items()} == {
        "invoke_agent lead": 0,
        "execute_tool delegate": 1,
        "invoke_agent worker": 2,
        "reasoning": 3,
        "execute_tool restart_pod": 4,
        "message": 5,
    }


def test_an_agent_run_started_inside_a_run_joins_its_trace_like_a_sub_agent(
    exporter: InMemorySpanExporter,
) -> None:
    with sdk.agent_run("outer", conversation_id="conv-9") as outer:
        outer.reasoning("delegate")
        with sdk.agent_run("inner") as inner:
            inner.message("hi")

    spans = by_name(finished(exporter))
    assert parent_id(spans["invoke_agent inner"]) == span_id(spans["invoke_agent outer"])
    assert attributes(spans["invoke_agent inner"])[sc.GEN_AI_CONVERSATION_ID] == "conv-9"
    assert [
        attributes(spans[name])[sc.MAST_STEP_INDEX] for name in ("reasoning", "invoke_agent inner", "message")
    ] == [
        1,
        2,
        3,
    ]


def test_step_indexes_stay_unique_under_threads_and_tasks_keep_their_own_run(
    exporter: InMemorySpanExporter,
) -> None:
    with sdk.agent_run("parallel") as run:

        def call_tools(worker: int) -> None:
            for call in range(50):
                with run.tool_call(f"tool-{worker}-{call}"):
                    pass

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(call_tools, range(8)))

    steps = sorted(int(attributes(span)[sc.MAST_STEP_INDEX]) for span in finished(exporter))  # type: ignore[call-overload]
    assert steps == list(range(401))

    async def agent(name: str) -> str | None:
        with sdk.agent_run(name) as own:
            await asyncio.sleep(0)
            current = sdk.current_run()
            return current.agent_name if current is own and current is not None else None

    async def both() -> list[str | None]:
        return list(await asyncio.gather(agent("a"), agent("b")))

    assert asyncio.run(both()) == ["a", "b"]


# --- content capture and redaction ------------------------------------------------------------


def _run_with_all_content_kinds() -> None:
    with sdk.agent_run("triage", model="m", task="task SECRET-1") as run:
        with run.chat(
            input_messages=[{"role": "user", "content": "hi SECRET-2"}], system_instructions="SECRET-3"
        ) as call:
            call.set_response(
                text="SECRET-4",
                reasoning="SECRET-5",
                tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": "SECRET-6"}}],
                input_tokens=7,
                output_tokens=8,
            )
        run.reasoning("SECRET-7")
        with run.tool_call("lookup", arguments={"q": "SECRET-8"}, call_id="c1") as tool:
            tool.set_result({"answer": "SECRET-9"})
        run.message("SECRET-10")
        run.handoff("other", reason="SECRET-11")
        run.set_final_answer("SECRET-12")
        with pytest.raises(RuntimeError), run.tool_call("fails"):
            raise RuntimeError("boom SECRET-13")


def _all_strings(spans: Sequence[ReadableSpan]) -> str:
    values: list[str] = []
    for span in spans:
        values.extend(str(value) for value in (span.attributes or {}).values())
        values.extend(str(value) for event in span.events for value in (event.attributes or {}).values())
        values.append(span.status.description or "")
    return "\n".join(values)


def test_content_capture_off_keeps_structure_but_no_content(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = InMemorySpanExporter()
    sdk.configure(exporter=memory, capture_content=False, set_global=False)
    _run_with_all_content_kinds()

    spans = by_name(finished(memory))
    content_keys = {
        sc.GEN_AI_INPUT_MESSAGES,
        sc.GEN_AI_OUTPUT_MESSAGES,
        sc.GEN_AI_SYSTEM_INSTRUCTIONS,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.GEN_AI_TOOL_CALL_RESULT,
    }
    for span in spans.values():
        assert content_keys.isdisjoint(attributes(span)), span.name
    everything = _all_strings(list(spans.values()))
    for number in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12):
        assert not re.search(rf"SECRET-{number}(?!\d)", everything), number
    chat = attributes(spans["chat m"])
    assert (chat[sc.GEN_AI_USAGE_INPUT_TOKENS], chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (7, 8)
    tool = attributes(spans["execute_tool lookup"])
    assert (tool[sc.GEN_AI_TOOL_NAME], tool[sc.GEN_AI_TOOL_CALL_ID]) == ("lookup", "c1")
    assert attributes(spans["handoff"])[sc.MAST_HANDOFF_TARGET] == "other"
    assert attributes(spans["execute_tool fails"])[sc.ERROR_TYPE] == "RuntimeError"


def test_content_capture_can_be_turned_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAST_OTEL_CAPTURE_CONTENT", "false")
    memory = InMemorySpanExporter()
    sdk.configure(exporter=memory, set_global=False)
    with sdk.agent_run("a", task="the task") as run:
        run.reasoning("thinking")

    spans = by_name(finished(memory))
    assert sc.GEN_AI_INPUT_MESSAGES not in attributes(spans["invoke_agent a"])
    assert sc.GEN_AI_OUTPUT_MESSAGES not in attributes(spans["reasoning"])
    assert attributes(spans["reasoning"])[sc.MAST_STEP_KIND] == "reasoning"


def test_redact_hook_rewrites_every_content_string() -> None:
    seen: list[str] = []

    def redact(value: str) -> str:
        seen.append(value)
        return value.replace("SECRET", "[redacted]")

    memory = InMemorySpanExporter()
    sdk.configure(exporter=memory, redact=redact, set_global=False)
    _run_with_all_content_kinds()

    spans = by_name(finished(memory))
    everything = _all_strings(list(spans.values()))
    assert "SECRET" not in everything
    for number in range(1, 14):
        assert re.search(rf"\[redacted\]-{number}(?!\d)", everything), number
    assert decoded(spans["execute_tool lookup"], sc.GEN_AI_TOOL_CALL_ARGUMENTS) == {"q": "[redacted]-8"}
    assert decoded(spans["execute_tool lookup"], sc.GEN_AI_TOOL_CALL_RESULT) == {"answer": "[redacted]-9"}
    assert "q" not in seen  # object keys are structure, not content


# --- errors -----------------------------------------------------------------------------------


class QuotaExceeded(Exception):
    pass


def test_exceptions_mark_tool_chat_and_run_failed_and_propagate(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(QuotaExceeded), sdk.agent_run("triage", model="m") as run:
        with pytest.raises(TimeoutError), run.tool_call("get_logs"):
            raise TimeoutError("timed out after 30s")
        with run.chat():
            raise QuotaExceeded("429")

    spans = by_name(finished(exporter))
    for name, error_type, message in (
        ("execute_tool get_logs", "TimeoutError", "timed out after 30s"),
        ("chat m", "QuotaExceeded", "429"),
        ("invoke_agent triage", "QuotaExceeded", "429"),
    ):
        span = spans[name]
        assert attributes(span)[sc.ERROR_TYPE] == error_type, name
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == f"{error_type}: {message}"
        [event] = span.events
        assert event.name == "exception"
        assert (event.attributes or {})["exception.message"] == message


def test_set_error_marks_a_tool_call_failed_without_raising(exporter: InMemorySpanExporter) -> None:
    with sdk.agent_run("triage") as run, run.tool_call("restart_pod") as tool:
        tool.set_error("PermissionDenied", "forbidden")

    span = by_name(finished(exporter))["execute_tool restart_pod"]
    assert attributes(span)[sc.ERROR_TYPE] == "PermissionDenied"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "PermissionDenied: forbidden"


# --- outcomes ---------------------------------------------------------------------------------


def test_record_outcome_later_lands_in_the_runs_trace(exporter: InMemorySpanExporter) -> None:
    with sdk.agent_run("triage") as run:
        pass
    trace_id, root_span_id = run.trace_id, run.span_id

    # A grader elsewhere, with no context of the run: a fresh thread has none.
    grader = threading.Thread(target=sdk.record_outcome, args=(trace_id, "failure", 0.25))
    grader.start()
    grader.join()
    sdk.record_outcome(trace_id.upper(), Outcome.SUCCESS, root_span_id=root_span_id)

    outcomes = [span for span in finished(exporter) if span.name == "mast.task.outcome"]
    assert len(outcomes) == 2
    by_outcome = {attributes(span)[sc.MAST_TASK_OUTCOME]: span for span in outcomes}
    for span in outcomes:
        assert trace.format_trace_id(context_of(span).trace_id) == trace_id
        assert span.parent is not None and span.parent.is_remote
        assert attributes(span)[sc.MAST_STEP_KIND] == "outcome"
    assert attributes(by_outcome["failure"])[sc.MAST_TASK_SCORE] == 0.25
    assert trace.format_span_id(parent_id(by_outcome["success"]) or 0) == root_span_id
    assert sc.MAST_TASK_SCORE not in attributes(by_outcome["success"])


def test_set_outcome_after_the_run_ended_emits_an_outcome_span(exporter: InMemorySpanExporter) -> None:
    with sdk.agent_run("triage") as run:
        pass
    run.set_outcome("passed", 1)

    spans = by_name(finished(exporter))
    outcome = spans["mast.task.outcome"]
    assert parent_id(outcome) == span_id(spans["invoke_agent triage"])
    assert attributes(outcome)[sc.MAST_TASK_OUTCOME] == "success"
    assert attributes(outcome)[sc.MAST_TASK_SCORE] == 1.0


@pytest.mark.parametrize(
    ("trace_id", "outcome", "score", "message"),
    [
        ("abc", "success", None, "32 hexadecimal"),
        ("g" * 32, "success", None, "32 hexadecimal"),
        ("0" * 32, "success", None, "all zeros"),
        ("1" * 32, "sucess", None, "not recognised"),
        ("1" * 32, "success", 1.5, r"\[0, 1\]"),
        ("1" * 32, "success", -0.1, r"\[0, 1\]"),
        ("1" * 32, "success", float("nan"), r"\[0, 1\]"),
    ],
)
def test_record_outcome_rejects_bad_input_clearly(
    exporter: InMemorySpanExporter, trace_id: str, outcome: str, score: float | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        sdk.record_outcome(trace_id, outcome, score)
    with pytest.raises(ValueError, match="root_span_id"):
        sdk.record_outcome("1" * 32, "success", root_span_id="0" * 16)
    assert finished(exporter) == ()


# --- decorators -------------------------------------------------------------------------------


@sdk.tool("get_pods")
def get_pods(namespace: str, limit: int = 10) -> dict[str, list[str]]:
    return {"pods": [f"{namespace}-1"][:limit]}


@sdk.tool()
async def read_logs(pod: str) -> str:
    await asyncio.sleep(0)
    return f"{pod}: OOMKilled"


@sdk.agent("triage", model="gpt-4o", task_param="task")
def triage(task: str) -> str:
    get_pods("shop")
    return "checkout-1 is fine"


@sdk.agent()
async def investigator(pod: str) -> str:
    return await read_logs(pod)


def test_decorators_trace_tools_and_agents(exporter: InMemorySpanExporter) -> None:
    assert triage("Triage INC-42") == "checkout-1 is fine"
    assert asyncio.run(investigator("checkout-1")) == "checkout-1: OOMKilled"

    spans = finished(exporter)
    named = {span.name: span for span in spans}
    assert len(named) == 4
    agent_span, tool_span = named["invoke_agent triage"], named["execute_tool get_pods"]
    assert parent_id(tool_span) == span_id(agent_span)
    assert decoded(tool_span, sc.GEN_AI_TOOL_CALL_ARGUMENTS) == {"namespace": "shop", "limit": 10}
    assert decoded(tool_span, sc.GEN_AI_TOOL_CALL_RESULT) == {"pods": ["shop-1"]}
    assert decoded(agent_span, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [text("Triage INC-42")]}
    ]
    assert decoded(agent_span, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {"role": "assistant", "parts": [text("checkout-1 is fine")], "finish_reason": "stop"}
    ]
    async_tool = named["execute_tool read_logs"]
    assert parent_id(async_tool) == span_id(named["invoke_agent investigator"])
    assert attributes(async_tool)[sc.GEN_AI_TOOL_CALL_RESULT] == "checkout-1: OOMKilled"
    assert attributes(async_tool)[sc.MAST_STEP_INDEX] == 1


def test_a_decorated_tool_outside_a_run_still_emits_a_span(exporter: InMemorySpanExporter) -> None:
    assert get_pods("ops", limit=0) == {"pods": []}

    [span] = finished(exporter)
    assert span.name == "execute_tool get_pods"
    assert span.parent is None
    assert sc.MAST_STEP_INDEX not in attributes(span)
    assert decoded(span, sc.GEN_AI_TOOL_CALL_ARGUMENTS) == {"namespace": "ops", "limit": 0}


# --- configuration ----------------------------------------------------------------------------


def test_without_configure_the_api_works_on_the_global_provider() -> None:
    sdk.shutdown()  # nothing configured: the global (here: no-op proxy) provider is used
    with sdk.agent_run("quiet", task="t") as run, run.chat() as call:
        call.set_response(text="x")
        assert sdk.current_run() is run
    run.set_outcome("failure")
    assert get_pods("ns") == {"pods": ["ns-1"]}
    assert sdk.force_flush()


def test_configure_without_set_global_leaves_the_global_provider_alone() -> None:
    memory = InMemorySpanExporter()
    provider = sdk.configure(exporter=memory, set_global=False)
    assert isinstance(provider, TracerProvider)
    assert trace.get_tracer_provider() is not provider
    later = InMemorySpanExporter()
    sdk.configure(exporter=later, set_global=False)  # the module API follows the last configure()
    with sdk.agent_run("a"):
        pass
    assert [span.name for span in finished(later)] == ["invoke_agent a"]
    assert memory.get_finished_spans() == ()
    provider.shutdown()


def test_service_name_comes_from_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def service_name(**configure_arguments: object) -> object:
        provider = sdk.configure(exporter=InMemorySpanExporter(), set_global=False, **configure_arguments)  # type: ignore[arg-type]
        provider.shutdown()
        return provider.resource.attributes["service.name"]

    assert service_name() == "mast-otel-agent"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,team=sre")
    assert service_name() == "from-attributes"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert service_name() == "from-env"
    assert service_name(service_name="explicit") == "explicit"
    provider = sdk.configure(
        exporter=InMemorySpanExporter(), set_global=False, resource_attributes={"x": "y"}
    )
    provider.shutdown()
    assert provider.resource.attributes["team"] == "sre"
    assert provider.resource.attributes["x"] == "y"


# --- the backpressure batch processor ----------------------------------------------------------


class SlowExporter(InMemorySpanExporter):
    """An exporter that takes a while per batch, like a remote collector."""

    def __init__(self, seconds_per_batch: float) -> None:
        super().__init__()
        self._seconds_per_batch = seconds_per_batch

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(self._seconds_per_batch)
        return super().export(spans)


class GatedExporter(InMemorySpanExporter):
    """An exporter that holds every export until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.wait(timeout=30)  # a bound against a hung test, not a timed assertion
        return super().export(spans)


class FailingExporter(InMemorySpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


class QueueSettings(TypedDict):
    max_queue_size: int
    max_export_batch_size: int
    schedule_delay_millis: float


TINY_QUEUE = QueueSettings(max_queue_size=100, max_export_batch_size=100, schedule_delay_millis=600_000)


def _end_spans(processor: BatchSpanProcessor, count: int) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("load")
    for _ in range(count):
        tracer.start_span("step").end()
    return provider


def test_no_span_is_lost_from_a_tight_loop_into_a_slow_exporter() -> None:
    slow = SlowExporter(seconds_per_batch=0.02)
    provider = _end_spans(sdk.BackpressureBatchSpanProcessor(slow), 20_000)
    provider.shutdown()
    assert len(slow.get_finished_spans()) == 20_000


def test_backpressure_exports_on_the_producing_thread_instead_of_dropping(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # With the batch size equal to the queue size and the schedule far away, the worker thread of our
    # processor never wakes: every export before the final flush is backpressure on this thread.
    ours = InMemorySpanExporter()
    with caplog.at_level(logging.WARNING, logger="mast_otel.sdk._processor"):
        provider = _end_spans(sdk.BackpressureBatchSpanProcessor(ours, **TINY_QUEUE), 1000)
        exported_before_flush = len(ours.get_finished_spans())
        provider.shutdown()
    assert 1000 - exported_before_flush < 100  # never more waiting than the queue holds
    assert len(ours.get_finished_spans()) == 1000
    assert "instead of dropping spans" in caplog.text

    # The stock processor with the same settings, its exporter held until the loop is over, drops.
    stock = GatedExporter()
    stock_provider = _end_spans(BatchSpanProcessor(stock, **TINY_QUEUE), 1000)
    stock.gate.set()
    stock_provider.shutdown()
    assert len(stock.get_finished_spans()) <= 200  # the queue plus the one batch held at the gate


def test_a_failing_exporter_does_not_stall_the_application(caplog: pytest.LogCaptureFixture) -> None:
    failing = FailingExporter()
    processor = sdk.BackpressureBatchSpanProcessor(failing, **TINY_QUEUE)
    with caplog.at_level(logging.WARNING, logger="mast_otel.sdk._processor"):
        _end_spans(processor, 1000).shutdown()
    assert "exporter is failing" in caplog.text


def test_bsp_environment_variables_override_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    memory = InMemorySpanExporter()
    provider = _end_spans(sdk.BackpressureBatchSpanProcessor(memory), 1000)
    exported_before_flush = len(memory.get_finished_spans())
    provider.shutdown()
    assert 1000 - exported_before_flush < 100  # the high-water mark follows the configured queue of 100
    assert len(memory.get_finished_spans()) == 1000


# --- real OTLP/gRPC ---------------------------------------------------------------------------


class RecordingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def test_spans_arrive_over_real_otlp_grpc() -> None:
    service = RecordingTraceService()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        sdk.configure("grpc-agent", f"http://127.0.0.1:{port}", set_global=False)
        with sdk.agent_run("triage", task="over the wire") as run, run.tool_call("get_pods") as tool:
            tool.set_result("ok")
        assert sdk.force_flush()
    finally:
        sdk.shutdown()
        server.stop(grace=None)

    resource_spans = [resource for request in service.requests for resource in request.resource_spans]
    service_names = {
        attribute.value.string_value
        for resource in resource_spans
        for attribute in resource.resource.attributes
        if attribute.key == "service.name"
    }
    assert service_names == {"grpc-agent"}
    received = {
        span.name: span
        for resource in resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    assert set(received) == {"invoke_agent triage", "execute_tool get_pods"}
    assert received["execute_tool get_pods"].parent_span_id == received["invoke_agent triage"].span_id
    assert received["invoke_agent triage"].trace_id.hex() == run.trace_id
