"""The collector's configuration: one YAML file, `${env:VAR}` references, env overrides, CLI flags.

Every component keeps its own typed config (a frozen dataclass with defaults and validation, like
the OpenTelemetry Collector's components); `CollectorConfig` composes them and the YAML mirrors
that tree key for key. Unknown keys are errors that name their path, so a typo never silently falls
back to a default. Precedence, lowest first: defaults, the YAML file, `MAST_OTEL_*` environment
variables for the common knobs (see `ENV_OVERRIDES`), command-line flags.

String values may reference the environment as the Collector does: `${env:NAME}` or
`${env:NAME:-default}`. Secrets (tokens, passwords in store URLs) are redacted by `render`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import TypeAdapter, ValidationError

from mast_otel.annotate.llm.config import JUDGE_ENV, JudgeConfig
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.receiver_grpc import GrpcReceiverConfig
from mast_otel.collector.receiver_http import HttpReceiverConfig
from mast_otel.collector.security import AuthConfig, TlsConfig
from mast_otel.collector.span_writer import SpanWriterConfig
from mast_otel.collector.spool import SpoolConfig

_STRICT: dict[str, Any] = {"extra": "forbid"}
_SERVER_SCHEMES = ("http://", "https://", "clickhouse://", "clickhouses://")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class StoreConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    target: str = "mast-otel-data"  # a chDB data directory, or a ClickHouse server URL
    database: str = "mast"
    # false when an otelcol-contrib clickhouse exporter already writes otel_traces (see the gateway config)
    write_raw_spans: bool = True

    @property
    def embedded(self) -> bool:
        return not self.target.startswith(_SERVER_SCHEMES)

    @property
    def data_dir(self) -> Path | None:
        """The chDB data directory, for an embedded store."""
        if not self.embedded:
            return None
        return Path(self.target.removeprefix("chdb://")).expanduser().resolve()


@dataclass(frozen=True, slots=True)
class ReceiversConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    grpc: GrpcReceiverConfig = field(default_factory=GrpcReceiverConfig)
    http: HttpReceiverConfig = field(default_factory=HttpReceiverConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    admin_endpoint: str = "127.0.0.1:13133"  # /healthz and the read-only query API; "" disables it
    metrics_endpoint: str = "0.0.0.0:8888"  # Prometheus /metrics; "" disables it
    log_level: str = "info"
    stats_interval_s: float = 15.0  # snapshots of the collector's numbers into mast_collector_stats; 0 = off
    instance: str = ""  # this collector's name in those snapshots; default host:pid

    def __post_init__(self) -> None:
        if self.log_level.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("log_level must be one of debug, info, warning, error")


@dataclass(frozen=True, slots=True)
class CollectorConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    store: StoreConfig = field(default_factory=StoreConfig)
    receivers: ReceiversConfig = field(default_factory=ReceiversConfig)
    assembly: AssemblyConfig = field(default_factory=AssemblyConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    raw_spans: SpanWriterConfig = field(default_factory=SpanWriterConfig)  # used when store.write_raw_spans
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    judge: JudgeConfig | None = None  # the LLM judge (mast_otel.annotate.llm); off unless configured

    def spool_directory(self) -> Path:
        """Where the write-ahead spool lives: as configured, else next to the embedded data, else ./.

        One spool per database: two collectors writing different databases never replay each other's.
        """
        if self.spool.directory:
            return Path(self.spool.directory).expanduser().resolve()
        data_dir = self.store.data_dir
        base = (data_dir / "spool") if data_dir else Path("mast-otel-spool").resolve()
        return base / self.store.database


# Environment variables for the knobs people set most, as (variable, dotted path).
ENV_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("MAST_OTEL_STORE", "store.target"),
    ("MAST_OTEL_DATABASE", "store.database"),
    ("MAST_OTEL_GRPC_ENDPOINT", "receivers.grpc.endpoint"),
    ("MAST_OTEL_HTTP_ENDPOINT", "receivers.http.endpoint"),
    ("MAST_OTEL_ADMIN_ENDPOINT", "telemetry.admin_endpoint"),
    ("MAST_OTEL_METRICS_ENDPOINT", "telemetry.metrics_endpoint"),
    ("MAST_OTEL_SPOOL_DIR", "spool.directory"),
    ("MAST_OTEL_BEARER_TOKEN_FILE", "receivers.auth.bearer_token_file"),
    ("MAST_OTEL_MAX_IN_FLIGHT_SPANS", "pipeline.max_in_flight_spans"),
)

# Innermost first: a default may itself hold a reference, `${env:URL:-http://u:${env:PW:-}@host}`.
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^${}]*))?\}")
_ADAPTER = TypeAdapter(CollectorConfig)


def load(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> CollectorConfig:
    """The effective config: defaults < YAML file < MAST_OTEL_* variables < `overrides` (dotted paths)."""
    env = os.environ if environ is None else environ
    tree: dict[str, Any] = {}
    if path is not None:
        tree = _read_yaml(Path(path), env)
    for variable, dotted in ENV_OVERRIDES:
        if variable in env:
            _set(tree, dotted, env[variable])
    # The judge's variables only apply once there is a judge to configure: OPENAI_BASE_URL alone,
    # set for some other tool, must not conjure up a judge section without a model.
    if "MAST_OTEL_JUDGE_MODEL" in env or isinstance(tree.get("judge"), dict):
        for variable, dotted in JUDGE_ENV:
            if variable in env:
                _set(tree, "judge." + dotted, env[variable])
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set(tree, dotted, value)
    return from_mapping(tree)


def from_mapping(tree: Mapping[str, Any]) -> CollectorConfig:
    try:
        return _ADAPTER.validate_python(dict(tree))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(top level)'}: {_message(error)}"
            for error in exc.errors()
        )
        raise ConfigError(f"invalid collector config: {problems}") from None


def render(config: CollectorConfig) -> str:
    """The effective config as YAML, secrets redacted (for --print-config)."""
    tree = asdict(config)
    tree["store"]["target"] = _redact_url(config.store.target)
    return str(yaml.safe_dump(tree, sort_keys=False))


def loopback(
    target: str, *, database: str = "mast", http: bool = True, admin: bool = True, **sections: Any
) -> CollectorConfig:
    """A collector on free loopback ports, metrics off: for the demo, the tests and the benchmarks."""
    return CollectorConfig(
        store=StoreConfig(target, database),
        receivers=ReceiversConfig(
            grpc=GrpcReceiverConfig(endpoint="127.0.0.1:0"),
            http=HttpReceiverConfig(endpoint="127.0.0.1:0" if http else ""),
        ),
        telemetry=TelemetryConfig(
            admin_endpoint="127.0.0.1:0" if admin else "", metrics_endpoint="", stats_interval_s=0
        ),
        **sections,
    )


def _read_yaml(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (store, receivers, ...)")
    expanded: dict[str, Any] = _expand_values(tree, env, path)
    return expanded


def _expand_values(node: Any, env: Mapping[str, str], path: Path) -> Any:
    """Resolve ${env:...} in string values only (comments and keys are left alone, YAML can't be injected)."""
    if isinstance(node, dict):
        return {key: _expand_values(value, env, path) for key, value in node.items()}
    if isinstance(node, list):
        return [_expand_values(value, env, path) for value in node]
    if isinstance(node, str):
        return _expand(node, env, path)
    return node


def _expand(text: str, env: Mapping[str, str], path: Path) -> str:
    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{path}: ${{env:{name}}} is referenced but {name} is not set (use ${{env:{name}:-default}})"
        )

    while True:
        expanded = _ENV_REFERENCE.sub(substitute, text)
        if expanded == text:
            return expanded
        text = expanded


def _set(tree: dict[str, Any], dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{key} must be a mapping")
        node = child
    node[leaf] = value


def _message(error: Any) -> str:
    if error.get("type") == "unexpected_keyword_argument":
        return "unknown key"
    return str(error.get("msg", "invalid value"))


def _redact_url(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
