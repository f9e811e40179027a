"""Scripted SRE incident-triage agents for `mast-otel demo`, acting in the world of `incidents.py`.

Nothing here talks to a model: every trace is synthetic. A run picks an incident from the
catalogue, a simulated model profile (`profiles.py`), whether the run succeeds, and the MAST
failure modes the run will exhibit. The scripted agent "sre-triage" then works the incident
against `SimulatedCluster`, sometimes handing the fix to a "remediator" sub-agent, and every step
goes out through `mast_otel.sdk`: each simulated LLM call with the history it saw, its reasoning
and the tools it asked for; each tool call with the cluster's result; handoffs; the graded
outcome, which for some runs a grader records after the run ended.

Outcomes are not coin flips painted on afterwards: `grade` reads the cluster (is the service
healthy?) and the agent's stated root cause.

Everything derives from the seed, never from clocks or uuids, so a seed replays the same runs with
the same contents; only trace and span ids differ.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Final, Literal

from mast_otel import sdk
from mast_otel.conversation.model import Outcome
from mast_otel.demo.incidents import (
    CATALOGUE,
    CLUSTER,
    TOOLS,
    UNRELATED_SERVICES,
    Action,
    Diagnosis,
    Incident,
    SimulatedCluster,
    ToolResult,
    grade,
)
from mast_otel.demo.profiles import PROFILES, ModeDraw, ModelProfile

TRIAGE_AGENT: Final = "sre-triage"
REMEDIATOR_AGENT: Final = "remediator"
PROVIDER_NAME: Final = "mast-otel-sim"
INCIDENT_ATTRIBUTE: Final = "mast.demo.incident"  # on the root span: which catalogue incident

# The agent framework's iteration budget (LLM calls of the triage agent); runs that exhaust it end
# with `MaxIterationsExceeded` on the root span, like LangGraph's GraphRecursionError.
MAX_ITERATIONS: Final = 18
# Tool output longer than this is cut in the agent's context (the tool span keeps all of it).
CONTEXT_CLIP_CHARS: Final = 1500
LATE_GRADING_RATE: Final = 0.2  # runs whose outcome a grader records after the run ended
GRADING_DELAY_RUNS: Final = 3  # ... that many runs later


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one scripted run did, for the demo's progress and honesty notes (and for tests)."""

    trace_id: str
    model: str
    profile: str  # ModelProfile.key
    outcome: Outcome
    score: float
    steps: int  # LLM calls plus tool calls, all agents of the run
    spans_emitted: int  # every span of the run's trace, a late outcome span included
    intended_modes: tuple[str, ...]  # MAST codes the script set out to exhibit, sorted
    incident: str = ""  # Incident.key
    outcome_reported_later: bool = False  # recorded by a grader after the run ended


class MaxIterationsExceeded(RuntimeError):
    """The agent framework's iteration budget ran out before the agent gave a final answer."""


# --- how agents word their actions -------------------------------------------------------------


def _purpose(action: Action) -> str:
    """What a call is for, as an agent says it: "look at the checkout pods in shop"."""
    a = action.arguments
    match action.tool:
        case "list_alerts":
            return f"see what is firing in {a.get('namespace') or CLUSTER}"
        case "get_pod_status":
            return f"look at the {a['deployment']} pods in {a['namespace']}"
        case "query_metrics":
            return "look at the related metrics"
        case "search_logs":
            return f"search the {a['service']} logs for '{a['query']}'"
        case "describe_deployment":
            return f"describe the {a['deployment']} deployment in {a['namespace']}"
        case "check_service_health":
            return f"verify {a['service']} in {a['namespace']}"
        case "restart_pod":
            return f"restart the pod {a['pod']}"
        case "rollback_deployment":
            return f"roll {a['deployment']} back to revision {a['to_revision']}"
        case "scale_deployment":
            return f"scale {a['deployment']} to {a['replicas']} replicas"
        case "set_resource_limits":
            kind = "memory" if "memory" in a else "cpu"
            return f"set the {kind} limit of {a['deployment']} to {a[kind]}"
        case "renew_certificate":
            return f"renew the certificate {a['namespace']}/{a['certificate']}"
    raise ValueError(f"no wording for the tool {action.tool!r}")


