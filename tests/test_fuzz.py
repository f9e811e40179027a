"""A fast subset of the fuzzing in bench/fuzz.py, plus structured fuzzing of rebuild and the rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mast_otel import semconv as sc
from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.conversation.rebuild import rebuild
from mast_otel.spans import Span

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fuzz


def test_mutated_exports_never_crash_the_receive_path() -> None:
    result = fuzz.run(inputs=1500, seed=7)
    assert result["crashes"] == 0, result["crash_examples"]
    assert result["decoded"] > 0 and result["refused_cleanly"] > 0  # both paths were exercised


TRACE = "7" * 32
texts = st.text(max_size=40)
values = st.one_of(
    texts,
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.lists(texts, max_size=3).map(tuple),
    st.binary(max_size=8),
)
messages = st.one_of(
    texts,
    st.lists(
        st.fixed_dictionaries(
            {
                "role": texts,
                "parts": st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(
                                ["text", "tool_call", "tool_call_response", "reasoning", "x"]
                            ),
                            "content": values,
                            "id": texts,
                            "name": texts,
                            "arguments": values,
                            "response": values,
                        }
                    ),
                    max_size=3,
                ),
            }
        ),
        max_size=3,
    ).map(lambda m: json.dumps(m, default=repr)),
)
keys = st.sampled_from(
    [
        sc.GEN_AI_OPERATION_NAME,
        sc.GEN_AI_AGENT_NAME,
        sc.GEN_AI_TOOL_NAME,
        sc.GEN_AI_TOOL_CALL_ID,
        sc.GEN_AI_TOOL_CALL_RESULT,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.MAST_STEP_KIND,
        sc.MAST_TASK_OUTCOME,
        sc.MAST_TASK_SCORE,
        sc.GEN_AI_RESPONSE_FINISH_REASONS,
        sc.ERROR_TYPE,
        sc.GEN_AI_USAGE_INPUT_TOKENS,
        sc.MAST_HANDOFF_TARGET,
        "other",
    ]
)


@st.composite
def spans(draw: st.DrawFn) -> list[Span]:
    count = draw(st.integers(1, 12))
    ids = [f"{i + 1:016x}" for i in range(count)]
    out = []
    for i, span_id in enumerate(ids):
        attributes = draw(st.dictionaries(keys, values, max_size=6))
        if draw(st.booleans()):
            attributes[sc.GEN_AI_OPERATION_NAME] = draw(
                st.sampled_from(["invoke_agent", "chat", "execute_tool"])
            )
        if draw(st.booleans()):
            attributes[draw(st.sampled_from([sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES]))] = draw(
                messages
            )
        parent = draw(st.sampled_from(["", "ffffffffffffffff", *ids]))
        start = draw(st.integers(0, 10**12))
        out.append(
            Span(
                trace_id=TRACE,
                span_id=span_id,
                parent_span_id=parent if parent != span_id else "",
                name=f"s{i}",
                start_ns=start,
                end_ns=start + draw(st.integers(0, 10**9)),
                attributes=attributes,
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(spans())
def test_rebuild_and_rules_take_any_spans(trace: list[Span]) -> None:
    conversation = rebuild(trace)
    assert [t.index for t in conversation.turns] == list(range(len(conversation.turns)))
    for finding in RuleAnnotator().annotate(conversation):
        assert all(0 <= step < len(conversation.turns) for step in finding.evidence.step_indexes)
