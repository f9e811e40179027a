"""Store stage: the ClickHouse schema (`schema.py`) and store (`clickhouse.py`), chDB or server."""
