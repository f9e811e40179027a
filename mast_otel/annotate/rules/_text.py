"""Lexical helpers shared by the rule detectors: canonical tool-call keys, word splitting, the
read-only / state-changing classification of tool calls, and every English cue list.

The cue lists are generic English on purpose (never agent, tool or task names) and live only here,
so there is one place to tune what the detectors read in text. Every pattern is compiled at import;
nothing compiles per turn. Matches are hedge-aware: "the pod is healthy" is a claim, "once the pod
is healthy" and "not yet verified" are not; "3 errors" is a failure marker, "errors: 0" is not.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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


# A word (as `words` reads them), or the end of a sentence (as `sentences` splits them).
_WORD_OR_END = re.compile(r"[.!?](?=\s)|\n|;(?=\s)|[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


def sentence_words(text: str) -> list[list[str]]:
    """`words` of each of `sentences`, in one pass over the text; sentences without words dropped.

    The tokens are joined, lower-cased and split back at sentence ends by C code, not token by token.
    """
    text = text[:MAX_SCAN_CHARS]
    if "n't" in text or "n’t" in text or "N'T" in text:
        text = _NOT_CONTRACTION.sub(" not", text)
    joined = "\x00".join(_WORD_OR_END.findall(text)).lower()
    return [sentence.split("\x00") for sentence in _TOKEN_ENDS.split(joined) if sentence]


_TOKEN_ENDS = re.compile(r"(?:^|\x00)[.!?\n;](?=\x00|$)(?:\x00[.!?\n;](?=\x00|$))*\x00?")


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


@functools.lru_cache(maxsize=1024)
def canonical_arguments(arguments: str) -> str:
    """Arguments as a comparable string: JSON parsed with keys sorted, whitespace collapsed.

    Remembered for the last arguments seen: runs call the same tools with the same arguments over
    and over (that is what repetition is), and every detector that compares calls asks."""
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
# Every inflected form of a known verb -> the verb: "restarting" and "restarted" -> "restart".
_VERB_ROOT = {form: verb for verb in (*MUTATING_VERBS, *READ_VERBS) for form in _inflections(verb)}
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


def verb_root(word: str) -> str | None:
    """The known read or write verb `word` is a form of, if any ("deleting" -> "delete")."""
    return _VERB_ROOT.get(word)


def call_verbs(call: ToolCall) -> frozenset[str]:
    """The known verbs in a call's name, as roots: `restart_pod` -> {"restart"}."""
    return frozenset(root for word in words(call.name) if (root := _VERB_ROOT.get(word)) is not None)


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


@functools.lru_cache(maxsize=64)
def lowered(text: str) -> str:
    """`text.lower()`, remembered for the last few texts: every cue reads the same turn lower-cased,
    and a detector pass asks about one turn many times in a row."""
    return text.lower()


_ESCAPE = re.compile(r"\\.")


@dataclass(frozen=True, slots=True)
class _Cue:
    """A case-insensitive pattern, and lower-case keywords of which every match contains one.

    Most texts hold no keyword, and a few substring tests are far cheaper than running the pattern.
    When they do, a case-sensitive twin of the pattern runs over the lower-cased text (Python's
    case-insensitive matching is several times slower) and each hit is re-matched in place on the
    original, so callers get matches on the text they passed.
    """

    keys: tuple[str, ...]
    pattern: re.Pattern[str]
    # Every character a match can start with, when known: lets the engine skip the others at C speed
    # (it cannot see that through a leading `\b` and an alternation).
    starts: str = ""
    _lower_pattern: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _any_key: re.Pattern[str] = field(init=False, repr=False, default=re.compile(""))

    def __post_init__(self) -> None:
        # One search in C for any of the keywords, instead of a loop over them.
        object.__setattr__(self, "_any_key", re.compile("|".join(map(re.escape, self.keys))))
        if not self.pattern.flags & re.IGNORECASE:
            return  # a case-sensitive cue ("TERMINATE") runs as it is
        literal = _ESCAPE.sub("", self.pattern.pattern)
        if literal != literal.lower():
            raise ValueError(f"case-insensitive cues are written in lower case: {self.pattern.pattern[:60]}")
        source = (
            f"(?=[{re.escape(self.starts)}])(?:{self.pattern.pattern})"
            if self.starts
            else self.pattern.pattern
        )
        object.__setattr__(self, "_lower_pattern", re.compile(source, self.pattern.flags & ~re.IGNORECASE))

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        scanned = text[:MAX_SCAN_CHARS]
        lower = lowered(scanned)
        if self._any_key.search(lower) is None:
            return
        if self._lower_pattern is None or len(lower) != len(scanned):
            # case-sensitive, or a text where lower-casing changes lengths (rare): the plain way
            yield from self.pattern.finditer(scanned)
            return
        for hit in self._lower_pattern.finditer(lower):
            match = self.pattern.match(scanned, hit.start())
            if match is not None:
                yield match

    def search_in(self, text: str) -> re.Match[str] | None:
        return next(self.finditer(text), None)


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
    starts="cdefhinoprstu5",
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


