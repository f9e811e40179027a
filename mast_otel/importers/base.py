"""The import framework: a per-format `Reader`, and `run_import`, the one runner every format shares.

A reader turns one file into Conversations, or raises `ImportFileError` saying what is wrong with
that file. The runner expands the paths it is given (directories are walked for the reader's file
suffixes), reads each file, annotates every run with `annotate_run` (findings and blame, exactly as
the collector does for live traces), and writes the runs to the store in batches. A bad file costs
only itself: its error is collected in the report and the import goes on. A bad line or record
inside a file costs only itself too: readers of line-oriented formats skip it, say which line and
why (`FileRead.skipped`), and keep the rest of the file.

Imported runs need a trace id. Readers derive it from the file's content (`content_trace_id`), so
importing the same file again produces the same trace id with a newer version, which replaces the
earlier rows instead of adding a second run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mast_otel.annotate.base import AnnotatedRun, Annotator, Blame
from mast_otel.annotate.run import annotate_run
from mast_otel.conversation.model import Conversation, Outcome
from mast_otel.conversation.rebuild import rebuild
from mast_otel.spans import Span
from mast_otel.store.base import Store

# Below this many files an import is over before a progress bar would be worth drawing.
PROGRESS_MIN_FILES = 20
DEFAULT_BATCH_RUNS = 200
_GZIP_MAGIC = b"\x1f\x8b"


class ImportFileError(Exception):
    """One file could not be imported; the message names the file and what is wrong with it."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


class Reader(Protocol):
    """One file format: which files it reads in a directory, and how one file becomes runs."""

    @property
    def format_name(self) -> str: ...  # as on the command line: "who-and-when"

    @property
    def description(self) -> str: ...  # one line for --help

    @property
    def suffixes(self) -> tuple[str, ...]: ...  # files picked up when walking a directory: (".json",)

    def read(self, path: Path) -> FileRead:
        """The runs in one file; raises `ImportFileError` when the file cannot be read as this format."""
        ...


@dataclass(frozen=True, slots=True)
class FileRead:
    """What a reader got out of one file: its runs, and the parts it had to skip (each an
    `ImportFileError` naming the file and the line or record, e.g. "line 7: not valid JSON")."""

    conversations: tuple[Conversation, ...]
    skipped: tuple[ImportFileError, ...] = ()


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """What was (or, on a dry run, would be) stored for one run: enough to print, not the run itself."""

    path: Path
    trace_id: str
    agents: tuple[str, ...]
    turns: int
    outcome: Outcome
    modes: tuple[str, ...]  # codes of the modes detected, in taxonomy order
    blame: Blame | None


@dataclass(frozen=True, slots=True)
class ImportReport:
    files: int  # files read (well or not)
    runs: tuple[ImportedRun, ...]
    errors: tuple[ImportFileError, ...]  # files that could not be imported at all
    skipped: tuple[ImportFileError, ...]  # lines or records left out of files that were imported
    stored: int  # runs written to the store (0 on a dry run)
    dry_run: bool


def content_trace_id(content: bytes, part: int = 0) -> str:
    """A stable 32-hex-digit trace id for the `part`-th run of a file with this content."""
    digest = hashlib.sha256(content)
    if part:
        digest.update(f"\0{part}".encode())
    return digest.hexdigest()[:32]


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ImportFileError(path, f"cannot read: {exc.strerror or exc}") from None


