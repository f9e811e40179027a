"""The store stage's interface: where spans, annotated runs and outcomes go, and how they are read.

`Store` is implemented by `ClickHouseStore` (chDB embedded or a ClickHouse server, both through
clickhouse-connect). `QuerySource` is the read side alone: the analysis needs nothing more, which
lets it run against a store opened directly or against a running collector that holds the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mast_otel.annotate.base import AnnotatedRun
from mast_otel.conversation.model import OutcomeReport
from mast_otel.spans import Span

if TYPE_CHECKING:  # the judge package is optional at run time
    from mast_otel.annotate.llm.usage import JudgeUsage


class StoreError(RuntimeError):
    """The database refused or could not be reached; the message says which and what to do."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    column_names: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.column_names, row, strict=True)) for row in self.rows]


class QuerySource(Protocol):
    """Runs a read-only query. Parameters use ClickHouse's `{name:Type}` server-side binding."""

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult: ...


class Store(QuerySource, Protocol):
    def insert_spans(self, spans: Sequence[Span]) -> None: ...

    def with_own_connection(self) -> Store:
        """This store on a separate connection (or itself, when it cannot open one); close it after use."""
        ...

    def insert_otlp_requests(self, bodies: Sequence[bytes], dedup_token: str) -> None:
        """The spans of serialized OTLP trace requests, parsed by the database; the same batch
        inserted again with the same token stores nothing."""
        ...

    def insert_runs(self, runs: Sequence[AnnotatedRun]) -> None: ...

    def insert_outcomes(self, outcomes: Sequence[OutcomeReport]) -> None: ...

    def existing_runs(self, trace_ids: Sequence[str]) -> set[str]: ...

    def load_spans(self, trace_ids: Sequence[str]) -> dict[str, list[Span]]: ...

    def insert_collector_stats(self, instance: str, values: Mapping[str, float], time_ns: int) -> None: ...

    def insert_judge_usage(self, rows: Sequence[JudgeUsage]) -> None: ...

    def ping(self) -> bool: ...

    def close(self) -> None: ...