@functools.lru_cache(maxsize=256)
def contradicting_outcome(call: ToolCall) -> str | None:
    """What in a call's outcome contradicts a success claim (its error, or the failure marker in its
    result with some context), or None when nothing does. Remembered for the last few calls: the
    detectors and blame ask about the same calls."""
    if call.failed:
        return shorten(call.error, 60)
    if call.result is None:
        return None
    match = find_failure_marker(call.result)
    return None if match is None else shorten(snippet(call.result, match), 80)


# --- what agents say about their work ---------------------------------------------------------------

# Words that, just before a cue, make it a refusal or a condition rather than what the agent does:
# "instead of using placeholder values", "we should not assume", "if no results are found".
DOING_HEDGES = frozenset({
    "not", "no", "never", "without", "avoid", "instead", "rather", "than", "if", "unless", "whether",
    "once", "until", "should", "must", "cannot",
})  # fmt: skip

_FABRICATION = _Cue(
    (
        "hypothetic",
        "placeholder",
        "dummy",
        "mock",
        "made up",
        "made-up",
        "fictional",
        "fabricat",
        "simulat",
        "sample",
        "illustrat",
        "synthetic",
        "demonstration",
        "assum",
        "pretend",
        "suppos",
    ),
    re.compile(
        r"\b(?:hypothetical|placeholder|dummy|mock(?:ed)?|made[- ]up|fictional|fabricated|simulated"
        r"|illustrative|synthetic|fake)\s+(?:\w+\s+)?(?:data|values?|numbers?|figures?|results?"
        r"|files?|dataset|inputs?|records?|entries|content|text|paths?|ids?|urls?|links?|responses?"
        r"|outputs?|scenario|information|details|lyrics|pages?)\b"
        r"|\bhypothetical(?:ly)?\b"
        r"|\bfor (?:demonstration|illustration|illustrative) purposes\b"
        r"|\b(?:let['’]s|let us|we(?:['’]ll| will| can)|i(?:['’]ll| will| can))\s+(?:just\s+|now\s+)?"
        r"(?:assume|pretend|simulate|suppose|imagine|make up)\b"
        r"|\bassuming\s+(?:that\s+)?(?:we|i)\s+(?:have|had|obtained|downloaded|found)\b",
        re.IGNORECASE,
    ),
)

_MISSING_INFORMATION = _Cue(
    (
        "not ",
        "never",
        "unclear",
        "ambigu",
        "unspecified",
        "missing",
        "lack",
        "no access",
        "no information",
        "no details",
        "no data",
        "unable",
        "cannot",
        "can't",
        "could not",
        "couldn't",
    ),
    re.compile(
        r"\b(?:not|never)\s+(?:been\s+|yet\s+|directly\s+)?(?:provided|specified|given|mentioned|defined"
        r"|available|accessible|clear|included|attached|supplied|stated|known)\b"
        r"|\b(?:unclear|ambiguous|ambiguity|unspecified|missing)\b"
        r"|\black(?:s|ing)?\s+(?:the|any|specific|sufficient|enough)\b"
        r"|\bno\s+(?:direct\s+)?(?:access|information|details|data)\b"
        r"|\b(?:cannot|can['’]t|could not|couldn['’]t|unable to)\s+(?:directly\s+)?(?:access|find|locate"
        r"|retrieve|download|determine|open|read|obtain|verify)\b",
        re.IGNORECASE,
    ),
)