def read_uncompressed(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (known by its magic bytes, whatever its name)."""
    content = read_bytes(path)
    if not content.startswith(_GZIP_MAGIC):
        return content
    try:
        return gzip.decompress(content)
    except (OSError, EOFError, zlib.error) as exc:
        raise ImportFileError(path, f"not a readable gzip file: {exc}") from None


def rebuild_traces(spans: Iterable[Span], format_name: str, path: Path) -> tuple[Conversation, ...]:
    """One run per trace among `spans`, however the file ordered or split them, each rebuilt by the
    collector's own `rebuild` and marked with the format and file it was imported from."""
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    provenance = {"mast.import.format": format_name, "mast.import.file": path.name}
    return tuple(
        replace(conversation, attributes={**conversation.attributes, **provenance})
        for conversation in (rebuild(trace) for trace in traces.values())
    )


def load_json(path: Path, content: bytes) -> object:
    """The file's JSON document (UTF-8, a byte order mark tolerated); `ImportFileError` with the line
    and column of a syntax error."""
    try:
        return json.loads(content.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ImportFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ImportFileError(
            path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ImportFileError(path, "not valid JSON: nested too deeply") from None


_DIGITS = re.compile(r"(\d+)")


def _natural_key(path: Path) -> tuple[object, ...]:
    """ "2.json" before "10.json"."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(str(path)))


def expand_paths(paths: Iterable[Path | str], suffixes: Sequence[str]) -> list[Path]:
    """Files as given (whatever their suffix), directories walked recursively for `suffixes`, in
    natural order, each file once. Missing paths are kept: reading them reports the problem."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found.extend(
                sorted(
                    (p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in suffixes),
                    key=_natural_key,
                )
            )
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def run_import(
    paths: Iterable[Path | str],
    reader: Reader,
    store: Store | None,
    annotator: Annotator,
    *,
    dry_run: bool = False,
    progress: bool = False,
    console: Console | None = None,
    batch_runs: int = DEFAULT_BATCH_RUNS,
) -> ImportReport:
    """Read, annotate and store every run in `paths`; bad files are reported, not fatal.

    `store` may be None on a dry run only. `progress` draws a progress bar (on `console`) when there
    are at least `PROGRESS_MIN_FILES` files. A store error propagates: it is not one file's fault,
    and the runs written before it stay written.
    """
    if store is None and not dry_run:
        raise ValueError("a store is needed unless this is a dry run")
    files = expand_paths(paths, reader.suffixes)
    imported: list[ImportedRun] = []
    errors: list[ImportFileError] = []
    skipped: list[ImportFileError] = []
    pending: list[AnnotatedRun] = []
    stored = 0

    def flush() -> None:
        nonlocal stored
        if pending and store is not None and not dry_run:
            store.insert_runs(pending)
            stored += len(pending)
        pending.clear()

    with _progress_bar(len(files) if progress else 0, reader.format_name, console) as advance:
        for path in files:
            try:
                read = reader.read(path)
                runs = [annotate_run(conversation, annotator) for conversation in read.conversations]
            except ImportFileError as exc:
                errors.append(exc)
            except Exception as exc:  # a reader or annotator bug must not stop the other files
                errors.append(ImportFileError(path, f"could not be processed: {type(exc).__name__}: {exc}"))
            else:
                skipped.extend(read.skipped)
                imported.extend(_summary(path, run) for run in runs)
                pending.extend(runs)
                if len(pending) >= batch_runs:
                    flush()
            advance()
        flush()
    return ImportReport(
        files=len(files),
        runs=tuple(imported),
        errors=tuple(errors),
        skipped=tuple(skipped),
        stored=stored,
        dry_run=dry_run,
    )


def _summary(path: Path, run: AnnotatedRun) -> ImportedRun:
    conversation = run.conversation
    modes = sorted({finding.mode.code for finding in run.findings})
    return ImportedRun(
        path=path,
        trace_id=conversation.trace_id,
        agents=conversation.agents,
        turns=len(conversation.turns),
        outcome=conversation.outcome,
        modes=tuple(modes),
        blame=run.blame,
    )


@contextmanager
def _progress_bar(total: int, what: str, console: Console | None) -> Iterator[Callable[[], None]]:
    """Yields `advance()`: a transient rich progress bar over `total` files, or nothing below
    `PROGRESS_MIN_FILES`."""
    if total < PROGRESS_MIN_FILES:
        yield lambda: None
        return
    columns = (TextColumn(f"importing {what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)
