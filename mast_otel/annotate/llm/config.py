"""The LLM judge's configuration: a frozen tree of dataclasses, from YAML (`judge:`), env or code.

The tree mirrors the YAML key for key (nested keys are field names; unknown keys are errors that name
their path), in the same style as the collector's config so it nests there as the `judge:` section.
Credentials are never part of it: the config names where the API key lives (an environment variable,
a file), and `api_key()` reads it when the client is built, so no repr, log line or rendered config
can show it.

Precedence in `load_judge_config`, lowest first: defaults, a YAML file, `JUDGE_ENV` variables,
explicit overrides (dotted paths, e.g. from CLI flags).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import yaml
from pydantic import TypeAdapter, ValidationError

from mast_otel.redact import RedactionConfig

__all__ = [
    "JUDGE_ENV",
    "BudgetConfig",
    "ContextConfig",
    "FewShotExample",
    "JudgeConfig",
    "JudgeConfigError",
    "PricingConfig",
    "RequestConfig",
    "ResponseFormat",
    "SamplingConfig",
    "load_judge_config",
]

# hide_input_in_errors: a validation message must never echo a value (it could be a pasted key).
_STRICT: dict[str, Any] = {"extra": "forbid", "hide_input_in_errors": True}
OPENAI_BASE_URL: Final = "https://api.openai.com/v1"


class JudgeConfigError(ValueError):
    """The judge's configuration is invalid; the message names the key and what is wrong."""


class ResponseFormat(str, Enum):
    """How the judge asks for JSON. `auto` tries a JSON schema, then JSON mode, then plain text."""

    AUTO = "auto"
    JSON_SCHEMA = "json_schema"  # OpenAI structured outputs, vLLM/Ollama/LiteLLM guided decoding
    JSON_OBJECT = "json_object"  # JSON mode: valid JSON, any shape
    TEXT = "text"  # no response_format at all; the answer is extracted from the text


@dataclass(frozen=True, slots=True)
class RequestConfig:
    """One chat-completion request: sampling, output, timeouts and retries."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    temperature: float | None = 0.0  # None: not sent (reasoning models refuse it)
    max_output_tokens: int = 1500
    # The request field carrying max_output_tokens: OpenAI's reasoning models want
    # max_completion_tokens; many OpenAI-compatible servers know only max_tokens.
    max_tokens_field: str = "max_tokens"
    # A ResponseFormat value; a plain string so that the config renders as YAML like any other.
    response_format: Literal["auto", "json_schema", "json_object", "text"] = "auto"
    seed: int | None = None
    timeout_s: float = 60.0  # per request
    max_attempts: int = 4  # per chunk: 429, 5xx, timeouts, connection errors, invalid answers
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    # Merged into every request body: server-specific options (vLLM's top_k, Ollama's options...).
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def format(self) -> ResponseFormat:
        return ResponseFormat(self.response_format)

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ValueError("temperature must be in [0, 2]")
        if self.max_output_tokens < 64:
            raise ValueError("max_output_tokens must be >= 64 (14 modes need room to answer)")
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_field must be max_tokens or max_completion_tokens")
        if self.timeout_s <= 0 or self.max_attempts < 1:
            raise ValueError("timeout_s must be > 0 and max_attempts >= 1")
        if self.backoff_initial_s < 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_initial_s must be >= 0 and backoff_max_s >= backoff_initial_s")
        reserved = {"model", "messages", "response_format", "stream"} & set(self.extra_body)
        if reserved:
            raise ValueError(f"extra_body may not set {', '.join(sorted(reserved))}: the judge sets them")


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """How a run is fitted into the model's context: token estimate, chunking, compaction."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    max_tokens: int = 32_768  # the model's context window (input + output)
    # The estimate: characters per token, on the low side so that code and JSON (denser than prose)
    # still fit. Servers' reported usage is what the accounting stores.
    chars_per_token: float = 3.0
    safety_margin: float = 0.1  # share of the window kept free for the estimate's error
    overlap_steps: int = 2  # steps repeated at the start of the next chunk, for continuity
    # Compaction: text longer than a limit keeps its head and tail around a marker. Every step stays
    # visible (number, speaker, what is left of its text); the limits trade what the judge can quote
    # against tokens sent. The per-part limits apply first, then the whole step's.
    tool_output_chars: int = 800  # a tool result longer than this keeps its head and tail
    tool_arguments_chars: int = 400
    message_chars: int = 1200  # agent messages and reasoning
    step_chars: int = 600  # a whole step (its text after "[n] speaker"), for all but the last steps
    # The run's last steps keep more: termination, verification and the final answer show there.
    end_steps: int = 2
    end_step_chars: int = 1500
    task_chars: int = 2000
    system_chars: int = 800  # each agent's system instructions, repeated in every chunk

    def __post_init__(self) -> None:
        if self.max_tokens < 2048:
            raise ValueError("max_tokens (the context window) must be >= 2048")
        if not 1.0 <= self.chars_per_token <= 8.0:
            raise ValueError("chars_per_token must be in [1, 8]")
        if not 0.0 <= self.safety_margin < 0.5:
            raise ValueError("safety_margin must be in [0, 0.5)")
        if self.overlap_steps < 0 or self.end_steps < 0:
            raise ValueError("overlap_steps and end_steps must be >= 0")
        for name in (
            "tool_output_chars",
            "tool_arguments_chars",
            "message_chars",
            "step_chars",
            "end_step_chars",
            "task_chars",
            "system_chars",
        ):
            if getattr(self, name) < 80:
                raise ValueError(f"{name} must be >= 80")


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """Which runs are judged: every failed run, every run a rule fired on, a fraction of the rest."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    failed_runs: bool = True
    rules_fired: bool = True
    other_fraction: float = 0.1  # decided by the content hash: a replayed run gets the same decision

    def __post_init__(self) -> None:
        if not 0.0 <= self.other_fraction <= 1.0:
            raise ValueError("other_fraction must be in [0, 1]")


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """An hourly token budget (input + output, sliding window); 0 means unlimited."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    hourly_tokens: int = 0

    def __post_init__(self) -> None:
        if self.hourly_tokens < 0:
            raise ValueError("hourly_tokens must be >= 0 (0: unlimited)")


