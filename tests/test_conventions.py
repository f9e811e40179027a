"""Other instrumentations' spans -> the stored conversation, turn by turn.

Each real instrumentation package (OpenInference, OpenLLMetry, OpenTelemetry's openai-v2) wraps the
real `openai` client talking to a scripted stub, in a process of its own (`instrumented_openai.py`),
and exports over OTLP/gRPC to a real in-process collector; the test reads back what was stored.
The older forms no current package emits (OpenLLMetry's numbered attributes, GenAI span events) are
built span by span from their documented shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import instrumented_openai as agent
from spanfactory import messages, span

from mast_otel.collector.service import Collector
from mast_otel.conversation.conventions import (
    GenAiMessagesNormalizer,
    ordered_normalizers,
)
from mast_otel.conversation.genai_events import GenAiEventsNormalizer
from mast_otel.conversation.model import TurnKind
from mast_otel.conversation.normalize import GenAiNormalizer, Operation, view_span
from mast_otel.conversation.openinference import OpenInferenceNormalizer
from mast_otel.conversation.rebuild import rebuild
from mast_otel.conversation.traceloop import TraceloopNormalizer
from mast_otel.spans import SpanEvent

SCRIPT = Path(__file__).with_name("instrumented_openai.py")
ARGUMENTS = {"ns": "shop"}
SECOND_PROMPT_TOKENS = len(agent.SYSTEM + agent.TASK + agent.TOOL_RESULT) // 4  # the stub's accounting
SECOND_COMPLETION_TOKENS = len(agent.ANSWER) // 4


@dataclass(frozen=True)
class StoredTurn:
    kind: str
    agent: str
    content: str
    tool_name: str
    tool_arguments: str
    tool_result: str | None
    model: str


def run_instrumented(collector: Collector, source: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), source, collector.grpc_endpoint],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    assert collector.wait_idle(30)
    return result.stdout.strip().splitlines()[-1]


def stored(collector: Collector, trace_id: str) -> tuple[dict[str, Any], list[StoredTurn]]:
    rows = collector.store.query(
        "SELECT RootAgent, Model, Task, InputTokens, OutputTokens, ToolCallCount,"
        " Turns.Kind, Turns.Agent, Turns.Content, Turns.ToolName, Turns.ToolArguments,"
        " Turns.ToolResult, Turns.Model FROM mast_conversations FINAL WHERE TraceId = {t:String}",
        {"t": trace_id},
    ).rows
    [(root, model, task, tokens_in, tokens_out, tool_calls, *turns)] = rows
    summary = {
        "root": root,
        "model": model,
        "task": task,
        "tokens": (tokens_in, tokens_out),
        "tool_calls": tool_calls,
    }
    return summary, [StoredTurn(*columns) for columns in zip(*turns, strict=True)]


def assert_tool_using_chat(collector: Collector, trace_id: str, service: str) -> None:
    """What every source must yield for `instrumented_openai.py`'s conversation."""
    summary, turns = stored(collector, trace_id)
    assert summary == {
        "root": service,
        "model": agent.MODEL,
        "task": agent.TASK,
        "tokens": (20 + SECOND_PROMPT_TOKENS, 5 + SECOND_COMPLETION_TOKENS),
        "tool_calls": 2,
    }
    assert [(t.kind, t.agent) for t in turns] == [
        ("system", "system"),
        ("user", "user"),
        ("tool_call", service),  # requested by the first call
        ("tool_call", service),  # its result, sent back in the second call
        ("agent_message", service),
    ]
    system, task, request, result, answer = turns
    assert (system.content, task.content, answer.content) == (agent.SYSTEM, agent.TASK, agent.ANSWER)
    assert request.tool_name == "get_pods" and json.loads(request.tool_arguments) == ARGUMENTS
    assert request.model == agent.MODEL and answer.model == agent.MODEL
    assert result.tool_result == agent.TOOL_RESULT


def test_openinference_instrumentation(collector: Collector) -> None:
    trace_id = run_instrumented(collector, "openinference")
    assert_tool_using_chat(collector, trace_id, "openinference-agent")


