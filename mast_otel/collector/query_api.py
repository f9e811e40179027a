"""The collector's admin endpoint: health, and read-only queries against the store it holds.

chDB opens a data directory in one process only. While a collector runs on an embedded store, other
processes (`mast-otel analyze`, a notebook) cannot open it, so the collector answers their queries:
`POST /api/v1/query` with `{"sql": ..., "parameters": {...}}` returns `{"columns": [...], "rows":
[...]}`. Only read statements are accepted. The collector records its admin address in a lock file
inside the data directory (`collector.json`), which is how `analyze --store DIR` finds it.

`GET /healthz` answers 200 when the store answers a ping, 503 otherwise. `GET /api/v1/stats` shows
the pipeline's counters (mode, spans in flight, spool depth, ...) as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

from mast_otel.store.base import QueryResult, QuerySource, Store, StoreError

log = logging.getLogger(__name__)

LOCK_FILE = "collector.json"
QUERY_PATH = "/api/v1/query"
STATS_PATH = "/api/v1/stats"
_READ_STATEMENT = re.compile(r"^\s*(?:--[^\n]*\n\s*)*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXPLAIN|EXISTS)\b", re.I)
_MAX_BODY = 1024 * 1024


def is_read_only(sql: str) -> bool:
    return bool(_READ_STATEMENT.match(sql))


class AdminServer:
    """Serves /healthz and the read-only query API on a background thread."""

    def __init__(
        self,
        endpoint: str,
        store: Store,
        extra_health: Callable[[], bool] | None = None,
        stats: Callable[[], Mapping[str, object]] | None = None,
    ) -> None:
        host, _, port = endpoint.rpartition(":")
        self._store = store
        self._extra_health = extra_health
        self.stats = stats
        handler = _handler_class(self)
        self._http = ThreadingHTTPServer((host or "127.0.0.1", int(port)), handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="mast-otel-admin",
            daemon=True,
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def healthy(self) -> bool:
        try:
            store_ok = self._store.ping()
        except Exception:
            store_ok = False
        return store_ok and (self._extra_health() if self._extra_health else True)

    def run_query(self, sql: str, parameters: Mapping[str, Any] | None) -> QueryResult:
        if not is_read_only(sql):
            raise PermissionError("only read statements (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN) are accepted")
        return self._store.query(sql, parameters)


def _handler_class(server: AdminServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "mast-otel"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("admin: " + format, *args)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path in ("/healthz", "/health"):
                ok = server.healthy()
                self._reply(200 if ok else 503, {"status": "ok" if ok else "unhealthy"})
            elif path == STATS_PATH and server.stats is not None:
                self._reply(200, dict(server.stats()))
            else:
                self._reply(
                    404, {"error": f"no such endpoint {self.path}; try /healthz or POST {QUERY_PATH}"}
                )

        def do_POST(self) -> None:
            if self.path != QUERY_PATH:
                self._reply(404, {"error": f"no such endpoint {self.path}"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > _MAX_BODY:
                self._reply(400, {"error": f"send a JSON body of 1..{_MAX_BODY} bytes"})
                return
            try:
                request = json.loads(self.rfile.read(length))
                sql = request["sql"]
                parameters = request.get("parameters") or {}
                if not isinstance(sql, str) or not isinstance(parameters, dict):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                self._reply(400, {"error": 'body must be JSON: {"sql": "...", "parameters": {...}}'})
                return
            try:
                result = server.run_query(sql, parameters)
            except PermissionError as exc:
                self._reply(403, {"error": str(exc)})
                return
            except Exception as exc:
                self._reply(400, {"error": f"query failed: {exc}"})
                return
            self._reply(200, {"columns": list(result.column_names), "rows": [list(r) for r in result.rows]})

        def _reply(self, status: int, payload: object) -> None:
            body = json.dumps(payload, default=_json_default).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _json_default(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (Decimal, UUID)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


class CollectorQueryClient:
    """A QuerySource that asks a running collector (see module docstring)."""

    def __init__(self, admin_url: str, timeout_s: float = 60.0) -> None:
        self.admin_url = admin_url.rstrip("/")
        self._timeout = timeout_s

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        body = json.dumps({"sql": sql, "parameters": dict(parameters or {})}, default=_json_default).encode()
        request = urllib.request.Request(
            self.admin_url + QUERY_PATH, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise StoreError(f"the collector at {self.admin_url} refused the query: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise StoreError(f"could not reach the collector at {self.admin_url}: {exc}") from exc
        return QueryResult(tuple(payload["columns"]), tuple(tuple(r) for r in payload["rows"]))


@dataclass(frozen=True, slots=True)
class CollectorLock:
    pid: int
    admin_url: str
    grpc_endpoint: str


def write_lock(data_dir: Path, lock: CollectorLock) -> Path:
    path = data_dir / LOCK_FILE
    path.write_text(
        json.dumps({"pid": lock.pid, "admin_url": lock.admin_url, "grpc_endpoint": lock.grpc_endpoint})
    )
    return path


def read_lock(data_dir: Path) -> CollectorLock | None:
    """The running collector that holds `data_dir`, or None when there is none (stale locks are ignored)."""
    path = data_dir / LOCK_FILE
    try:
        raw = json.loads(path.read_text())
        lock = CollectorLock(int(raw["pid"]), str(raw["admin_url"]), str(raw.get("grpc_endpoint", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return lock if _alive(lock.pid) else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def query_source_for(data_dir: Path) -> QuerySource | None:
    """A client for the collector that holds `data_dir`, if one is running."""
    lock = read_lock(data_dir)
    return CollectorQueryClient(lock.admin_url) if lock else None