@dataclass(frozen=True, slots=True)
class PricingConfig:
    """Prices for the cost column, in USD per million tokens; 0 when unknown (self-hosted models)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    input_usd_per_million: float = 0.0
    output_usd_per_million: float = 0.0

    def __post_init__(self) -> None:
        if self.input_usd_per_million < 0 or self.output_usd_per_million < 0:
            raise ValueError("prices must be >= 0")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_usd_per_million + output_tokens * self.output_usd_per_million) / 1e6


@dataclass(frozen=True, slots=True)
class FewShotExample:
    """An annotated excerpt shown to the judge before the run: `run` as the judge would see it
    (numbered steps), `answer` the JSON answer it should give (validated when the judge is built)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    run: str
    answer: str


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """The `judge:` section. Only `model` is required; everything else has a working default."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    model: str
    # OpenAI by default; any OpenAI-compatible server: vLLM (http://host:8000/v1), Ollama
    # (http://host:11434/v1), a LiteLLM proxy. With api_version set, base_url is an Azure endpoint.
    base_url: str = ""
    api_version: str = ""  # Azure OpenAI only (e.g. 2024-10-21); `model` is then the deployment
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key...
    api_key_file: str = ""  # ...or a file holding it (wins when set); no key at all for local servers
    request: RequestConfig = field(default_factory=RequestConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    pricing: PricingConfig = field(default_factory=PricingConfig)
    redaction: RedactionConfig = field(default_factory=RedactionConfig)
    # The mode definitions in the prompt: "gist", a few words per mode (taxonomy.py's `gist`, the
    # default, about a third of the tokens), or "full", the paper's definitions (`definition`). On
    # short runs the definitions are most of what is sent; "full" gives the model the exact wording.
    definitions: Literal["gist", "full"] = "gist"
    few_shot: tuple[FewShotExample, ...] = ()
    few_shot_file: str = ""  # YAML or JSON list of {run, answer}, appended to `few_shot`
    concurrency: int = 4  # requests in flight at once, across all runs
    queue_size: int = 1000  # runs waiting for the judge (the service's bounded queue)
    cache_size: int = 10_000  # verdicts kept in memory; ClickHouse keeps them all
    # A judge finding's confidence: the judge answers yes/no, so this is how far its yes is trusted
    # (MAST's o1 judge reached Cohen's kappa 0.77 against human annotators).
    confidence: float = 0.75

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("model is required (the judge model, or the Azure deployment name)")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        if self.api_version and not self.base_url:
            raise ValueError("api_version (Azure OpenAI) needs base_url, the Azure endpoint")
        if self.concurrency < 1 or self.queue_size < 1 or self.cache_size < 0:
            raise ValueError("concurrency and queue_size must be >= 1, cache_size >= 0")
        if not 0.0 < self.confidence <= 1.0:
            raise ValueError("confidence must be in (0, 1]")
        if self.request.max_output_tokens >= self.context.max_tokens // 2:
            raise ValueError("request.max_output_tokens must be under half of context.max_tokens")

    @property
    def endpoint(self) -> str:
        """Where requests go, for messages (never carries credentials)."""
        return self.base_url or OPENAI_BASE_URL

    @property
    def annotator(self) -> str:
        """The provenance its findings carry, "llm/<model>"."""
        return f"llm/{self.model}"

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The API key from `api_key_file` or `api_key_env`; None when neither holds one."""
        env = os.environ if env is None else env
        if self.api_key_file:
            path = Path(self.api_key_file).expanduser()
            try:
                key = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise JudgeConfigError(f"cannot read judge.api_key_file {path}: {exc.strerror}") from None
            if not key:
                raise JudgeConfigError(f"judge.api_key_file {path} is empty")
            return key
        return env.get(self.api_key_env) or None

    def all_few_shot(self) -> tuple[FewShotExample, ...]:
        """`few_shot` followed by the examples of `few_shot_file`."""
        if not self.few_shot_file:
            return self.few_shot
        return self.few_shot + _read_few_shot(Path(self.few_shot_file).expanduser())

    @classmethod
    def from_mapping(cls, tree: Mapping[str, Any]) -> JudgeConfig:
        """Validate a `judge:` mapping (YAML/JSON shaped); errors name the offending key."""
        try:
            config = _ADAPTER.validate_python(dict(tree))
        except ValidationError as exc:
            raise JudgeConfigError(f"invalid judge config: {_problems(exc)}") from None
        config.all_few_shot()  # a missing or malformed examples file is a config error, now
        return config

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> JudgeConfig:
        """The config `JUDGE_ENV` describes (MAST_OTEL_JUDGE_MODEL is required)."""
        return load_judge_config(environ=env)


