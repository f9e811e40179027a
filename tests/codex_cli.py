"""The real Codex CLI for the tests: where `scripts/test-deps.sh` installs it and how to run it offline.

`scripts/test-deps.sh` installs the npm package `@openai/codex` at the version it pins into `CODEX_DIR`
(`~/.cache/mast-otel/codex`, or `$MAST_OTEL_CODEX_DIR`); its platform package holds the native
binary this module runs. A `CodexHome` is a temporary `CODEX_HOME` whose `config.toml` points Codex
at a model stub on loopback (`codex_model_stub.py`), approves every command, turns its own metrics
and traces off (so nothing leaves the machine) and, when asked, exports its OTLP log events to a
collector.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_INSTALLER = Path(__file__).resolve().parent.parent / "scripts" / "test-deps.sh"
_PINNED = re.search(r"^CODEX_VERSION=(\S+)$", _INSTALLER.read_text(), re.MULTILINE)
assert _PINNED is not None, f"{_INSTALLER} pins no CODEX_VERSION"
CODEX_VERSION = _PINNED.group(1)
CODEX_DIR = Path(os.environ.get("MAST_OTEL_CODEX_DIR") or Path.home() / ".cache" / "mast-otel" / "codex")
MODEL = "stub-model"
PROVIDER = "stub"
_KEY_VARIABLE = "MAST_OTEL_STUB_API_KEY"


def codex_binary() -> Path | None:
    """The native Codex binary of the pinned version, if installed."""
    for candidate in sorted(CODEX_DIR.glob("node_modules/@openai/codex*/vendor/*/bin/codex")):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_codex() -> Path:
    """The binary, or the test fails saying how to install it (CI must not skip these tests)."""
    binary = codex_binary()
    if binary is None:
        pytest.fail(
            f"Codex CLI {CODEX_VERSION} is not installed under {CODEX_DIR}: run `sh scripts/test-deps.sh`",
            pytrace=False,
        )
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    if CODEX_VERSION not in version.stdout:
        pytest.fail(
            f"{binary} is {version.stdout.strip() or 'unreadable'}, not codex-cli {CODEX_VERSION}: "
            "run `sh scripts/test-deps.sh`",
            pytrace=False,
        )
    return binary


@dataclass(frozen=True)
class OtelExport:
    """Where Codex sends its OTLP log events: `grpc`, `http` (protobuf) or `http-json`."""

    protocol: str
    endpoint: str  # http://host:port for gRPC; the full .../v1/logs URL for HTTP

    def toml(self) -> str:
        if self.protocol == "grpc":
            return f"{{ otlp-grpc = {{ endpoint = {json.dumps(self.endpoint)} }} }}"
        encoding = "json" if self.protocol == "http-json" else "binary"
        return f'{{ otlp-http = {{ endpoint = {json.dumps(self.endpoint)}, protocol = "{encoding}" }} }}'


class CodexHome:
    """A CODEX_HOME for one test: config, sessions and state all under `root`."""

    def __init__(self, binary: Path, root: Path, *, base_url: str, otel: OtelExport | None = None) -> None:
        self.binary = binary
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        exporter = otel.toml() if otel is not None else '"none"'
        (root / "config.toml").write_text(
            f"""\
model = "{MODEL}"
model_provider = "{PROVIDER}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "Stub"
base_url = {json.dumps(base_url)}
wire_api = "responses"
env_key = "{_KEY_VARIABLE}"
request_max_retries = 0
stream_max_retries = 0

[otel]
environment = "test"
log_user_prompt = true
log_agent_responses = true
metrics_exporter = "none"
trace_exporter = "none"
exporter = {exporter}
"""
        )

    def run(self, prompt: str, *, cwd: Path, resume: str = "") -> subprocess.CompletedProcess[str]:
        """`codex exec` (or `codex exec resume SESSION`) with `prompt`; fails the test if Codex fails."""
        arguments = [str(self.binary), "exec", "--skip-git-repo-check"]
        arguments += ["resume", resume, prompt] if resume else [prompt]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "CODEX_HOME": str(self.root),
            _KEY_VARIABLE: "not-a-real-key",
            "NO_COLOR": "1",
        }
        result = subprocess.run(
            arguments,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"codex exited with {result.returncode}:\n{result.stderr[-3000:]}"
        return result

    def rollouts(self) -> list[Path]:
        return sorted((self.root / "sessions").rglob("rollout-*.jsonl"))
