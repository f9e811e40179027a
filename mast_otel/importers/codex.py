"""Codex CLI session rollouts -> Conversations: `mast-otel import codex PATH...`.

Codex writes every session to `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`
(`~/.codex` by default), one JSON object per line; `mast_otel.conversation.codex` knows what the
lines mean and turns them into the spans our SDK emits, which `rebuild` makes a run of. This module
only reads files: each line is decoded on its own, so a line that is not UTF-8 or not JSON (a
file cut off mid-write ends in one) is reported with its number and the rest of the file imports.

A run's trace id is the session's UUID (32 hex digits), the trace id the same session gets when it
arrives live as OTLP logs: importing a rollout again, or after the session was resumed, replaces
the run. A late grader can attach an outcome to it with `sdk.record_outcome(trace_id, ...)`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from mast_otel.conversation.codex import RolloutError, rollout_conversation
from mast_otel.importers.base import FileRead, ImportFileError, content_trace_id, read_bytes

FORMAT = "codex"


class CodexRolloutReader:
    """The `Reader` for Codex rollouts: one run per file."""

    format_name = FORMAT
    description = "Codex CLI session rollouts (rollout-*.jsonl under $CODEX_HOME/sessions)"
    suffixes = (".jsonl",)

    def read(self, path: Path) -> FileRead:
        content = read_bytes(path)
        records: list[tuple[int, object]] = []
        bad: list[ImportFileError] = []
        for number, raw in enumerate(content.split(b"\n"), start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                bad.append(
                    ImportFileError(path, f"line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})")
                )
                continue
            if not line.strip():
                continue
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                bad.append(
                    ImportFileError(path, f"line {number}: not valid JSON: {exc.msg} at column {exc.colno}")
                )
            except RecursionError:
                bad.append(ImportFileError(path, f"line {number}: not valid JSON: nested too deeply"))
        try:
            run = rollout_conversation(records, fallback_trace_id=content_trace_id(content))
        except RolloutError as exc:
            first_bad = f" ({len(bad)} unreadable line(s), the first: {bad[0].problem})" if bad else ""
            raise ImportFileError(path, f"not a Codex rollout: {exc}{first_bad}") from None
        skipped = bad + [ImportFileError(path, f"line {p.line}: {p.problem}") for p in run.problems]
        skipped.sort(key=lambda error: _line_of(error.problem))
        conversation = run.conversation
        provenance = {"mast.import.format": FORMAT, "mast.import.file": path.name}
        return FileRead(
            (replace(conversation, attributes={**conversation.attributes, **provenance}),), tuple(skipped)
        )


def _line_of(problem: str) -> int:
    number = problem.removeprefix("line ").partition(":")[0]
    return int(number) if number.isdigit() else 0