# The verbs `_purpose` opens a change with, in the past tense; reads have none.
_PAST_TENSE: Mapping[str, str] = MappingProxyType(
    {"restart": "restarted", "roll": "rolled", "scale": "scaled", "set": "set", "renew": "renewed"}
)


def _done(change: Action) -> str:
    """A change in the past tense, for reports: "rolled payment-api back to revision 41"."""
    verb, rest = _purpose(change).split(" ", 1)
    return f"{_PAST_TENSE[verb]} {rest}"


# How a model refuses a tool in words, for the reasoning-action mismatch.
_REFUSALS: Mapping[str, str] = MappingProxyType(
    {
        "restart_pod": "restart the pod",
        "scale_deployment": "scale the deployment",
    }
)


def _announce(finding: str, action: Action, purpose: str = "") -> str:
    return f"{_sentence(finding)} Next I will call {action.tool} to {purpose or _purpose(action)}."


def _sentence(text: str) -> str:
    # Never re-cased: findings may start with an identifier ("pgbouncer runs as...").
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


# --- the scripted agents -----------------------------------------------------------------------

TRIAGE_SYSTEM: Final = (
    f"You are {TRIAGE_AGENT}, an SRE incident-triage agent for the Kubernetes cluster {CLUSTER} "
    "(a synthetic environment of the mast-otel demo). Work the incident in the task: find the root "
    "cause, apply the smallest safe remediation, and verify it with check_service_health before you "
    f"declare the incident resolved. Tools: {', '.join(TOOLS)}. You may hand a remediation to the "
    f"{REMEDIATOR_AGENT} agent. Tool output longer than {CONTEXT_CLIP_CHARS} characters is cut in "
    "your context. Finish with the lines 'Root cause:', 'Remediation:' and 'Verification:'."
)
REMEDIATOR_SYSTEM: Final = (
    f"You are {REMEDIATOR_AGENT}. Apply exactly the remediation you are given, with one tool call, "
    "and report what you changed. Do not investigate."
)


@dataclass(slots=True)
class _Tally:
    """What a run emitted, across its agents."""

    llm_calls: int = 0
    tool_calls: int = 0
    spans: int = 0


