"""The analysis SQL, each metric written once: the CLI, the HTML report, Grafana's panels and its alert
rules all render these templates (see `sql.py` for the holes and the two dialects).

Every query reads only the latest version of each run (FINAL on `mast_conversations`; its modes come
from the `mast_run_modes` rollup joined on that version, findings on `(TraceId, Version)`) and takes a
run's *effective* outcome: the latest late outcome from `mast_outcomes` when a grader sent one, else
the run's own. Success rate, prevalences and odds ratios count only runs whose outcome is known.

`GROUP_SUMMARY_SQL`, `MODE_PREVALENCE_SQL`... are the templates rendered for the CLI (bound
parameters, built by `parameters()`); `TEMPLATES` names every template for the dashboards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from statistics import NormalDist
from typing import Any, Final

from mast_otel.analysis.sql import STUDY_FATAL_MODES, Bound, mode_mask
from mast_otel.annotate.llm.usage import JudgeStatus
from mast_otel.conversation.model import Outcome
from mast_otel.taxonomy import CODES, Category, modes_in


class Dimension(str, Enum):
    """What runs are grouped by: each value names one `mast_conversations` column."""

    MODEL = "model"  # the run's primary model
    AGENT = "agent"  # the run's root agent
    SERVICE = "service"  # service.name
    VERSION = "version"  # service.version

    @property
    def column(self) -> str:
        return _COLUMNS[self]

    @property
    def plural(self) -> str:
        return f"{self.value}s"

    @classmethod
    def parse(cls, value: str | Dimension) -> Dimension:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(d.value for d in cls)
            raise ValueError(f"cannot group runs by {value!r}; choose one of {valid}") from None


_COLUMNS = {
    Dimension.MODEL: "Model",
    Dimension.AGENT: "RootAgent",
    Dimension.SERVICE: "ServiceName",
    Dimension.VERSION: "ServiceVersion",
}

EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
FAR_FUTURE: Final = datetime(2262, 4, 11, tzinfo=timezone.utc)  # DateTime64(9) ends here
Z_95: Final = NormalDist().inv_cdf(0.975)  # two-sided 95% interval
# A failed run with this many distinct modes or more is a cascade (the study: 2.6 vs 5.3 per run).
CASCADE_MIN_MODES: Final = 4

_SUCCESS = Outcome.SUCCESS.value
_FAILURE = Outcome.FAILURE.value
_N_MODES = len(CODES)
_CATEGORY_MASKS = {category: mode_mask([m.code for m in modes_in(category)]) for category in Category}


def runs_cte(window: str = "{{time_filter:Timestamp}}") -> str:
    """`latest_runs` and `runs`: the runs in `window` with group, effective outcome/score and modes."""
    return f"""
