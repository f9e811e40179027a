"""The collector with the LLM judge configured: rules first, then a judged version of the same run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from llm_stub import ChatStub, Reply, answer
from spanfactory import agent_attrs, span, to_request
from test_collector import export

from mast_otel.annotate.llm.config import JudgeConfig
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import load, loopback
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig

T = "9a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70"


def test_judge_findings_arrive_as_a_new_version_next_to_the_rules(
    chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    with ChatStub() as stub:
        stub.responder = lambda body: Reply(answer({"FM-3.2": [1]}, task_completed="no"))
        judge = JudgeConfig.from_mapping(
            {
                "model": "stub-judge",
                "base_url": stub.base_url,
                "request": {
                    "timeout_s": 2.0,
                    "max_attempts": 2,
                    "backoff_initial_s": 0.001,
                    "backoff_max_s": 0.01,
                },
            }
        )
        config = loopback(
            str(chdb_dir),
            database=database,
            assembly=AssemblyConfig(grace_s=0.1, max_wait_s=5.0),
            pipeline=PipelineConfig(flush_interval_s=0.05),
            spool=SpoolConfig(directory=str(tmp_path / "s")),
        )
        with Collector(replace(config, judge=judge)) as collector:
            root = span(T, "invoke_agent a", 1_000, 9_000, **agent_attrs("a", mast__task__outcome="failure"))
            tool = span(
                T,
                "execute_tool restart",
                2_000,
                3_000,
                parent=root.span_id,
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name="restart",
                gen_ai__tool__call__result="restarted",
            )
            export(collector, to_request([root, tool]).SerializeToString())
            assert collector.wait_idle(10)
            assert collector.judge is not None and collector.judge.wait_idle(20)
            deadline = time.monotonic() + 20
            rows: tuple = ()
            while time.monotonic() < deadline:
                rows = collector.store.query(
                    "SELECT f.Mode, f.Annotator FROM mast_findings AS f FINAL"
                    " INNER JOIN (SELECT TraceId, Version FROM mast_conversations FINAL) AS c"
                    " ON f.TraceId = c.TraceId AND f.Version = c.Version"
                ).rows
                if any(a.startswith("llm/") for _, a in rows):
                    break
                time.sleep(0.1)
            usage = collector.store.query("SELECT Status, Reason FROM mast_judge_usage").rows
            assert ("FM-3.2", "llm/stub-judge") in rows, (collector.judge.stats(), usage, len(stub.bodies))
            assert collector.store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0] == 1
            assert stub.bodies, "the judge talked to the stand-in over HTTP"


def test_judge_section_from_yaml_and_env(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("judge:\n  model: gpt-x\n  concurrency: 2\n")
    config = load(path, environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert config.judge is not None and config.judge.model == "gpt-x"
    assert config.judge.base_url == "http://127.0.0.1:9/v1" and config.judge.concurrency == 2
    # OPENAI_BASE_URL set for some other tool does not conjure up a judge
    assert load(environ={"OPENAI_BASE_URL": "http://x/v1"}).judge is None
    assert load(environ={"MAST_OTEL_JUDGE_MODEL": "m"}).judge is not None


def test_import_with_the_judge(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "who_and_when_small"
    with ChatStub() as stub:
        stub.responder = lambda body: Reply(answer({"FM-1.3": [0]}, task_completed="no"))
        store = tmp_path / "store"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "mast_otel.cli",
                "import",
                "who-and-when",
                str(fixture),
                "--store",
                str(store),
                "--judge-model",
                "stub-judge",
                "--judge-base-url",
                stub.base_url,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"},
        )
        assert stub.bodies, result.stderr
    assert "imported" in result.stdout, result.stderr
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "mast_otel.cli",
            "import",
            "who-and-when",
            str(fixture),
            "--dry-run",
            "--judge",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2 and "--dry-run" in refused.stderr
