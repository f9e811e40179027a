"""Latency of every Grafana panel and alert query at fleet scale: 100k runs, 1M spans, in chDB.

    python bench/queries.py [--json] [--runs 100000] [--repeat 7]

Loads synthetic runs (five models, four agents, three services; 20% graded late, 5% re-annotated),
their findings (0-5 modes per run, more in failed runs) and ten spans per run with ClickHouse's own
generators (INSERT ... SELECT, seconds), then expands each panel's and alert's SQL the way Grafana
and the ClickHouse plugin do (all models selected, the last 7 days) and times it: the median of
`--repeat` runs after one warm-up. Target: every query <= 100 ms on this 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mast_otel.analysis.sql import GRAFANA_ALL
from mast_otel.dashboards.alerts import alert_rules
from mast_otel.dashboards.macros import ALL, QueryContext, Variable, expand
from mast_otel.dashboards.panels import all_dashboards
from mast_otel.store.clickhouse import ClickHouseStore, open_store
from mast_otel.taxonomy import CODES

TARGET_MS = 100.0
_MODES = "[" + ",".join(f"'{code}'" for code in CODES) + "]"
_TRACE = "lower(hex(cityHash64({n}))) || lower(hex(cityHash64({n}, 1)))"


def load(store: ClickHouseStore, runs: int) -> None:
    trace = _TRACE.format(n="number")
    store.query(f"""
INSERT INTO mast_conversations (Timestamp, EndTimestamp, TraceId, RootSpanId, ServiceName, ServiceVersion,
    RootAgent, Agents, Model, Models, Outcome, Score, TurnCount, Version, AnnotatedAt, Turns)
SELECT now64(9) - toIntervalSecond(number * 6) AS ts, ts + 30, {trace}, lower(hex(cityHash64(number, 2))),
    ['checkout', 'search', 'billing'][number % 3 + 1], ['1.0', '1.1', '2.0', '2.1'][number % 4 + 1],
    ['triage', 'fixer', 'planner', 'coder'][intDiv(number, 7) % 4 + 1], ['triage'],
    ['gpt-a', 'gpt-b', 'claude-c', 'llama-d', 'mistral-e'][number % 5 + 1], ['m'],
    ['success', 'failure', 'failure', 'unknown'][cityHash64(number, 9) % 4 + 1],
    (cityHash64(number, 3) % 100) / 100, 12, 1, now64(9),
    arrayMap(i -> (i, 'agent_message', 'triage', repeat('x', 200), 'span', now64(9), '', '', '', NULL, '', '',
                   '', '', 0), range(12))
FROM numbers({runs})""")
    # Failed runs (hash % 4 in 1..2) get more modes, and more of the fatal ones.
    store.query(f"""
INSERT INTO mast_findings (Timestamp, TraceId, ServiceName, Model, Agent, Mode, ModeName, Category, Annotator,
    Confidence, Version, StepIndex, EvidenceSteps)
SELECT now64(9) - toIntervalSecond(n * 6), {_TRACE.format(n="n")}, 'checkout', 'gpt-a', 'triage',
    {_MODES}[(cityHash64(n, k) % 14) + 1], '', 'FC1', 'rules', 0.9, 1, toInt32(k * 2), [toInt32(k * 2)]
FROM (SELECT number AS n, cityHash64(number, 9) % 4 IN (1, 2) AS failed FROM numbers({runs}))
ARRAY JOIN range(toUInt64(cityHash64(n, 5) % if(failed, 6, 3))) AS k""")
    store.query(f"""
INSERT INTO mast_outcomes (Timestamp, TraceId, Outcome, Score, Source)
SELECT now64(9), {trace}, 'failure', 0.1, 'grader' FROM numbers({runs}) WHERE number % 5 = 0""")
    store.query(f"""
INSERT INTO mast_conversations (Timestamp, EndTimestamp, TraceId, Model, Outcome, Version)
SELECT now64(9) - toIntervalSecond(number * 6), now64(9), {trace},
    ['gpt-a', 'gpt-b', 'claude-c', 'llama-d', 'mistral-e'][number % 5 + 1], 'failure', 2
