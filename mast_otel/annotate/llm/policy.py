"""Which runs the judge spends tokens on: the sampling policy and the hourly token budget.

Sampling judges every failed run and every run a rule fired on (where a second opinion matters),
plus a fraction of the rest (to measure what the rules miss). The fraction is decided by the run's
content hash, so the same run always gets the same decision, whichever replica sees it.

The budget is a sliding one-hour window of tokens (input + output). A run reserves its estimate
before its first request and settles to what the server reported afterwards.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mast_otel.annotate.base import Finding
from mast_otel.annotate.llm.config import SamplingConfig
from mast_otel.conversation.model import Conversation, Outcome

__all__ = ["Decision", "HourlyTokenBudget", "Reservation", "SamplingPolicy"]

WINDOW_S = 3600.0


@dataclass(frozen=True, slots=True)
class Decision:
    judge: bool
    reason: str


class SamplingPolicy:
    def __init__(self, config: SamplingConfig) -> None:
        self.config = config

    def decide(
        self, conversation: Conversation, rule_findings: Sequence[Finding], content_hash: str
    ) -> Decision:
        config = self.config
        if config.failed_runs and (conversation.outcome is Outcome.FAILURE or conversation.error):
            return Decision(True, "failed run")
        if config.rules_fired and rule_findings:
            codes = ", ".join(sorted({finding.mode.code for finding in rule_findings}))
            return Decision(True, f"rules fired: {codes}")
        # The hash is uniform: its first 8 bytes as a fraction of 2**64 is a fair coin, and a stable one.
        draw = int(content_hash[:16], 16) / 2**64
        if draw < config.other_fraction:
            return Decision(True, f"sampled ({config.other_fraction:.0%} of other runs)")
        return Decision(
            False, f"not sampled: no failure, no rule fired, outside the {config.other_fraction:.0%} sample"
        )


@dataclass(slots=True)
class _Spend:
    time: float
    tokens: int
    in_window: bool = True


@dataclass(slots=True)
class Reservation:
    """Tokens set aside for one run; `settle` replaces the estimate by what was actually used."""

    _budget: HourlyTokenBudget
    _spend: _Spend

    def settle(self, actual_tokens: int) -> None:
        self._budget._settle(self._spend, actual_tokens)


class HourlyTokenBudget:
    """Thread-safe sliding-window token budget; a limit of 0 means unlimited."""

    def __init__(self, hourly_tokens: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = hourly_tokens
        self._clock = clock
        self._lock = threading.Lock()
        self._window: deque[_Spend] = deque()
        self._used = 0

    @property
    def unlimited(self) -> bool:
        return self.limit <= 0

    def used(self) -> int:
        with self._lock:
            self._expire()
            return self._used

    def exhausted(self) -> bool:
        return not self.unlimited and self.used() >= self.limit

    def reserve(self, tokens: int) -> Reservation | None:
        """Set `tokens` aside if the last hour's use leaves room for them; None otherwise."""
        with self._lock:
            self._expire()
            if not self.unlimited and self._used + tokens > self.limit:
                return None
            spend = _Spend(self._clock(), tokens)
            self._window.append(spend)
            self._used += tokens
            return Reservation(self, spend)

    def seconds_until_room(self, tokens: int) -> float:
        """How long until `tokens` would fit, if nothing else is spent meanwhile (inf if never)."""
        if self.unlimited:
            return 0.0
        if tokens > self.limit:
            return float("inf")
        with self._lock:
            self._expire()
            excess = self._used + tokens - self.limit
            now = self._clock()
            for spend in self._window:
                if excess <= 0:
                    break
                excess -= spend.tokens
                if excess <= 0:
                    return max(0.0, spend.time + WINDOW_S - now)
            return 0.0

    def describe(self) -> str:
        return f"{self.used():,} of {self.limit:,} tokens used in the last hour"

    def _settle(self, spend: _Spend, actual: int) -> None:
        with self._lock:
            if spend.in_window:
                self._used += actual - spend.tokens
            spend.tokens = actual

    def _expire(self) -> None:
        horizon = self._clock() - WINDOW_S
        while self._window and self._window[0].time <= horizon:
            spend = self._window.popleft()
            spend.in_window = False
            self._used -= spend.tokens
