"""The verdict cache: a run's content hash -> its verdict, in memory (LRU) and in ClickHouse.

The hash covers what the judge reads (task, and every turn's kind, agent, text, tool call and
result) plus the judge's identity (model, prompt version, few-shot examples, compaction and redaction
settings), and nothing else: not the trace id, timings or span ids, nor the outcome, which the judge
never sees. A run re-annotated after late spans that changed nothing, a replay after a restart, or
the same run imported twice all hit the cache; a new model or prompt judges afresh.

ClickHouse is the durable side: `mast_judge_usage` rows of judged runs carry the verdict JSON, so a
restarted collector still never judges a run twice. A store that cannot be read is a miss, never an
error: judging again costs tokens, failing the run would cost findings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import asdict
from typing import Final

from mast_otel.annotate.llm.config import JudgeConfig
from mast_otel.annotate.llm.prompt import PROMPT_VERSION
from mast_otel.annotate.llm.usage import JudgeStatus
from mast_otel.annotate.llm.verdict import RunVerdict
from mast_otel.conversation.model import Conversation
from mast_otel.store.base import QuerySource, StoreError

__all__ = ["VerdictCache", "content_hash", "judge_identity"]

log = logging.getLogger(__name__)

CACHED_VERDICT_SQL: Final = f"""
SELECT Verdict
FROM mast_judge_usage
WHERE ContentHash = {{hash:String}} AND Status = '{JudgeStatus.JUDGED.value}' AND Verdict != ''
ORDER BY Timestamp DESC
LIMIT 1
"""


def judge_identity(config: JudgeConfig) -> str:
    """What makes two judges give the same verdict on the same content."""
    identity = {
        "prompt": PROMPT_VERSION,
        "model": config.model,
        "definitions": config.definitions,
        "few_shot": [asdict(example) for example in config.all_few_shot()],
        "context": asdict(config.context),
        "redaction": asdict(config.redaction),
    }
    return hashlib.blake2b(json.dumps(identity, sort_keys=True).encode(), digest_size=16).hexdigest()


def content_hash(conversation: Conversation, identity: str) -> str:
    """32 hex digits identifying this run's content for this judge."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(identity.encode())
    _feed(digest, conversation.task)
    for turn in conversation.turns:
        tool = turn.tool
        for value in (
            str(turn.index),
            turn.kind.value,
            turn.agent,
            turn.content,
            turn.target_agent,
            turn.finish_reason,
            tool.name if tool else "",
            tool.arguments if tool else "",
            "\x00" if tool is None or tool.result is None else tool.result,
            tool.error if tool else "",
        ):
            _feed(digest, value)
    return digest.hexdigest()


def _feed(digest: hashlib.blake2b, value: str) -> None:
    # Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    data = value.encode("utf-8", "surrogatepass")
    digest.update(len(data).to_bytes(8, "little"))
    digest.update(data)


class VerdictCache:
    """Thread-safe LRU in front of the store's verdicts."""

    def __init__(self, capacity: int, source: QuerySource | None = None) -> None:
        self.capacity = capacity
        self._source = source
        self._entries: OrderedDict[str, RunVerdict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> RunVerdict | None:
        with self._lock:
            verdict = self._entries.get(key)
            if verdict is not None:
                self._entries.move_to_end(key)
                return verdict
        verdict = self._from_store(key)
        if verdict is not None:
            self._remember(key, verdict)
        return verdict

    def put(self, key: str, verdict: RunVerdict) -> None:
        self._remember(key, verdict)

    def _remember(self, key: str, verdict: RunVerdict) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._entries[key] = verdict
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def _from_store(self, key: str) -> RunVerdict | None:
        if self._source is None:
            return None
        try:
            rows = self._source.query(CACHED_VERDICT_SQL, {"hash": key}).rows
        except StoreError as exc:
            log.warning("verdict cache lookup failed (%s); judging as if uncached", exc)
            return None
        if not rows:
            return None
        try:
            return RunVerdict.from_json(rows[0][0])
        except ValueError as exc:
            log.warning("ignoring an unreadable cached verdict for %s: %s", key, exc)
            return None
