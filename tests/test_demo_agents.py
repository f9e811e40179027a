"""Tests of the demo's scripted SRE agents (mast_otel.demo.agents / incidents / profiles): determinism, the
outcome mix of each profile, the shape of every emitted span, late outcomes, and that each run
really exhibits the failure modes it claims (structurally, and as the rule detectors see it)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, format_span_id, format_trace_id

from mast_otel import sdk
from mast_otel import semconv as sc
from mast_otel.conversation.model import Outcome
from mast_otel.demo.agents import (
    MAX_ITERATIONS,
    REMEDIATOR_AGENT,
    TRIAGE_AGENT,
    RunSummary,
    check_scriptable,
    run_demo_agents,
)
from mast_otel.demo.incidents import CATALOGUE, UNRELATED_SERVICES, Action, Incident, SimulatedCluster
from mast_otel.demo.profiles import PROFILES, ModeDraw, ModelProfile, profile
from mast_otel.spans import Span

SEED = 20250314
PART_TYPES = {sc.PART_TEXT, sc.PART_REASONING, sc.PART_TOOL_CALL, sc.PART_TOOL_CALL_RESPONSE}
MUTATING_TOOLS = {
    "restart_pod",
    "rollback_deployment",
    "scale_deployment",
    "set_resource_limits",
    "renew_certificate",
}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    sdk.configure(service_name="demo-test", exporter=memory, set_global=False)
    yield memory
    sdk.shutdown()


def emit(
    exporter: InMemorySpanExporter,
    runs: int,
    seed: int = SEED,
    profiles: Sequence[ModelProfile] = PROFILES,
) -> tuple[list[RunSummary], dict[str, list[ReadableSpan]]]:
    exporter.clear()
    done: list[RunSummary] = []
    summaries = run_demo_agents(runs=runs, seed=seed, on_run_done=done.append, profiles=profiles)
    assert done == summaries
    assert sdk.force_flush()
    traces: dict[str, list[ReadableSpan]] = defaultdict(list)
    for span in exporter.get_finished_spans():
        traces[format_trace_id(context(span).trace_id)].append(span)
    return summaries, traces


def context(span: ReadableSpan) -> SpanContext:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def in_step_order(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Steps by mast.step.index; a grader's outcome span (no index) last."""
    return sorted(
        spans, key=lambda s: number(s, sc.MAST_STEP_INDEX) if sc.MAST_STEP_INDEX in attrs(s) else 1 << 30
    )


def number(span: ReadableSpan, key: str) -> int:
    value = attrs(span)[key]
    assert isinstance(value, int)
    return value