latest_runs AS (
    SELECT TraceId, Version, Timestamp, {{{{group}}}} AS GroupKey, Outcome, Score
    FROM mast_conversations FINAL
    WHERE {window}
        AND {{{{filter:Model:model}}}} AND {{{{filter:RootAgent:agent}}}}
        AND {{{{filter:ServiceName:service}}}} AND {{{{filter:ServiceVersion:version}}}}
),
runs AS (
    SELECT
        latest_runs.TraceId AS TraceId,
        latest_runs.Version AS Version,
        latest_runs.Timestamp AS Timestamp,
        latest_runs.GroupKey AS GroupKey,
        if(late.LateOutcome IN ('{_SUCCESS}', '{_FAILURE}'), late.LateOutcome, latest_runs.Outcome)
            AS EffectiveOutcome,
        coalesce(late.LateScore, latest_runs.Score) AS EffectiveScore,
        masks.ModeMask AS ModeMask -- 0 for a run without findings (LEFT JOIN default)
    FROM latest_runs
    LEFT JOIN (
        SELECT TraceId, Outcome AS LateOutcome, Score AS LateScore FROM mast_outcomes FINAL
    ) AS late ON late.TraceId = latest_runs.TraceId
    LEFT JOIN (
        SELECT TraceId, Version, ModeMask FROM mast_run_modes FINAL WHERE {window}
    ) AS masks ON masks.TraceId = latest_runs.TraceId AND masks.Version = latest_runs.Version
)"""


RUNS_CTE: Final = runs_cte()

# Per-run rates, each defined once: the summary, the time series and the alerts aggregate these.
_KNOWN = f"countIf(EffectiveOutcome IN ('{_SUCCESS}', '{_FAILURE}'))"
RATES: Final[Mapping[str, str]] = {
    "runs": "count()",
    "success_rate": f"countIf(EffectiveOutcome = '{_SUCCESS}') / nullIf({_KNOWN}, 0)",
    "mean_score": "avgOrNull(EffectiveScore)",
    "fatal_mode_rate": "countIf(bitAnd(ModeMask, {{fatal_mask}}) != 0) / count()",
    "modes_per_failed_run": f"avgIfOrNull(bitCount(ModeMask), EffectiveOutcome = '{_FAILURE}')",
}

# Per group: runs, outcomes, success rate, mean score, distinct modes per failed run, the share of
# failed runs that cascade, and the fatal-mode rate.
GROUP_SUMMARY_TEMPLATE: Final = f"""
WITH {RUNS_CTE}
SELECT
    GroupKey AS group_key,
    {RATES["runs"]} AS runs,
    countIf(EffectiveOutcome = '{_SUCCESS}') AS successes,
    countIf(EffectiveOutcome = '{_FAILURE}') AS failures,
    {RATES["success_rate"]} AS success_rate,
    {RATES["mean_score"]} AS mean_score,
    {RATES["modes_per_failed_run"]} AS modes_per_failed_run,
    countIf(EffectiveOutcome = '{_FAILURE}' AND bitCount(ModeMask) >= {CASCADE_MIN_MODES})
        / nullIf(failures, 0) AS cascading_share,
    {RATES["fatal_mode_rate"]} AS fatal_mode_rate
FROM runs
GROUP BY group_key
ORDER BY runs DESC, group_key
"""

# Per group x mode (every taxonomy mode, also those never seen): how many successful and failed runs
# show it, its prevalence in each, the relative increase (p_fail - p_success) / p_success (NULL when
# p_success is 0), and the odds ratio of the mode in failed vs successful runs with its 95% Woolf
# (logit) interval. Zero cells get the Haldane-Anscombe correction (0.5 added to every cell); with no
# successful or no failed run there is no ratio at all.
_A, _B = "failures_with_mode", "successes_with_mode"
_C, _D = f"(failures - {_A})", f"(successes - {_B})"
_K = f"if({_A} = 0 OR {_B} = 0 OR {_C} = 0 OR {_D} = 0, 0.5, 0.)"
MODE_PREVALENCE_TEMPLATE: Final = f"""
WITH {RUNS_CTE},
-- Runs share few distinct mode sets: count them first, then expand the (small) sets per mode.
mode_sets AS (
    SELECT GroupKey, EffectiveOutcome, ModeMask, count() AS Runs
    FROM runs
    GROUP BY GroupKey, EffectiveOutcome, ModeMask
),
counts AS (
    SELECT
        GroupKey,
        Bit,
        sumIf(Runs, EffectiveOutcome = '{_SUCCESS}') AS successes,
        sumIf(Runs, EffectiveOutcome = '{_FAILURE}') AS failures,
        sumIf(Runs, EffectiveOutcome = '{_SUCCESS}' AND bitTest(ModeMask, Bit)) AS successes_with_mode,
        sumIf(Runs, EffectiveOutcome = '{_FAILURE}' AND bitTest(ModeMask, Bit)) AS failures_with_mode
    FROM mode_sets
    ARRAY JOIN range({_N_MODES}) AS Bit
    GROUP BY GroupKey, Bit
)
-- Ratios over the counts in an outer SELECT: derived from aggregates in place, they cost twice.
SELECT
    GroupKey AS group_key,
    {{{{modes}}}}[Bit + 1] AS mode,
    successes,
    failures,
    successes_with_mode,
    failures_with_mode,
    successes_with_mode / nullIf(successes, 0) AS success_prevalence,
    failures_with_mode / nullIf(failures, 0) AS failure_prevalence,
    (failure_prevalence - success_prevalence) / nullIf(success_prevalence, 0) AS relative_increase,
    if(successes = 0 OR failures = 0, NULL,
       (({_A} + {_K}) * ({_D} + {_K})) / (({_C} + {_K}) * ({_B} + {_K}))) AS odds_ratio,
    sqrt(1 / ({_A} + {_K}) + 1 / ({_B} + {_K}) + 1 / ({_C} + {_K}) + 1 / ({_D} + {_K})) AS log_odds_se,
    exp(log(odds_ratio) - {Z_95!r} * log_odds_se) AS odds_ratio_low,
    exp(log(odds_ratio) + {Z_95!r} * log_odds_se) AS odds_ratio_high