_ASSUMPTION = _Cue(
    ("assum", "guess", "presum", "suppos", "proceed with"),
    re.compile(
        r"\b(?:i|we)(?:['’]ll| will| can| shall| must| need to| have to)?\s+(?:just\s+)?"
        r"(?:assume|guess|presume|suppose)\b"
        r"|\blet(?:['’]s| us)\s+(?:just\s+)?(?:assume|suppose|guess|presume)\b"
        r"|\bassuming\b|\b(?:educated|best|reasonable|rough)\s+guess\b|\bpresumably\b"
        r"|\b(?:will|['’]ll|let['’]s|let us)\s+proceed\s+with\s+(?:an?\s+|the\s+)?(?:assumption|estimate"
        r"|approximation|guess|general|typical|standard|common)\b",
        re.IGNORECASE,
    ),
)

# A reaction to what just happened that says it went wrong ("It seems the search returned nothing",
# "Unfortunately...", "There was an error..."); read at the start of a message only, where agents
# react to the previous step, not deep in a report where they recount history.
_SETBACK = _Cue(
    (
        "seem",
        "appear",
        "looks like",
        "unfortunately",
        "error",
        "issue",
        "problem",
        "mistake",
        "bug",
        "did not",
        "didn't",
        "does not",
        "doesn't",
        "incorrect",
        "wrong",
        "inaccurate",
        "invalid",
        "flawed",
        "failed",
    ),
    re.compile(
        r"\b(?:it|this|that)\s+(?:seems|appears|looks)(?:\s+like)?\b[^.!?\n]{0,160}?"
        r"\b(?:errors?|not|no|failed|fail(?:s|ure)?|issues?|problems?|empty|missing|incorrect|wrong"
        r"|unable|nothing|none|did(?:n['’]t| not))\b"
        r"|\bunfortunately\b"
        r"|\bthere\s+(?:was|is|were|seems to be|appears to be)\s+(?:an?\s+|some\s+)?(?:error|issue|problem"
        r"|mistake|bug)\b"
        r"|\b(?:did|does|do)(?:\s+not|n['’]t)\s+(?:return|produce|yield|find|contain|work|provide|match"
        r"|succeed|load|run)\b"
        r"|\b(?:is|was|are|were|seems?)\s+(?:incorrect|wrong|inaccurate|invalid|flawed|mistaken)\b"
        r"|\b(?:the\s+)?(?:execution|code|script|search|command|request|call|query)\s+failed\b",
        re.IGNORECASE,
    ),
)
SETBACK_WINDOW_CHARS = 400

_INABILITY = _Cue(
    ("unable", "not able", "could not", "couldn't", "cannot", "can't", "no ", "not found", "404"),
    re.compile(
        r"\b(?:unable to|not able to|could not|couldn['’]t|cannot|can['’]t)\s+(?:\w+\s+)?(?:find|locate"
        r"|access|retrieve|determine|identify|obtain|get|verify|confirm|download|open|load|extract)\b"
        r"|\bno\s+(?:relevant\s+|useful\s+|matching\s+)?(?:results|matches|information|data|records)\s+"
        r"(?:(?:were|was|is|are)\s+)?(?:found|returned|available)\b"
        r"|\b(?:page|file|resource|document|article)\s+(?:was\s+)?not\s+found\b"
        r"|\b404\b",
        re.IGNORECASE,
    ),
)

# Self-assessments that the team is stuck ("we are not making progress", "we are in a loop").
_NO_PROGRESS = _Cue(
    ("progress", "loop", "stall", "repeating", "stuck"),
    re.compile(
        r"\b(?:not|no)\s+(?:making\s+)?(?:any\s+|much\s+)?(?:real\s+)?progress\b"
        r"|\b(?:are|is|were|was|be|stuck)\s+in\s+a\s+loop\b"
        r"|\bstall(?:ed|ing)\b|\brepeating\s+(?:the\s+same|ourselves|itself|myself)\b|\bstuck\b",
        re.IGNORECASE,
    ),
)

