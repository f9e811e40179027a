"""Where the analysis reads from: a store opened directly, or the running collector that holds it.

chDB opens a data directory in one process only, so when a collector is running on the embedded
store the analysis asks that collector (its admin endpoint, found through the lock file it keeps in
the data directory) instead of opening the directory itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mast_otel.collector.query_api import CollectorQueryClient, read_lock
from mast_otel.store.base import QuerySource, StoreError

_SERVER_SCHEMES = ("http://", "https://", "clickhouse://", "clickhouses://")


@contextmanager
def open_query_source(target: str | Path, database: str = "mast") -> Iterator[QuerySource]:
    """Open `target` (a chDB data directory or a ClickHouse URL) for reading; closes what it opened."""
    text = str(target)
    if not text.startswith(_SERVER_SCHEMES):
        data_dir = Path(text.removeprefix("chdb://")).expanduser().resolve()
        if not data_dir.is_dir() or not any(data_dir.iterdir()):
            raise StoreError(
                f"no data at {data_dir}: run `mast-otel demo --data {data_dir}` or point a collector at it "
                f"(`mast-otel collector --store {data_dir}`) first"
            )
        lock = read_lock(data_dir)
        if lock is not None:
            yield CollectorQueryClient(lock.admin_url)
            return
    from mast_otel.store.clickhouse import open_store

    store = open_store(text, database=database)
    try:
        yield store
    finally:
        store.close()
