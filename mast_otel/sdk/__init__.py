"""Instrumentation SDK for agent authors: OpenTelemetry spans for agent runs, in the GenAI conventions.

    from mast_otel import sdk

    sdk.configure(service_name="sre-agent")  # OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT or localhost:4317
    with sdk.agent_run("triage", model="gpt-4o", task="Triage INC-42") as run:
        with run.chat(input_messages=[{"role": "user", "content": "..."}]) as call:
            call.set_response(text="...", input_tokens=120, output_tokens=40)
        run.reasoning("The alert says ... so I will query the pods next.")
        with run.tool_call("get_pods", arguments={"namespace": "shop"}) as tool:
            tool.set_result({"pods": []})
        run.set_final_answer("Root cause: ...")
    sdk.record_outcome(run.trace_id, "success", score=0.9)  # also later, from a grader

Spans follow the OpenTelemetry GenAI semantic conventions (`invoke_agent`, `chat`, `execute_tool`,
messages as JSON parts) with `mast.*` attributes where the spec has nothing: step index, reasoning,
message and handoff steps, task outcome. Content is captured by default (the collector needs it to
diagnose a run); `capture_content=False` or `MAST_OTEL_CAPTURE_CONTENT=false` turns it off and
`redact=` rewrites every captured string before it leaves the process. Spans are never dropped
silently: see `BackpressureBatchSpanProcessor`.
"""

from __future__ import annotations

from mast_otel.sdk._config import configure, force_flush, shutdown
from mast_otel.sdk._decorators import agent, tool
from mast_otel.sdk._processor import BackpressureBatchSpanProcessor
from mast_otel.sdk._run import AgentRun, ChatCall, ToolCallSpan, agent_run, current_run, record_outcome

__all__ = [
    "AgentRun",
    "BackpressureBatchSpanProcessor",
    "ChatCall",
    "ToolCallSpan",
    "agent",
    "agent_run",
    "configure",
    "current_run",
    "force_flush",
    "record_outcome",
    "shutdown",
    "tool",
]