def test_openllmetry_instrumentation(collector: Collector) -> None:
    trace_id = run_instrumented(collector, "traceloop", TRACELOOP_TRACE_CONTENT="true")
    assert_tool_using_chat(collector, trace_id, "traceloop-agent")


def test_openai_v2_instrumentation_with_latest_conventions(collector: Collector) -> None:
    trace_id = run_instrumented(
        collector,
        "openai-v2",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    )
    assert_tool_using_chat(collector, trace_id, "openai-v2-agent")


def test_openai_v2_default_settings_messages_as_log_records(collector: Collector) -> None:
    """By default openai-v2 sends the messages as GenAI event log records, not on its spans: the
    collector's logs endpoint puts them back on the model-call spans, so the run is the same."""
    trace_id = run_instrumented(
        collector, "openai-v2", OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"
    )
    assert_tool_using_chat(collector, trace_id, "openai-v2-agent")
    carriers = collector.store.query(
        "SELECT count(), sum(length(Events.Name)) FROM otel_traces"
        " WHERE TraceId = {t:String} AND SpanName = 'gen_ai.events'",
        {"t": trace_id},
    ).rows
    # Two calls: 2 and 4 input messages and a choice each, one record per export (the SDK's simple
    # processor), so one carrier span per record.
    assert [tuple(row) for row in carriers] == [(8, 8)]


# --- forms built by hand ------------------------------------------------------------------------

TRACE = "ab" * 16


def test_openllmetry_numbered_attributes() -> None:
    workflow = span(
        TRACE,
        "triage.workflow",
        0,
        100,
        traceloop__span__kind="workflow",
        traceloop__entity__name="triage",
        traceloop__entity__input=json.dumps({"args": ["Why is checkout failing?"], "kwargs": {}}),
        traceloop__entity__output=json.dumps("Checkout is crash-looping."),
    )
    call = span(
        TRACE,
        "openai.chat",
        10,
        20,
        parent=workflow.span_id,
        llm__request__type="chat",
        gen_ai__request__model="gpt-4o",
        gen_ai__response__model="gpt-4o-2024-08-06",
        gen_ai__prompt__0__role="system",
        gen_ai__prompt__0__content="You are an SRE agent.",
        gen_ai__prompt__1__role="user",
        gen_ai__prompt__1__content="Why is checkout failing?",
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__finish_reason="tool_calls",
        gen_ai__completion__0__tool_calls__0__id="call_1",
        gen_ai__completion__0__tool_calls__0__name="get_pods",
        gen_ai__completion__0__tool_calls__0__arguments='{"ns": "shop"}',
        gen_ai__usage__prompt_tokens=30,
        gen_ai__usage__completion_tokens=7,
    )
    tool = span(
        TRACE,
        "get_pods.tool",
        30,
        40,
        parent=workflow.span_id,
        traceloop__span__kind="tool",
        traceloop__entity__name="get_pods",
        traceloop__entity__input=json.dumps({"args": [], "kwargs": {"ns": "shop"}}),
        traceloop__entity__output=json.dumps({"checkout": "CrashLoopBackOff"}),
    )
    conversation = rebuild([workflow, call, tool])
    assert [(t.kind, t.agent) for t in conversation.turns] == [
        (TurnKind.USER, "user"),
        (TurnKind.SYSTEM, "system"),
        (TurnKind.TOOL_CALL, "triage"),  # requested (no call id ties it to the tool span)
        (TurnKind.TOOL_CALL, "triage"),  # executed
        (TurnKind.AGENT_MESSAGE, "triage"),
    ]
    requested, executed = conversation.turns[2].tool, conversation.turns[3].tool
    assert requested is not None and executed is not None
    assert (requested.name, json.loads(requested.arguments)) == ("get_pods", ARGUMENTS)
    assert executed.name == "get_pods" and json.loads(executed.result or "") == {
        "checkout": "CrashLoopBackOff"
    }
    assert conversation.turns[4].content == "Checkout is crash-looping."
    assert (conversation.root_agent, conversation.task) == ("triage", "Why is checkout failing?")
    assert conversation.models == ("gpt-4o-2024-08-06",)
    assert (conversation.input_tokens, conversation.output_tokens) == (30, 7)
    assert conversation.turns[2].finish_reason == "tool_calls"


