"""The judge service: judges stored runs in the background, off the collector's pipeline thread.

The pipeline stores a run's rules version first, then calls `submit(run)`. `submit` never blocks: it
applies the sampling policy and puts the run on a bounded queue, or returns False and records why
(a `mast_judge_usage` row: not sampled, queue full, budget exhausted). Worker threads (as many as
`concurrency`) take runs from the queue, ask the judge (cache, budget, model), and a writer thread
stores, in batches, a NEW version of each judged run (the rules' findings plus the judge's, with a
higher version, so the analysis reads both) and every usage row.

When the hourly token budget runs out, workers wait for room instead of dropping runs: runs stay
queued, and only once the queue is full are new runs turned away (recorded as skipped_budget).
A judge result for a run that was re-submitted meanwhile with a newer version (late spans) is not
written: the newer version is judged in turn. On `stop`, the queue is drained until the timeout;
what is left is recorded as skipped_overload, never silently dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Final

from mast_otel.annotate.base import AnnotatedRun, Finding
from mast_otel.annotate.llm.config import JudgeConfig
from mast_otel.annotate.llm.judge import JudgeOutcome, LLMJudge
from mast_otel.annotate.llm.usage import JudgeStatus, JudgeStore, JudgeUsage

__all__ = ["JudgeService", "JudgeServiceStats"]

log = logging.getLogger(__name__)

_TRACKED_TRACES: Final = 100_000  # latest submitted version per trace, for the superseded check
_MAX_PENDING_USAGE: Final = 100_000  # usage rows waiting for a store that is down; beyond, dropped
_POLL_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class JudgeServiceStats:
    submitted: int = 0
    queued: int = 0  # now
    in_progress: int = 0  # now
    judged: int = 0
    partial: int = 0
    cached: int = 0
    skipped_sampling: int = 0
    skipped_budget: int = 0
    skipped_overload: int = 0
    failed: int = 0
    superseded: int = 0  # judged, but a newer version of the run arrived meanwhile
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    runs_written: int = 0
    usage_rows_written: int = 0
    usage_rows_dropped: int = 0
    store_errors: int = 0


@dataclass(frozen=True, slots=True)
class _Item:
    run: AnnotatedRun
    rule_findings: tuple[Finding, ...]


@dataclass
class _Outbox:
    runs: list[AnnotatedRun] = field(default_factory=list)
    usage: list[JudgeUsage] = field(default_factory=list)
    since: float = 0.0  # when the oldest item came in

    def empty(self) -> bool:
        return not (self.runs or self.usage)

    def add(self, run: AnnotatedRun | None = None, usage: JudgeUsage | None = None) -> None:
        if self.empty():
            self.since = time.monotonic()
        if run is not None:
            self.runs.append(run)
        if usage is not None:
            self.usage.append(usage)


class JudgeService:
    """Owns its judge (built from `config` unless given) and closes it on `stop`."""

    def __init__(
        self,
        config: JudgeConfig,
        store: JudgeStore,
        *,
        judge: LLMJudge | None = None,
        env: Mapping[str, str] | None = None,
        flush_interval_s: float = 0.5,
        retry_max_s: float = 10.0,
    ) -> None:
        self.config = config
        self.judge = judge or LLMJudge(config, source=store, env=env)
        self._store = store
        self._flush_interval_s = flush_interval_s
        self._retry_max_s = retry_max_s
        self._queue: queue.Queue[_Item] = queue.Queue(maxsize=config.queue_size)
        self._lock = threading.Lock()
        self._counts = {
            f.name: 0 for f in fields(JudgeServiceStats) if f.name not in ("queued", "in_progress")
        }
        self._in_progress = 0
        self._latest: OrderedDict[str, int] = OrderedDict()  # trace id -> newest submitted version
        self._outbox = _Outbox()
        self._outbox_changed = threading.Condition(self._lock)
        self._stopping = threading.Event()  # no new submissions
        self._abandon = threading.Event()  # workers: record what is left instead of judging it
        self._workers_done = threading.Event()
        self._closed = threading.Event()  # the writer: give up retrying
        self._writing = 0  # batches taken from the outbox and not yet stored
        self._threads: list[threading.Thread] = []
        self._writer: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        if self._threads:
            return
        self._threads = [
            threading.Thread(target=self._work, name=f"mast-otel-judge-{n}", daemon=True)
            for n in range(self.config.concurrency)
        ]
        for thread in self._threads:
            thread.start()
        self._writer = threading.Thread(target=self._write_loop, name="mast-otel-judge-writer", daemon=True)
        self._writer.start()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop taking runs, judge what is queued until `timeout_s`, record the rest, write everything.
        True when every queued run was judged and every row written."""
        self._stopping.set()
        if not self._threads:
            self.start()  # runs submitted before a start are drained like any others
        deadline = time.monotonic() + timeout_s
        drained = self._wait_until(lambda: self._queue.unfinished_tasks == 0, deadline)
        if not drained:
            self._abandon.set()
            self.judge.close()  # interrupts backoff waits and open requests
            self._wait_until(lambda: self._queue.unfinished_tasks == 0, time.monotonic() + 5.0)
        self._workers_done.set()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        with self._outbox_changed:
            self._outbox_changed.notify_all()
        if self._writer is not None:
            self._writer.join(max(0.0, deadline - time.monotonic()) + 1.0)
        self._closed.set()
        if drained:
            self.judge.close()
        with self._lock:
            written = self._outbox.empty() and not self._writing
            if not written:
                log.error(
                    "the judge service stopped with %d runs and %d usage rows not stored",
                    len(self._outbox.runs),
                    len(self._outbox.usage),
                )
        return drained and written

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until every submitted run is judged and written (tests, the demo, `import`)."""

        def idle() -> bool:
            with self._lock:
                return self._queue.unfinished_tasks == 0 and self._outbox.empty() and not self._writing

        return self._wait_until(idle, time.monotonic() + timeout_s)

    def stats(self) -> JudgeServiceStats:
        with self._lock:
            return JudgeServiceStats(
                queued=self._queue.qsize(), in_progress=self._in_progress, **self._counts
            )

    # --- the pipeline's side ----------------------------------------------------------------------
    def submit(self, run: AnnotatedRun) -> bool:
        """Queue a stored run for judging; False (and a usage row saying why) when it is not queued.
        Never blocks: the decision is the sampling policy (a hash) and a non-blocking put."""
        conversation = run.conversation
        rule_findings = tuple(f for f in run.findings if f.annotator != self.judge.name)
        key = self.judge.content_hash(conversation)
        with self._lock:
            self._counts["submitted"] += 1
            self._note_version(conversation.trace_id, run.version)
        if self._stopping.is_set():
            return self._refuse(run, key, JudgeStatus.SKIPPED_OVERLOAD, "the judge is stopping")
        decision = self.judge.decide(conversation, rule_findings, key)
        if not decision.judge:
            return self._refuse(run, key, JudgeStatus.SKIPPED_SAMPLING, decision.reason)
        try:
            self._queue.put_nowait(_Item(run, rule_findings))
        except queue.Full:
            size = self.config.queue_size
            if self.judge.budget.exhausted():
                reason = (
                    f"hourly token budget exhausted ({self.judge.budget.describe()}) and {size} runs wait"
                )
                return self._refuse(run, key, JudgeStatus.SKIPPED_BUDGET, reason)
            return self._refuse(
                run, key, JudgeStatus.SKIPPED_OVERLOAD, f"the judge queue is full ({size} runs)"
            )
        return True

    # --- workers ------------------------------------------------------------------------------------
    def _work(self) -> None:
        while not self._workers_done.is_set():
            try:
                item = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            with self._lock:
                self._in_progress += 1
            try:
                outcome = self._assess(item)
            except Exception as exc:  # a worker must outlive any single bad run, and say what happened
                log.exception("judging trace %s failed unexpectedly", item.run.conversation.trace_id)
                outcome = self._skipped(
                    item.run, JudgeStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}"
                )
            try:
                self._emit(item, outcome)
            finally:
                with self._lock:
                    self._in_progress -= 1
                self._queue.task_done()

    def _assess(self, item: _Item) -> JudgeOutcome:
        conversation = item.run.conversation
        if self._abandon.is_set():
            return self._skipped(
                item.run, JudgeStatus.SKIPPED_OVERLOAD, "stopped before the judge reached it"
            )
        return self.judge.assess(
            conversation,
            item.rule_findings,
            sample=False,  # decided at submit
            wait_for_budget=lambda seconds: not self._abandon.wait(seconds),
        )

    def _emit(self, item: _Item, outcome: JudgeOutcome) -> None:
        run = item.run
        with self._lock:
            self._count(outcome.usage)
            superseded = self._latest.get(run.conversation.trace_id, run.version) > run.version
            if outcome.status.has_verdict and superseded:
                self._counts["superseded"] += 1
            elif outcome.status.has_verdict:
                version = max(time.time_ns(), run.version + 1)
                self._outbox.add(
                    run=AnnotatedRun(run.conversation, item.rule_findings + outcome.findings, version)
                )
            self._add_usage(outcome.usage)

    # --- refusals -----------------------------------------------------------------------------------
    def _refuse(self, run: AnnotatedRun, key: str, status: JudgeStatus, reason: str) -> bool:
        usage = self._usage(run, key, status, reason)
        with self._lock:
            self._count(usage)
            self._add_usage(usage)
        return False

    def _skipped(self, run: AnnotatedRun, status: JudgeStatus, reason: str) -> JudgeOutcome:
        """An outcome without a verdict: the run keeps its rules' version, the usage row says why."""
        key = self.judge.content_hash(run.conversation)
        return JudgeOutcome(status, (), self._usage(run, key, status, reason))

    def _usage(self, run: AnnotatedRun, key: str, status: JudgeStatus, reason: str) -> JudgeUsage:
        conversation = run.conversation
        return JudgeUsage(
            time_ns=time.time_ns(),
            content_hash=key,
            trace_id=conversation.trace_id,
            service_name=conversation.service_name,
            run_model=conversation.model,
            judge_model=self.config.model,
            status=status,
            reason=reason,
        )

    # --- bookkeeping (callers hold the lock) ----------------------------------------------------------
    def _count(self, usage: JudgeUsage) -> None:
        self._counts[usage.status.value] += 1
        self._counts["requests"] += usage.requests
        self._counts["input_tokens"] += usage.input_tokens
        self._counts["output_tokens"] += usage.output_tokens

    def _add_usage(self, usage: JudgeUsage) -> None:
        if len(self._outbox.usage) >= _MAX_PENDING_USAGE:
            self._counts["usage_rows_dropped"] += 1
            return
        self._outbox.add(usage=usage)
        self._outbox_changed.notify_all()

    def _note_version(self, trace_id: str, version: int) -> None:
        if version > self._latest.get(trace_id, -1):
            self._latest[trace_id] = version
        self._latest.move_to_end(trace_id)
        while len(self._latest) > _TRACKED_TRACES:
            self._latest.popitem(last=False)

    # --- the writer ---------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        delay = 0.0
        while True:
            with self._outbox_changed:
                if self._outbox.empty():
                    if self._workers_done.is_set():
                        return
                    self._outbox_changed.wait(self._flush_interval_s)
                    continue
                # Batch what comes in within a flush interval: ClickHouse prefers few larger inserts.
                wait = self._outbox.since + self._flush_interval_s - time.monotonic()
                if wait > 0 and not self._workers_done.is_set():
                    self._outbox_changed.wait(wait)
                    continue
                batch, self._outbox = self._outbox, _Outbox()
                self._writing += 1
            try:
                if batch.runs:
                    self._store.insert_runs(batch.runs)
                if batch.usage:
                    self._store.insert_judge_usage(batch.usage)
            except Exception as exc:
                # Inserts carry deduplication tokens: writing the whole batch again is safe.
                delay = min(self._retry_max_s, max(0.2, delay * 2))
                log.warning("storing judge results failed (%s); retrying in %.1fs", exc, delay)
                with self._lock:
                    self._counts["store_errors"] += 1
                    self._outbox.runs[:0] = batch.runs
                    self._outbox.usage[:0] = batch.usage
                    self._writing -= 1
                if self._closed.wait(delay):
                    return  # stop() gave up waiting: it reports what is left
                continue
            delay = 0.0
            with self._lock:
                self._writing -= 1
                self._counts["runs_written"] += len(batch.runs)
                self._counts["usage_rows_written"] += len(batch.usage)

    @staticmethod
    def _wait_until(condition: Callable[[], bool], deadline: float) -> bool:
        while not condition():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True
