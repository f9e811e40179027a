"""Lexical helpers shared by the rule detectors: canonical tool-call keys, word splitting, the
read-only / state-changing classification of tool calls, and every English cue list.

The cue lists are generic English on purpose (never agent, tool or task names) and live only here,
so there is one place to tune what the detectors read in text. Every pattern is compiled at import;
nothing compiles per turn. Matches are hedge-aware: "the pod is healthy" is a claim, "once the pod
is healthy" and "not yet verified" are not; "3 errors" is a failure marker, "errors: 0" is not.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from mast_otel.conversation.model import ToolCall

# Bounds that keep every helper linear in a bounded prefix of its input, however large the
# attribute that carried it: results and arguments can be megabytes.
MAX_SCAN_CHARS = 32_768
MAX_CANONICAL_CHARS = 16_384
_HEDGE_WINDOW_CHARS = 64

CallKey = tuple[str, str]  # (tool name, canonical arguments)


# --- plain text -------------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_NOT_CONTRACTION = re.compile(r"n['’]t\b", re.IGNORECASE)
# Words split at case changes too: "getLogs" -> get, Logs; "HTTPServer" -> HTTP, Server.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+|;\s+")


def normalise_space(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def shorten(text: str, limit: int = 60) -> str:
    """One line of at most `limit` characters, for explanations."""
    line = normalise_space(text[: limit * 4])
    return line if len(line) <= limit else line[: max(limit - 1, 0)].rstrip() + "…"


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words; camelCase and snake_case split, "don't" read as "do not"."""
    text = text[:MAX_SCAN_CHARS]
    if "n't" in text or "n’t" in text or "N'T" in text:
        text = _NOT_CONTRACTION.sub(" not", text)
    return [word.lower() for word in _WORD.findall(text)]