_RESTART = _Cue(
    ("start", "scratch", "begin", "plan", "reset"),
    re.compile(
        r"\b(?:start(?:ing)?|begin(?:ning)?)\s+(?:over|again|afresh|anew|from\s+scratch"
        r"|from\s+the\s+(?:beginning|start))\b"
        r"|\bfrom\s+scratch\b|\bre-?plan(?:ning)?\b|\bnew\s+plan\b"
        r"|\breset(?:ting)?\s+(?:the\s+|our\s+)?(?:conversation|chat|task|context|progress|team|everything)\b",
        re.IGNORECASE,
    ),
)

_CORRECTION = _Cue(
    (
        "you should",
        "you need",
        "you must",
        "please",
        "instead",
        "suggest",
        "recommend",
        "make sure",
        "be careful",
        "incorrect",
        "wrong",
        "not correct",
        "forgot",
        "missed",
        "do not",
        "don't",
    ),
    re.compile(
        r"\byou\s+(?:should|need to|must|have to|forgot|missed)\b"
        r"|\bplease\s+(?:use|try|check|fix|correct|avoid|do not|don['’]t|re-?run|verify|change|update)\b"
        r"|\binstead,?\s+(?:use|try|call|run|check)\b|\bi\s+(?:suggest|recommend)\b"
        r"|\b(?:make sure|be careful)\b"
        r"|\b(?:that|this|it|which)(?:['’]s|\s+is|\s+was)\s+(?:incorrect|wrong|not correct)\b"
        r"|\b(?:do not|don['’]t)\s+(?:use|call|run|repeat|retry)\b",
        re.IGNORECASE,
    ),
)

# "Do not restart any pods", "without deleting", "never scale": the verb the task forbids.
_PROHIBITION = re.compile(
    r"\b(?:do\s+not|don['’]t|never|must\s+not|mustn['’]t|should\s+not|shouldn['’]t|may\s+not|avoid"
    r"|without)\s+(?:(?:any|the|a|an|to|be|ever|make|making|perform|performing|allowed\s+to)\s+){0,2}"
    r"(?P<verb>[a-z]+)",
    re.IGNORECASE,
)


def _first_unhedged(
    cue: _Cue, text: str, hedges: frozenset[str], limit: int = MAX_SCAN_CHARS
) -> re.Match[str] | None:
    scanned = text[:limit]
    for match in cue.finditer(scanned):
        # Upper-case text is a heading or a template ("4. EDUCATED GUESSES"), not the agent speaking.
        if not match.group(0).isupper() and not _hedged_in_clause(scanned, match.start(), hedges):
            return match
    return None


_CLAUSE_END = re.compile(r"[,.;:!?\n](?!.*[,.;:!?\n])", re.DOTALL)


def _hedged_in_clause(text: str, start: int, hedges: frozenset[str], window_words: int = 3) -> bool:
    """A hedge among the few words before `start` in the same clause: in "it is not specified, so
    I'll assume", the "not" belongs to the clause before and does not hedge the assumption."""
    before = text[max(0, start - _HEDGE_WINDOW_CHARS) : start]
    end = _CLAUSE_END.search(before)
    if end is not None:
        before = before[end.end() :]
    return any(word in hedges for word in words(before)[-window_words:])


def find_fabrication(text: str) -> re.Match[str] | None:
    """Made-up inputs standing in for real ones ("let's assume", "placeholder values", "hypothetical")."""
    return _first_unhedged(_FABRICATION, text, DOING_HEDGES)


def find_missing_information(text: str) -> re.Match[str] | None:
    """A statement that something needed is missing or unclear ("not specified", "cannot access")."""
    return _first_unhedged(_MISSING_INFORMATION, text, frozenset({"if", "whether", "unless"}))


def find_assumption(text: str) -> re.Match[str] | None:
    """The agent proceeding on an assumption or a guess ("I'll assume", "presumably", "best guess")."""
    return _first_unhedged(_ASSUMPTION, text, DOING_HEDGES)