def root_of(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1
    return roots[0]


def json_attr(span: ReadableSpan, key: str) -> object:
    value = attrs(span)[key]
    assert isinstance(value, str)
    return json.loads(value)


def script(summaries: Sequence[RunSummary], traces: dict[str, list[ReadableSpan]]) -> list[object]:
    """Everything the runs emitted except ids and times."""
    lines: list[object] = []
    for summary in summaries:
        lines.append(dataclasses.replace(summary, trace_id=""))
        for span in in_step_order(traces[summary.trace_id]):
            lines.append((span.name, span.kind, span.status.status_code, sorted(attrs(span).items())))
    return lines


def tool_calls(spans: Sequence[ReadableSpan]) -> list[tuple[str, str, str]]:
    """(tool, canonical arguments, result) of each execute_tool span, in step order."""
    calls = []
    for span in in_step_order(spans):
        a = attrs(span)
        if a.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL:
            arguments = json.dumps(json.loads(str(a[sc.GEN_AI_TOOL_CALL_ARGUMENTS])), sort_keys=True)
            calls.append((str(a[sc.GEN_AI_TOOL_NAME]), arguments, str(a.get(sc.GEN_AI_TOOL_CALL_RESULT, ""))))
    return calls


def messages(span: ReadableSpan, key: str) -> list[dict[str, Any]]:
    decoded = json_attr(span, key)
    assert isinstance(decoded, list)
    return decoded


def output_parts(span: ReadableSpan, part_type: str) -> list[dict[str, Any]]:
    if sc.GEN_AI_OUTPUT_MESSAGES not in attrs(span):
        return []
    return [
        part
        for message in messages(span, sc.GEN_AI_OUTPUT_MESSAGES)
        for part in message["parts"]
        if part["type"] == part_type
    ]


def chats(spans: Sequence[ReadableSpan], agent: str = TRIAGE_AGENT) -> list[ReadableSpan]:
    return [
        s
        for s in in_step_order(spans)
        if attrs(s).get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT and attrs(s)[sc.GEN_AI_AGENT_NAME] == agent
    ]


# --- determinism ---------------------------------------------------------------------------------


def test_the_same_seed_replays_the_same_runs_and_another_seed_does_not(
    exporter: InMemorySpanExporter,
) -> None:
    first = script(*emit(exporter, 24))
    again = script(*emit(exporter, 24))
    assert first == again
    other = script(*emit(exporter, 24, seed=SEED + 1))
    assert other != first
    assert len(first) > 24 * 8  # a summary and at least 8 steps per run were compared


def test_trace_ids_are_fresh_but_conversation_ids_follow_the_seed(exporter: InMemorySpanExporter) -> None:
    summaries, traces = emit(exporter, 6)
    again, retraces = emit(exporter, 6)
    assert {s.trace_id for s in summaries}.isdisjoint({s.trace_id for s in again})
    conversations = [attrs(root_of(traces[s.trace_id]))[sc.GEN_AI_CONVERSATION_ID] for s in summaries]
    assert conversations == [attrs(root_of(retraces[s.trace_id]))[sc.GEN_AI_CONVERSATION_ID] for s in again]
    assert len(set(conversations)) == len(conversations)


# --- outcomes and profiles --------------------------------------------------------------------------


def test_each_profile_has_successes_and_failures_and_its_own_shape(exporter: InMemorySpanExporter) -> None:
    summaries, _ = emit(exporter, 60)
    by_profile: dict[str, list[RunSummary]] = defaultdict(list)
    for summary in summaries:
        by_profile[summary.profile].append(summary)
        assert summary.model == profile(summary.profile).model
        assert summary.model.startswith("sim-")  # nobody mistakes the demo for a real model
    assert set(by_profile) == {p.key for p in PROFILES}
    for key, runs in by_profile.items():
        outcomes = {s.outcome for s in runs}
        assert outcomes == {Outcome.SUCCESS, Outcome.FAILURE}, key
        for run in runs:
            lowest, highest = (
                profile(key).on_success if run.outcome is Outcome.SUCCESS else profile(key).on_failure
            ).bounds
            assert lowest <= len(run.intended_modes) <= highest
            # Success means the root cause was named and mitigated; failures score at most half.
            assert (run.score >= 0.75) if run.outcome is Outcome.SUCCESS else (run.score <= 0.5)
    failed_modes = {
        key: [len(s.intended_modes) for s in runs if s.outcome is Outcome.FAILURE]
        for key, runs in by_profile.items()
    }
    assert max(failed_modes["overconfident"]) <= 3 <= min(failed_modes["cascading"])  # surgical vs cascade


def test_outcomes_are_on_the_root_or_recorded_later_in_the_same_trace(exporter: InMemorySpanExporter) -> None:
    summaries, traces = emit(exporter, 45)
    late = [s for s in summaries if s.outcome_reported_later]
    assert 0 < len(late) < len(summaries) / 2
    for summary in summaries:
        spans = traces[summary.trace_id]
        root = root_of(spans)
        reports = [s for s in spans if s.name == sc.SPAN_OUTCOME]
        if summary.outcome_reported_later:
            assert sc.MAST_TASK_OUTCOME not in attrs(root)
            assert len(reports) == 1
            report = reports[0]
            assert format_trace_id(context(report).trace_id) == summary.trace_id
            assert report.parent is not None and report.parent.is_remote
            assert report.start_time is not None and root.end_time is not None
            assert report.start_time > root.end_time  # graded after the run ended
            verdict = attrs(report)
        else:
            assert reports == []
            verdict = attrs(root)
        assert verdict[sc.MAST_TASK_OUTCOME] == summary.outcome.value
        assert verdict[sc.MAST_TASK_SCORE] == pytest.approx(summary.score)
    # Some graders know the root span id, others only the trace id.
    reports = [span for run in late for span in traces[run.trace_id] if span.name == sc.SPAN_OUTCOME]
    knows_root = {
        r.parent.span_id == context(root_of(traces[format_trace_id(context(r).trace_id)])).span_id
        for r in reports
        if r.parent is not None
    }
    assert knows_root == {True, False}


# --- the wire format ------------------------------------------------------------------------------


def test_every_span_is_well_formed(exporter: InMemorySpanExporter) -> None:
    summaries, traces = emit(exporter, 30)
    assert set(traces) == {s.trace_id for s in summaries}
    for summary in summaries:
        spans = traces[summary.trace_id]
        assert len(spans) == summary.spans_emitted
        root = root_of(spans)
        assert root.name == f"invoke_agent {TRIAGE_AGENT}" and root.kind is SpanKind.INTERNAL
        root_attrs = attrs(root)
        assert root_attrs[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_AGENT
        assert root_attrs[sc.GEN_AI_REQUEST_MODEL] == summary.model
        assert str(root_attrs[sc.MAST_TASK_ID]).startswith("INC-")
        ids = {format_span_id(context(s).span_id) for s in spans}
        steps = sorted(number(s, sc.MAST_STEP_INDEX) for s in spans if sc.MAST_STEP_INDEX in attrs(s))
        assert steps == list(range(len(steps)))  # every step numbered once, in one sequence
        requested: dict[str, str] = {}  # tool call id -> tool, from the model outputs
        for span in in_step_order(spans):
            a = attrs(span)
            if span is not root and span.name != sc.SPAN_OUTCOME:
                assert span.parent is not None and format_span_id(span.parent.span_id) in ids
                assert a[sc.GEN_AI_AGENT_NAME] in (TRIAGE_AGENT, REMEDIATOR_AGENT)
            operation = a.get(sc.GEN_AI_OPERATION_NAME)
            if operation == sc.OP_CHAT:
                assert span.name == f"chat {summary.model}" and span.kind is SpanKind.CLIENT
                assert number(span, sc.GEN_AI_USAGE_INPUT_TOKENS) > 0
                assert number(span, sc.GEN_AI_USAGE_OUTPUT_TOKENS) > 0
                finish = a[sc.GEN_AI_RESPONSE_FINISH_REASONS]
                assert finish in (("tool_calls",), ("stop",))
                inputs = messages(span, sc.GEN_AI_INPUT_MESSAGES)
                outputs = messages(span, sc.GEN_AI_OUTPUT_MESSAGES)
                assert inputs and len(outputs) == 1
                assert outputs[0]["finish_reason"] == finish[0]
                for message in inputs + outputs:
                    assert message["role"] in ("user", "assistant", "tool") and message["parts"]
                    assert {part["type"] for part in message["parts"]} <= PART_TYPES
                assert json_attr(span, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
                calls = output_parts(span, sc.PART_TOOL_CALL)
                assert (finish == ("tool_calls",)) == bool(calls)
                requested.update({str(call["id"]): str(call["name"]) for call in calls})
            elif operation == sc.OP_EXECUTE_TOOL:
                tool = str(a[sc.GEN_AI_TOOL_NAME])
                assert span.name == f"execute_tool {tool}"
                assert requested.get(str(a[sc.GEN_AI_TOOL_CALL_ID])) == tool  # a model asked for this call
                assert isinstance(json_attr(span, sc.GEN_AI_TOOL_CALL_ARGUMENTS), dict)
                assert a[sc.GEN_AI_TOOL_CALL_RESULT]
            elif operation == sc.OP_INVOKE_AGENT and span is not root:
                assert span.name == f"invoke_agent {REMEDIATOR_AGENT}"
                assert a[sc.GEN_AI_CONVERSATION_ID] == root_attrs[sc.GEN_AI_CONVERSATION_ID]
            elif a.get(sc.MAST_STEP_KIND) == sc.STEP_HANDOFF:
                assert (a[sc.MAST_HANDOFF_SOURCE], a[sc.MAST_HANDOFF_TARGET]) == (
                    TRIAGE_AGENT,
                    REMEDIATOR_AGENT,
                )
            elif span is not root:
                assert a[sc.MAST_STEP_KIND] in (sc.STEP_REASONING, sc.STEP_MESSAGE, sc.STEP_OUTCOME)


def test_runs_stay_within_their_step_budget_and_tool_results_are_realistic(
    exporter: InMemorySpanExporter,
) -> None:
    summaries, traces = emit(exporter, 45)
    result_sizes: dict[str, list[int]] = defaultdict(list)
    for summary in summaries:
        spans = traces[summary.trace_id]
        operations = [attrs(s).get(sc.GEN_AI_OPERATION_NAME) for s in spans]
        assert summary.steps == operations.count(sc.OP_CHAT) + operations.count(sc.OP_EXECUTE_TOOL)
        assert 8 <= summary.steps <= 40
        assert len(chats(spans)) <= MAX_ITERATIONS
        for tool, _, result in tool_calls(spans):
            result_sizes[tool].append(len(result))
    assert min(result_sizes["query_metrics"]) >= 2000 and max(result_sizes["query_metrics"]) <= 8500
    assert max(result_sizes["search_logs"]) >= 2000
    assert {tool for tool in result_sizes} >= {
        "list_alerts",
        "get_pod_status",
        "describe_deployment",
        "check_service_health",
    }


# --- the intended modes are really there ----------------------------------------------------------


def exhibited(summary: RunSummary, spans: Sequence[ReadableSpan]) -> set[str]:
    """The modes a run shows, read structurally from its spans the way signals.md describes them."""
    found: set[str] = set()
    calls = tool_calls(spans)
    keys = [(tool, arguments) for tool, arguments, _ in calls]
    if any(keys.count(key) >= 3 for key in keys):
        found.add("FM-1.3")
    sizes = [len(messages(chat, sc.GEN_AI_INPUT_MESSAGES)) for chat in chats(spans)]
    if any(
        later <= earlier / 2 and earlier - later >= 3
        for i, earlier in enumerate(sizes)
        for later in sizes[i + 1 :]
    ):
        found.add("FM-1.4")
    root = root_of(spans)
    texts = [
        (chat, str(part["content"])) for chat in chats(spans) for part in output_parts(chat, sc.PART_TEXT)
    ]
    declared_at = next(
        (number(chat, sc.MAST_STEP_INDEX) for chat, text in texts if "incident is resolved" in text),
        None,
    )
    later_calls = [
        s
        for s in spans
        if attrs(s).get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
        and declared_at is not None
        and number(s, sc.MAST_STEP_INDEX) > declared_at
    ]
    if attrs(root).get(sc.ERROR_TYPE) == "MaxIterationsExceeded" or len(later_calls) >= 2:
        found.add("FM-1.5")
    unrelated = {name for pair in UNRELATED_SERVICES for name in pair}
    if sum(1 for _, arguments, _ in calls if unrelated & set(json.loads(arguments).values())) >= 3:
        found.add("FM-2.3")
    for chat in chats(spans):
        said = " ".join(str(part["content"]) for part in output_parts(chat, sc.PART_REASONING))
        asked = [str(call["name"]) for call in output_parts(chat, sc.PART_TOOL_CALL)]
        if asked and f"I will call {asked[0]}" not in said and "I will call " in said:
            found.add("FM-2.6")
    final = texts[-1][1] if texts else ""
    if final.splitlines() and final.splitlines()[-1].startswith("Next I will"):
        found.add("FM-3.1")
    changed = [i for i, (tool, _, _) in enumerate(calls) if tool in MUTATING_TOOLS]
    checks = [(i, result) for i, (tool, _, result) in enumerate(calls) if tool == "check_service_health"]
    if changed and final and not any(i > changed[-1] for i, _ in checks):
        found.add("FM-3.2")
    if checks and '"status":"healthy"' not in checks[-1][1] and "is healthy again" in final:
        found.add("FM-3.3")
    return found


def test_runs_exhibit_exactly_the_modes_they_intend(exporter: InMemorySpanExporter) -> None:
    summaries, traces = emit(exporter, 90)
    seen: set[str] = set()
    for summary in summaries:
        assert exhibited(summary, traces[summary.trace_id]) == set(summary.intended_modes), summary
        seen.update(summary.intended_modes)
    assert seen == {"FM-1.3", "FM-1.4", "FM-1.5", "FM-2.3", "FM-2.6", "FM-3.1", "FM-3.2", "FM-3.3"}


def test_other_profiles_act_out_other_combinations_of_modes(exporter: InMemorySpanExporter) -> None:
    wanderer = ModelProfile(
        key="wanderer",
        model="sim-wanderer",
        title="wanders off, then stops early",
        study_note="not from the study: exercises the script's other paths",
        success_rate=0.5,
        on_success=ModeDraw(always=("FM-2.3",)),
        on_failure=ModeDraw(always=("FM-3.1",), maybe=MappingProxyType({"FM-2.3": 0.5})),
        handoff_rate=0.5,
    )
    summaries, traces = emit(exporter, 16, profiles=(wanderer,))
    assert {s.outcome for s in summaries} == {Outcome.SUCCESS, Outcome.FAILURE}
    for summary in summaries:
        assert exhibited(summary, traces[summary.trace_id]) == set(summary.intended_modes), summary


@pytest.mark.parametrize(
    ("on_success", "on_failure", "problem"),
    [
        (ModeDraw(), ModeDraw(always=("FM-1.3",)), "nothing makes the run fail"),
        (ModeDraw(always=("FM-3.2",)), ModeDraw(always=("FM-3.2",)), "successful run cannot show"),
        (ModeDraw(), ModeDraw(always=("FM-1.5",), one_of=("FM-3.1", "FM-3.3")), "exclude each other"),
        (ModeDraw(), ModeDraw(always=("FM-3.2", "FM-2.2")), "cannot act out"),
    ],
)
def test_profiles_the_script_cannot_act_out_are_refused(
    on_success: ModeDraw, on_failure: ModeDraw, problem: str
) -> None:
    odd = ModelProfile("odd", "sim-odd", "odd", "", 0.5, on_success=on_success, on_failure=on_failure)
    with pytest.raises(ValueError, match=problem):
        check_scriptable(odd)
    with pytest.raises(ValueError, match=problem):
        run_demo_agents(runs=1, seed=0, profiles=(odd,))
    for shipped in PROFILES:
        check_scriptable(shipped)


def test_the_rule_detectors_find_the_intended_modes(exporter: InMemorySpanExporter) -> None:
    """End to end through OTLP encoding, decoding and rebuild: what the demo claims, the rules see."""
    from mast_otel.annotate.rules import RuleAnnotator
    from mast_otel.collector.decode import TraceDecoder
    from mast_otel.conversation.rebuild import rebuild

    summaries, _ = emit(exporter, 45)
    decoded = TraceDecoder(max_attribute_bytes=1 << 20).decode(encode_spans(exporter.get_finished_spans()))
    assert decoded.rejected == 0
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in decoded.spans:
        by_trace[span.trace_id].append(span)
    annotator = RuleAnnotator()
    intended = detected = agreed = 0
    for summary in summaries:
        conversation = rebuild(by_trace[summary.trace_id])
        assert conversation.outcome is summary.outcome
        found = {finding.mode.code for finding in annotator.annotate(conversation)}
        intended += len(summary.intended_modes)
        detected += len(found)
        agreed += len(found & set(summary.intended_modes))
    assert intended > 60
    # Headroom for detector tuning; today both are 100%.
    assert agreed >= 0.9 * intended  # what the demo claims, the rules see
    assert agreed >= 0.9 * detected  # and they see little it does not claim


# --- the simulated cluster and the profiles -------------------------------------------------------


def status(cluster: SimulatedCluster, health: Action) -> object:
    result = cluster.call(health).output
    assert not isinstance(result, str)
    return result["status"]


@pytest.mark.parametrize("incident", CATALOGUE, ids=lambda incident: incident.key)
def test_only_the_right_fix_heals_the_service(incident: Incident) -> None:
    now = datetime(2025, 3, 14, 3, 0, tzinfo=timezone.utc)
    health = Action("check_service_health", {"namespace": incident.namespace, "service": incident.service})
    cluster = SimulatedCluster(incident, now, seed="t")
    assert status(cluster, health) != "healthy"
    assert cluster.call(health) == cluster.call(health)  # nothing changed: the very same answer
    assert not cluster.call(incident.wrong_fix).error_type
    assert status(cluster, health) != "healthy"
    assert not cluster.mitigated
    assert not cluster.call(incident.fix).error_type
    assert cluster.mitigated
    assert status(cluster, health) == "healthy"
    for step in incident.investigation:  # every investigation call answers without error
        assert not cluster.call(step.action).error_type


def test_mode_draws_are_validated_and_bounded() -> None:
    with pytest.raises(KeyError, match=r"FM-9\.9"):
        ModeDraw(always=("FM-9.9",))
    with pytest.raises(ValueError, match="only once"):
        ModeDraw(always=("FM-1.3",), maybe=MappingProxyType({"FM-1.3": 0.5}))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ModeDraw(maybe=MappingProxyType({"FM-1.3": 1.5}))
    draw = ModeDraw(always=("FM-1.4",), one_of=("FM-3.2", "FM-3.3"), maybe=MappingProxyType({"FM-2.6": 0.5}))
    assert draw.bounds == (2, 3)
    rng = random.Random(1)
    drawn = [draw.draw(rng) for _ in range(200)]
    assert all("FM-1.4" in modes and len(modes & {"FM-3.2", "FM-3.3"}) == 1 for modes in drawn)
    assert any("FM-2.6" in modes for modes in drawn) and not all("FM-2.6" in modes for modes in drawn)
    assert set(draw.possible()) == {
        frozenset({"FM-1.4", "FM-3.2"}),
        frozenset({"FM-1.4", "FM-3.3"}),
        frozenset({"FM-1.4", "FM-3.2", "FM-2.6"}),
        frozenset({"FM-1.4", "FM-3.3", "FM-2.6"}),
    }
    assert set(drawn) == set(draw.possible())
    with pytest.raises(KeyError, match="overconfident"):
        profile("optimistic")


def test_negative_run_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="runs"):
        run_demo_agents(runs=-1, seed=0)