def stem(word: str) -> str:
    """A crude plural fold, applied alike to tool names and text ("pods" ~ "pod", "logs" ~ "log")."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text[:MAX_SCAN_CHARS]) if s.strip()]


_MAX_QUESTION_CHARS = 300
_CODE_CHARS = frozenset("(){}[]=`<>")


def questions(text: str) -> list[str]:
    """The prose sentences of a text that end with a question mark (code is skipped)."""
    found: list[str] = []
    scanned = text[:MAX_SCAN_CHARS]
    end = scanned.find("?")
    while end >= 0:
        floor = max(0, end - _MAX_QUESTION_CHARS)
        start = max(scanned.rfind(mark, floor, end) for mark in ".!?\n") + 1
        sentence = scanned[max(start, floor) : end + 1]
        if not _CODE_CHARS.intersection(sentence):
            found.append(sentence)
        end = scanned.find("?", end + 1)
    return found


def _sentence_around(text: str, start: int, end: int, reach: int = 300) -> str:
    """The sentence holding text[start:end], looking at most `reach` characters either way."""
    floor, ceiling = max(0, start - reach), min(len(text), end + reach)
    left = max(floor - 1, *(text.rfind(mark, floor, start) for mark in ".!?\n"))
    rights = [i for i in (text.find(mark, end, ceiling) for mark in ".!?\n") if i >= 0]
    return text[left + 1 : min(rights, default=ceiling)]


# --- tool calls -------------------------------------------------------------------------------


def _parse_json(text: str) -> object | None:
    """`text` parsed when it is a JSON object or array of bounded size, else None."""
    if text[:1] not in ("{", "[") or len(text) > MAX_CANONICAL_CHARS:
        return None
    try:
        parsed: object = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: pathologically deep nesting
        return None
    return parsed


def canonical_arguments(arguments: str) -> str:
    """Arguments as a comparable string: JSON parsed with keys sorted, whitespace collapsed."""
    text = arguments.strip()
    parsed = _parse_json(text)
    if parsed is not None:
        with contextlib.suppress(RecursionError):  # parsed near the limit, too deep to dump again
            text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return normalise_space(text[:MAX_CANONICAL_CHARS])


def call_key(call: ToolCall) -> CallKey:
    return (call.name, canonical_arguments(call.arguments))


def render_call(call: ToolCall, limit: int = 60) -> str:
    """`name(arguments)` shortened for an explanation."""
    arguments = canonical_arguments(call.arguments)
    return f"{call.name}({shorten(arguments, limit)})" if arguments else call.name


def same_outcome(a: ToolCall, b: ToolCall) -> bool:
    """Both calls came back with the same result (or the same error); unknown results never match.

    Results are compared on their first MAX_SCAN_CHARS characters, whitespace collapsed."""
    if (a.result is None and not a.error) or a.error != b.error:
        return False
    if a.result == b.result:
        return True
    if a.result is None or b.result is None:
        return False
    return normalise_space(a.result[:MAX_SCAN_CHARS]) == normalise_space(b.result[:MAX_SCAN_CHARS])


def json_string_values(arguments: str) -> list[str] | None:
    """The string leaves of JSON arguments, or None when the arguments are not JSON."""
    parsed = _parse_json(arguments.strip())
    if parsed is None:
        return None
    leaves: list[str] = []
    pending: list[object] = [parsed]
    while pending:  # iterative: nesting depth must not cost stack
        value = pending.pop()
        if isinstance(value, str):
            leaves.append(value)
        elif isinstance(value, dict):
            pending.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            pending.extend(reversed(value))
    return leaves


# --- verbs: what a tool call does --------------------------------------------------------------

MUTATING_VERBS = (
    "restart", "delete", "remove", "scale", "rollback", "revert", "apply", "patch", "update",
    "upgrade", "downgrade", "deploy", "redeploy", "kill", "terminate", "stop", "start", "create",
    "set", "write", "fix", "edit", "modify", "change", "replace", "rename", "move", "install",
    "uninstall", "cordon", "uncordon", "drain", "evict", "reset", "reboot", "enable", "disable",
    "insert", "drop", "truncate", "put", "post", "add", "commit", "push", "merge", "send", "assign",
    "close", "mitigate", "failover", "suspend", "resume", "purge", "flush", "annotate", "label",
    "taint",
)  # fmt: skip
READ_VERBS = (
    "get", "list", "describe", "check", "query", "status", "verify", "test", "read", "show", "fetch",
    "search", "find", "inspect", "view", "watch", "log", "logs", "health", "healthcheck", "probe",
    "ping", "monitor", "validate", "lookup", "look", "cat", "grep", "tail", "head", "top", "count",
    "explain", "diff", "compare", "observe", "retrieve", "download", "scan", "analyze", "analyse",
    "poll", "trace", "metric", "metrics", "audit", "select", "browse", "curl",
)  # fmt: skip
# Verbs that announce an action without saying whether it reads or writes.
GENERIC_ACTION_VERBS = (
    "call", "run", "rerun", "use", "invoke", "execute", "try", "retry", "investigate", "examine",
    "confirm", "proceed", "continue", "wait", "review", "collect", "gather", "dig", "escalate",
    "navigate", "visit", "scrape", "calculate", "compute", "implement", "debug", "repeat", "attempt",
)  # fmt: skip


def _inflections(verb: str) -> set[str]:
    forms = {verb, verb + "s", verb + "es", verb + "ed", verb + "d", verb + "ing"}
    if verb.endswith("e"):
        forms.add(verb[:-1] + "ing")
    if verb.endswith("y") and verb[-2:-1] not in ("a", "e", "o", "u"):
        forms |= {verb[:-1] + "ies", verb[:-1] + "ied"}
    if len(verb) >= 3 and verb[-1] not in "aeiouwxy" and verb[-2] in "aeiou" and verb[-3] not in "aeiou":
        forms |= {verb + verb[-1] + "ed", verb + verb[-1] + "ing"}  # stop -> stopped, set -> setting
    return forms


class ActionKind(str, Enum):
    MUTATE = "mutate"  # changes state: restart, delete, scale, apply...
    READ = "read"  # observes state: get, list, describe, check...
    OTHER = "other"  # cannot tell from the words


def _verb_table() -> dict[str, ActionKind]:
    table: dict[str, ActionKind] = {}
    for kind, verbs in ((ActionKind.READ, READ_VERBS), (ActionKind.MUTATE, MUTATING_VERBS)):
        for verb in verbs:
            for form in _inflections(verb):
                table.setdefault(form, kind)
    return table


_VERB_KIND = _verb_table()
_ACTION_FORMS = frozenset(_VERB_KIND) | frozenset(
    form for verb in GENERIC_ACTION_VERBS for form in _inflections(verb)
)
# Only short, command-like arguments are read for a verb: in a code blob or a document the first
# verb says nothing about what the call does.
_MAX_COMMAND_CHARS = 256
_ARGUMENT_WORDS_SCANNED = 64


def _first_verb_kind(tokens: Iterable[str]) -> ActionKind:
    # Names and commands put the verb first ("list_deleted_pods", "kubectl get pods"): the first verb wins.
    for token in tokens:
        kind = _VERB_KIND.get(token)
        if kind is not None:
            return kind
    return ActionKind.OTHER


def classify_call(call: ToolCall) -> ActionKind:
    """Whether a call changes state, reads it, or cannot be told; from its name, else its arguments."""
    kind = _first_verb_kind(words(call.name))
    if kind is ActionKind.OTHER and len(call.arguments) <= _MAX_COMMAND_CHARS:
        kind = _first_verb_kind(words(call.arguments)[:_ARGUMENT_WORDS_SCANNED])
    return kind


def is_action_verb(word: str) -> bool:
    return word in _ACTION_FORMS


_TOOL_STEP_FORMS = frozenset(_VERB_KIND) | frozenset(
    form for verb in ("call", "run", "rerun", "invoke", "execute", "use") for form in _inflections(verb)
)


def is_tool_verb(word: str) -> bool:
    """A verb that names a tool-backed step (reads or writes), not thinking or writing prose."""
    return word in _TOOL_STEP_FORMS


# --- hedges and negations ------------------------------------------------------------------------

# Words that, just before a cue, turn a claim into a plan, a condition or a denial.
CLAIM_HEDGES = frozenset({
    "not", "no", "never", "without", "unable", "cannot", "yet", "if", "once", "until", "unless",
    "whether", "before", "be", "when", "might", "may", "could", "would", "hopefully", "expect",
    "expected", "ensure", "make",
})  # fmt: skip
# Words that, just before a failure marker, say there is none ("no errors", "0 failures").
MARKER_NEGATIONS = frozenset({"not", "no", "never", "without", "zero", "0", "none"})
# Words of intent before a tool mention ("I will call get_logs", "next: query metrics").
INTENT_WORDS = frozenset({
    "will", "ll", "going", "next", "let", "lets", "should", "need", "plan", "now", "first", "then",
    "shall", "must", "want",
})  # fmt: skip
# Words of refusal before a tool mention ("we should not restart the pod", "instead of restarting").
NEGATION_WORDS = frozenset({"not", "never", "avoid", "without", "skip"})
NEGATING_PAIRS = frozenset({("instead", "of"), ("rather", "than")})
# A sentence with one of these states a condition, not an intent ("if get_logs fails, restart").
CONDITIONAL_WORDS = frozenset({
    "if", "unless", "when", "whenever", "once", "until", "otherwise", "case", "whether",
})  # fmt: skip
# Words that end the clause a tool mention belongs to, scanning backwards.
CLAUSE_BREAKS = frozenset({"but", "however", "although", "though", "because", "since", "after", "so"})


def _hedged(text: str, start: int, hedges: frozenset[str], window_words: int = 4) -> bool:
    before = words(text[max(0, start - _HEDGE_WINDOW_CHARS) : start])[-window_words:]
    return any(word in hedges for word in before)


# --- cue patterns ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Cue:
    """A pattern, and lower-case keywords of which every match contains one: most texts hold none,
    and a few substring tests are far cheaper than running the pattern over them."""

    keys: tuple[str, ...]
    pattern: re.Pattern[str]

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        scanned = text[:MAX_SCAN_CHARS]
        lowered = scanned.lower()
        if any(key in lowered for key in self.keys):
            yield from self.pattern.finditer(scanned)


_COMPLETION = _Cue(
    ("final answer", "complet", "done", "finish", "solved", "fixed", "mitigated", "no further"),
    re.compile(
        r"\bfinal answer\b"
        r"|\btask (?:is |has been )?(?:now )?(?:complete|completed|done|finished)\b"
        r"|\b(?:issue|problem|incident|task|request|it|this) (?:is|has been|was|have been) (?:now )?"
        r"(?:successfully )?(?:resolved|fixed|solved|mitigated|complete|completed|done)\b"
        r"|\b(?:i|we) (?:have|'ve) (?:now )?(?:successfully )?(?:completed|resolved|fixed|finished|solved)\b"
        r"|\ball done\b|\bno further (?:action|steps|work) (?:is |are )?(?:needed|required)\b",
        re.IGNORECASE,
    ),
)
# The conventional end-of-chat token of several agent frameworks; upper-case only, so that the
# verb ("terminate the pod") never reads as a declaration.
_TERMINATE = _Cue(("terminate",), re.compile(r"\bTERMINATE\b"))

_SUCCESS_CLAIM_KEYS = (
    "verified", "confirmed", "validated", "healthy", "solved", "fixed", "restored", "stable",
    "operational", "running", "normal", "green", "pass", "working", "succeeded", "ready",
    "successfully", "errors", "issues", "failures", "problems",
)  # fmt: skip
_SUCCESS_CLAIM = _Cue(
    _SUCCESS_CLAIM_KEYS,
    re.compile(
        r"\b(?:verified|confirmed|validated)\b"
        r"|\b(?:is|are|was|were|has been|have been|looks?|seems?|now)\s+(?:now\s+|all\s+|fully\s+|back\s+)?"
        r"(?:healthy|resolved|fixed|restored|stable|operational|up and running|back to normal|green|passing"
        r"|working\s+(?:again|correctly|fine|properly|as expected|normally|now)"
        r"|running\s+(?:normally|fine|again|correctly|as expected))\b"
        r"|\ball (?:the )?(?:checks|tests|pods|services|replicas|health checks)\s+(?:are\s+|have\s+)?"
        r"(?:pass|passed|passing|green|healthy|succeeded|ready)\b"
        r"|\b(?:executed|ran|completed|applied|deployed|restarted|finished)\s+successfully\b"
        r"|\bsuccessfully\s+(?:executed|ran|completed|applied|deployed|restarted|fixed|resolved|restored|verified)\b"
        r"|\bno (?:more |further )?(?:errors|issues|failures|problems) (?:remain|found|detected|reported)\b",
        re.IGNORECASE,
    ),
)

_FAILURE_MARKER_KEYS = (
    "error", "fail", "exception", "traceback", "panic", "fatal", "crashloop", "oomkilled",
    "imagepull", "evicted", "unhealthy", "ready", "degraded", "unavailable", "unreachable",
    "firing", "denied", "refused", "forbidden", "timed out", "timeout", "exit", "http", "status",
    "code", "server error", "bad gateway", "gateway time",
)  # fmt: skip
_FAILURE_MARKER = _Cue(
    _FAILURE_MARKER_KEYS,
    re.compile(
        r"\b(?:errors?|failed|failures?|failing|exceptions?|traceback|panic|fatal"
        r"|crashloopbackoff|oomkilled|imagepullbackoff|errimagepull|evicted"
        r"|unhealthy|not ready|notready|degraded|unavailable|unreachable|firing"
        r"|denied|refused|forbidden|timed out"
        r"|timeout(?!\s*[\"']?\s*[:=]\s*[\"']?\d))\b"  # "timeout: 30" is a setting, not a failure
        r"|\bnon-?zero exit\b"
        r"|\bexit(?:_|\s)?(?:code|status)\W{0,3}[1-9]\d*\b"
        r"|\b(?:http|status|status_code|code)\W{0,4}5\d\d\b"
        r"|\b5\d\d\s+(?:internal server error|bad gateway|service unavailable|gateway time-?out)",
        re.IGNORECASE,
    ),
)
# A marker used as a key with an empty value says there is no failure: "errors: 0", "error": null.
_EMPTY_VALUE_AFTER = re.compile(
    r"""[\s"']*[:=]\s*["']?(?:0|none|null|false|no|\[\]|\{\}|"")(?![\w.])""", re.I
)