class _ScriptedAgent:
    """One agent of a run: keeps its chat history and turns scripted decisions into SDK spans.

    `act` is one iteration of a tool-calling loop: an LLM call whose answer asks for one tool, then
    the tool's execution against the cluster. `answer` is the final LLM call. The history is what
    the next LLM call sees, OpenAI-style, with long tool output clipped as agent frameworks do.
    """

    def __init__(
        self,
        run: sdk.AgentRun,
        cluster: SimulatedCluster,
        tally: _Tally,
        *,
        system: str,
        task: str,
        call_id_seed: str,
        max_iterations: int | None = None,
        reasoning_spans: bool = False,
    ) -> None:
        self._run = run
        self._cluster = cluster
        self._tally = tally
        self._system = system
        self._call_id_seed = call_id_seed
        self._max_iterations = max_iterations
        # ReAct-style frameworks log the thought as a step of its own rather than in the model output.
        self._reasoning_spans = reasoning_spans
        self._iterations = 0
        self._history: list[dict[str, object]] = [{"role": "user", "content": task}]

    def act(self, thought: str, action: Action, *, text: str | None = None) -> ToolResult:
        call_id = self._llm_call(thought, text, action)
        with self._run.tool_call(action.tool, arguments=dict(action.arguments), call_id=call_id) as span:
            result = self._cluster.call(action)
            span.set_result(result.output)
            if result.error_type:
                span.set_error(result.error_type, result.text)
        self._tally.tool_calls += 1
        self._tally.spans += 1
        self._history.append({"role": "tool", "tool_call_id": call_id, "content": _clip(result.text)})
        return result

    def answer(self, thought: str, text: str) -> None:
        self._llm_call(thought, text, None)

    def hear(self, speaker: str, text: str) -> None:
        """Another agent's report lands in this agent's context, named as group chats do."""
        self._history.append({"role": "user", "name": speaker, "content": text})

    def forget(self, keep: int) -> None:
        """A naive memory window: only the last `keep` messages survive, the task and alerts do not."""
        self._history = self._history[-keep:]

    def delegate(self, thought: str, action: Action, task_id: str) -> str:
        """Hand `action` to the remediator sub-agent; returns its report."""
        self._llm_call(thought, f"Handing off to {REMEDIATOR_AGENT}: {_purpose(action)}.", None)
        self._run.handoff(REMEDIATOR_AGENT, reason=f"{task_id}: {_purpose(action)}")
        instruction = (
            f"{task_id}: {_purpose(action)}. Use {action.tool} with arguments "
            f"{json.dumps(dict(action.arguments))}."
        )
        with self._run.sub_agent(REMEDIATOR_AGENT, task=instruction) as sub:
            remediator = _ScriptedAgent(
                sub,
                self._cluster,
                self._tally,
                system=REMEDIATOR_SYSTEM,
                task=instruction,
                call_id_seed=f"{self._call_id_seed}/{REMEDIATOR_AGENT}",
                reasoning_spans=True,
            )
            result = remediator.act(
                f"The instruction is explicit. I will call {action.tool} to {_purpose(action)}.", action
            )
            if result.error_type:
                report = f"Could not {_purpose(action)}: {result.text}"
            else:
                report = f"Done: {_done(action)}; the change is rolling out."
            remediator.answer("The change is applied; reporting back to the triage agent.", report)
            sub.set_final_answer(report)
        self._tally.spans += 2  # the handoff and the sub-agent's invoke_agent span
        self.hear(REMEDIATOR_AGENT, report)
        return report

    def _llm_call(self, thought: str, text: str | None, action: Action | None) -> str:
        """One LLM call; returns the id of the tool call it requested ("" when none)."""
        if self._max_iterations is not None and self._iterations >= self._max_iterations:
            raise MaxIterationsExceeded(
                f"{self._run.agent_name} reached max iterations ({self._max_iterations}) "
                "without a final answer"
            )
        self._iterations += 1
        self._tally.llm_calls += 1
        call_id = ""
        tool_calls: list[dict[str, object]] = []
        if action is not None:
            digest = hashlib.blake2b(f"{self._call_id_seed}/{self._tally.llm_calls}".encode(), digest_size=12)
            call_id = f"call_{digest.hexdigest()}"
            tool_calls = [{"id": call_id, "name": action.tool, "arguments": dict(action.arguments)}]
        output_chars = len(thought) + len(text or "") + sum(len(json.dumps(c)) for c in tool_calls)
        with self._run.chat(input_messages=self._history, system_instructions=self._system) as chat:
            chat.set_response(
                text=text,
                reasoning=None if self._reasoning_spans else thought,
                tool_calls=tool_calls,
                finish_reason="tool_calls" if tool_calls else "stop",
                input_tokens=_tokens_of(self._system) + sum(_tokens_of(json.dumps(m)) for m in self._history),
                output_tokens=max(1, output_chars // 4),
            )
        self._tally.spans += 1
        if self._reasoning_spans:
            self._run.reasoning(thought)
            self._tally.spans += 1
        message: dict[str, object] = {"role": "assistant", "content": text}
        if action is not None:
            arguments = json.dumps(dict(action.arguments))
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": action.tool, "arguments": arguments}}
            ]
        self._history.append(message)
        return call_id


def _tokens_of(text: str) -> int:
    return len(text) // 4 + 1  # the usual four characters per token


def _clip(text: str) -> str:
    if len(text) <= CONTEXT_CLIP_CHARS:
        return text
    return f"{text[:CONTEXT_CLIP_CHARS]}\n[... {len(text) - CONTEXT_CLIP_CHARS} more characters cut]"


# --- what a run will do ------------------------------------------------------------------------