FROM counts
ORDER BY group_key, Bit
"""

# Per group: how many failed runs show k distinct modes, k = 0..14 (surgical vs cascading).
MODES_PER_FAILED_RUN_TEMPLATE: Final = f"""
WITH {RUNS_CTE}
SELECT GroupKey AS group_key, toString(bitCount(ModeMask)) AS modes, count() AS failed_runs
FROM runs
WHERE EffectiveOutcome = '{_FAILURE}'
GROUP BY group_key, bitCount(ModeMask)
ORDER BY group_key, bitCount(ModeMask)
"""

# Per group: the share of failed runs with at least one mode of each MAST category.
_CATEGORY_SHARES = ",\n    ".join(
    f'countIf(bitAnd(ModeMask, {mask}) != 0) / count() AS "{category.value} {category.label}"'
    for category, mask in _CATEGORY_MASKS.items()
)
CATEGORY_BREAKDOWN_TEMPLATE: Final = f"""
WITH {RUNS_CTE}
SELECT
    GroupKey AS group_key,
    count() AS failed_runs,
    {_CATEGORY_SHARES}
FROM runs
WHERE EffectiveOutcome = '{_FAILURE}'
GROUP BY group_key
ORDER BY group_key
"""

# In failed runs, pairs of modes: how often they occur together, and which one showed first (by the
# first evidence step of each). Modes that open a run before the others are what precede a collapse.
_STEPS_CTE = f"""
WITH {RUNS_CTE},
steps AS (
    SELECT
        failed.GroupKey AS GroupKey,
        mast_findings.TraceId AS TraceId,
        mast_findings.Mode AS Mode,
        minOrNullIf(mast_findings.StepIndex, mast_findings.StepIndex >= 0) AS FirstStep
    FROM mast_findings
    INNER JOIN (
        SELECT TraceId, Version, GroupKey FROM runs WHERE EffectiveOutcome = '{_FAILURE}'
    ) AS failed ON mast_findings.TraceId = failed.TraceId AND mast_findings.Version = failed.Version
    GROUP BY GroupKey, TraceId, Mode
)"""

MODE_PAIRS_TEMPLATE: Final = f"""{_STEPS_CTE},
per_run AS (
    SELECT GroupKey, TraceId, arraySort(groupArray((Mode, FirstStep))) AS Found
    FROM steps
    GROUP BY GroupKey, TraceId
)
SELECT
    GroupKey AS group_key,
    pair.1.1 AS mode_a,
    pair.2.1 AS mode_b,
    count() AS together,
    countIf(pair.1.2 < pair.2.2) AS a_first,
    countIf(pair.2.2 < pair.1.2) AS b_first
FROM per_run
ARRAY JOIN arrayFlatten(arrayMap(x -> arrayMap(y -> (x, y), arrayFilter(y -> y.1 > x.1, Found)), Found))
    AS pair
GROUP BY group_key, mode_a, mode_b
ORDER BY group_key, together DESC, mode_a, mode_b
"""

MODE_OPENERS_TEMPLATE: Final = f"""{_STEPS_CTE},
run_starts AS (
    SELECT TraceId, min(FirstStep) AS RunFirstStep FROM steps GROUP BY TraceId
)
SELECT
    steps.GroupKey AS group_key,
    steps.Mode AS mode,
    count() AS failed_runs_with_mode,
    countIf(steps.FirstStep = run_starts.RunFirstStep) AS opens_run,
    medianOrNull(steps.FirstStep) AS median_first_step
