"""mast-otel: tells teams why their LLM agents fail.

OpenTelemetry traces of agent runs are rebuilt into conversations, annotated with the 14 failure
modes of the MAST taxonomy and stored in ClickHouse for analysis, dashboards and alerts.
"""

__version__ = "0.1.0"