_LIMIT = re.compile(
    r"max(?:imum)?[\s_-]*(?:number[\s_-]*of[\s_-]*)?(?:turns?|iterations?|steps?|rounds?|tool[\s_-]*calls?"
    r"|calls?|retries|attempts?|recursion|messages?)"
    r"|(?:turn|iteration|step|recursion|round|call|budget)[\s_-]*limit"
    r"|limit[\s_-]*(?:reached|exceeded|hit)|recursion(?:error|[\s_-]*depth)"
    r"|time[\s_-]*out|timed[\s_-]*out|deadline[\s_-]*exceeded"
    r"|budget[\s_-]*(?:exhausted|exceeded)|ran[\s_-]*out[\s_-]*of[\s_-]*(?:turns|steps|time|budget)",
    re.IGNORECASE,
)
_TIMEOUT_ONLY = re.compile(r"time[\s_-]*out|timed[\s_-]*out|deadline[\s_-]*exceeded", re.IGNORECASE)
# finish_reason values meaning the model was cut off by a token limit.
LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})

# "I will check...", "let me look at...", "next step: restart...": the verb is checked separately.
_INTENT = re.compile(
    r"\b(?:let me|let['’]s|let us"
    r"|(?:next(?: step)?\s*[:,-]?\s*|now,?\s*)?(?:i|we)(?:['’]ll| will| shall| am going to|['’]m going to"
    r"| are going to|['’]re going to| need to| should| must)"
    r"|next(?: step)?\s*[:,-])"
    r"\s+(?:now\s+|next\s+|first\s+|then\s+|also\s+|further\s+|go ahead and\s+|proceed to\s+"
    r"|try to\s+|attempt to\s+|need to\s+)?(?P<verb>[a-z]+)",
    re.IGNORECASE,
)
_GIVE_UP = re.compile(
    r"\b(?:i|we) (?:cannot|can't|am unable to|are unable to|was unable to|were unable to|could not"
    r"|couldn't) (?:proceed|continue|complete|finish|determine|find|resolve|access|verify)\b"
    r"|\bgiv(?:e|ing) up\b|\b(?:stop|stopping) here\b|\bunable to (?:proceed|continue|complete)\b",
    re.IGNORECASE,
)
_PLAN_ITEM = re.compile(
    r"^\s*(?:\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-])\s+(?:\*\*)?(?P<verb>[A-Za-z]+)", re.MULTILINE
)