FROM steps
INNER JOIN run_starts ON run_starts.TraceId = steps.TraceId
GROUP BY group_key, mode
ORDER BY group_key, opens_run DESC, mode
"""

# Where failed runs went wrong (`annotate.blame`), per group: the three most blamed agents, steps and
# modes among failed runs that carry blame, with their share of those runs. A blame no finding points
# at (the run's structure alone located it) counts under the mode "structural".
BLAME_TEMPLATE: Final = f"""
WITH {RUNS_CTE},
blamed AS (
    SELECT runs.GroupKey AS GroupKey, c.BlameAgent AS Agent, c.BlameStep AS Step, c.BlameMode AS Mode
    FROM runs
    INNER JOIN (
        SELECT TraceId, Version, BlameAgent, BlameStep, BlameMode
        FROM mast_conversations FINAL
        WHERE {{{{time_filter:Timestamp}}}} AND BlameStep >= 0
    ) AS c ON c.TraceId = runs.TraceId AND c.Version = runs.Version
    WHERE runs.EffectiveOutcome = '{_FAILURE}'
),
totals AS (
    SELECT GroupKey, count() AS Blamed FROM blamed GROUP BY GroupKey
),
facets AS (
    SELECT GroupKey, 'agent' AS Facet, toString(Agent) AS Value, count() AS Runs
    FROM blamed GROUP BY GroupKey, Value
    UNION ALL
    SELECT GroupKey, 'step' AS Facet, toString(Step) AS Value, count() AS Runs
    FROM blamed GROUP BY GroupKey, Value
    UNION ALL
    SELECT GroupKey, 'mode' AS Facet, if(Mode = '', 'structural', toString(Mode)) AS Value, count() AS Runs
    FROM blamed GROUP BY GroupKey, Value
)
SELECT
    facets.GroupKey AS group_key,
    facets.Facet AS facet,
    facets.Value AS value,
    facets.Runs AS failed_runs,
    facets.Runs / totals.Blamed AS share
FROM facets
INNER JOIN totals ON totals.GroupKey = facets.GroupKey
ORDER BY group_key, facet, failed_runs DESC, value
LIMIT 3 BY group_key, facet
"""


def over_time(rates: Iterable[str]) -> str:
    """Rates per time bucket and group, in Grafana's long format (time, group, values...)."""
    columns = ",\n    ".join(f"{RATES[name]} AS {name}" for name in rates)
    return f"""
WITH {RUNS_CTE}
SELECT {{{{bucket:Timestamp}}}} AS time, GroupKey AS group_key,
    {columns}
FROM runs
GROUP BY time, group_key
ORDER BY time, group_key
"""


RATES_OVER_TIME_TEMPLATE: Final = over_time(RATES)

# --- one run (drill-down) --------------------------------------------------------------------------

RECENT_RUNS_TEMPLATE: Final = f"""
WITH {RUNS_CTE}
SELECT
    Timestamp AS time,
    TraceId AS trace_id,
    GroupKey AS group_key,
    EffectiveOutcome AS outcome,
    EffectiveScore AS score,
    bitCount(ModeMask) AS modes,
    arrayStringConcat(
        arrayFilter((code, bit) -> bitTest(ModeMask, bit), {{{{modes}}}}, range({_N_MODES})), ' '
    ) AS mode_codes
FROM runs
ORDER BY outcome = '{_FAILURE}' DESC, modes DESC, time DESC
LIMIT {{{{value:top}}}}
"""

RUN_TURNS_TEMPLATE: Final = """
SELECT
    turn.Index AS step,
    turn.Time AS time,
    turn.Kind AS kind,
    turn.Agent AS agent,
    if(turn.ToolName != '', turn.ToolName, turn.TargetAgent) AS tool_or_target,
    turn.Content AS content,
    ifNull(turn.ToolResult, '') AS tool_result,
    turn.ToolError AS tool_error,
    turn.SpanId AS span_id
FROM mast_conversations FINAL
ARRAY JOIN Turns AS turn
WHERE TraceId = {{var:trace_id}}
ORDER BY step
"""

