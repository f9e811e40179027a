"""Is a mode fatal or benign for *these* runs? Fisher's exact test and the verdict rule.

The odds ratio and its 95% interval come from SQL (`queries.MODE_PREVALENCE_TEMPLATE`, so Grafana
shows the same numbers); the exact p-value needs the hypergeometric distribution, from scipy.

Verdict, per group and mode, on the 2x2 table (failed/successful runs x mode present/absent):

- thin data, when the group has fewer than `MIN_RUNS_PER_OUTCOME` successful or failed runs, or the
  mode was seen in fewer than `MIN_RUNS_WITH_MODE` runs with a known outcome: the reference study's
  prior (fatal / benign, else inconclusive), marked as such;
- fatal: Fisher's two-sided p < `ALPHA` and the odds ratio above 1 (more common in failed runs);
- benign: significantly more common in successful runs, or not significant while present in at least
  `BENIGN_MIN_SUCCESS_PREVALENCE` of successful runs (common, yet it does not decide the run: the
  study's step repetition);
- inconclusive otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from scipy.stats import fisher_exact

from mast_otel.taxonomy import FailureMode, Prior

ALPHA: Final = 0.05
MIN_RUNS_PER_OUTCOME: Final = 10
MIN_RUNS_WITH_MODE: Final = 5
BENIGN_MIN_SUCCESS_PREVALENCE: Final = 0.2


class Verdict(str, Enum):
    FATAL = "fatal"
    BENIGN = "benign"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class ModeVerdict:
    verdict: Verdict
    from_prior: bool  # True when the data was too thin and the study's prior decided
    reason: str


def fisher_p(failures_with: int, failures: int, successes_with: int, successes: int) -> float | None:
    """Two-sided Fisher exact p for the mode in failed vs successful runs; None without both."""
    if failures <= 0 or successes <= 0:
        return None
    table = [[failures_with, failures - failures_with], [successes_with, successes - successes_with]]
    return float(fisher_exact(table, alternative="two-sided").pvalue)


def verdict(
    mode: FailureMode,
    *,
    failures_with: int,
    failures: int,
    successes_with: int,
    successes: int,
    odds_ratio: float | None,
    p_value: float | None,
) -> ModeVerdict:
    """The verdict for one mode in one group (see the module docstring for the rule)."""
    thin = _thin(failures_with, failures, successes_with, successes)
    if thin or p_value is None or odds_ratio is None:
        prior = {Prior.FATAL: Verdict.FATAL, Prior.BENIGN: Verdict.BENIGN}.get(
            mode.prior, Verdict.INCONCLUSIVE
        )
        source = f"study prior ({mode.prior.value})" if mode.prior is not Prior.UNKNOWN else "no prior"
        return ModeVerdict(prior, True, f"thin data: {thin or 'no comparison'}; {source}")
    if p_value < ALPHA and odds_ratio > 1:
        return ModeVerdict(
            Verdict.FATAL, False, f"more common in failed runs (OR {odds_ratio:.2f}, p={p_value:.2g})"
        )
    if p_value < ALPHA and odds_ratio < 1:
        return ModeVerdict(Verdict.BENIGN, False, f"more common in successful runs (p={p_value:.2g})")
    success_prevalence = successes_with / successes
    if success_prevalence >= BENIGN_MIN_SUCCESS_PREVALENCE:
        return ModeVerdict(
            Verdict.BENIGN,
            False,
            f"in {success_prevalence:.0%} of successful runs without separating outcomes (p={p_value:.2g})",
        )
    return ModeVerdict(Verdict.INCONCLUSIVE, False, f"no significant difference (p={p_value:.2g})")


def _thin(failures_with: int, failures: int, successes_with: int, successes: int) -> str:
    if failures < MIN_RUNS_PER_OUTCOME or successes < MIN_RUNS_PER_OUTCOME:
        return f"{successes} successful / {failures} failed runs (< {MIN_RUNS_PER_OUTCOME} each)"
    if failures_with + successes_with < MIN_RUNS_WITH_MODE:
        return f"seen in {failures_with + successes_with} runs (< {MIN_RUNS_WITH_MODE})"
    return ""
