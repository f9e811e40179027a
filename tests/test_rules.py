"""The offline rule detectors: each fires on a small run showing its behaviour and stays silent on
the near miss that looks like it; `RuleAnnotator` merges them and survives a broken detector."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from mast_otel.annotate.base import Annotator, Finding
from mast_otel.annotate.rules import (
    ConversationReset,
    DisobeyRoleSpecification,
    DisobeyTaskSpecification,
    FailToAskForClarification,
    HistoryLoss,
    IgnoredOtherAgentsInput,
    IncorrectVerification,
    InformationWithholding,
    NoVerification,
    PrematureTermination,
    ReasoningActionMismatch,
    RuleAnnotator,
    StepRepetition,
    TaskDerailment,
    UnawareOfTermination,
    default_detectors,
)
from mast_otel.annotate.rules._text import (
    ActionKind,
    EntityFinder,
    call_key,
    classify_call,
    find_failure_marker,
    find_success_claim,
    forbidden_verbs,
    sentence_words,
    sentences,
    words,
)
from mast_otel.conversation.model import Conversation, ToolCall, Turn, TurnKind
from mast_otel.taxonomy import CODES


class Run:
    """Builds a conversation turn by turn; step indexes count from 0, span ids follow them."""

    def __init__(self, task: str = "") -> None:
        self.task = task
        self.turns: list[Turn] = []

    def _add(self, kind: TurnKind, agent: str, **fields: Any) -> Run:
        index = len(self.turns)
        self.turns.append(Turn(index=index, kind=kind, agent=agent, span_id=f"span{index:02d}", **fields))
        return self

    def user(self, text: str) -> Run:
        return self._add(TurnKind.USER, "user", content=text)

    def say(self, agent: str, text: str, **fields: Any) -> Run:
        return self._add(TurnKind.AGENT_MESSAGE, agent, content=text, **fields)

    def think(self, agent: str, text: str, **fields: Any) -> Run:
        return self._add(TurnKind.REASONING, agent, content=text, **fields)

    def call(
        self,
        agent: str,
        name: str,
        arguments: dict[str, object] | str = "",
        result: str | None = None,
        error: str = "",
        **fields: Any,
    ) -> Run:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        tool = ToolCall(name=name, call_id=f"c{len(self.turns)}", arguments=text, result=result, error=error)
        return self._add(TurnKind.TOOL_CALL, agent, content=name, tool=tool, **fields)

    def handoff(self, source: str, target: str) -> Run:
        return self._add(TurnKind.HANDOFF, source, target_agent=target)

    def build(self, error: str = "") -> Conversation:
        return Conversation(trace_id="0" * 32, turns=tuple(self.turns), task=self.task, error=error)


def only(findings: Sequence[Finding], code: str) -> Finding:
    assert [f.mode.code for f in findings] == [code], findings
    return findings[0]


PODS_OK = '{"pods": [{"name": "checkout-7d9f", "status": "Running", "ready": true, "restarts": 0}]}'
PODS_CRASHING = '{"pods": [{"name": "checkout-7d9f", "status": "CrashLoopBackOff", "restarts": 7}]}'


# --- shared helpers -------------------------------------------------------------------------------


def test_call_keys_ignore_key_order_and_whitespace() -> None:
    a = ToolCall("get_pods", arguments='{"namespace": "shop", "label": "app=checkout"}')
    b = ToolCall("get_pods", arguments='{ "label":"app=checkout",\n "namespace":"shop" }')
    c = ToolCall("get_pods", arguments='{"namespace": "other", "label": "app=checkout"}')
    assert call_key(a) == call_key(b) != call_key(c)


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("restart_deployment", "{}", ActionKind.MUTATE),
        ("list_deleted_pods", "{}", ActionKind.READ),
        ("kubectl", '{"command": "kubectl rollout restart deployment/checkout"}', ActionKind.MUTATE),
        ("shell", '{"command": "kubectl get pods -n shop"}', ActionKind.READ),
        ("scaleDeployment", "{}", ActionKind.MUTATE),
        ("python", '{"code": "print(1)"}', ActionKind.OTHER),
    ],
)
def test_calls_are_classified_by_their_verbs(name: str, arguments: str, kind: ActionKind) -> None:
    assert classify_call(ToolCall(name, arguments=arguments)) is kind


@pytest.mark.parametrize(
    ("text", "fails"),
    [
        ("Back-off restarting failed container: CrashLoopBackOff", True),
        ("HTTP/1.1 503 Service Unavailable", True),
        ("exitcode: 1 (execution failed)", True),
        ('{"error": "connection refused"}', True),
        ("all 3 replicas ready, 0 errors", False),
        ('{"errors": 0, "error": null, "timeout": 30}', False),
        ("no errors found in the last hour", False),
        ("exitcode: 0 (execution succeeded)", False),
    ],
)
def test_failure_markers_respect_negation(text: str, fails: bool) -> None:
    assert (find_failure_marker(text) is not None) is fails


# --- FM-1.3 step repetition -----------------------------------------------------------------------


def test_repetition_fires_on_the_same_call_three_times() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {"namespace": "shop", "label": "app=checkout"}, result=PODS_OK)
        .think("sre", "Pods look fine, let me look again.")
        .call("sre", "get_pods", {"label": "app=checkout", "namespace": "shop"}, result=PODS_OK)
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="GET /cart 200")
        .call("sre", "get_pods", {"namespace": "shop", "label": "app=checkout"}, result=PODS_OK)
    )
    finding = only(StepRepetition().annotate(run.build()), "FM-1.3")
    assert finding.evidence.step_indexes == (0, 2, 4)
    assert finding.evidence.span_ids == ("span00", "span02", "span04")
    assert finding.evidence.agent == "sre"
    assert finding.annotator == "rules/step_repetition"
    assert "get_pods" in finding.explanation and "3 times" in finding.explanation
    assert "same result" in finding.explanation


def test_repetition_fires_on_two_consecutive_calls_with_the_same_result() -> None:
    run = (
        Run()
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="connection reset")
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="connection  reset")
    )
    finding = only(StepRepetition().annotate(run.build()), "FM-1.3")
    assert finding.evidence.step_indexes == (0, 1)


def test_repetition_fires_on_an_agent_repeating_its_message() -> None:
    message = "I think we should check the database connection pool settings before anything else."
    run = Run().say("planner", message).say("coder", "Done.").say("planner", message.upper())
    finding = only(StepRepetition().annotate(run.build()), "FM-1.3")
    assert finding.evidence.step_indexes == (0, 2)
    assert finding.evidence.agent == "planner"


def test_repetition_ignores_two_identical_calls_with_different_results() -> None:
    run = (
        Run()
        .call("sre", "get_rollout_status", {"deployment": "checkout"}, result="2/3 updated")
        .call("sre", "get_rollout_status", {"deployment": "checkout"}, result="3/3 updated")
    )
    assert StepRepetition().annotate(run.build()) == ()


def test_repetition_ignores_two_identical_calls_that_are_not_consecutive() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
    )
    assert StepRepetition().annotate(run.build()) == ()


# --- FM-1.4 loss of conversation history ---------------------------------------------------------


def test_history_loss_fires_when_the_context_shrinks() -> None:
    run = (
        Run()
        .think("sre", "Looking at the alert.", context_size=4)
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK, context_size=4)
        .think("sre", "Pods are fine, checking logs.", context_size=12)
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="ok", context_size=12)
        .think("sre", "Let me start by looking at the alert.", context_size=3)
    )
    finding = only(HistoryLoss().annotate(run.build()), "FM-1.4")
    assert finding.evidence.step_indexes == (4, 2)
    assert finding.evidence.agent == "sre"
    assert "12" in finding.explanation and "3" in finding.explanation


def test_history_loss_ignores_a_growing_context_and_other_agents() -> None:
    run = (
        Run()
        .think("sre", "a", context_size=4)
        .think("sre", "b", context_size=9)
        .think("reviewer", "c", context_size=2)  # another agent starts small: not a loss
        .think("sre", "d", context_size=7)  # a small dip, not to half
        .think("sre", "e", context_size=15)
    )
    assert HistoryLoss().annotate(run.build()) == ()


def test_history_loss_fires_on_rediscovery_with_nothing_changed() -> None:
    run = Run().call("sre", "list_services", {"namespace": "shop"}, result="checkout, cart")
    for pod in ("a", "b", "c"):
        run.think("sre", f"Looking at {pod}.").call("sre", "get_logs", {"pod": pod}, result="ok")
    run.call("sre", "list_services", {"namespace": "shop"}, result="checkout, cart")
    finding = only(HistoryLoss().annotate(run.build()), "FM-1.4")
    assert finding.evidence.step_indexes == (7, 0)
    assert "list_services" in finding.explanation


def test_history_loss_ignores_rereading_after_a_change() -> None:
    run = Run().call("sre", "list_services", {"namespace": "shop"}, result="checkout")
    run.call("sre", "get_logs", {"pod": "a"}, result="ok").call("sre", "get_logs", {"pod": "b"}, result="ok")
    run.call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
    run.think("sre", "Checking again.").think("sre", "Still checking.")
    run.call("sre", "list_services", {"namespace": "shop"}, result="checkout")
    assert HistoryLoss().annotate(run.build()) == ()


def test_history_loss_fires_on_a_question_asked_again_after_an_answer() -> None:
    run = (
        Run()
        .say("analyst", "Which region is the outage in?")
        .user("It is eu-west-1.")
        .say("analyst", "Thanks. Which region is the outage in?")
    )
    finding = only(HistoryLoss().annotate(run.build()), "FM-1.4")
    assert finding.evidence.step_indexes == (2, 0)


# --- FM-1.5 unaware of termination conditions -----------------------------------------------------


def test_termination_unaware_fires_when_a_limit_stopped_the_run() -> None:
    run = Run().call("sre", "get_pods", {}, result=PODS_OK).think("sre", "Let me check the pods again.")
    finding = only(
        UnawareOfTermination().annotate(
            run.build(error="GraphRecursionError: Recursion limit of 25 reached")
        ),
        "FM-1.5",
    )
    assert finding.evidence.step_indexes == (1,)
    assert finding.confidence >= 0.8
    assert "Recursion limit" in finding.explanation


def test_termination_unaware_fires_on_a_length_finish_at_the_end() -> None:
    run = Run().call("sre", "get_pods", {}, result=PODS_OK).say("sre", "The pods are", finish_reason="length")
    finding = only(UnawareOfTermination().annotate(run.build()), "FM-1.5")
    assert finding.evidence.step_indexes == (1,)


def test_termination_unaware_fires_when_the_agent_acts_after_declaring_done() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {}, result=PODS_OK)
        .say("sre", "Final answer: the checkout pods were OOM killed. TERMINATE")
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="ok")
        .call("sre", "get_events", {"namespace": "shop"}, result="none")
    )
    finding = only(UnawareOfTermination().annotate(run.build()), "FM-1.5")
    assert finding.evidence.step_indexes == (1, 2, 3)
    assert finding.evidence.agent == "sre"


def test_termination_unaware_fires_when_the_run_ends_in_a_loop() -> None:
    run = Run().call("sre", "get_logs", {"pod": "a"}, result="ok")
    for _ in range(3):
        run.call("sre", "get_rollout_status", {"deployment": "checkout"}, result="1/3 updated")
    finding = only(UnawareOfTermination().annotate(run.build()), "FM-1.5")
    assert finding.evidence.step_indexes == (1, 2, 3)


@pytest.mark.parametrize(
    "run",
    [
        # one more call after "done" is a last look, not a loop past the end
        Run().say("sre", "Task complete.").call("sre", "get_pods", {}, result=PODS_OK),
        # a plan to finish is not a declaration
        Run()
        .say("sre", "Once the task is complete I will report back.")
        .call("sre", "get_pods", {}, result=PODS_OK)
        .call("sre", "get_logs", {"pod": "a"}, result="ok"),
        # a new request reopens the task
        Run()
        .say("sre", "Final answer: restart fixed it.")
        .user("Now check the cart service too.")
        .call("sre", "get_pods", {"app": "cart"}, result=PODS_OK)
        .call("sre", "get_logs", {"pod": "cart-1"}, result="ok"),
        # the verb, not the end-of-chat token
        Run()
        .say("sre", "We need to terminate the stuck pod.")
        .call("sre", "delete_pod", {"pod": "a"}, result="deleted")
        .call("sre", "get_pods", {}, result=PODS_OK),
    ],
)
def test_termination_unaware_near_misses(run: Run) -> None:
    assert UnawareOfTermination().annotate(run.build(error="ValueError: bad input")) == ()


# --- FM-3.1 premature termination -----------------------------------------------------------------


def test_premature_termination_fires_on_an_announced_step_that_never_happens() -> None:
    run = (
        Run("Find why checkout is slow")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .say("sre", "The pods are running. Next, I will check the logs of the checkout service.")
    )
    finding = only(PrematureTermination().annotate(run.build()), "FM-3.1")
    assert finding.evidence.step_indexes == (1,)
    assert finding.annotator == "rules/premature_termination"
    assert "check the logs" in finding.explanation


def test_premature_termination_fires_on_a_call_that_never_returned() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("sre", "get_logs", {"pod": "checkout-7d9f"})
    )
    finding = only(PrematureTermination().annotate(run.build()), "FM-3.1")
    assert finding.evidence.step_indexes == (1,)
    assert "get_logs" in finding.explanation


def test_premature_termination_fires_on_a_dangling_handoff() -> None:
    run = Run().call("triage", "get_pods", {}, result=PODS_CRASHING).handoff("triage", "remediator")
    finding = only(PrematureTermination().annotate(run.build()), "FM-3.1")
    assert finding.evidence.step_indexes == (1,)
    assert finding.evidence.agent == "triage"
    assert "remediator" in finding.explanation


def test_premature_termination_fires_on_a_plan_cut_short() -> None:
    run = (
        Run()
        .think("sre", "Plan:\n1. Check the pods\n2. Query the error-rate metrics\n3. Restart the deployment")
        .call("sre", "get_pods", {}, result=PODS_OK)
        .say("sre", "Task complete.")
    )
    finding = only(PrematureTermination().annotate(run.build()), "FM-3.1")
    assert finding.evidence.step_indexes == (2, 0)
    assert "3 tool steps" in finding.explanation


@pytest.mark.parametrize(
    ("run", "error"),
    [
        # "let me know" is politeness, not a next step
        (
            Run()
            .call("sre", "get_pods", {}, result=PODS_OK)
            .say("sre", "Final answer: the pods are fine. Let me know if you need anything else."),
            "",
        ),
        # no result anywhere: content capture is off, nothing is hanging
        (Run().call("sre", "get_pods", {}).call("sre", "get_logs", {"pod": "a"}), ""),
        # stopped by a limit: that is FM-1.5's finding
        (
            Run().call("sre", "get_pods", {}, result=PODS_OK).say("sre", "Let me check the logs."),
            "max turns reached",
        ),
        # the announced step happens
        (
            Run()
            .say("sre", "Let me check the logs.")
            .call("sre", "get_logs", {"pod": "a"}, result="ok")
            .say("sre", "The logs are clean; the issue is resolved."),
            "",
        ),
    ],
)
def test_premature_termination_near_misses(run: Run, error: str) -> None:
    assert PrematureTermination().annotate(run.build(error=error)) == ()


# --- FM-2.6 reasoning-action mismatch -------------------------------------------------------------


def test_mismatch_fires_when_the_next_call_is_not_the_announced_one() -> None:
    run = (
        Run()
        .call("sre", "get_logs", {"pod": "a"}, result="ok")
        .think("sre", "The pod restarted twice. I will query the metrics next to see the memory trend.")
        .call("sre", "restart_pod", {"pod": "a"}, result="restarted")
        .call("sre", "query_metrics", {"q": "memory"}, result="1.2Gi")
    )
    finding = only(ReasoningActionMismatch().annotate(run.build()), "FM-2.6")
    assert finding.evidence.step_indexes == (2, 1)
    assert finding.evidence.agent == "sre"
    assert "query_metrics" in finding.explanation and "restart_pod" in finding.explanation


def test_mismatch_fires_when_the_agent_does_what_it_said_not_to() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {}, result=PODS_CRASHING)
        .think("sre", "We should NOT restart the pod before reading its logs; get_logs comes first.")
        .call("sre", "restart_pod", {"pod": "checkout-7d9f"}, result="restarted")
    )
    finding = only(ReasoningActionMismatch().annotate(run.build()), "FM-2.6")
    assert finding.evidence.step_indexes == (2, 1)
    assert finding.confidence == pytest.approx(0.8)
    assert "says not to" in finding.explanation


@pytest.mark.parametrize(
    "reasoning",
    [
        "I will call get_logs next.",
        "If get_logs shows nothing, I will restart the pod.",
        "Instead of restart_pod, I will get the logs first.",
        "get_logs earlier showed nothing useful, so I'll get the logs of the sidecar.",
    ],
)
def test_mismatch_ignores_reasoning_that_matches_the_next_action(reasoning: str) -> None:
    run = (
        Run()
        .call("sre", "restart_pod", {"pod": "b"}, result="restarted")
        .think("sre", reasoning)
        .call("sre", "get_logs", {"pod": "checkout-7d9f"}, result="ok")
    )
    assert ReasoningActionMismatch().annotate(run.build()) == ()


# --- FM-3.2 no or incomplete verification ---------------------------------------------------------


def test_no_verification_fires_on_success_claimed_right_after_a_change() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_CRASHING)
        .call("sre", "restart_deployment", {"name": "checkout"}, result="deployment restarted")
        .say("sre", "I restarted checkout; the issue is resolved.")
    )
    finding = only(NoVerification().annotate(run.build()), "FM-3.2")
    assert finding.evidence.step_indexes == (2, 1)
    assert finding.evidence.agent == "sre"
    assert "restart_deployment" in finding.explanation


@pytest.mark.parametrize(
    "run",
    [
        # the check comes after the restart
        Run()
        .call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .say("sre", "All pods are healthy; the issue is resolved."),
        # a change with no claim of success
        Run().call("sre", "restart_deployment", {"name": "checkout"}, result="restarted"),
        # a hedged claim is a plan, not a claim
        Run()
        .call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
        .say("sre", "It should be resolved once the rollout completes."),
    ],
)
def test_no_verification_near_misses(run: Run) -> None:
    assert NoVerification().annotate(run.build()) == ()


# --- FM-3.3 incorrect verification ----------------------------------------------------------------


def test_incorrect_verification_fires_on_a_claim_against_a_failing_check() -> None:
    run = (
        Run()
        .call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_CRASHING)
        .say("sre", "Verified: the checkout service is healthy again.")
    )
    finding = only(IncorrectVerification().annotate(run.build()), "FM-3.3")
    assert finding.evidence.step_indexes == (2, 1)
    assert finding.evidence.agent == "sre"
    assert "CrashLoopBackOff" in finding.explanation
    assert len(finding.explanation) <= 200


def test_incorrect_verification_fires_on_a_claim_after_a_failed_call() -> None:
    run = (
        Run()
        .call("sre", "check_health", {"service": "checkout"}, error="TimeoutError")
        .say("sre", "The checkout service is healthy.")
    )
    finding = only(IncorrectVerification().annotate(run.build()), "FM-3.3")
    assert finding.evidence.step_indexes == (1, 0)
    assert finding.confidence == pytest.approx(0.8)
    assert "TimeoutError" in finding.explanation


@pytest.mark.parametrize(
    ("result", "claim"),
    [
        (PODS_OK, "Verified: all pods are healthy and the issue is resolved."),  # the check passed
        ("3/3 ready, 0 errors", "Confirmed, the service is healthy."),
        (PODS_CRASHING, "Confirmed: checkout is in CrashLoopBackOff."),  # acknowledges the failure
        (PODS_CRASHING, "The fix is not verified yet."),  # no claim
    ],
)
def test_incorrect_verification_near_misses(result: str, claim: str) -> None:
    run = Run().call("sre", "get_pods", {"namespace": "shop"}, result=result).say("sre", claim)
    assert IncorrectVerification().annotate(run.build()) == ()


# --- FM-2.3 task derailment -----------------------------------------------------------------------


def test_derailment_fires_on_calls_about_things_nothing_mentioned() -> None:
    run = (
        Run("Checkout latency is high in namespace shop")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("sre", "get_logs", {"service": "billing-db", "namespace": "legacy"}, result="billing-db ok")
        .call("sre", "describe", {"service": "billing-db"}, result="billing-db: 3 replicas")
        .call("sre", "query_metrics", {"host": "db-17.internal"}, result="cpu 20%")
    )
    finding = only(TaskDerailment().annotate(run.build()), "FM-2.3")
    assert finding.evidence.step_indexes == (1, 2, 3)
    assert "billing-db" in finding.explanation
    assert finding.confidence <= 0.6


def test_derailment_ignores_entities_found_in_earlier_results() -> None:
    run = (
        Run("Checkout latency is high in namespace shop")
        .call("sre", "get_dependencies", {"service": "checkout"}, result='["billing-db", "db-17.internal"]')
        .call("sre", "get_logs", {"service": "billing-db"}, result="ok")
        .call("sre", "describe", {"service": "billing-db"}, result="3 replicas")
        .call("sre", "query_metrics", {"host": "db-17.internal"}, result="cpu 20%")
    )
    assert TaskDerailment().annotate(run.build()) == ()


# --- RuleAnnotator --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "conversation",
    [
        Conversation(trace_id="0" * 32, turns=()),
        Run("Why is checkout slow?").user("Why is checkout slow?").build(),
    ],
)
def test_nothing_to_see_in_empty_runs(conversation: Conversation) -> None:
    assert RuleAnnotator().annotate(conversation) == ()
    for detector in default_detectors():
        assert detector.annotate(conversation) == ()


def test_every_detector_is_an_annotator_with_a_rules_name() -> None:
    detectors = default_detectors()
    assert all(isinstance(detector, Annotator) for detector in detectors)
    names = [detector.name for detector in detectors]
    assert len(set(names)) == len(names) and all(name.startswith("rules/") for name in names)
    assert RuleAnnotator().name == "rules"


class _Broken:
    name = "rules/broken"

    def annotate(self, conversation: Conversation) -> Sequence[Finding]:
        raise RuntimeError("boom")


def test_a_detector_that_raises_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    run = (
        Run()
        .call("sre", "check_health", {"service": "checkout"}, error="TimeoutError")
        .say("sre", "The checkout service is healthy.")
    )
    annotator = RuleAnnotator([_Broken(), IncorrectVerification()])
    with caplog.at_level(logging.ERROR, logger="mast_otel.annotate.rules"):
        findings = annotator.annotate(run.build())
    assert [f.mode.code for f in findings] == ["FM-3.3"]
    assert any("rules/broken" in record.getMessage() for record in caplog.records)


def test_findings_are_merged_one_per_mode_and_sorted_by_first_step() -> None:
    run = (
        Run("Checkout pods crash in namespace shop")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_CRASHING)
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_CRASHING)
        .call("sre", "restart_deployment", {"name": "checkout"}, result="restarted")
        .say("sre", "Restart applied successfully; the service is healthy again.")
        .turns
    )
    turns = [*run, Turn(index=4, kind=TurnKind.AGENT_MESSAGE, agent="sre", content="Task complete.")]
    findings = RuleAnnotator().annotate(Conversation(trace_id="0" * 32, turns=tuple(turns)))
    codes = [f.mode.code for f in findings]
    assert sorted(codes) == ["FM-1.3", "FM-3.2"]  # repetition at step 0, the unverified claim at step 3
    assert [f.evidence.first_step for f in findings] == sorted(f.evidence.first_step for f in findings)
    assert findings[1].evidence.span_ids == ("span03", "span02")
    for finding in findings:
        assert 0.0 <= finding.confidence <= 1.0
        assert "\n" not in finding.explanation and len(finding.explanation) <= 200


def test_a_well_behaved_run_has_no_findings() -> None:
    run = (
        Run("Checkout in namespace shop returns errors; find the cause and fix it.")
        .user("Checkout in namespace shop returns errors; find the cause and fix it.")
        .think("sre", "I will check the pods of checkout first.", context_size=2)
        .call(
            "sre", "get_pods", {"namespace": "shop", "app": "checkout"}, result=PODS_CRASHING, context_size=2
        )
        .think("sre", "The pod keeps crashing, so I will get the logs of checkout-7d9f.", context_size=4)
        .call(
            "sre",
            "get_logs",
            {"pod": "checkout-7d9f", "namespace": "shop"},
            result="OOMKilled",
            context_size=4,
        )
        .think(
            "sre",
            "It runs out of memory. I will patch the deployment to raise its memory limit.",
            context_size=6,
        )
        .call(
            "sre", "patch_deployment", {"name": "checkout", "memory": "1Gi"}, result="patched", context_size=6
        )
        .think("sre", "Now I will check the pods again to verify the fix.", context_size=8)
        .call("sre", "get_pods", {"namespace": "shop", "app": "checkout"}, result=PODS_OK, context_size=8)
        .say(
            "sre",
            "Verified: checkout is healthy again. Final answer: it was OOM killed; memory raised to 1Gi.",
        )
    )
    assert RuleAnnotator().annotate(run.build()) == ()


def test_a_run_ending_on_a_question_is_not_premature() -> None:
    run = (
        Run()
        .call("sre", "get_pods", {}, result=PODS_CRASHING)
        .say("sre", "Checkout is crash-looping. Should I restart it? I will wait for your go-ahead.")
    )
    assert PrematureTermination().annotate(run.build()) == ()


def test_an_instruction_to_say_terminate_is_not_a_declaration() -> None:
    run = (
        Run()
        .say("manager", "When you are done, reply TERMINATE.")
        .call("manager", "get_pods", {}, result=PODS_OK)
        .call("manager", "get_logs", {"pod": "a"}, result="ok")
    )
    assert UnawareOfTermination().annotate(run.build()) == ()


def test_a_context_drop_after_a_handoff_counts_less() -> None:
    run = (
        Run()
        .think("worker", "a", context_size=12)
        .handoff("worker", "planner")
        .handoff("planner", "worker")
        .think("worker", "b", context_size=2)
    )
    finding = only(HistoryLoss().annotate(run.build()), "FM-1.4")
    assert finding.evidence.step_indexes == (3, 0)
    assert finding.confidence == pytest.approx(0.5)


def test_an_intent_in_a_plain_message_counts_less_than_in_reasoning() -> None:
    run = (
        Run()
        .call("sre", "get_logs", {"pod": "a"}, result="ok")
        .say("sre", "I will not restart the pod yet.")
        .call("sre", "restart_pod", {"pod": "a"}, result="restarted")
    )
    finding = only(ReasoningActionMismatch().annotate(run.build()), "FM-2.6")
    assert finding.evidence.step_indexes == (2, 1)
    assert finding.confidence == pytest.approx(0.7)


def test_hostile_input_is_handled_by_every_detector() -> None:
    deep = "[" * 5000 + "]" * 5000
    huge = "ERROR " * 400_000  # 2.4 MB of result
    run = (
        Run("task \udcff with a lone surrogate")
        .call("a", "get_x", deep, result=huge)
        .call("a", "get_x", deep, result=huge)
        .call("a", "get_x", deep, result=huge)
        .call("a", "", "{not json", result=None, error="x" * 100_000)
        .say("a", "Verified: healthy. " * 10_000, context_size=-5)
        .handoff("a", "")
    )
    conversation = run.build(error="\x00" * 10)
    for detector in default_detectors():
        for finding in detector.annotate(conversation):
            assert len(finding.explanation) <= 200
            assert len(finding.evidence.step_indexes) <= 32


def test_an_agent_output_recorded_twice_is_not_a_repetition() -> None:
    answer = "Root cause: the checkout pods ran out of memory; the limit is now 1Gi and they are healthy."
    run = (
        Run()
        .call("sre", "get_pods", {}, result=PODS_OK)
        .say("sre", answer)  # the last LLM call's output
        .think("sre", "Reporting back.")
        .say("sre", answer)  # the same output, recorded again by the agent's span
    )
    assert StepRepetition().annotate(run.build()) == ()


# --- shared helpers added for speed: same answers as the plain way ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Revision 42 (payment-api:2.14.0) rolled out. We should NOT restart; instead I'll wait.\nNext: query",
        "I don't know.  Why?  getLogs and HTTPServer said: ok",
        "",
    ],
)
def test_sentence_words_match_words_of_each_sentence(text: str) -> None:
    assert sentence_words(text) == [w for w in (words(s) for s in sentences(text)) if w]


def test_cues_return_matches_on_the_original_text() -> None:
    text = "Status: VERIFIED — the Checkout service is Healthy again."
    match = find_success_claim(text)
    assert match is not None and match.group(0) == "VERIFIED"
    assert text[match.start() : match.end()] == "VERIFIED"


def test_failure_markers_are_found_whatever_their_case_and_place() -> None:
    assert find_failure_marker("all good\n" * 500 + "Back-off: CrashLoopBackOff") is not None
    assert find_failure_marker("HTTP/1.1 503 Service Unavailable") is not None
    # a character whose lower case is longer (İ) shifts positions: the plain path takes over
    assert find_failure_marker("İİİ request FAILED") is not None


def test_entity_finder_finds_whole_identifiers_only() -> None:
    finder = EntityFinder(["api", "billing-db", "shop"])
    found = finder.find("the rapid shop/api of billing-db-0 is down", known=set())
    assert found == {"api", "shop"}  # not inside "rapid", not "billing-db" inside "billing-db-0"
    assert finder.find("shop and api", known={"shop"}) == {"api"}


def test_forbidden_verbs_read_the_task_prohibitions() -> None:
    task = "Find why checkout is slow. Do not restart any pods, never scale, and avoid deleting data."
    assert forbidden_verbs(task) == {"restart", "scale", "delete"}
    assert forbidden_verbs("Restart the pods if needed.") == frozenset()


# --- FM-1.1 disobey task specification -------------------------------------------------------------


def test_task_specification_fires_on_a_call_the_task_forbids() -> None:
    run = (
        Run("Investigate the checkout latency. Do not restart any pods.")
        .call("sre", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("sre", "restart_pod", {"pod": "checkout-7d9f"}, result="restarted")
    )
    finding = only(DisobeyTaskSpecification().annotate(run.build()), "FM-1.1")
    assert finding.evidence.step_indexes == (1,)
    assert finding.confidence == pytest.approx(0.75)
    assert "restart" in finding.explanation


def test_task_specification_fires_on_made_up_inputs() -> None:
    run = (
        Run("Compute the mean of the values in data.csv")
        .call("analyst", "read_file", {"path": "data.csv"}, error="FileNotFoundError")
        .say("analyst", "The file is missing. Let's assume we have the following values: 3, 5, 8.")
        .say("analyst", "The mean of the hypothetical values is 5.33.")
    )
    finding = only(DisobeyTaskSpecification().annotate(run.build()), "FM-1.1")
    assert finding.evidence.step_indexes == (1, 2)
    assert finding.evidence.agent == "analyst"
    assert finding.confidence == pytest.approx(0.6)


@pytest.mark.parametrize(
    "run",
    [
        Run("Do not restart any pods.")
        .call("sre", "get_pods", {}, result=PODS_OK)
        .call("sre", "describe_pod", {"pod": "a"}, result="ok"),
        Run("Compute the mean of data.csv").say(
            "analyst", "Instead of using placeholder values, I will download the real file first."
        ),
        Run("Compute the mean of data.csv").say("analyst", "We should not assume anything; let me read it."),
        Run("Restart the checkout pods.").call("sre", "restart_pod", {"pod": "a"}, result="restarted"),
    ],
)
def test_task_specification_near_misses(run: Run) -> None:
    assert DisobeyTaskSpecification().annotate(run.build()) == ()


# --- FM-1.2 disobey role specification -------------------------------------------------------------


def test_role_specification_fires_on_a_line_written_as_another_agent() -> None:
    run = (
        Run()
        .say("planner", "Plan: migrate the table, then verify the row counts.")
        .say("reviewer", "Looks reasonable to me.")
        .say("planner", "Great.\nReviewer: I agree with the migration, we can ship it.")
    )
    finding = only(DisobeyRoleSpecification().annotate(run.build()), "FM-1.2")
    assert finding.evidence.step_indexes == (2,)
    assert finding.evidence.agent == "planner"
    assert finding.confidence == pytest.approx(0.6)


def test_role_specification_fires_on_an_agent_speaking_as_another_role() -> None:
    run = (
        Run()
        .say("Tizin_Translation_Expert", "The translation is 'Maktay Zapple Pa'.")
        .say("Verification_Expert", "As the Translation Expert, I confirm the translation is right.")
    )
    finding = only(DisobeyRoleSpecification().annotate(run.build()), "FM-1.2")
    assert finding.evidence.step_indexes == (1,)
    assert finding.confidence == pytest.approx(0.5)


@pytest.mark.parametrize(
    "run",
    [
        # a roster describes the team; it does not speak for anyone
        Run()
        .say("planner", "The team:\nReviewer: an agent that reviews changes.\nCoder: writes the code.")
        .say("reviewer", "Ready.")
        .say("coder", "Ready."),
        # one agent alone has nobody to impersonate
        Run().say("planner", "Reviewer: I agree with myself."),
        # speaking as itself
        Run()
        .say("Data_Analysis_Expert", "As the data analysis expert, I computed the mean.")
        .say("Verification_Expert", "Checked."),
    ],
)
def test_role_specification_near_misses(run: Run) -> None:
    assert DisobeyRoleSpecification().annotate(run.build()) == ()


# --- FM-2.1 conversation reset ------------------------------------------------------------------------

TASK = "Find the root cause of the checkout latency spike in namespace shop and mitigate it safely"


def test_conversation_reset_fires_when_the_task_is_restated_after_work() -> None:
    run = (
        Run(TASK)
        .user(TASK)
        .think("lead", f"We are working on the following request: {TASK}. Plan: check pods, then logs.")
        .call("lead", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("lead", "get_logs", {"pod": "checkout-7d9f"}, result="GET /cart 200")
        .say("lead", "Nothing obvious so far.")
        .think("lead", f"New plan. We are working on the following request: {TASK}.")
    )
    finding = only(ConversationReset().annotate(run.build()), "FM-2.1")
    assert finding.evidence.step_indexes == (5,)
    assert finding.confidence == pytest.approx(0.65)  # restated and announced ("new plan")


def test_conversation_reset_fires_on_an_announced_restart() -> None:
    run = (
        Run(TASK)
        .call("lead", "get_pods", {"namespace": "shop"}, result=PODS_OK)
        .call("lead", "get_logs", {"pod": "a"}, result="ok")
        .say("lead", "That went nowhere.")
        .say("lead", "Let's start over from scratch with a different approach.")
    )
    finding = only(ConversationReset().annotate(run.build()), "FM-2.1")
    assert finding.evidence.step_indexes == (3,)
    assert finding.confidence == pytest.approx(0.4)


@pytest.mark.parametrize(
    "run",
    [
        # restating the task at the start is how work begins
        Run(TASK).user(TASK).think("lead", f"The request: {TASK}.").call("lead", "get_pods", {}, result="ok"),
        # handing the task down to a sub-agent is delegation, not a reset
        Run(TASK)
        .call("lead", "get_pods", {}, result="ok")
        .call("lead", "get_logs", {}, result="ok")
        .call("lead", "get_events", {}, result="ok")
        .say("lead", TASK, target_agent="worker"),
    ],
)
def test_conversation_reset_near_misses(run: Run) -> None:
    assert ConversationReset().annotate(run.build()) == ()


# --- FM-2.2 fail to ask for clarification -----------------------------------------------------------


def test_no_clarification_fires_on_a_guess_about_missing_information() -> None:
    run = (
        Run("How many tickets were sold last year?")
        .say("analyst", "The year is not specified in the request, so I'll assume it means 2023.")
        .call("analyst", "query_sales", {"year": 2023}, result="1200")
    )
    finding = only(FailToAskForClarification().annotate(run.build()), "FM-2.2")
    assert finding.evidence.step_indexes == (0,)
    assert finding.confidence == pytest.approx(0.5)
    assert "not specified" in finding.explanation


@pytest.mark.parametrize(
    "text",
    [
        "The year is not specified in the request. Which year do you mean?",  # it asks
        "I'll assume the default region, as the runbook says.",  # nothing is missing
        "The year is not specified, and I cannot proceed without it.",  # no guess
    ],
)
def test_no_clarification_near_misses(text: str) -> None:
    assert FailToAskForClarification().annotate(Run().say("analyst", text).build()) == ()


# --- FM-2.4 information withholding ------------------------------------------------------------------


def test_withholding_fires_when_a_failure_is_left_out_of_the_report() -> None:
    run = (
        Run()
        .say("lead", "Worker, please check the health of checkout.")
        .handoff("lead", "worker")
        .call("worker", "check_health", {"service": "checkout"}, error="TimeoutError")
        .say("worker", "I looked at the checkout service as asked; over to you.")
        .say("lead", "Thanks, then we are done.")
    )
    finding = only(InformationWithholding().annotate(run.build()), "FM-2.4")
    assert finding.evidence.step_indexes == (3, 2)
    assert finding.evidence.agent == "worker"
    assert "TimeoutError" in finding.explanation


@pytest.mark.parametrize(
    "report",
    [
        "The health check timed out, so I could not verify checkout.",  # reported
        "Verified: checkout is healthy.",  # a false success claim is FM-3.3's
    ],
)
def test_withholding_ignores_reported_failures(report: str) -> None:
    run = (
        Run()
        .say("lead", "Worker, please check checkout.")
        .call("worker", "check_health", {"service": "checkout"}, error="TimeoutError")
        .say("worker", report)
        .say("lead", "Thanks.")
    )
    assert InformationWithholding().annotate(run.build()) == ()


def test_withholding_needs_somebody_to_withhold_from() -> None:
    run = (
        Run()
        .call("sre", "check_health", {"service": "checkout"}, error="TimeoutError")
        .say("sre", "Moving on to the next service.")
    )
    assert InformationWithholding().annotate(run.build()) == ()


# --- FM-2.5 ignored other agent's input --------------------------------------------------------------


def test_ignored_input_fires_on_the_same_call_after_a_correction() -> None:
    run = (
        Run()
        .call("coder", "run_tests", {"path": "tests/"}, result="ImportError: no module named app")
        .say("coder", "The tests fail on an import.")
        .say("reviewer", "You should fix the import in app/__init__.py before running the tests again.")
        .call("coder", "run_tests", {"path": "tests/"}, result="ImportError: no module named app")
    )
    finding = only(IgnoredOtherAgentsInput().annotate(run.build()), "FM-2.5")
    assert finding.evidence.step_indexes == (3, 2, 0)
    assert finding.evidence.agent == "coder"
    assert finding.confidence == pytest.approx(0.5)


def test_ignored_input_fires_on_the_same_answer_after_a_correction() -> None:
    answer = "The answer is 42 because the table lists 42 entries for the year 2019 in total."
    run = (
        Run()
        .say("solver", answer)
        .say("checker", "That is wrong, please use the 2020 table instead.")
        .say("solver", answer + " Final.")
    )
    finding = only(IgnoredOtherAgentsInput().annotate(run.build()), "FM-2.5")
    assert finding.evidence.step_indexes == (2, 1, 0)
    assert finding.confidence == pytest.approx(0.45)


@pytest.mark.parametrize(
    "run",
    [
        # the correction is followed
        Run()
        .call("coder", "run_tests", {"path": "tests/"}, result="ImportError")
        .say("reviewer", "You should fix the import first.")
        .call("coder", "edit_file", {"path": "app/__init__.py"}, result="ok"),
        # the user is not another agent
        Run()
        .call("coder", "run_tests", {"path": "tests/"}, result="ImportError")
        .user("You should fix the import first.")
        .call("coder", "run_tests", {"path": "tests/"}, result="ImportError"),
    ],
)
def test_ignored_input_near_misses(run: Run) -> None:
    assert IgnoredOtherAgentsInput().annotate(run.build()) == ()


# --- all 14 --------------------------------------------------------------------------------------------


def test_the_default_detectors_cover_all_14_modes() -> None:
    """One small run per mode, all through `RuleAnnotator`: every mode of the taxonomy is reachable."""
    runs = {
        "FM-1.1": Run("Do not restart pods.").call("a", "restart_pod", {"pod": "x"}, result="ok"),
        "FM-1.2": Run().say("a", "Hi.").say("b", "Ok.").say("a", "b: I agree with everything."),
        "FM-1.3": Run().call("a", "get_x", {"q": 1}, result="1").call("a", "get_x", {"q": 1}, result="1"),
        "FM-1.4": Run().think("a", "x", context_size=12).think("a", "y", context_size=2),
        "FM-1.5": Run().call("a", "get_x", {}, result="1").say("a", "The", finish_reason="length"),
        "FM-2.1": Run(TASK)
        .call("a", "get_x", {}, result="1")
        .call("a", "get_y", {}, result="2")
        .say("a", "Hmm.")
        .say("a", "Let's start over from scratch."),
        "FM-2.2": Run().say("a", "The year is not specified, so I'll assume 2023."),
        "FM-2.3": Run("Checkout latency in namespace shop")
        .call("a", "get_logs", {"service": "billing-db"}, result="ok")
        .call("a", "describe", {"service": "billing-db"}, result="ok")
        .call("a", "query", {"host": "db-17.internal"}, result="ok"),
        "FM-2.4": Run()
        .say("lead", "Check it.")
        .call("w", "check", {}, error="TimeoutError")
        .say("w", "Looked at it.")
        .say("lead", "Thanks."),
        "FM-2.5": Run()
        .call("c", "run_tests", {"p": 1}, result="ImportError")
        .say("c", "Fails.")
        .say("r", "You should fix the import first.")
        .call("c", "run_tests", {"p": 1}, result="ImportError"),
        "FM-2.6": Run()
        .call("a", "get_pods", {}, result="ok")
        .think("a", "We should NOT restart the pod.")
        .call("a", "restart_pod", {}, result="ok"),
        "FM-3.1": Run().call("a", "get_pods", {}, result="ok").call("a", "get_logs", {"pod": "x"}),
        "FM-3.2": Run()
        .call("a", "restart_deployment", {}, result="restarted")
        .say("a", "The issue is resolved."),
        "FM-3.3": Run()
        .call("a", "check_health", {}, error="TimeoutError")
        .say("a", "The service is healthy."),
    }
    assert sorted(runs) == list(CODES)
    annotator = RuleAnnotator()
    for code, run in runs.items():
        assert code in {f.mode.code for f in annotator.annotate(run.build())}, code


def test_the_machinery_is_not_a_participant() -> None:
    stock = "There is no code from the last message for me to execute; let the others continue."
    run = (
        Run()
        .say("planner", "Let us compute it.")
        .say("executor", stock)
        .say("solver", "I think it is 42.")
        .say("executor", stock)
        .say("planner", "Agreed.")
        .say("executor", stock)
    )
    assert StepRepetition().annotate(run.build()) == ()
