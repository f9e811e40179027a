"""Shared fixtures.

chDB runs one embedded server per process, bound to one data directory at a time. The whole test
session therefore shares one data directory, and tests keep apart by database name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def database() -> str:
    """A database name no other test in this session uses."""
    return f"t{next(_databases)}"


@pytest.fixture
def collector(chdb_dir: Path, database: str) -> Iterator[object]:
    """A collector on free loopback ports and the session's chDB, tuned for tests: traces are
    released 0.2 s after their root, batches written every 0.05 s."""
    from mast_otel.collector.assembly import AssemblyConfig
    from mast_otel.collector.config import loopback
    from mast_otel.collector.pipeline import PipelineConfig
    from mast_otel.collector.service import Collector

    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
    )
    with Collector(config) as running:
        yield running


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[object]:
    from mast_otel.store.clickhouse import open_store

    opened = open_store(chdb_dir, database=database)
    yield opened
    opened.close()
