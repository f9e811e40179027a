"""Rebuild: spans in GenAI semantic conventions -> ordered conversation turns."""

from __future__ import annotations

import json
import random

from spanfactory import agent_attrs, messages, output, span

from mast_otel import semconv as sc
from mast_otel.conversation.model import Outcome, TurnKind
from mast_otel.conversation.rebuild import is_outcome_only, outcome_reports, rebuild
from mast_otel.spans import StatusCode

T = "4bf92f3577b34da6a3ce929d0e0e4736"
TASK = "Pod checkout-7d9 is crash-looping; find the root cause."


def triage_trace() -> list:
    root = span(
        T,
        "invoke_agent triage",
        1_000,
        9_000,
        **agent_attrs(
            "triage",
            gen_ai__request__model="sim-1",
            mast__task__id="INC-1",
            gen_ai__conversation__id="conv-1",
            mast__task__outcome="failure",
            mast__task__score=0.25,
        ),
        gen_ai__input__messages=messages(("user", TASK)),
        gen_ai__output__messages=output("Fixed: restarted the pod."),
    )
    chat1 = span(
        T,
        "chat sim-1",
        1_100,
        1_900,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__request__model="sim-1",
        gen_ai__agent__name="triage",
        gen_ai__usage__input_tokens=100,
        gen_ai__usage__output_tokens=20,
        gen_ai__response__finish_reasons=("tool_calls",),
        gen_ai__system_instructions=json.dumps([{"type": "text", "content": "You are an SRE."}]),
        gen_ai__input__messages=messages(("user", TASK)),
        gen_ai__output__messages=output(
            reasoning="Check the pods first.",
            tool_calls=[{"id": "c1", "name": "get_pods", "arguments": {"ns": "shop"}}],
            finish_reason="tool_calls",
        ),
    )
    tool1 = span(
        T,
        "execute_tool get_pods",
        2_000,
        2_500,
        parent=root.span_id,
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="get_pods",
        gen_ai__tool__call__id="c1",
        gen_ai__tool__call__arguments='{"ns": "shop"}',
        gen_ai__tool__call__result='{"status": "OOMKilled"}',
    )
    chat2_input = json.dumps(
        [
            {"role": "user", "parts": [{"type": "text", "content": TASK}]},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "get_pods", "arguments": {}}],
            },
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "OOMKilled"}]},
        ]
    )
    chat2 = span(
        T,
        "chat sim-1",
        2_600,
        3_000,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__request__model="sim-1",
        gen_ai__agent__name="triage",
        gen_ai__usage__input_tokens=150,
        gen_ai__usage__output_tokens=30,
        gen_ai__input__messages=chat2_input,
        gen_ai__output__messages=output("Memory limit too low."),
    )
    handoff = span(
        T,
        "handoff",
        3_100,
        3_100,
        parent=root.span_id,
        mast__step__kind="handoff",
        mast__handoff__source="triage",
        mast__handoff__target="remediator",
        gen_ai__output__messages=output("needs a restart"),
    )
    sub = span(
        T,
        "invoke_agent remediator",
        3_200,
        8_000,
        parent=root.span_id,
        **agent_attrs("remediator"),
        gen_ai__input__messages=messages(("user", "Restart checkout-7d9")),
    )
    restart = span(
        T,
        "execute_tool restart_pod",
        3_300,
        3_900,
        parent=sub.span_id,
        status=StatusCode.ERROR,
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="restart_pod",
        gen_ai__tool__call__arguments='{"pod": "checkout-7d9"}',
        error__type="PermissionDenied",
    )
    reasoning = span(
        T,
        "reasoning",
        4_000,
        4_000,
        parent=sub.span_id,
        mast__step__kind="reasoning",
        gen_ai__agent__name="remediator",
        gen_ai__output__messages=output(reasoning="Restart failed; report back."),
    )
    return [root, chat1, tool1, chat2, handoff, sub, restart, reasoning]


def test_turns_in_order_with_content() -> None:
    conversation = rebuild(triage_trace())
    got = [(t.index, t.kind, t.agent, t.content) for t in conversation.turns]
    assert got == [
        (0, TurnKind.USER, "user", TASK),
        (1, TurnKind.SYSTEM, "system", "You are an SRE."),
        (2, TurnKind.REASONING, "triage", "Check the pods first."),
        (3, TurnKind.TOOL_CALL, "triage", 'get_pods({"ns": "shop"})'),
        (4, TurnKind.AGENT_MESSAGE, "triage", "Memory limit too low."),
        (5, TurnKind.HANDOFF, "triage", "needs a restart"),
        (6, TurnKind.AGENT_MESSAGE, "triage", "Restart checkout-7d9"),
        (7, TurnKind.TOOL_CALL, "remediator", 'restart_pod({"pod": "checkout-7d9"})'),
        (8, TurnKind.REASONING, "remediator", "Restart failed; report back."),
        (9, TurnKind.AGENT_MESSAGE, "triage", "Fixed: restarted the pod."),
    ]
    tool = conversation.turns[3].tool
    assert tool is not None and (tool.name, tool.call_id, tool.result) == (
        "get_pods",
        "c1",
        '{"status": "OOMKilled"}',
    )
    failed = conversation.turns[7].tool
    assert failed is not None and failed.failed and failed.error == "PermissionDenied"
    assert conversation.turns[5].target_agent == "remediator"
    assert conversation.turns[2].context_size == 1 and conversation.turns[4].context_size == 3


def test_run_level_fields() -> None:
    c = rebuild(triage_trace())
    assert (c.trace_id, c.task_id, c.conversation_id, c.root_agent) == (T, "INC-1", "conv-1", "triage")
    assert c.agents == ("triage", "remediator")
    assert c.models == ("sim-1",)
    assert (c.outcome, c.score) == (Outcome.FAILURE, 0.25)
    assert (c.input_tokens, c.output_tokens, c.span_count) == (250, 50, 8)
    assert c.task == TASK and (c.start_ns, c.end_ns) == (1_000, 9_000)