RUN_FINDINGS_TEMPLATE: Final = """
SELECT
    Mode AS mode,
    ModeName AS name,
    Category AS category,
    Agent AS blamed_agent,
    StepIndex AS first_step,
    arrayStringConcat(arrayMap(step -> toString(step), EvidenceSteps), ' ') AS evidence_steps,
    arrayStringConcat(EvidenceSpanIds, ' ') AS evidence_spans,
    Annotator AS annotator,
    Confidence AS confidence,
    Explanation AS explanation
FROM mast_findings
WHERE TraceId = {{var:trace_id}}
    AND Version = (SELECT max(Version) FROM mast_conversations WHERE TraceId = {{var:trace_id}})
ORDER BY first_step, mode
"""

# The columns Grafana's trace view wants (its trace data frame), as the plugin's own trace-ID query
# selects them, narrowed in time by the `otel_traces_trace_id_ts` lookup. Each span once: a span a
# sender exported twice while the collector was replaying its spool is stored twice.
RUN_SPANS_TEMPLATE: Final = """
WITH
    (SELECT min(Start) FROM otel_traces_trace_id_ts WHERE TraceId = {{var:trace_id}}) AS trace_start,
    (SELECT max(End) + 1 FROM otel_traces_trace_id_ts WHERE TraceId = {{var:trace_id}}) AS trace_end
SELECT
    TraceId AS traceID,
    SpanId AS spanID,
    ParentSpanId AS parentSpanID,
    ServiceName AS serviceName,
    SpanName AS operationName,
    multiply(toUnixTimestamp64Nano(Timestamp), 0.000001) AS startTime,
    multiply(Duration, 0.000001) AS duration,
    arrayMap(key -> map('key', key, 'value', SpanAttributes[key]), mapKeys(SpanAttributes)) AS tags,
    arrayMap(key -> map('key', key, 'value', ResourceAttributes[key]), mapKeys(ResourceAttributes))
        AS serviceTags,
    SpanKind AS kind,
    StatusCode AS statusCode,
    StatusMessage AS statusMessage
FROM otel_traces
WHERE TraceId = {{var:trace_id}} AND Timestamp >= trace_start AND Timestamp <= trace_end
ORDER BY startTime
LIMIT 1 BY spanID
LIMIT 10000
"""

# --- alert rules: one numeric `value` per row, the other columns become the alert's labels ---------

_RECENT = "Timestamp >= now() - toIntervalSecond({{value:recent_s}})"
_ALERT_WINDOW = "Timestamp >= now() - toIntervalSecond({{value:recent_s}} + {{value:baseline_s}})"
_VOLUME_OK = "recent_runs >= {{value:min_runs}} AND baseline_runs >= {{value:min_baseline_runs}}"

# The fatal-mode rate of the last `recent_s` against the `baseline_s` before it, per model; `value`
# is the rise in points when both windows have volume and the rate grew by `rise_factor`, else 0.
ALERT_FATAL_RATE_TEMPLATE: Final = f"""
WITH {runs_cte(_ALERT_WINDOW)},
windows AS (
    SELECT
        GroupKey,
        countIf({_RECENT}) AS recent_runs,
        countIf(NOT ({_RECENT})) AS baseline_runs,
        countIf({_RECENT} AND bitAnd(ModeMask, {{{{fatal_mask}}}}) != 0) / nullIf(recent_runs, 0)
            AS recent_rate,
        countIf(NOT ({_RECENT}) AND bitAnd(ModeMask, {{{{fatal_mask}}}}) != 0) / nullIf(baseline_runs, 0)
            AS baseline_rate
    FROM runs
    GROUP BY GroupKey
)
SELECT
    GroupKey AS model,
    toFloat64(if({_VOLUME_OK} AND recent_rate >= {{{{value:rise_factor}}}} * baseline_rate,
                 recent_rate - baseline_rate, 0)) AS value
FROM windows
ORDER BY model
"""