def find_setback(text: str) -> re.Match[str] | None:
    """A reaction, at the start of a message, that the previous step went wrong."""
    return _SETBACK.search_in(text[:SETBACK_WINDOW_CHARS])


def find_inability(text: str) -> re.Match[str] | None:
    """The agent reporting it could not do or find something ("unable to locate", "no results found")."""
    return _first_unhedged(_INABILITY, text, frozenset({"if", "whether", "unless", "when"}), 4096)


_NO_PROGRESS_HEDGES = frozenset({"if", "whether", "unless", "avoid", "not", "never", "no"})


def find_no_progress(text: str) -> re.Match[str] | None:
    """A self-assessment that the team is stuck ("not making progress", "in a loop", "stalled")."""
    return _first_unhedged(_NO_PROGRESS, text, _NO_PROGRESS_HEDGES, 4096)


def find_restart(text: str) -> re.Match[str] | None:
    """Starting the work over ("let's start over", "from scratch", "replanning", "new plan")."""
    return _first_unhedged(_RESTART, text, DOING_HEDGES, 4096)


def find_correction(text: str) -> re.Match[str] | None:
    """A correction or suggestion addressed to another agent ("you should", "please use", "that's wrong")."""
    return _first_unhedged(_CORRECTION, text, frozenset({"if", "whether", "unless"}), 4096)


def forbidden_verbs(task: str) -> frozenset[str]:
    """The known read or write verbs the task forbids, as roots ("do not restart anything" -> restart)."""
    if not task:
        return frozenset()
    found = set()
    for match in _PROHIBITION.finditer(task[:MAX_SCAN_CHARS]):
        root = verb_root(match.group("verb").lower())
        if root is not None:
            found.add(root)
    return frozenset(found)


# --- entities: the things tool arguments act on ---------------------------------------------------

_ENTITY_PARTS = re.compile(r"[/:@.=,]+")
# Characters that continue an identifier part: "api" is not found in "rapid" nor in "api-v2".
_PART_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_NOT_AN_ENTITY = re.compile(r"[\d\W_]+")  # numbers, dates, punctuation
# Argument values too generic to say what a call is about.
GENERIC_VALUES = frozenset({
    "true", "false", "null", "none", "default", "all", "any", "json", "yaml", "text", "csv", "asc",
    "desc", "yes", "no", "auto", "latest",
})  # fmt: skip
_MAX_ENTITY_CHARS = 80


@functools.lru_cache(maxsize=1024)
def argument_entities(arguments: str) -> tuple[str, ...]:
    """Identifier-like string values of JSON arguments (names of services, hosts, namespaces...).

    Free text (values with spaces), numbers and generic values are not entities; non-JSON arguments
    have none, since without keys a command line cannot be told from its flags. Remembered for the
    last arguments seen, as `canonical_arguments` is.
    """
    values = json_string_values(arguments)
    if values is None:
        return ()
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
    return tuple(entities)


def entity_parts(entity: str) -> frozenset[str]:
    """An entity's parts, split at / : @ . = , ("shop/api" -> shop, api; "billing-db" stays whole)."""
    return frozenset(part for part in _ENTITY_PARTS.split(entity) if part)


class EntityFinder:
    """Finds a fixed set of entity parts in texts, as whole words (not inside longer identifiers).

    Built once per run from the parts of the entities its calls act on, so a text is searched (in C)
    only for those of them not found yet, instead of being split into every identifier it holds.
    """

    def __init__(self, parts: Iterable[str]) -> None:
        self._parts = tuple(sorted(set(parts)))

    def find(self, text: str, known: set[str]) -> set[str]:
        """The parts, not already `known`, that occur in `text` as whole words."""
        found: set[str] = set()
        lower: str | None = None
        for part in self._parts:
            if part in known:
                continue
            if lower is None:
                lower = lowered(text[:MAX_SCAN_CHARS])
            start = lower.find(part)
            while start >= 0:
                end = start + len(part)
                if (start == 0 or lower[start - 1] not in _PART_CHARS) and (
                    end == len(lower) or lower[end] not in _PART_CHARS
                ):
                    found.add(part)
                    break
                start = lower.find(part, start + 1)
        return found
