"""Who&When logs into the pipeline: parsing both halves' shapes, bad files, and the shared runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.cli import main
from mast_otel.conversation.model import Outcome, TurnKind
from mast_otel.importers import READERS, ImportFileError, content_trace_id, expand_paths, run_import
from mast_otel.importers.who_and_when import (
    LABEL_STEP,
    Speaker,
    WhoAndWhenReader,
    bare_agent,
    parse_speaker,
    read_log,
)
from mast_otel.store.clickhouse import ClickHouseStore

FIXTURES = Path(__file__).parent / "fixtures" / "who_and_when_small"
AG2 = FIXTURES / "ag2_small.json"
M1 = FIXTURES / "m1_coder_small.json"
ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(
    ("raw", "named", "speaker"),
    [
        ("Orchestrator (thought)", False, Speaker("Orchestrator", TurnKind.REASONING)),
        ("Orchestrator (-> WebSurfer)", False, Speaker("Orchestrator", TurnKind.HANDOFF, "WebSurfer")),
        ("Orchestrator (termination condition)", False, Speaker("Orchestrator", TurnKind.AGENT_MESSAGE)),
        ("WebSurfer", False, Speaker("WebSurfer", TurnKind.AGENT_MESSAGE)),
        ("human", False, Speaker("user", TurnKind.USER)),
        ("system", False, Speaker("system", TurnKind.SYSTEM)),
        ("user", True, Speaker("user", TurnKind.AGENT_MESSAGE)),  # an agent named "user" is an agent
        ("  Excel_Expert ", True, Speaker("Excel_Expert", TurnKind.AGENT_MESSAGE)),
    ],
)
def test_speakers_are_parsed_as_the_benchmark_writes_them(raw: str, named: bool, speaker: Speaker) -> None:
    assert parse_speaker(raw, named=named) == speaker


def test_bare_agents_drop_the_note() -> None:
    assert bare_agent("Orchestrator (-> WebSurfer)") == "Orchestrator"
    assert bare_agent("WebSurfer") == "WebSurfer"


def test_an_algorithm_generated_log_becomes_one_turn_per_history_entry() -> None:
    log = read_log(AG2)
    conversation = log.conversation
    history = json.loads(AG2.read_text())["history"]
    assert [turn.index for turn in conversation.turns] == list(range(len(history)))
    assert log.speakers == tuple(entry["name"] for entry in history)  # `name` is the speaker
    assert [turn.kind for turn in conversation.turns] == [
        TurnKind.AGENT_MESSAGE,
        TurnKind.AGENT_MESSAGE,
        TurnKind.TOOL_CALL,
        TurnKind.AGENT_MESSAGE,
        TurnKind.AGENT_MESSAGE,
    ]
    run_code = conversation.turns[2]
    assert run_code.tool is not None
    assert run_code.agent == "Lookup_Expert"  # whose code the terminal ran
    assert run_code.tool.name == "Computer_terminal"
    assert run_code.tool.error == "exit code 1"
    assert "print(elements[42])" in run_code.tool.arguments
    assert run_code.tool.result is not None and run_code.tool.result.startswith("Traceback")
    assert conversation.task == "Which element has atomic number 42?"
    assert conversation.task_id == "tiny-ag2-1"
    assert conversation.outcome is Outcome.FAILURE
    # everyone who speaks, the code executor too
    assert conversation.agents == (
        "Chemistry_Expert",
        "Lookup_Expert",
        "Computer_terminal",
        "Verification_Expert",
    )
    assert log.label is not None and (log.label.agent, log.label.step) == ("Lookup_Expert", 1)
    assert conversation.attributes["who_and_when.mistake_step"] == "1"


def test_a_hand_crafted_log_keeps_orchestrator_roles_apart_but_names_the_bare_agent() -> None:
    conversation = read_log(M1).conversation
    kinds = {turn.index: (turn.kind, turn.agent, turn.target_agent) for turn in conversation.turns}
    assert kinds[0] == (TurnKind.USER, "user", "")
    assert kinds[1] == (TurnKind.REASONING, "Orchestrator", "")
    assert kinds[2] == (TurnKind.HANDOFF, "Orchestrator", "Assistant")
    assert kinds[5][0] is TurnKind.TOOL_CALL and kinds[5][1] == "Assistant"  # POSIX exit code 1
    assert kinds[8] == (TurnKind.AGENT_MESSAGE, "ComputerTerminal", "")  # no exit code: a message
    assert "user" not in conversation.agents and "Orchestrator" in conversation.agents


def test_trace_ids_come_from_the_file_content(tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    copy.write_bytes(AG2.read_bytes())
    assert read_log(copy).conversation.trace_id == read_log(AG2).conversation.trace_id
    assert read_log(AG2).conversation.trace_id == content_trace_id(AG2.read_bytes())
    assert read_log(M1).conversation.trace_id != read_log(AG2).conversation.trace_id
    assert content_trace_id(b"x", 1) != content_trace_id(b"x") and len(content_trace_id(b"x")) == 32


def _write(directory: Path, name: str, content: bytes | str | object) -> Path:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        ([1, 2], "expected a JSON object"),
        ({"question": "q"}, "no `history`"),
        ({"history": []}, "no `history`"),
        ({"history": ["hello"]}, "history[0] is a str"),
        ({"history": [{"content": "hi"}]}, "history[0] has neither a `name` nor a `role`"),
    ],
)
def test_bad_files_get_a_clear_error_naming_the_file(tmp_path: Path, content: object, problem: str) -> None:
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(ImportFileError) as raised:
        read_log(path)
    assert problem in str(raised.value) and str(path) in str(raised.value)


def test_unusable_labels_do_not_stop_the_import(tmp_path: Path) -> None:
    document = json.loads(AG2.read_text())
    document[LABEL_STEP] = "12"  # beyond the five steps
    log = read_log(_write(tmp_path, "late.json", document))
    assert log.label is None and "outside the history" in log.label_problem
    assert log.conversation.outcome is Outcome.FAILURE  # is_correct: false


def test_directories_are_walked_for_the_formats_files(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    for name in ("10.json", "2.json", "nested/1.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    found = expand_paths([tmp_path, tmp_path / "2.json"], WhoAndWhenReader.suffixes)
    assert [path.relative_to(tmp_path).as_posix() for path in found] == ["2.json", "10.json", "nested/1.json"]


def test_the_runner_stores_good_files_reports_bad_ones_and_replaces_on_reimport(
    tmp_path: Path, store: ClickHouseStore
) -> None:
    bad = _write(tmp_path, "bad.json", "{oops")
    missing = tmp_path / "missing.json"
    report = run_import([FIXTURES, bad, missing], WhoAndWhenReader(), store, RuleAnnotator(), batch_runs=2)
    good = sorted(FIXTURES.glob("*.json"))
    assert report.files == len(good) + 2 and report.stored == len(good) and not report.dry_run
    assert sorted(error.path for error in report.errors) == sorted([bad, missing])
    assert all(run.outcome is Outcome.FAILURE and run.blame is not None for run in report.runs)
    stored = store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0]
    assert stored == len(good)

    again = run_import([AG2], WhoAndWhenReader(), store, RuleAnnotator())
    assert again.stored == 1 and again.runs[0].trace_id == read_log(AG2).conversation.trace_id
    assert store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0] == len(good)
    blamed = store.query(
        "SELECT BlameAgent, BlameStep FROM mast_conversations FINAL WHERE TraceId = {t:String}",
        {"t": again.runs[0].trace_id},
    ).rows
    assert blamed == ((again.runs[0].blame.agent, again.runs[0].blame.step_index),)  # type: ignore[union-attr]


def test_a_dry_run_stores_nothing_and_needs_no_store() -> None:
    report = run_import([AG2], WhoAndWhenReader(), None, RuleAnnotator(), dry_run=True)
    assert report.dry_run and report.stored == 0 and len(report.runs) == 1
    with pytest.raises(ValueError, match="dry run"):
        run_import([AG2], WhoAndWhenReader(), None, RuleAnnotator())


def test_the_import_command_dry_run_prints_what_would_be_stored(capsys: pytest.CaptureFixture[str]) -> None:
    assert "who-and-when" in READERS
    code = main(["import", "who-and-when", str(AG2), str(FIXTURES / "nope.json"), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 1  # one file could not be read
    assert "nope.json: cannot read" in err
    assert "would store 1 run(s)" in out
    assert read_log(AG2).conversation.trace_id in out and "blame Lookup_Expert at step 1" in out


def test_the_import_command_stores_into_a_store_of_its_own(tmp_path: Path) -> None:
    # chDB opens one directory per process: the command runs in a process of its own.
    data = tmp_path / "data"
    command = [
        sys.executable,
        "-m",
        "mast_otel.cli",
        "import",
        "who-and-when",
        str(FIXTURES),
        "--store",
        str(data),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"imported {len(list(FIXTURES.glob('*.json')))} run(s)" in done.stdout
