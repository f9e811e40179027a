"""Trace assembly: release timing, dedup, late spans, runaway traces."""

from __future__ import annotations

import pytest
from spanfactory import span

from mast_otel.collector.assembly import AssemblyConfig, ReleaseReason, TraceAssembler

T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "1af7651916cd43dd8448eb211c80319c"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_trace_released_grace_after_root_not_before() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=2.0, max_wait_s=60.0), clock=clock)
    root = span(T1, "invoke_agent a", 10, 50)
    child = span(T1, "chat m", 20, 30, parent=root.span_id)
    assembler.add([child])
    clock.now += 30
    assert assembler.release_due() == []  # no root yet, max_wait not reached
    assembler.add([root])
    clock.now += 1.9
    assert assembler.release_due() == []
    late_child = span(T1, "execute_tool t", 31, 40, parent=root.span_id)
    assembler.add([late_child])  # stragglers inside the grace period join the trace
    clock.now += 0.2
    [trace] = assembler.release_due()
    assert trace.reason is ReleaseReason.ROOT_ENDED
    assert [s.span_id for s in trace.spans] == [root.span_id, child.span_id, late_child.span_id]  # by start
    assert assembler.trace_count == 0 and assembler.span_count == 0


def test_trace_without_root_released_after_max_wait() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=1.0, max_wait_s=5.0), clock=clock)
    assembler.add([span(T1, "chat m", 1, 2, parent="ffffffffffffffff")])
    clock.now += 4.99
    assert assembler.release_due() == []
    clock.now += 0.02
    [trace] = assembler.release_due()
    assert trace.reason is ReleaseReason.MAX_WAIT and len(trace.spans) == 1


def test_duplicates_dropped_before_and_after_release() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=0.0, max_wait_s=5.0), clock=clock)
    root = span(T1, "invoke_agent a", 1, 9)
    first = assembler.add([root, root])
    assert (first.accepted, first.duplicates) == ((root,), 1)
    [released] = assembler.release_due()
    assert released.spans == (root,)
    again = assembler.add([root])
    assert (again.accepted, again.duplicates) == ((), 1)
    assert assembler.trace_count == 0


def test_late_span_starts_a_late_trace_released_after_grace() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=2.0, max_wait_s=60.0), clock=clock)
    root = span(T1, "invoke_agent a", 1, 9)
    assembler.add([root])
    clock.now += 2.0
    assembler.release_due()
    straggler = span(T1, "execute_tool t", 2, 3, parent=root.span_id)
    assert assembler.add([straggler]).accepted == (straggler,)
    clock.now += 1.9
    assert assembler.release_due() == []
    clock.now += 0.2  # a late trace waits the grace period, not max_wait: its root came long ago
    [late] = assembler.release_due()
    assert late.reason is ReleaseReason.LATE and late.spans == (straggler,)
    assert assembler.add([straggler, root]).duplicates == 2  # both remembered now


def test_clear_forgets_pending_and_remembered() -> None:
    assembler = TraceAssembler(AssemblyConfig(grace_s=0.0, max_wait_s=5.0), clock=Clock())
    root = span(T1, "invoke_agent a", 1, 9)
    assembler.add([root])
    assembler.release_due()
    assembler.add([span(T2, "chat", 1, 2, parent="0000000000000abc")])
    assert assembler.clear() == 1
    assert assembler.trace_count == 0 and assembler.span_count == 0
    assert assembler.add([root]).accepted == (root,)  # replayed spans are not mistaken for duplicates


def test_traces_are_independent_and_flush_releases_everything() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=5.0, max_wait_s=60.0), clock=clock)
    assembler.add([span(T1, "invoke_agent a", 1, 9), span(T2, "chat m", 1, 2, parent="0000000000000abc")])
    assert assembler.trace_count == 2
    flushed = assembler.flush()
    assert {t.trace_id for t in flushed} == {T1, T2}
    assert all(t.reason is ReleaseReason.FLUSH for t in flushed)
    assert assembler.release_due() == []


def test_runaway_trace_released_at_span_cap() -> None:
    clock = Clock()
    assembler = TraceAssembler(
        AssemblyConfig(grace_s=5.0, max_wait_s=60.0, max_spans_per_trace=3), clock=clock
    )
    assembler.add([span(T1, f"s{i}", i + 1, i + 2, parent="0000000000000abc") for i in range(3)])
    [trace] = assembler.release_due()
    assert len(trace.spans) == 3


@pytest.mark.parametrize(
    "kwargs",
    [{"grace_s": -1}, {"max_wait_s": 0}, {"grace_s": 5, "max_wait_s": 1}, {"max_spans_per_trace": 0}],
)
def test_invalid_config_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        AssemblyConfig(**kwargs)  # type: ignore[arg-type]


def test_release_due_in_bounded_chunks_oldest_first() -> None:
    clock = Clock()
    assembler = TraceAssembler(AssemblyConfig(grace_s=0.0, max_wait_s=5.0), clock=clock)
    trace_ids = [f"{n:032x}" for n in range(1, 6)]
    for trace_id in trace_ids:
        root = span(trace_id, "invoke_agent a", 1, 9)
        assembler.add([root, *(span(trace_id, "chat m", 2, 3, parent=root.span_id) for _ in range(2))])
        clock.now += 0.1  # deadlines in the order added
    chunks = []
    while released := assembler.release_due(max_spans=4):
        chunks.append([trace.trace_id for trace in released])
    # 3 spans per trace: a chunk stops once it holds 4 or more, and nothing due is left behind.
    assert chunks == [trace_ids[0:2], trace_ids[2:4], trace_ids[4:5]]
    assert assembler.trace_count == 0
    big = span("f" * 32, "invoke_agent a", 1, 9)
    assembler.add([big, *(span("f" * 32, "chat m", 2, 3, parent=big.span_id) for _ in range(9))])
    [whole] = assembler.release_due(max_spans=4)  # a trace larger than the bound still goes out whole
    assert len(whole.spans) == 10