# What the script can act out. A failed run needs one mode that makes it fail (a stall, an early
# stop, or a fix never or wrongly verified); a successful run only the benign detours.
SCRIPTED_MODES: Final = frozenset(
    {"FM-1.3", "FM-1.4", "FM-1.5", "FM-2.3", "FM-2.6", "FM-3.1", "FM-3.2", "FM-3.3"}
)
_FAILING_MODES: Final = frozenset({"FM-1.5", "FM-3.1", "FM-3.2", "FM-3.3"})
_SUCCESS_MODES: Final = frozenset({"FM-1.3", "FM-1.4", "FM-2.3"})
# A stalled run never declares anything, and a fix is either never verified or verified wrongly.
_EXCLUSIVE: Final = (frozenset({"FM-1.5", "FM-3.2"}), frozenset({"FM-1.5", "FM-3.1"}),
                     frozenset({"FM-3.2", "FM-3.3"}))  # fmt: skip

Verification = Literal["check", "none", "misread"]
Stall = Literal["", "logs", "health"]


def check_scriptable(profile: ModelProfile) -> None:
    """Raise ValueError unless every mode set the profile can draw makes a coherent run."""
    draws: tuple[tuple[bool, ModeDraw], ...] = ((True, profile.on_success), (False, profile.on_failure))
    for succeeds, draw in draws:
        for modes in draw.possible():
            problem = ""
            if not modes <= SCRIPTED_MODES:
                problem = f"the script cannot act out {sorted(modes - SCRIPTED_MODES)}"
            elif succeeds and not modes <= _SUCCESS_MODES:
                problem = f"a successful run cannot show {sorted(modes - _SUCCESS_MODES)}"
            elif not succeeds and not modes & _FAILING_MODES:
                problem = f"nothing makes the run fail; add one of {sorted(_FAILING_MODES)}"
            elif conflict := next((pair for pair in _EXCLUSIVE if pair <= modes), None):
                problem = f"{' and '.join(sorted(conflict))} exclude each other"
            if problem:
                outcome = "successful" if succeeds else "failed"
                raise ValueError(f"profile {profile.key!r}, {outcome} run with {sorted(modes)}: {problem}")


@dataclass(frozen=True, slots=True)
class _Plan:
    """A run's script, drawn before it starts; each field exists to exhibit (or avoid) a mode."""

    incident: Incident
    profile: ModelProfile
    succeeds: bool
    modes: frozenset[str]
    investigation_depth: int  # how many investigation steps before acting
    repeat_at: int | None  # FM-1.3: investigation step repeated twice, back to back
    poll_health: bool  # FM-1.3 (benign): re-checks a healthy service twice more
    detour_at: int | None  # after this investigation step come the detours below
    loses_history: bool  # FM-1.4: the history is cut, then the agent lists the alerts again
    derail_to: tuple[tuple[str, str], ...]  # FM-2.3: unrelated (service, namespace) it wanders to
    stall_on: Stall  # FM-1.5: loops on the logs or on the health check until the budget runs out
    keeps_acting: bool  # FM-1.5: keeps calling tools after declaring the incident resolved
    acts_against_reasoning: bool  # FM-2.6
    verification: Verification  # "none" is FM-3.2, "misread" FM-3.3
    stops_early: bool  # FM-3.1: ends announcing a next step that never happens
    delegates_fix: bool  # the fix goes through a handoff to the remediator
    graded_late: bool
    grader_knows_root_span: bool