FROM numbers({runs}) WHERE number % 20 = 0""")
    store.query(f"""
INSERT INTO otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName,
    SpanAttributes, ResourceAttributes, Duration, StatusCode)
SELECT now64(9) - toIntervalSecond(intDiv(number, 10) * 6) + toIntervalMillisecond(number % 10),
    {_TRACE.format(n="intDiv(number, 10)")}, lower(hex(cityHash64(number, 7))),
    if(number % 10 = 0, '', lower(hex(cityHash64(intDiv(number, 10) * 10, 7)))),
    ['invoke_agent triage', 'chat gpt-a', 'execute_tool get_pods'][number % 3 + 1], 'Internal', 'checkout',
    map('gen_ai.operation.name', 'chat', 'gen_ai.request.model', 'gpt-a', 'gen_ai.input.messages',
        repeat('y', 400)), map('service.name', 'checkout'), 1000000, 'Ok'
FROM numbers({runs * 10})""")
    store.query("""
INSERT INTO mast_collector_stats (Timestamp, Instance, Metric, Value)
SELECT now64(9) - toIntervalSecond(15 * number), 'collector-' || toString(number % 3), metric, number
FROM numbers(2000) ARRAY JOIN ['spool_bytes', 'judge_errors', 'spans_received'] AS metric""")


def queries() -> dict[str, str]:
    found = {}
    for name, dashboard in all_dashboards().items():
        for panel in dashboard["panels"]:
            found[f"{name.removesuffix('.json')}: {panel['title']}"] = panel["targets"][0]["rawSql"]
    for rule in alert_rules()["groups"][0]["rules"]:
        found[f"alert: {rule['title']}"] = rule["data"][0]["model"]["rawSql"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mast-bench-queries-") as directory:
        store = open_store(directory, database="bench")
        started = time.perf_counter()
        load(store, args.runs)
        load_s = time.perf_counter() - started
        spans = store.query("SELECT count() FROM otel_traces").rows[0][0]
        # A failed run that was never re-annotated: its turns and findings are all in version 1.
        trace = store.query(
            "SELECT TraceId FROM mast_conversations GROUP BY TraceId"
            " HAVING max(Version) = 1 AND any(Outcome) = 'failure' ORDER BY TraceId LIMIT 1"
        ).rows[0][0]
        now = datetime.now(timezone.utc)
        variables = {
            name: Variable([ALL], all_value=GRAFANA_ALL) for name in ("model", "agent", "service", "version")
        }
        variables["fatal_modes"] = Variable(["FM-1.4", "FM-1.5", "FM-2.6", "FM-3.1", "FM-3.3"])
        variables["trace_id"] = Variable([trace])
        context = QueryContext(now - timedelta(days=7), now, interval_s=3600, variables=variables)
        results = {}
        for name, sql in queries().items():
            expanded = expand(sql, context)
            store.query(expanded)  # warm-up
            timings = []
            for _ in range(args.repeat):
                begin = time.perf_counter()
                rows = len(store.query(expanded).rows)
                timings.append((time.perf_counter() - begin) * 1000)
            results[name] = {
                "median_ms": round(statistics.median(timings), 1),
                "max_ms": round(max(timings), 1),
                "rows": rows,
            }
        store.close()
    slowest = max(result["median_ms"] for result in results.values())
    report = {
        "runs": args.runs,
        "spans": spans,
        "load_s": round(load_s, 1),
        "target_ms": TARGET_MS,
        "all_within_target": slowest <= TARGET_MS,
        "queries": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.runs} runs, {spans} spans loaded in {load_s:.1f} s; median of {args.repeat} runs:")
        for name, result in results.items():
            flag = "" if result["median_ms"] <= TARGET_MS else "  > target"
            print(f"  {result['median_ms']:7.1f} ms  {result['rows']:6d} rows  {name}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