# One mode's prevalence (all runs) of the last `recent_s` against the baseline, per model and mode.
ALERT_MODE_SPIKE_TEMPLATE: Final = f"""
WITH {runs_cte(_ALERT_WINDOW)},
mode_sets AS (
    SELECT GroupKey, {_RECENT} AS Recent, ModeMask, count() AS Runs
    FROM runs
    GROUP BY GroupKey, Recent, ModeMask
),
windows AS (
    SELECT
        GroupKey,
        Bit,
        sumIf(Runs, Recent) AS recent_runs,
        sumIf(Runs, NOT Recent) AS baseline_runs,
        sumIf(Runs, Recent AND bitTest(ModeMask, Bit)) / nullIf(recent_runs, 0) AS recent_prevalence,
        sumIf(Runs, NOT Recent AND bitTest(ModeMask, Bit)) / nullIf(baseline_runs, 0) AS baseline_prevalence
    FROM mode_sets
    ARRAY JOIN range({_N_MODES}) AS Bit
    GROUP BY GroupKey, Bit
)
SELECT
    GroupKey AS model,
    {{{{modes}}}}[Bit + 1] AS mode,
    toFloat64(if({_VOLUME_OK} AND recent_prevalence >= {{{{value:rise_factor}}}} * baseline_prevalence,
                 recent_prevalence - baseline_prevalence, 0)) AS value
FROM windows
ORDER BY model, mode
"""

# No run stored for `silence_s` although the baseline says at least `min_expected_runs` were due.
ALERT_NO_DATA_TEMPLATE: Final = """
WITH counts AS (
    SELECT
        ServiceName,
        countIf(Timestamp >= now() - toIntervalSecond({{value:silence_s}})) AS recent_runs,
        countIf(Timestamp < now() - toIntervalSecond({{value:silence_s}}))
            * {{value:silence_s}} / {{value:baseline_s}} AS expected_runs
    FROM mast_conversations FINAL
    WHERE Timestamp >= now() - toIntervalSecond({{value:silence_s}} + {{value:baseline_s}})
    GROUP BY ServiceName
)
SELECT
    ServiceName AS service,
    toFloat64(if(recent_runs = 0 AND expected_runs >= {{value:min_expected_runs}}, expected_runs, 0)) AS value
FROM counts
ORDER BY service
"""


def _counter_increase(metric: str) -> str:
    """How much a collector counter grew in the stats window, per instance (restarts handled)."""
    return f"""
WITH samples AS (
    SELECT
        Instance,
        Value - lagInFrame(Value) OVER w AS delta,
        row_number() OVER w AS position,
        Value
    FROM mast_collector_stats
    WHERE Metric = '{metric}' AND Timestamp >= now() - toIntervalSecond({{{{value:stats_window_s}}}})
    WINDOW w AS (PARTITION BY Instance ORDER BY Timestamp ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT
    Instance AS instance,
    -- a counter that went down was restarted: everything it counted since is new
    toFloat64(sumIf(if(delta < 0, Value, delta), position > 1)) AS value
FROM samples
GROUP BY instance
ORDER BY instance
"""


ALERT_JUDGE_ERRORS_TEMPLATE: Final = _counter_increase("judge_errors")

# How many bytes each collector's spool grew in the stats window (a database that cannot keep up).
ALERT_SPOOL_GROWTH_TEMPLATE: Final = """
SELECT
    Instance AS instance,
    toFloat64(argMax(Value, Timestamp) - argMin(Value, Timestamp)) AS value
FROM mast_collector_stats
WHERE Metric = 'spool_bytes' AND Timestamp >= now() - toIntervalSecond({{value:stats_window_s}})
GROUP BY instance
ORDER BY instance
"""


# --- the LLM judge ----------------------------------------------------------------------------------
#
# Its ledger (`mast_judge_usage`, one row per decision about a run) per judge model: what it judged,
# reused from its cache or skipped and why, the requests, tokens and cost, per judged run too.


def _status_in(*statuses: JudgeStatus) -> str:
    return "Status IN (" + ", ".join(f"'{status.value}'" for status in statuses) + ")"


