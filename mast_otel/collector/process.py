"""A `mast-otel collector` in a child process, found through the lock file it writes.

For what must see a real, separate collector: crash and restart tests (SIGKILL), benchmarks that
measure the collector's own memory, tools that need their own chDB data directory (chDB opens one
per process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mast_otel.collector.query_api import LOCK_FILE, STATS_PATH, CollectorQueryClient


class CollectorProcess:
    """Starts `mast-otel collector --store DATA_DIR` on free loopback ports; extra flags pass through."""

    def __init__(self, data_dir: Path, *extra: str, start_timeout_s: float = 60.0) -> None:
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
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                info = json.loads((data_dir / LOCK_FILE).read_text())
            except (OSError, ValueError):  # not written yet, or being written
                info = {}
            if info.get("pid") == self.process.pid:
                self.grpc_target: str = info["grpc_endpoint"].removeprefix("http://")
                self.admin_url: str = info["admin_url"]
                self.query = CollectorQueryClient(self.admin_url)
                return
            time.sleep(0.05)
        self.kill()
        stderr = self.process.stderr.read() if self.process.stderr else ""
        raise RuntimeError(f"the collector did not start: {stderr.strip()[-2000:]}")

    def count(self, sql: str) -> int:
        return int(self.query.query(sql).rows[0][0])

    def wait_for(self, sql: str, expected: int, timeout_s: float = 60.0) -> int:
        """Poll `sql` (a count) until it equals `expected` or time runs out; returns the last value."""
        deadline = time.monotonic() + timeout_s
        value = self.count(sql)
        while value != expected and time.monotonic() < deadline:
            time.sleep(0.1)
            value = self.count(sql)
        return value

    def stats(self) -> dict[str, object]:
        with urllib.request.urlopen(self.admin_url + STATS_PATH, timeout=5) as response:
            stats: dict[str, object] = json.loads(response.read())
        return stats

    def rss_kb(self, field: str = "VmRSS") -> int:
        """The child's resident memory (`VmHWM` for its peak), from /proc, in KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0

    def cpu_seconds(self) -> float:
        """The child's CPU time so far (user + system, all threads), from /proc."""
        # After the command name, which may hold spaces and ")": field 14 (utime) and 15 (stime).
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def terminate(self, timeout_s: float = 300.0) -> int:
        """SIGTERM: the collector flushes what it accepted; returns its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