def _unhedged(cue: _Cue, text: str, hedges: frozenset[str], window_words: int = 4) -> re.Match[str] | None:
    for match in cue.finditer(text):
        if not _hedged(text, match.start(), hedges, window_words):
            return match
    return None


def find_completion(text: str) -> re.Match[str] | None:
    """A declaration that the task is done ("final answer", "task complete", "TERMINATE")."""
    declared = _unhedged(_COMPLETION, text, CLAIM_HEDGES)
    if declared is None and "TERMINATE" in text:
        # A bare token reaches further back for its hedge: "when you are done, reply TERMINATE".
        declared = _unhedged(_TERMINATE, text, CLAIM_HEDGES, window_words=6)
    return declared


def find_failure_marker(text: str) -> re.Match[str] | None:
    """A failure marker that is not negated ("no errors") nor an empty key ("errors: 0")."""
    scanned = text[:MAX_SCAN_CHARS]
    for match in _FAILURE_MARKER.finditer(scanned):
        if _hedged(scanned, match.start(), MARKER_NEGATIONS, window_words=2):
            continue
        if _EMPTY_VALUE_AFTER.match(scanned, match.end()):
            continue
        return match
    return None


def find_success_claim(text: str) -> re.Match[str] | None:
    """A claim that something was verified or works, unhedged, in a sentence that reports no failure.

    "Confirmed: the pod is in CrashLoopBackOff" acknowledges a failure; it is not a success claim.
    """
    scanned = text[:MAX_SCAN_CHARS]
    for match in _SUCCESS_CLAIM.finditer(scanned):
        if _hedged(scanned, match.start(), CLAIM_HEDGES):
            continue
        if find_failure_marker(_sentence_around(scanned, match.start(), match.end())) is not None:
            continue
        return match
    return None