def _plan(profile: ModelProfile, incident: Incident, rng: random.Random) -> _Plan:
    succeeds = rng.random() < profile.success_rate
    modes = (profile.on_success if succeeds else profile.on_failure).draw(rng)
    depth = len(incident.investigation)
    if profile.jumps_to_conclusions and not succeeds:
        depth = max(2, depth // 2)
    stall_on: Stall = ""
    keeps_acting = False
    if "FM-1.5" in modes:
        # A run that claims success keeps going after the claim; otherwise it loops until stopped.
        keeps_acting = "FM-3.3" in modes
        if not keeps_acting:
            stall_on = "health" if "FM-2.6" in modes or rng.random() < 0.5 else "logs"
    repeat_at, poll_health = None, False
    if "FM-1.3" in modes and not (stall_on or keeps_acting):  # loops repeat on their own
        poll_health = succeeds and rng.random() < 0.5
        repeat_at = None if poll_health else rng.randrange(depth)
    detours = "FM-1.4" in modes or "FM-2.3" in modes
    derail_to = tuple(rng.sample(UNRELATED_SERVICES, 3)) if "FM-2.3" in modes else ()
    acts_against_reasoning = "FM-2.6" in modes
    verification: Verification = "check"
    if "FM-3.3" in modes:
        verification = "misread"
    elif "FM-3.2" in modes:
        verification = "none"
    return _Plan(
        incident=incident,
        profile=profile,
        succeeds=succeeds,
        modes=modes,
        investigation_depth=depth,
        repeat_at=repeat_at,
        poll_health=poll_health,
        detour_at=min(2, depth - 1) if detours else None,
        loses_history="FM-1.4" in modes,
        derail_to=derail_to,
        stall_on=stall_on,
        keeps_acting=keeps_acting,
        acts_against_reasoning=acts_against_reasoning,
        verification=verification,
        stops_early="FM-3.1" in modes,
        delegates_fix=(
            stall_on != "logs" and not acts_against_reasoning and rng.random() < profile.handoff_rate
        ),
        graded_late=rng.random() < LATE_GRADING_RATE,
        grader_knows_root_span=rng.random() < 0.5,
    )


@dataclass(frozen=True, slots=True)
class _Conclusion:
    diagnosis: Diagnosis
    answer: str


def _work_incident(agent: _ScriptedAgent, plan: _Plan, task_id: str) -> _Conclusion:
    """The triage agent's script; raises MaxIterationsExceeded when the run stalls (FM-1.5)."""
    incident = plan.incident
    namespace, service = incident.namespace, incident.service
    alerts = Action("list_alerts", {"namespace": namespace})
    alerts_finding = (
        f"{len(incident.alerts)} alerts are firing ({', '.join(a.name for a in incident.alerts)}) "
        f"and they point at {service} in {namespace}"
    )
    agent.act(_announce(f"{task_id} is about {service} in {namespace}", alerts), alerts)
    finding = alerts_finding

    steps = incident.investigation[: plan.investigation_depth]
    for index, step in enumerate(steps):
        agent.act(_announce(finding, step.action, step.intent), step.action)
        finding = step.finding
        if index == plan.repeat_at:
            for doubt in ("The output looks cut off", "That still looks incomplete"):
                agent.act(
                    f"{doubt}; I will call {step.action.tool} again with the same arguments.", step.action
                )
        if index == plan.detour_at:
            if plan.loses_history:
                agent.forget(keep=2)
                finding = "I no longer have the alerts or the task details in my context"
            if plan.derail_to:
                finding = _wander_off(agent, plan.derail_to, finding)
            if plan.loses_history:
                agent.act(_announce(finding, alerts, f"see again what is firing in {namespace}"), alerts)
                finding = alerts_finding

    if plan.stall_on == "logs":
        logs = next(step.action for step in steps if step.action.tool == "search_logs")
        _loop(agent, logs, "The logs do not settle it yet; let me call search_logs again.")

    diagnosis = incident.root_cause if plan.succeeds or plan.acts_against_reasoning else incident.red_herring
    remedy = incident.fix if plan.succeeds else incident.wrong_fix
    lead = f"{_sentence(finding)} Root cause: {diagnosis.fault}."
    if plan.acts_against_reasoning:
        refusal = _REFUSALS.get(remedy.tool, f"call {remedy.tool}")
        agent.act(
            f"{lead} We should not {refusal} here; I will call {incident.fix.tool} to "
            f"{_purpose(incident.fix)}.",
            remedy,
        )
        finding = f"I {_done(remedy)}"
    elif plan.delegates_fix:
        report = agent.delegate(
            f"{lead} The {REMEDIATOR_AGENT} agent applies changes in this cluster, "
            f"so I hand it the fix: {_purpose(remedy)}.",
            remedy,
            task_id,
        )
        finding = f"The {REMEDIATOR_AGENT} reports: {report}"
    else:
        agent.act(f"{lead} Next I will call {remedy.tool} to {_purpose(remedy)}.", remedy)
        finding = f"I {_done(remedy)} and the change is rolling out"

    health = Action("check_service_health", {"namespace": namespace, "service": service})
    status = ""
    if plan.verification != "none":
        checked = agent.act(_announce(finding, health), health)
        status = str(checked.output.get("status", "")) if isinstance(checked.output, Mapping) else ""
        if plan.poll_health:
            for _ in range(2):
                agent.act("Let me call check_service_health once more to be sure the result holds.", health)
        if plan.stall_on == "health":
            _loop(
                agent,
                health,
                f"{service} still reports {status}; the change may need more time. "
                "Let me call check_service_health again.",
            )

    answer = _final_answer(plan, diagnosis, remedy, status)
    if plan.keeps_acting:
        pods = incident.investigation[0].action
        agent.act(
            "The incident is handled. Still, I will call get_pod_status to look at the pods once more.",
            pods,
            text=answer,
        )
        for wording in (
            "Let me call check_service_health again to be thorough.",
            "Let me call check_service_health one more time.",
        ):
            agent.act(wording, health)
        agent.answer("Same picture as before; repeating my summary.", answer)
    else:
        agent.answer("Writing the summary for the incident ticket.", answer)
    return _Conclusion(diagnosis, answer)


def _wander_off(agent: _ScriptedAgent, services: Sequence[tuple[str, str]], finding: str) -> str:
    """FM-2.3: without its context the agent checks services the incident never mentioned."""
    (first, first_ns), (second, _), (third, third_ns) = services[:3]
    agent.act(
        _announce(
            f"{finding}. Symptoms like these often start in a shared dependency",
            pods := Action("get_pod_status", {"namespace": first_ns, "deployment": first}),
        ),
        pods,
    )
    logs = Action("search_logs", {"service": second, "query": "connection refused", "since": "1h"})
    agent.act(
        _announce(f"The {first} pods look fine", logs, f"search the {second} logs for connection problems"),
        logs,
    )
    health = Action("check_service_health", {"namespace": third_ns, "service": third})
    agent.act(_announce(f"Nothing conclusive in the {second} logs", health), health)
    return f"{third} is fine as well, and none of this explains the incident"


def _loop(agent: _ScriptedAgent, action: Action, thought: str) -> None:
    """FM-1.5: the same call again and again until the framework's iteration budget stops the run."""
    while True:
        agent.act(thought, action)


def _final_answer(plan: _Plan, diagnosis: Diagnosis, remedy: Action, status: str) -> str:
    """The report; `status` is what the last health check said ("" when there was none)."""
    service = plan.incident.service
    lines = [f"Root cause: {diagnosis.fault} ({diagnosis.entity}).", f"Remediation: {_done(remedy)}."]
    if plan.verification == "check" and status == "healthy":
        lines.append(
            f"Verification: check_service_health reports {service} healthy with every check passing."
        )
    elif plan.verification == "check":
        lines.append(f"Verification: check_service_health still reports {service} {status}.")
    elif plan.verification == "misread":
        lines.append(f"Verification: confirmed, {service} is healthy again and all checks pass.")
    if plan.stops_early:
        # No declaration of completion: the agent says what it will do next and then stops.
        if plan.verification == "none":
            lines.append(f"{service} is healthy again.")
        lines.append(
            f"Next I will call query_metrics to watch {plan.incident.metric_watch} for the next hour."
        )
    else:
        lines.append("The incident is resolved.")
    return "\n".join(lines)


# --- the entry point ---------------------------------------------------------------------------

_INCIDENTS_SINCE = datetime(2025, 3, 3, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class _LateGrade:
    due_after_run: int
    trace_id: str
    root_span_id: str | None
    outcome: Outcome
    score: float


def run_demo_agents(
    *,
    runs: int,
    seed: int,
    on_run_done: Callable[[RunSummary], None] | None = None,
    profiles: Sequence[ModelProfile] = PROFILES,
) -> list[RunSummary]:
    """Emit `runs` scripted triage runs through `mast_otel.sdk` (configure it first); same seed, same runs.

    The profiles take turns; each must pass `check_scriptable`. About `LATE_GRADING_RATE` of the
    outcomes are recorded by a "grader" `GRADING_DELAY_RUNS` runs after their run ended (all of
    them before this returns). `on_run_done` is called as each run's own spans have ended.
    """
    if runs < 0:
        raise ValueError(f"runs must be >= 0, got {runs}")
    if not profiles:
        raise ValueError("at least one profile is needed")
    for profile in profiles:
        check_scriptable(profile)
    summaries: list[RunSummary] = []
    late: list[_LateGrade] = []
    for index in range(runs):
        summary, late_grade = _run_once(index, seed, profiles[index % len(profiles)])
        if late_grade is not None:
            late.append(late_grade)
        late = _record_due(late, index)
        summaries.append(summary)
        if on_run_done is not None:
            on_run_done(summary)
    _record_due(late, None)
    return summaries


def _record_due(late: list[_LateGrade], index: int | None) -> list[_LateGrade]:
    """Record the grades due after run `index` (all when None); returns those still waiting."""
    waiting = []
    for pending in late:
        if index is None or pending.due_after_run <= index:
            sdk.record_outcome(
                pending.trace_id, pending.outcome, pending.score, root_span_id=pending.root_span_id
            )
        else:
            waiting.append(pending)
    return waiting


def _run_once(index: int, seed: int, profile: ModelProfile) -> tuple[RunSummary, _LateGrade | None]:
    rng = random.Random(f"mast-otel-demo/{seed}/{index}")
    incident = rng.choice(CATALOGUE)
    plan = _plan(profile, incident, rng)
    now = _INCIDENTS_SINCE + timedelta(minutes=rng.randrange(60 * 24 * 28))
    cluster = SimulatedCluster(incident, now, seed=f"{seed}/{index}")
    task_id = f"INC-{rng.randrange(10_000, 100_000)}"
    task = (
        f"{task_id} [{incident.severity}] {incident.title} in namespace {incident.namespace} of cluster "
        f"{CLUSTER}. Alerts: {', '.join(a.name for a in incident.alerts)}. Find the root cause, mitigate "
        f"it and verify that {incident.service} is healthy again."
    )
    tally = _Tally(spans=2)  # the root span and the acknowledgement message
    conclusion: _Conclusion | None = None
    outcome, score = Outcome.FAILURE, 0.0
    trace_id = root_span_id = ""
    try:
        with sdk.agent_run(
            TRIAGE_AGENT,
            model=profile.model,
            task=task,
            task_id=task_id,
            conversation_id=hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=16).hexdigest(),
            provider_name=PROVIDER_NAME,
            attributes={INCIDENT_ATTRIBUTE: incident.key},
        ) as run:
            trace_id, root_span_id = run.trace_id, run.span_id
            run.message(f"Picked up {task_id}: {incident.title} in {incident.namespace}. Investigating.")
            agent = _ScriptedAgent(
                run,
                cluster,
                tally,
                system=TRIAGE_SYSTEM,
                task=task,
                call_id_seed=f"{seed}/{index}",
                max_iterations=MAX_ITERATIONS,
            )
            stopped: MaxIterationsExceeded | None = None
            try:
                conclusion = _work_incident(agent, plan, task_id)
            except MaxIterationsExceeded as limit:
                stopped = limit
            outcome, score = grade(cluster, conclusion.diagnosis if conclusion else None)
            if conclusion is not None:
                run.set_final_answer(conclusion.answer)
            if not plan.graded_late:
                run.set_outcome(outcome, score)
            if stopped is not None:
                raise stopped  # through the run's span, which records it as the run's error
    except MaxIterationsExceeded:
        pass
    late_grade = None
    if plan.graded_late:
        tally.spans += 1
        late_grade = _LateGrade(
            index + GRADING_DELAY_RUNS,
            trace_id,
            root_span_id if plan.grader_knows_root_span else None,
            outcome,
            score,
        )
    summary = RunSummary(
        trace_id=trace_id,
        model=profile.model,
        profile=profile.key,
        outcome=outcome,
        score=score,
        steps=tally.llm_calls + tally.tool_calls,
        spans_emitted=tally.spans,
        intended_modes=tuple(sorted(plan.modes)),
        incident=incident.key,
        outcome_reported_later=plan.graded_late,
    )
    return summary, late_grade
