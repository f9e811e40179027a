"""Importers: agent logs from files into the same pipeline as live traces (annotate -> store).

`base.py` is the small framework a new format plugs into: a `Reader` turns one file into
Conversations (or raises `ImportFileError` naming the file and the problem), and `run_import`
annotates every run with `annotate_run` (findings and blame, exactly as the collector does) and
writes them to the store in batches, continuing past bad files. One module per format:

- `who_and_when.py`: the Who&When failure-attribution benchmark's JSON logs, with their labels.
- `otlp_json.py`: OTLP/JSON trace exports (file exporter output), rebuilt like live traces.
- `codex.py`: Codex CLI session rollouts (`rollout-*.jsonl`).
- `otelcol_debug.py`: the collector `debug` exporter's detailed text, rebuilt like live traces.
"""

from collections.abc import Callable, Mapping

from mast_otel.importers.base import (
    FileRead,
    ImportedRun,
    ImportFileError,
    ImportReport,
    Reader,
    content_trace_id,
    expand_paths,
    run_import,
)
from mast_otel.importers.codex import CodexRolloutReader
from mast_otel.importers.otelcol_debug import OtelcolDebugReader
from mast_otel.importers.otlp_json import OtlpJsonReader
from mast_otel.importers.who_and_when import WhoAndWhenReader

# Every format `mast-otel import` knows, by its command-line name. A new format adds its reader here.
READERS: Mapping[str, Callable[[], Reader]] = {
    WhoAndWhenReader.format_name: WhoAndWhenReader,
    OtlpJsonReader.format_name: OtlpJsonReader,
    CodexRolloutReader.format_name: CodexRolloutReader,
    OtelcolDebugReader.format_name: OtelcolDebugReader,
}

__all__ = [
    "READERS",
    "FileRead",
    "ImportFileError",
    "ImportReport",
    "ImportedRun",
    "Reader",
    "content_trace_id",
    "expand_paths",
    "run_import",
]