def test_genai_span_events_both_body_encodings() -> None:
    call = span(
        TRACE,
        "chat gpt-4o",
        0,
        10,
        gen_ai__operation__name="chat",
        gen_ai__request__model="gpt-4o",
        gen_ai__usage__input_tokens=12,
        gen_ai__usage__output_tokens=4,
    )
    events = (
        SpanEvent("gen_ai.system.message", 1, {"gen_ai.system": "openai", "content": "Be brief."}),
        SpanEvent("gen_ai.user.message", 1, {"gen_ai.event.content": json.dumps({"content": "Status?"})}),
        SpanEvent(
            "gen_ai.assistant.message",
            1,
            {
                "tool_calls": json.dumps(
                    [{"id": "c1", "function": {"name": "get_pods", "arguments": ARGUMENTS}}]
                )
            },
        ),
        SpanEvent("gen_ai.tool.message", 1, {"id": "c1", "content": "all green"}),
        SpanEvent(
            "gen_ai.choice",
            9,
            {
                "gen_ai.event.content": json.dumps(
                    {"index": 0, "finish_reason": "stop", "message": {"content": "OK."}}
                )
            },
        ),
    )
    conversation = rebuild([replace(call, events=events)])
    assert [(t.kind, t.content) for t in conversation.turns] == [
        (TurnKind.SYSTEM, "Be brief."),
        (TurnKind.USER, "Status?"),
        (TurnKind.TOOL_CALL, "tool result"),
        (TurnKind.AGENT_MESSAGE, "OK."),
    ]
    tool = conversation.turns[2].tool
    assert tool is not None and (tool.call_id, tool.result) == ("c1", "all green")
    assert conversation.turns[3].finish_reason == "stop" and conversation.models == ("gpt-4o",)
    assert (conversation.input_tokens, conversation.output_tokens) == (12, 4)


def test_openinference_agent_tool_and_chain_spans() -> None:
    chain = span(
        TRACE,
        "RunnableSequence",
        0,
        100,
        openinference__span__kind="CHAIN",
        session__id="s-1",
        input__value=json.dumps({"input": "Find the bug."}),
        output__value="Found it.",
    )
    inner = span(
        TRACE, "parse", 1, 2, parent=chain.span_id, openinference__span__kind="CHAIN", input__value="x"
    )
    tool = span(
        TRACE,
        "search_logs",
        10,
        20,
        parent=chain.span_id,
        openinference__span__kind="TOOL",
        tool__name="search_logs",
        input__value='{"q": "panic"}',
        output__value="panic at main.go:12",
    )
    views = {v.span.name: v for v in (view_span(s) for s in (chain, inner, tool))}
    assert views["RunnableSequence"].operation is Operation.AGENT
    assert views["parse"].operation is Operation.OTHER
    conversation = rebuild([chain, inner, tool])
    assert [(t.kind, t.content) for t in conversation.turns] == [
        (TurnKind.USER, "Find the bug."),
        (TurnKind.TOOL_CALL, 'search_logs({"q": "panic"})'),
        (TurnKind.AGENT_MESSAGE, "Found it."),
    ]
    assert conversation.conversation_id == "s-1"
    assert (
        conversation.turns[1].tool is not None and conversation.turns[1].tool.result == "panic at main.go:12"
    )


def test_the_order_decides_when_a_span_carries_several_conventions() -> None:
    both = span(
        TRACE,
        "chat",
        0,
        1,
        gen_ai__operation__name="chat",
        openinference__span__kind="LLM",
        gen_ai__prompt__0__content="numbered",
        gen_ai__input__messages=messages(("user", "json form")),
    )
    chosen = [n for n in ordered_normalizers() if n.accepts(both)]
    assert [type(n) for n in chosen] == [
        GenAiMessagesNormalizer,
        OpenInferenceNormalizer,
        TraceloopNormalizer,
        GenAiNormalizer,
    ]
    assert [m.text for m in view_span(both).input_messages] == ["json form"]
    numbered = span(
        TRACE, "chat", 0, 1, gen_ai__operation__name="chat", gen_ai__prompt__0__content="numbered"
    )
    assert [m.text for m in view_span(numbered).input_messages] == ["numbered"]
    assert not GenAiEventsNormalizer().accepts(numbered)
