"""The analysis SQL, each metric written once: the CLI, the reports and Grafana run these same texts.

Every query reads only the latest version of each run (FINAL on `mast_conversations`; findings are
joined on that version's `(TraceId, Version)`), takes a run's *effective* outcome (the latest late
outcome from `mast_outcomes` when a grader sent one, else the run's own) and is parameterised by
server-side bindings only:

- `{group:Identifier}` the `mast_conversations` column runs are grouped by (see `Dimension`),
- `{since:DateTime64(9)}` the earliest run start to include (Unix seconds, nine decimals),
- `{modes:Array(String)}` the taxonomy's mode codes, in order (prevalence query only).

`parameters()` builds them. Success rate and prevalences count only runs whose outcome is known.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, Final

from mast_otel.conversation.model import Outcome
from mast_otel.taxonomy import CODES


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

_SUCCESS = Outcome.SUCCESS.value
_FAILURE = Outcome.FAILURE.value

# The runs in scope with their group and effective outcome and score, and the distinct modes of
# each run's latest version. Shared by every query below.
RUNS_CTE: Final = f"""
latest_runs AS (
    SELECT TraceId, Version, {{group:Identifier}} AS GroupKey, Outcome, Score
    FROM mast_conversations FINAL
    WHERE Timestamp >= {{since:DateTime64(9)}}
),
late_outcomes AS (
    SELECT TraceId, Outcome AS LateOutcome, Score AS LateScore
    FROM mast_outcomes FINAL
    WHERE TraceId IN (SELECT TraceId FROM latest_runs)
),
runs AS (
    SELECT
        latest_runs.TraceId AS TraceId,
        latest_runs.Version AS Version,
        latest_runs.GroupKey AS GroupKey,
        if(late_outcomes.LateOutcome IN ('{_SUCCESS}', '{_FAILURE}'), late_outcomes.LateOutcome,
           latest_runs.Outcome) AS EffectiveOutcome,
        coalesce(late_outcomes.LateScore, latest_runs.Score) AS EffectiveScore
    FROM latest_runs
    LEFT JOIN late_outcomes ON late_outcomes.TraceId = latest_runs.TraceId
),
run_modes AS (
    -- DISTINCT: several annotators may report the same mode; a run has a mode or not.
    SELECT DISTINCT mast_findings.TraceId AS TraceId, mast_findings.Mode AS Mode
    FROM mast_findings
    INNER JOIN latest_runs
        ON mast_findings.TraceId = latest_runs.TraceId AND mast_findings.Version = latest_runs.Version
)"""

# Per group: runs, outcomes, success rate, mean score, distinct modes per failed run.
GROUP_SUMMARY_SQL: Final = f"""
WITH {RUNS_CTE},
mode_counts AS (
    SELECT TraceId, count() AS ModeCount FROM run_modes GROUP BY TraceId
)
SELECT
    runs.GroupKey AS group_key,
    count() AS runs,
    countIf(runs.EffectiveOutcome = '{_SUCCESS}') AS successes,
    countIf(runs.EffectiveOutcome = '{_FAILURE}') AS failures,
    successes / nullIf(successes + failures, 0) AS success_rate,
    avgOrNull(runs.EffectiveScore) AS mean_score,
    avgIfOrNull(ifNull(mode_counts.ModeCount, 0), runs.EffectiveOutcome = '{_FAILURE}')
        AS modes_per_failed_run
FROM runs
LEFT JOIN mode_counts ON mode_counts.TraceId = runs.TraceId
GROUP BY group_key
ORDER BY runs DESC, group_key
"""

# Per group x mode (every taxonomy mode, also those never seen): how many successful and failed
# runs show the mode, its prevalence in each, and the relative increase in failed runs,
# (p_fail - p_success) / p_success, NULL when p_success is 0.
MODE_PREVALENCE_SQL: Final = f"""
WITH {RUNS_CTE},
group_outcomes AS (
    SELECT
        GroupKey,
        countIf(EffectiveOutcome = '{_SUCCESS}') AS Successes,
        countIf(EffectiveOutcome = '{_FAILURE}') AS Failures
    FROM runs
    GROUP BY GroupKey
),
mode_runs AS (
    SELECT
        runs.GroupKey AS GroupKey,
        run_modes.Mode AS Mode,
        countIf(runs.EffectiveOutcome = '{_SUCCESS}') AS SuccessesWithMode,
        countIf(runs.EffectiveOutcome = '{_FAILURE}') AS FailuresWithMode
    FROM run_modes
    INNER JOIN runs ON runs.TraceId = run_modes.TraceId
    GROUP BY GroupKey, Mode
),
taxonomy AS (
    SELECT arrayJoin({{modes:Array(String)}}) AS Mode
)
SELECT
    group_outcomes.GroupKey AS group_key,
    taxonomy.Mode AS mode,
    group_outcomes.Successes AS successes,
    group_outcomes.Failures AS failures,
    ifNull(mode_runs.SuccessesWithMode, 0) AS successes_with_mode,
    ifNull(mode_runs.FailuresWithMode, 0) AS failures_with_mode,
    successes_with_mode / nullIf(successes, 0) AS success_prevalence,
    failures_with_mode / nullIf(failures, 0) AS failure_prevalence,
    (failure_prevalence - success_prevalence) / nullIf(success_prevalence, 0) AS relative_increase
FROM group_outcomes
CROSS JOIN taxonomy
LEFT JOIN mode_runs ON mode_runs.GroupKey = group_outcomes.GroupKey AND mode_runs.Mode = taxonomy.Mode
ORDER BY group_key, indexOf({{modes:Array(String)}}, mode)
"""


def parameters(by: Dimension | str = Dimension.MODEL, since: datetime | None = None) -> dict[str, Any]:
    """The bindings for the queries above; plain JSON values, so they also travel to a collector.

    `since` goes as Unix seconds with nine decimals, which ClickHouse parses into DateTime64(9)
    whatever the server's time zone. A naive `since` is taken as UTC; None means all runs.
    """
    dimension = Dimension.parse(by)
    if since is None:
        since = EPOCH
    elif since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    since = max(since, EPOCH)  # run starts are nanoseconds since the epoch: none is earlier
    microseconds = (since - EPOCH) // timedelta(microseconds=1)
    seconds, fraction = divmod(microseconds, 1_000_000)
    return {"group": dimension.column, "since": f"{seconds}.{fraction:06d}000", "modes": list(CODES)}
