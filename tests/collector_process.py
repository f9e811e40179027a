"""A `mast-otel collector` in a subprocess, for tests that kill it or need their own data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mast_otel.collector.query_api import CollectorQueryClient


class CollectorProcess:
    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mast_otel.cli",
                "collector",
                "--store",
                str(data_dir),
                "--grpc-endpoint",
                "127.0.0.1:0",
                "--http-endpoint",
                "",
                "--admin-endpoint",
                "127.0.0.1:0",
                "--metrics-endpoint",
                "",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lock = data_dir / "collector.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.process.poll() is None:
            if lock.exists():
                try:
                    info = json.loads(lock.read_text())
                except ValueError:
                    continue  # being written
                if info["pid"] == self.process.pid:
                    self.grpc_target = info["grpc_endpoint"].removeprefix("http://")
                    self.query = CollectorQueryClient(info["admin_url"])
                    return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"collector did not start: {self.process.stderr.read() if self.process.stderr else ''}"
        )

    def count(self, sql: str) -> int:
        return int(self.query.query(sql).rows[0][0])

    def wait_for(self, sql: str, expected: int, timeout_s: float = 60) -> int:
        deadline = time.monotonic() + timeout_s
        value = -1
        while time.monotonic() < deadline:
            value = self.count(sql)
            if value == expected:
                return value
            time.sleep(0.1)
        return value

    def terminate(self, timeout_s: float = 60) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
