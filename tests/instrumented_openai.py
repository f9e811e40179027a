"""Run a two-call tool-using chat through the real `openai` client under one real instrumentation.

`python tests/instrumented_openai.py SOURCE ENDPOINT` instruments `openai` with SOURCE's instrumentor
(openinference, traceloop or openai-v2), talks to a scripted `ChatStub` on loopback (the first
answer requests `get_pods`, the second answers in text), exports the spans over OTLP/gRPC to
ENDPOINT with the SDK's exporter and prints the trace id. Log records the instrumentation emits
(openai-v2's GenAI message events, by default) go to ENDPOINT too, with the SDK's log exporter.
A process of its own per source: the instrumentors patch `openai` globally and read their settings
from the environment once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai
from llm_stub import ChatStub, Reply
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

SYSTEM = "You are an SRE agent."
TASK = "Why is checkout failing?"
TOOL_RESULT = "checkout: CrashLoopBackOff"
ANSWER = "Checkout is crash-looping after the 14:02 deploy."
MODEL = "stub-model"
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_pods", "arguments": '{"ns": "shop"}'},
}
FIRST_USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


def tool_call_reply() -> Reply:
    """A chat completion that requests one tool call (the stub itself only answers in text)."""
    message = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL}
    return Reply(raw_body=json.dumps({**body, "choices": [choice], "usage": FIRST_USAGE}).encode())


def instrumentor(source: str) -> Any:
    if source == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        return OpenInference()
    if source == "traceloop":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Traceloop

        return Traceloop()
    if source == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIv2

        return OpenAIv2()
    raise SystemExit(f"unknown source {source!r}")


def main(source: str, endpoint: str) -> None:
    resource = Resource({"service.name": f"{source}-agent"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True)))
    instrumented = instrumentor(source)
    instrumented.instrument(tracer_provider=provider, logger_provider=logs)
    tracer = provider.get_tracer("instrumented-openai-test")
    with ChatStub() as stub, tracer.start_as_current_span("triage") as root:
        stub.script(tool_call_reply(), Reply(ANSWER))
        client = openai.OpenAI(base_url=stub.base_url, api_key="test-key", max_retries=0)
        tools = [{"type": "function", "function": {"name": "get_pods", "parameters": {"type": "object"}}}]
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        call = first.choices[0].message
        assert call.tool_calls, "the scripted tool call did not come back"
        messages.append(call.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": TOOL_RESULT})
        client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        trace_id = format(root.get_span_context().trace_id, "032x")
    instrumented.uninstrument()
    provider.shutdown()
    logs.shutdown()
    print(trace_id)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