def find_limit(text: str) -> re.Match[str] | None:
    """Mention of an external limit: max turns/iterations/steps, recursion limit, timeout."""
    return _LIMIT.search(text[:MAX_SCAN_CHARS])


def is_timeout_only(text: str) -> bool:
    match = find_limit(text)
    return match is not None and _TIMEOUT_ONLY.fullmatch(match.group(0)) is not None


def find_intent(text: str) -> re.Match[str] | None:
    """The last announcement of a next action ("let me check...", "next I will restart...")."""
    last = None
    for match in _INTENT.finditer(text[:MAX_SCAN_CHARS]):
        if is_action_verb(match.group("verb").lower()):
            last = match
    return last


def find_give_up(text: str) -> re.Match[str] | None:
    return _GIVE_UP.search(text[:MAX_SCAN_CHARS])


def count_tool_plan_items(text: str) -> int:
    """Numbered plan items that start with a tool-backed verb ("1. Check the pods", "2) Restart...")."""
    return sum(
        1 for match in _PLAN_ITEM.finditer(text[:MAX_SCAN_CHARS]) if is_tool_verb(match.group("verb").lower())
    )


def snippet(text: str, match: re.Match[str], radius: int = 30) -> str:
    """The matched cue with a little context, on one line."""
    start, end = max(0, match.start() - radius), min(len(text), match.end() + radius)
    core = normalise_space(text[start:end])
    return ("…" if start else "") + core + ("…" if end < len(text) else "")


