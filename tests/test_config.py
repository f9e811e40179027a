"""Collector configuration: YAML, ${env:...}, MAST_OTEL_* overrides, flags, strictness, --print-config."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from mast_otel.collector.config import CollectorConfig, ConfigError, load, render

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "collector.yaml"
    path.write_text(text)
    return path


def test_defaults() -> None:
    config = load(environ={})
    assert config == CollectorConfig()
    assert (
        config.receivers.grpc.endpoint == "0.0.0.0:4317" and config.receivers.http.endpoint == "0.0.0.0:4318"
    )
    assert config.assembly.grace_s == 2.0 and config.assembly.max_wait_s == 60.0


def test_yaml_env_references_and_precedence(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
store:
  target: ${env:CH_URL:-/data/mast}
  database: ${env:CH_DB}
assembly:
  grace_s: 5
receivers:
  grpc:
    endpoint: 0.0.0.0:14317
""",
    )
    config = load(path, environ={"CH_DB": "prod"})
    assert (config.store.target, config.store.database) == ("/data/mast", "prod")
    assert config.assembly.grace_s == 5.0 and config.receivers.grpc.endpoint == "0.0.0.0:14317"
    env = {"CH_DB": "prod", "MAST_OTEL_GRPC_ENDPOINT": "127.0.0.1:5000"}
    assert load(path, environ=env).receivers.grpc.endpoint == "127.0.0.1:5000"  # env beats the file
    flagged = load(path, environ=env, overrides={"receivers.grpc.endpoint": "127.0.0.1:6000"})
    assert flagged.receivers.grpc.endpoint == "127.0.0.1:6000"  # flags beat env


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("store:\n  targt: x\n", "store.targt: unknown key"),
        ("recievers: {}\n", "recievers: unknown key"),
        ("assembly:\n  grace_s: soon\n", "assembly.grace_s"),
        ("assembly:\n  grace_s: 90\n", "max_wait_s must be at least grace_s"),
        ("receivers:\n  tls:\n    cert_file: a.pem\n", "both cert_file and key_file"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("store: [unclosed\n", "not valid YAML"),
        ("store:\n  target: ${env:NOPE_NOT_SET}\n", "NOPE_NOT_SET is not set"),
    ],
)
def test_invalid_configs_name_the_problem(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path, text), environ={})
    assert says in str(caught.value)


def test_render_redacts_passwords_and_round_trips() -> None:
    config = load(overrides={"store.target": "http://writer:s3cret@clickhouse:8123"}, environ={})
    text = render(config)
    assert "s3cret" not in text and "writer:***@clickhouse" in text
    tree = yaml.safe_load(text)
    tree["store"]["target"] = config.store.target
    path = Path(tempfile.mkdtemp()) / "rendered.yaml"
    path.write_text(yaml.safe_dump(tree))
    assert load(path, environ={}) == config  # what --print-config shows is a config that loads back


def test_shipped_config_file_is_valid() -> None:
    config = load(ROOT / "collector" / "mast-otel.yaml", environ={"MAST_CLICKHOUSE_PASSWORD": "x"})
    assert config.receivers.http.endpoint.endswith(":4318")


def test_print_config_command(tmp_path: Path) -> None:
    path = write(tmp_path, "assembly:\n  grace_s: 3\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mast_otel.cli",
            "collector",
            "--config",
            str(path),
            "--grpc-endpoint",
            "1.2.3.4:9",
            "--print-config",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    tree = yaml.safe_load(result.stdout)
    assert tree["assembly"]["grace_s"] == 3 and tree["receivers"]["grpc"]["endpoint"] == "1.2.3.4:9"
    bad = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "collector", "--config", str(write(tmp_path, "nope: 1\n"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "nope: unknown key" in bad.stderr