_JUDGED = _status_in(JudgeStatus.JUDGED, JudgeStatus.PARTIAL)
_STATUS_COUNTS = ",\n    ".join(f"countIf(Status = '{s.value}') AS {s.value}" for s in JudgeStatus)
JUDGE_USAGE_TEMPLATE: Final = f"""
SELECT
    JudgeModel AS judge_model,
    {_STATUS_COUNTS},
    sum(Requests) AS requests,
    sum(InputTokens) AS input_tokens,
    sum(OutputTokens) AS output_tokens,
    sum(CostUsd) AS cost_usd,
    countIf({_JUDGED}) AS judged_runs,
    sumIf(InputTokens + OutputTokens, {_JUDGED}) / nullIf(judged_runs, 0) AS tokens_per_judged_run,
    sumIf(Requests, {_JUDGED}) / nullIf(judged_runs, 0) AS requests_per_judged_run,
    sumIf(CostUsd, {_JUDGED}) / nullIf(judged_runs, 0) AS cost_per_judged_run,
    {JudgeStatus.CACHED.value} / nullIf(judged_runs + {JudgeStatus.CACHED.value}, 0) AS cache_hit_rate
FROM mast_judge_usage
WHERE {{{{time_filter:Timestamp}}}} AND {{{{filter:RunModel:model}}}} AND {{{{filter:ServiceName:service}}}}
GROUP BY judge_model
ORDER BY judge_model
"""

# Rules vs judge, per mode, over the runs the judge gave a verdict on (latest verdict per run) whose
# latest version is in scope. A mode the judge could not settle for a run (unknown) leaves that run
# out for that mode. Cohen's kappa = (p_o - p_e) / (1 - p_e), NULL when p_e is 1 (no variation).
_VERDICT = _status_in(JudgeStatus.JUDGED, JudgeStatus.PARTIAL, JudgeStatus.CACHED)
AGREEMENT_TEMPLATE: Final = f"""
WITH {RUNS_CTE},
judged AS (
    SELECT TraceId, argMax(UnknownModes, Timestamp) AS UnknownModes
    FROM mast_judge_usage
    WHERE {_VERDICT} AND TraceId IN (SELECT TraceId FROM runs)
    GROUP BY TraceId
),
votes AS (
    SELECT
        TraceId,
        Mode,
        max(startsWith(Annotator, 'rules')) AS RulesYes,
        max(startsWith(Annotator, 'llm/')) AS JudgeYes
    FROM mast_findings
    WHERE (TraceId, Version) IN (SELECT TraceId, Version FROM runs)
        AND TraceId IN (SELECT TraceId FROM judged)
    GROUP BY TraceId, Mode
),
grid AS (
    SELECT TraceId, mode AS Mode
    FROM judged
    ARRAY JOIN {{{{modes}}}} AS mode
    WHERE NOT has(UnknownModes, mode)
)
SELECT
    grid.Mode AS mode,
    count() AS runs,
    countIf(votes.RulesYes = 1 AND votes.JudgeYes = 1) AS rules_and_judge,
    countIf(votes.RulesYes = 1 AND votes.JudgeYes = 0) AS rules_only,
    countIf(votes.RulesYes = 0 AND votes.JudgeYes = 1) AS judge_only,
    runs - rules_and_judge - rules_only - judge_only AS neither,
    (rules_and_judge + neither) / nullIf(runs, 0) AS observed_agreement,
    ((rules_and_judge + rules_only) * (rules_and_judge + judge_only)
        + (judge_only + neither) * (rules_only + neither)) / nullIf(runs * runs, 0) AS expected_agreement,
    (observed_agreement - expected_agreement) / nullIf(1 - expected_agreement, 0) AS kappa
FROM grid
LEFT JOIN votes ON votes.TraceId = grid.TraceId AND votes.Mode = grid.Mode
GROUP BY mode
ORDER BY indexOf({{{{modes}}}}, mode)
"""


def project(template: str, columns: Sequence[str], order: str = "") -> str:
    """A template narrowed to some of its columns (a panel shows only these), rows kept in order."""
    selected = ", ".join(columns)
    suffix = f"\nORDER BY {order}" if order else ""
    return f"SELECT {selected} FROM (\n{template.strip()}\n){suffix}"


