"""Annotate benchmark: what the offline annotator (14 rule detectors + blame) costs.

Three measurements, all in this process and this run, so the figures compare on a noisy machine,
for two span mixes (bench/ingest.py's request mix, and the demo's scripted SRE agents):

- throughput: conversations per second through `annotate_run` (rules and blame) for synthetic
  20-step and 200-step multi-agent conversations (reasoning, tool calls with 0.5-4 KB results, some
  failing, messages, a handoff), best of `--repeat` passes;
- `rules_share_e2e`: the share of a real collector's CPU (OTLP/gRPC in, assembly, rebuild,
  annotate, chDB store) spent in the rules and blame, measured with a timing annotator; the
  sender's own CPU (this process sends the requests) is left out;
- `rules_share_pipeline`: the CPU per pipeline stage on the same spans (decode -> rebuild ->
  annotate -> store, the store being rows plus the chDB insert), annotate's part of their sum. It
  leaves out gRPC and assembly, so it is an upper bound of the end-to-end share.

    python bench/annotate.py --json
    {"conversations_per_s_20_steps": ..., "conversations_per_s_200_steps": ...,
     "rules_share_e2e": {"ingest_mix": ..., "demo_mix": ...},
     "rules_share_pipeline": {"ingest_mix": ..., "demo_mix": ...}, "stages_cpu_s": {...}}
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel import sdk
from mast_otel.annotate.base import Finding
from mast_otel.annotate.blame import assign_blame
from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.annotate.run import annotate_run
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.decode import TraceDecoder
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector
from mast_otel.conversation.model import Conversation, Outcome, ToolCall, Turn, TurnKind
from mast_otel.conversation.rebuild import rebuild
from mast_otel.demo.agents import run_demo_agents
from mast_otel.spans import Span
from mast_otel.store.clickhouse import open_store

sys.path.insert(0, str(Path(__file__).parent))
from ingest import export_call, generate_requests  # the ingest benchmark's span mix, not a copy

_T = TypeVar("_T")
TOOLS = ("get_pods", "query_metrics", "search_logs", "describe_deployment", "restart_deployment")
LOG_WORDS = ("pod", "latency", "error", "rollout", "memory", "restart", "upstream", "timeout", "200", "ok")


def synthetic_conversation(steps: int, seed: int) -> Conversation:
    """A failed two-agent SRE run of `steps` turns: reasoning, tool calls, results, messages."""
    rng = random.Random(seed)
    turns: list[Turn] = [Turn(0, TurnKind.USER, "user", "checkout in namespace shop returns 503s; fix it")]
    agent = "triage"
    while len(turns) < steps:
        index = len(turns)
        tool = rng.choice(TOOLS)
        kind = rng.random()
        if kind < 0.3:
            text = f"The {rng.choice(LOG_WORDS)} looks off. I will call {tool} next to check checkout."
            turns.append(
                Turn(index, TurnKind.REASONING, agent, text, span_id=f"{index:016x}", context_size=index)
            )
        elif kind < 0.8:
            size = rng.randint(500, 4000)
            result = " ".join(rng.choices(LOG_WORDS, k=size // 5))[:size]
            failed = rng.random() < 0.1
            call = ToolCall(
                tool,
                f"c{index}",
                json.dumps({"namespace": "shop", "service": "checkout", "limit": rng.randint(1, 3)}),
                None if failed else result,
                "TimeoutError" if failed else "",
            )
            turns.append(Turn(index, TurnKind.TOOL_CALL, agent, tool, span_id=f"{index:016x}", tool=call))
        elif kind < 0.95:
            text = rng.choice(
                (
                    "The pods restarted 7 times; memory is at the limit.",
                    "Verified: the checkout service is healthy again.",
                    "Let me check the logs of the upstream service.",
                    "It seems the metrics query returned nothing useful.",
                )
            )
            turns.append(Turn(index, TurnKind.AGENT_MESSAGE, agent, text, span_id=f"{index:016x}"))
        else:
            other = "remediator" if agent == "triage" else "triage"
            turns.append(Turn(index, TurnKind.HANDOFF, agent, "needs a change", target_agent=other))
            agent = other
    return Conversation(
        trace_id=f"{seed:032x}",
        turns=tuple(turns),
        task="checkout in namespace shop returns 503s; fix it",
        agents=("triage", "remediator"),
        outcome=Outcome.FAILURE,
    )


def best_of(repeat: int, work: Callable[[], _T]) -> tuple[float, _T]:
    """The fastest of `repeat` timed passes (CPU seconds of this process), and what the work made."""
    best, made = float("inf"), work()
    for _ in range(repeat):
        started = time.process_time()
        made = work()
        best = min(best, time.process_time() - started)
    return best, made


def conversations_per_s(steps: int, count: int, repeat: int) -> float:
    conversations = [synthetic_conversation(steps, seed) for seed in range(count)]
    annotator = RuleAnnotator()
    elapsed, _ = best_of(repeat, lambda: [annotate_run(c, annotator) for c in conversations])
    return count / elapsed


def demo_requests(runs: int, seed: int) -> list[bytes]:
    """The demo's scripted SRE agents, encoded as the OTLP exporter sends them."""
    exporter = InMemorySpanExporter()
    sdk.configure(service_name="bench-demo", exporter=exporter, set_global=False)
    run_demo_agents(runs=runs, seed=seed)
    sdk.force_flush()
    spans = list(exporter.get_finished_spans())
    sdk.shutdown()
    return [encode_spans(spans[i : i + 512]).SerializeToString() for i in range(0, len(spans), 512)]