def contradicting_outcome(call: ToolCall) -> str | None:
    """What in a call's outcome contradicts a success claim (its error, or the failure marker in its
    result with some context), or None when nothing does."""
    if call.failed:
        return shorten(call.error, 60)
    if call.result is None:
        return None
    match = find_failure_marker(call.result)
    return None if match is None else shorten(snippet(call.result, match), 80)


# --- entities: the things tool arguments act on ---------------------------------------------------

_ENTITY_TOKEN = re.compile(r"[a-z0-9][a-z0-9._\-/:@]*[a-z0-9]|[a-z0-9]")
_ENTITY_PARTS = re.compile(r"[/:@.=,]+")
_NOT_AN_ENTITY = re.compile(r"[\d\W_]+")  # numbers, dates, punctuation
# Argument values too generic to say what a call is about.
GENERIC_VALUES = frozenset({
    "true", "false", "null", "none", "default", "all", "any", "json", "yaml", "text", "csv", "asc",
    "desc", "yes", "no", "auto", "latest",
})  # fmt: skip
_MAX_ENTITY_CHARS = 80


def entity_tokens(text: str) -> set[str]:
    """The identifier-like tokens of a text, whole and split at / : @ . = , ("shop/api" -> shop, api)."""
    tokens = set(_ENTITY_TOKEN.findall(text[:MAX_SCAN_CHARS].lower()))
    for token in [t for t in tokens if "/" in t or ":" in t or "@" in t or "." in t]:
        tokens.update(part for part in _ENTITY_PARTS.split(token) if part)
    return tokens


def argument_entities(arguments: str) -> list[str]:
    """Identifier-like string values of JSON arguments (names of services, hosts, namespaces...).

    Free text (values with spaces), numbers and generic values are not entities; non-JSON arguments
    have none, since without keys a command line cannot be told from its flags.
    """
    values = json_string_values(arguments)
    if values is None:
        return []
    entities: list[str] = []
    for value in values:
        value = value.strip().lower()
        if (
            3 <= len(value) <= _MAX_ENTITY_CHARS
            and not any(ch.isspace() for ch in value)
            and value not in GENERIC_VALUES
            and not _NOT_AN_ENTITY.fullmatch(value)
            and value not in entities
        ):
            entities.append(value)
    return entities


def grounded(entity: str, known: set[str]) -> bool:
    """Whether an entity, or every part of it, is among the known tokens."""
    if entity in known:
        return True
    parts = [part for part in _ENTITY_PARTS.split(entity) if part]
    return bool(parts) and all(part in known for part in parts)