# Every template by name, for the dashboards, the bench and the tests.
TEMPLATES: Final[Mapping[str, str]] = {
    "group_summary": GROUP_SUMMARY_TEMPLATE,
    "mode_prevalence": MODE_PREVALENCE_TEMPLATE,
    "modes_per_failed_run": MODES_PER_FAILED_RUN_TEMPLATE,
    "category_breakdown": CATEGORY_BREAKDOWN_TEMPLATE,
    "mode_pairs": MODE_PAIRS_TEMPLATE,
    "mode_openers": MODE_OPENERS_TEMPLATE,
    "blame": BLAME_TEMPLATE,
    "rates_over_time": RATES_OVER_TIME_TEMPLATE,
    "recent_runs": RECENT_RUNS_TEMPLATE,
    "run_turns": RUN_TURNS_TEMPLATE,
    "run_findings": RUN_FINDINGS_TEMPLATE,
    "run_spans": RUN_SPANS_TEMPLATE,
    "alert_fatal_rate": ALERT_FATAL_RATE_TEMPLATE,
    "alert_mode_spike": ALERT_MODE_SPIKE_TEMPLATE,
    "alert_no_data": ALERT_NO_DATA_TEMPLATE,
    "alert_judge_errors": ALERT_JUDGE_ERRORS_TEMPLATE,
    "alert_spool_growth": ALERT_SPOOL_GROWTH_TEMPLATE,
    "judge_usage": JUDGE_USAGE_TEMPLATE,
    "agreement": AGREEMENT_TEMPLATE,
}

_BOUND = Bound()
GROUP_SUMMARY_SQL: Final = _BOUND.render(GROUP_SUMMARY_TEMPLATE)
MODE_PREVALENCE_SQL: Final = _BOUND.render(MODE_PREVALENCE_TEMPLATE)
MODES_PER_FAILED_RUN_SQL: Final = _BOUND.render(MODES_PER_FAILED_RUN_TEMPLATE)
CATEGORY_BREAKDOWN_SQL: Final = _BOUND.render(CATEGORY_BREAKDOWN_TEMPLATE)
MODE_PAIRS_SQL: Final = _BOUND.render(MODE_PAIRS_TEMPLATE)
MODE_OPENERS_SQL: Final = _BOUND.render(MODE_OPENERS_TEMPLATE)
BLAME_SQL: Final = _BOUND.render(BLAME_TEMPLATE)
RATES_OVER_TIME_SQL: Final = _BOUND.render(RATES_OVER_TIME_TEMPLATE)
JUDGE_USAGE_SQL: Final = _BOUND.render(JUDGE_USAGE_TEMPLATE)
AGREEMENT_SQL: Final = _BOUND.render(AGREEMENT_TEMPLATE)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which runs an analysis covers: grouping, time window and filters (empty filter: all)."""

    by: Dimension = Dimension.MODEL
    since: datetime | None = None
    until: datetime | None = None
    models: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    fatal_modes: tuple[str, ...] = STUDY_FATAL_MODES
    bucket_s: int = 3600

    def parameters(self) -> dict[str, Any]:
        """The bindings of every Bound-rendered template; plain JSON values, so they travel too."""
        return {
            "group": self.by.column,
            "since": _seconds(self.since, EPOCH),
            "until": _seconds(self.until, FAR_FUTURE),
            "modes": list(CODES),
            "models": list(self.models),
            "agents": list(self.agents),
            "services": list(self.services),
            "versions": list(self.versions),
            "fatal_mask": mode_mask(self.fatal_modes),
            "bucket_s": self.bucket_s,
        }


def parameters(
    by: Dimension | str = Dimension.MODEL,
    since: datetime | None = None,
    until: datetime | None = None,
    **filters: Any,
) -> dict[str, Any]:
    """The bindings for the queries above (see `Scope`); None means no bound on that side.

    Times go as Unix seconds with nine decimals, which ClickHouse parses into DateTime64(9) whatever
    the server's time zone. A naive datetime is taken as UTC.
    """
    return Scope(Dimension.parse(by), since, until, **filters).parameters()


def _seconds(moment: datetime | None, default: datetime) -> str:
    if moment is None:
        moment = default
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = min(max(moment, EPOCH), FAR_FUTURE)  # run starts are nanoseconds since the epoch
    microseconds = (moment - EPOCH) // timedelta(microseconds=1)
    seconds, fraction = divmod(microseconds, 1_000_000)
    return f"{seconds}.{fraction:06d}000"