# Environment variables, as (variable, dotted path in the judge section). The collector's config
# prefixes the paths with "judge.". OPENAI_BASE_URL is the openai client's own variable.
JUDGE_ENV: Final[tuple[tuple[str, str], ...]] = (
    ("OPENAI_BASE_URL", "base_url"),
    ("MAST_OTEL_JUDGE_BASE_URL", "base_url"),
    ("MAST_OTEL_JUDGE_MODEL", "model"),
    ("MAST_OTEL_JUDGE_API_KEY_FILE", "api_key_file"),
    ("MAST_OTEL_JUDGE_API_VERSION", "api_version"),
    ("MAST_OTEL_JUDGE_CONTEXT_TOKENS", "context.max_tokens"),
    ("MAST_OTEL_JUDGE_HOURLY_TOKENS", "budget.hourly_tokens"),
    ("MAST_OTEL_JUDGE_SAMPLE_FRACTION", "sampling.other_fraction"),
    ("MAST_OTEL_JUDGE_CONCURRENCY", "concurrency"),
)

_ADAPTER: Final = TypeAdapter(JudgeConfig)


def load_judge_config(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> JudgeConfig:
    """Defaults < YAML file (a bare judge mapping, or a collector config's `judge:` section) <
    `JUDGE_ENV` variables < `overrides` (dotted paths; None values are ignored)."""
    env = os.environ if environ is None else environ
    tree: dict[str, Any] = {}
    if path is not None:
        tree = _read_yaml(Path(path))
    for variable, dotted in JUDGE_ENV:
        if env.get(variable):
            _set(tree, dotted, env[variable])
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set(tree, dotted, value)
    if "model" not in tree:
        raise JudgeConfigError(
            "the judge needs a model: set judge.model, MAST_OTEL_JUDGE_MODEL or --judge-model"
        )
    return JudgeConfig.from_mapping(tree)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise JudgeConfigError(f"cannot read judge config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise JudgeConfigError(f"{path} is not valid YAML: {exc}") from None
    if tree is None:
        return {}
    if isinstance(tree, dict) and isinstance(tree.get("judge"), dict):
        tree = tree["judge"]
    if not isinstance(tree, dict):
        raise JudgeConfigError(f"{path}: expected a mapping of judge settings (model, base_url, ...)")
    return tree


def _read_few_shot(path: Path) -> tuple[FewShotExample, ...]:
    try:
        items = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except OSError as exc:
        raise JudgeConfigError(f"cannot read judge.few_shot_file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise JudgeConfigError(f"judge.few_shot_file {path} is not valid YAML/JSON: {exc}") from None
    if not isinstance(items, list):
        raise JudgeConfigError(f"judge.few_shot_file {path}: expected a list of {{run, answer}}")
    examples = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict) or set(item) != {"run", "answer"}:
            raise JudgeConfigError(
                f"judge.few_shot_file {path}, example {number}: needs exactly run and answer"
            )
        answer = item["answer"]
        examples.append(
            FewShotExample(
                run=str(item["run"]), answer=answer if isinstance(answer, str) else json.dumps(answer)
            )
        )
    return tuple(examples)


def _set(tree: dict[str, Any], dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise JudgeConfigError(f"judge.{key} must be a mapping")
        node = child
    node[leaf] = value


def _problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = "unknown key" if error["type"] == "unexpected_keyword_argument" else error["msg"]
        problems.append(f"judge.{where}: {message}")
    return "; ".join(problems)