def stage_cpu(requests: Sequence[bytes], data_dir: Path, database: str, repeat: int) -> dict[str, float]:
    """CPU seconds per pipeline stage over these requests (best of `repeat` for the pure stages)."""
    decoder = TraceDecoder()
    decode_s, spans = best_of(repeat, lambda: _decode(decoder, requests))
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    rebuild_s, conversations = best_of(repeat, lambda: [rebuild(t) for t in traces.values()])
    annotator = RuleAnnotator()
    annotate_s, runs = best_of(repeat, lambda: [annotate_run(c, annotator) for c in conversations])
    store = open_store(data_dir, database=database)  # one chDB directory per process: databases apart
    try:
        started = time.process_time()  # counts chDB's own threads too: it runs in this process
        store.insert_spans(spans)
        store.insert_runs(runs)
        store_s = time.process_time() - started
    finally:
        store.close()
    return {
        "spans": len(spans),
        "runs": len(conversations),
        "decode": round(decode_s, 3),
        "rebuild": round(rebuild_s, 3),
        "annotate": round(annotate_s, 3),
        "store": round(store_s, 3),
    }


class _TimedRules:
    """The rule annotator, timing itself (thread CPU) and the blame `annotate_run` adds after it.

    Blame runs here once more to be timed; its copy's CPU is taken off the total again."""

    name = "rules"

    def __init__(self) -> None:
        self._rules = RuleAnnotator()
        self.rules_s = 0.0
        self.blame_s = 0.0

    def annotate(self, conversation: Conversation) -> tuple[Finding, ...]:
        started = time.thread_time()
        findings = self._rules.annotate(conversation)
        timed = time.thread_time()
        assign_blame(conversation, findings)
        self.rules_s += timed - started
        self.blame_s += time.thread_time() - timed
        return findings


def e2e_share(requests: Sequence[bytes], data_dir: Path, database: str) -> float:
    """Rules and blame's share of a collector's CPU while it takes in and stores `requests`."""
    timed = _TimedRules()
    config = loopback(
        str(data_dir),
        database=database,
        http=False,
        admin=False,
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=30.0),
        pipeline=PipelineConfig(max_in_flight_spans=1_000_000),
    )
    started = time.process_time()
    with Collector(config, annotator=timed) as collector:
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}")
        export = export_call(channel)
        sending = time.thread_time()
        for body in requests:
            export(body, timeout=60)
        sender_s = time.thread_time() - sending
        if not collector.wait_idle(600):
            raise RuntimeError("the collector did not store everything within 600 s")
        channel.close()
    total = time.process_time() - started - sender_s - timed.blame_s  # blame's timing copy is extra
    return round((timed.rules_s + timed.blame_s) / total, 3)


def _decode(decoder: TraceDecoder, requests: Sequence[bytes]) -> list[Span]:
    return [span for body in requests for span in decoder.decode_bytes(body).spans]


def _share(stages: dict[str, float]) -> float:
    total = stages["decode"] + stages["rebuild"] + stages["annotate"] + stages["store"]
    return round(stages["annotate"] / total, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--count", type=int, default=200, help="synthetic conversations per size (default 200)"
    )
    parser.add_argument("--spans", type=int, default=20_000, help="spans of the ingest mix (default 20000)")
    parser.add_argument("--demo-runs", type=int, default=600, help="demo agent runs (default 600)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes, the best is kept (default 3)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    result: dict[str, Any] = {
        "conversations_per_s_20_steps": round(conversations_per_s(20, args.count, args.repeat)),
        "conversations_per_s_200_steps": round(
            conversations_per_s(200, max(args.count // 10, 1), args.repeat)
        ),
    }
    mixes = {
        "ingest_mix": generate_requests(args.spans, seed=1)[0],
        "demo_mix": demo_requests(args.demo_runs, seed=3),
    }
    stages: dict[str, dict[str, float]] = {}
    shares: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mast-bench-") as tmp:
        for mix, requests in mixes.items():  # one chDB directory per process: databases apart
            shares[mix] = e2e_share(requests, Path(tmp), f"e2e_{mix}")
            stages[mix] = stage_cpu(requests, Path(tmp), mix, args.repeat)
    result["rules_share_e2e"] = shares
    result["rules_share_pipeline"] = {mix: _share(found) for mix, found in stages.items()}
    result["stages_cpu_s"] = stages
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>32}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
