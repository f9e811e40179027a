"""Fault injection at the database boundary: the real store, behind a switch that fails every call."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mast_otel.annotate.base import AnnotatedRun
from mast_otel.conversation.model import OutcomeReport
from mast_otel.spans import Span
from mast_otel.store.base import QueryResult, Store, StoreError


class Outage:
    """The real chDB store, behind a switch that makes every call fail as if the database went away."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = threading.Event()

    def _check(self) -> None:
        if self.down.is_set():
            raise StoreError("connection refused (simulated outage)")

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self._check()
        return self.store.query(sql, parameters)

    def insert_spans(self, spans: Sequence[Span]) -> None:
        self._check()
        self.store.insert_spans(spans)

    def with_own_connection(self) -> Outage:
        twin = Outage(self.store.with_own_connection())
        twin.down = self.down  # one switch for both connections
        return twin

    def insert_otlp_requests(self, bodies: Sequence[bytes], dedup_token: str) -> None:
        self._check()
        self.store.insert_otlp_requests(bodies, dedup_token)

    def insert_runs(self, runs: Sequence[AnnotatedRun]) -> None:
        self._check()
        self.store.insert_runs(runs)

    def insert_outcomes(self, outcomes: Sequence[OutcomeReport]) -> None:
        self._check()
        self.store.insert_outcomes(outcomes)

    def existing_runs(self, trace_ids: Sequence[str]) -> set[str]:
        self._check()
        return self.store.existing_runs(trace_ids)

    def load_spans(self, trace_ids: Sequence[str]) -> dict[str, list[Span]]:
        self._check()
        return self.store.load_spans(trace_ids)

    def insert_collector_stats(self, instance: str, values: Mapping[str, float], time_ns: int) -> None:
        self._check()
        self.store.insert_collector_stats(instance, values, time_ns)

    def insert_judge_usage(self, rows: Sequence[Any]) -> None:
        self._check()
        self.store.insert_judge_usage(rows)

    def ping(self) -> bool:
        return not self.down.is_set() and self.store.ping()

    def close(self) -> None:
        self.store.close()
