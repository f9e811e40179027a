"""Names on the wire: OpenTelemetry GenAI semantic conventions plus the `mast.*` extensions.

The GenAI names come from `opentelemetry-semantic-conventions` (the library is the source of truth);
we implement GenAI semantic conventions v1.41.0 and re-export the names here so the SDK, the
normalizers and the tests all spell them the same way. The `mast.*` names exist only where the
specification has nothing: task outcome and score, step index, handoff source and target.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv.attributes import error_attributes as _error

SEMCONV_VERSION: Final = "1.41.0"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# --- GenAI attributes (spec) ------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = _gen_ai.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME: Final = _gen_ai.GEN_AI_PROVIDER_NAME
GEN_AI_REQUEST_MODEL: Final = _gen_ai.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL: Final = _gen_ai.GEN_AI_RESPONSE_MODEL
GEN_AI_AGENT_NAME: Final = _gen_ai.GEN_AI_AGENT_NAME
GEN_AI_AGENT_ID: Final = _gen_ai.GEN_AI_AGENT_ID
GEN_AI_CONVERSATION_ID: Final = _gen_ai.GEN_AI_CONVERSATION_ID
GEN_AI_TOOL_NAME: Final = _gen_ai.GEN_AI_TOOL_NAME
GEN_AI_TOOL_TYPE: Final = _gen_ai.GEN_AI_TOOL_TYPE
GEN_AI_TOOL_CALL_ID: Final = _gen_ai.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_CALL_ARGUMENTS: Final = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_CALL_RESULT: Final = _gen_ai.GEN_AI_TOOL_CALL_RESULT
GEN_AI_USAGE_INPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_RESPONSE_FINISH_REASONS: Final = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_INPUT_MESSAGES: Final = _gen_ai.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES: Final = _gen_ai.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS: Final = _gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_EVALUATION_NAME: Final = _gen_ai.GEN_AI_EVALUATION_NAME
GEN_AI_EVALUATION_SCORE_LABEL: Final = _gen_ai.GEN_AI_EVALUATION_SCORE_LABEL
GEN_AI_EVALUATION_SCORE_VALUE: Final = _gen_ai.GEN_AI_EVALUATION_SCORE_VALUE
GEN_AI_EVALUATION_EXPLANATION: Final = _gen_ai.GEN_AI_EVALUATION_EXPLANATION
ERROR_TYPE: Final = _error.ERROR_TYPE

# gen_ai.operation.name values
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_INVOKE_WORKFLOW: Final = "invoke_workflow"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"

# Message part types of gen_ai.input.messages / gen_ai.output.messages
PART_TEXT: Final = "text"
PART_TOOL_CALL: Final = "tool_call"
PART_TOOL_CALL_RESPONSE: Final = "tool_call_response"
PART_REASONING: Final = "reasoning"

# The spec's event for evaluation results; findings are exported as these.
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"

# --- mast.* extensions (only where the spec has nothing) -------------------------------------
MAST_TASK_ID: Final = "mast.task.id"
MAST_TASK_OUTCOME: Final = "mast.task.outcome"  # success | failure | unknown
MAST_TASK_SCORE: Final = "mast.task.score"  # float in [0, 1]
MAST_STEP_INDEX: Final = "mast.step.index"
MAST_STEP_KIND: Final = "mast.step.kind"  # "reasoning" | "message" | "handoff" | "outcome" on SDK-only spans
MAST_HANDOFF_SOURCE: Final = "mast.handoff.source"
MAST_HANDOFF_TARGET: Final = "mast.handoff.target"
# On a span the collector made from log records that describe another span (GenAI events sent as
# OTLP logs): the span id they belong to. Rebuild moves the events onto that span.
MAST_EVENTS_FOR_SPAN: Final = "mast.events.for_span"

# mast.step.kind values for spans the GenAI spec has no operation for
STEP_REASONING: Final = "reasoning"
STEP_MESSAGE: Final = "message"  # an agent message recorded without an LLM call span
STEP_HANDOFF: Final = "handoff"
STEP_OUTCOME: Final = "outcome"  # a grader's verdict attached to a run, possibly after it ended

# Span names the SDK emits for mast.step.kind spans
SPAN_REASONING: Final = "reasoning"
SPAN_MESSAGE: Final = "message"
SPAN_HANDOFF: Final = "handoff"
SPAN_OUTCOME: Final = "mast.task.outcome"
