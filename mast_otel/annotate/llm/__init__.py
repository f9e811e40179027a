"""The MAST LLM judge over any OpenAI-compatible endpoint: structured, robust, chunked, cached, redacted.

One job per module, in the order a run goes through them:

- `config.py`   `JudgeConfig`, the `judge:` section (endpoint, model, limits, sampling, budget...)
- `cache.py`    content hash of a run for this judge; verdicts in memory and in ClickHouse
- `policy.py`   sampling policy and hourly token budget
- `chunking.py` redacted, compacted, numbered steps, split into chunks that fit the context
- `prompt.py`   MAST definitions from `taxonomy.py`, few-shot examples, one message per chunk
- `client.py`   one robust question to the endpoint (`openai` client, retries, response formats)
- `schema.py`   the answer's JSON schema, tolerant extraction, strict validation
- `verdict.py`  per-chunk answers, merged into a run's verdict (unknown is never "no")
- `judge.py`    `LLMJudge`, the `Annotator`, and `assess`, the full decision for one run
- `usage.py`    `JudgeUsage`, the ledger row per decision (tokens, cost, status, reason)
- `hybrid.py`   `HybridAnnotator` (rules + judge, synchronous: `import`) and `build_annotator`
- `service.py`  `JudgeService`: background judging for the collector, never blocking its pipeline

Nothing here imports `openai` until a client is built.
"""

from mast_otel.annotate.llm.config import JUDGE_ENV, JudgeConfig, JudgeConfigError, load_judge_config
from mast_otel.annotate.llm.hybrid import HybridAnnotator, build_annotator
from mast_otel.annotate.llm.judge import JudgeOutcome, LLMJudge
from mast_otel.annotate.llm.service import JudgeService, JudgeServiceStats
from mast_otel.annotate.llm.usage import JudgeStatus, JudgeStore, JudgeUsage
from mast_otel.annotate.llm.verdict import Detection, RunVerdict

__all__ = [
    "JUDGE_ENV",
    "Detection",
    "HybridAnnotator",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeOutcome",
    "JudgeService",
    "JudgeServiceStats",
    "JudgeStatus",
    "JudgeStore",
    "JudgeUsage",
    "LLMJudge",
    "RunVerdict",
    "build_annotator",
    "load_judge_config",
]