def test_arrival_order_does_not_matter() -> None:
    spans = triage_trace()
    expected = rebuild(spans).turns
    for seed in range(5):
        shuffled = spans[:]
        random.Random(seed).shuffle(shuffled)
        assert rebuild(shuffled).turns == expected


def test_late_outcome_span_overrides_root_outcome() -> None:
    spans = triage_trace()
    grader = span(
        T,
        sc.SPAN_OUTCOME,
        20_000,
        20_000,
        parent="00000000000000aa",
        mast__step__kind="outcome",
        mast__task__outcome="success",
        mast__task__score=1.0,
    )
    conversation = rebuild([*spans, grader])
    assert (conversation.outcome, conversation.score) == (Outcome.SUCCESS, 1.0)
    assert all(t.span_id != grader.span_id for t in conversation.turns)
    [report] = outcome_reports([grader])
    assert (report.trace_id, report.outcome, report.score) == (T, Outcome.SUCCESS, 1.0)
    assert is_outcome_only([grader]) and not is_outcome_only(spans)


def test_foreign_spans_and_orphans_do_not_break_rebuild() -> None:
    http = span(T, "GET /api", 10, 20, parent="00000000000000bb", http__method="GET")
    orphan_tool = span(
        T,
        "execute_tool t",
        30,
        40,
        parent="00000000000000cc",
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="t",
        gen_ai__tool__call__result="ok",
    )
    conversation = rebuild([http, orphan_tool])
    assert [t.kind for t in conversation.turns] == [TurnKind.TOOL_CALL]
    assert conversation.turns[0].agent == "test-agent"  # no agent anywhere: the service speaks
    assert conversation.span_count == 2


def test_parent_cycle_does_not_hang() -> None:
    a = span(T, "a", 1, 2, span_id="000000000000000a", parent="000000000000000b", gen_ai__agent__name="x")
    b = span(T, "b", 1, 2, span_id="000000000000000b", parent="000000000000000a")
    assert rebuild([a, b]).span_count == 2


def test_unparseable_messages_become_text() -> None:
    root = span(T, "invoke_agent a", 1, 5, **agent_attrs("a"), gen_ai__input__messages="just a plain task {")
    assert rebuild([root]).task == "just a plain task {"


def test_openai_shaped_messages_are_understood() -> None:
    root = span(T, "invoke_agent a", 1, 9, **agent_attrs("a"))
    chat = span(
        T,
        "chat m",
        2,
        3,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__agent__name="a",
        gen_ai__input__messages=json.dumps(
            [
                {"role": "user", "content": "hello"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "x1", "function": {"name": "lookup", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "x1", "content": "found it"},
            ]
        ),
    )
    turns = rebuild([root, chat]).turns
    assert [(t.kind, t.content) for t in turns][:1] == [(TurnKind.USER, "hello")]
    tool_turns = [t for t in turns if t.kind is TurnKind.TOOL_CALL]
    assert tool_turns and tool_turns[0].tool is not None and tool_turns[0].tool.result == "found it"


def test_final_answer_said_by_the_model_and_the_agent_is_one_turn() -> None:
    root = span(T, "invoke_agent a", 1, 90, **agent_attrs("a"), gen_ai__output__messages=output("All good."))
    chat = span(
        T,
        "chat m",
        10,
        20,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__agent__name="a",
        gen_ai__output__messages=output("All good."),
    )
    turns = rebuild([root, chat]).turns
    assert [(t.kind, t.content, t.span_id) for t in turns] == [
        (TurnKind.AGENT_MESSAGE, "All good.", chat.span_id)
    ]


def test_named_participant_in_input_history_is_attributed_to_them() -> None:
    root = span(T, "invoke_agent lead", 1, 90, **agent_attrs("lead"))
    history = json.dumps([{"role": "user", "name": "remediator", "content": "Restarted; pods healthy."}])
    chat = span(
        T,
        "chat m",
        10,
        20,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__agent__name="lead",
        gen_ai__input__messages=history,
    )
    [turn] = rebuild([root, chat]).turns
    assert (turn.kind, turn.agent, turn.content) == (
        TurnKind.AGENT_MESSAGE,
        "remediator",
        "Restarted; pods healthy.",
    )


def test_a_human_saying_the_same_thing_twice_is_two_turns_and_replayed_history_is_none() -> None:
    root = span(
        T, "invoke_agent a", 1, 90, **agent_attrs("a"), gen_ai__input__messages=messages(("user", "fix it"))
    )

    def call(start: int, history: list[tuple[str, str]], answer: str) -> object:
        return span(
            T,
            "chat m",
            start,
            start + 5,
            parent=root.span_id,
            gen_ai__operation__name="chat",
            gen_ai__agent__name="a",
            gen_ai__input__messages=messages(*history),
            gen_ai__output__messages=output(answer),
        )

    first = [("user", "fix it")]
    second = [*first, ("assistant", "OK"), ("user", "continue")]
    third = [*second, ("assistant", "OK"), ("user", "continue")]
    spans = [root, call(10, first, "OK"), call(20, second, "OK"), call(30, third, "done")]
    assert [(t.kind, t.content) for t in rebuild(spans).turns] == [
        (TurnKind.USER, "fix it"),
        (TurnKind.AGENT_MESSAGE, "OK"),
        (TurnKind.USER, "continue"),
        (TurnKind.AGENT_MESSAGE, "OK"),
        (TurnKind.USER, "continue"),
        (TurnKind.AGENT_MESSAGE, "done"),
    ]
