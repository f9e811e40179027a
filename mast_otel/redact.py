"""Redaction of secrets and personal data in text, with placeholders that stay stable in a document.

Whatever leaves the process for an LLM judge goes through a `RedactionSession` first: API keys and
tokens, private keys, `key=value` secrets, passwords in URLs, e-mail addresses and IP addresses (and
the user's own patterns) become placeholders such as `<SECRET_1>` or `<EMAIL_2>`. One session covers
one document (a run), so the same value gets the same placeholder everywhere in it and a reader can
still tell that two steps mention the same address. `restore` maps placeholders back, but only for
the categories the config lists as restorable; secrets never come back.

Generic on purpose: the SDK's `redact=` hook and the collector can use the same rules.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any, ClassVar, Final

__all__ = [
    "Category",
    "RedactionConfig",
    "RedactionPattern",
    "RedactionSession",
    "Redactor",
]

_STRICT: dict[str, Any] = {"extra": "forbid"}


class Category(str, Enum):
    """What kind of value a placeholder stands for; `restorable` names these (or a pattern's name)."""

    SECRET = "secret"  # API keys, tokens, private keys, key=value secrets
    URL_CREDENTIALS = "url_credentials"  # the password in scheme://user:password@host
    EMAIL = "email"
    IP_ADDRESS = "ip_address"


_NEVER_RESTORED: Final = frozenset({Category.SECRET.value, Category.URL_CREDENTIALS.value})
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# What a placeholder looks like; rules never redact a value that already is one.
PLACEHOLDER: Final = re.compile(r"<([A-Z][A-Z0-9_]*)_(\d+)>")
_NOT_A_PLACEHOLDER = r"(?!<[A-Z][A-Z0-9_]*_\d+>)"


@dataclass(frozen=True, slots=True)
class RedactionPattern:
    """A user pattern: matches of `regex` (or of its group 1, when it has groups) become `<NAME_n>`."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    name: str
    regex: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"redaction pattern name {self.name!r}: use letters, digits and underscores")
        try:
            re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"redaction pattern {self.name!r} is not a valid regex: {exc}") from None


@dataclass(frozen=True, slots=True)
class RedactionConfig:
    """Which built-in rules run, the user's patterns, and what `restore` may map back."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    enabled: bool = True
    secrets: bool = True
    url_credentials: bool = True
    emails: bool = True
    ip_addresses: bool = True
    patterns: tuple[RedactionPattern, ...] = ()
    # Categories ("email", "ip_address") or pattern names whose original values may come back in what
    # is stored (e.g. a judge's explanations). Secrets and URL passwords never do.
    restorable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        allowed = {Category.EMAIL.value, Category.IP_ADDRESS.value} | {p.name for p in self.patterns}
        for name in self.restorable:
            if name in _NEVER_RESTORED:
                raise ValueError(f"redaction.restorable: {name!r} values are never restored")
            if name not in allowed:
                raise ValueError(
                    f"redaction.restorable: unknown {name!r}; use email, ip_address or a pattern's name"
                )


@dataclass(frozen=True, slots=True)
class _Rule:
    label: str  # the placeholder's stem, "EMAIL"
    category: str  # a Category value, or the user pattern's name
    regex: re.Pattern[str]
    validate: Callable[[str], bool] | None = None  # a further check on a candidate match


def _valid_ipv6(candidate: str) -> bool:
    # The candidate regex is loose (it must not miss "fe80::1"); the address parser decides. Two hex
    # groups at least, one of them 3+ digits, so code like "a::b" or a lone "::1" loopback don't count.
    groups = [group for group in candidate.split("%", 1)[0].split(":") if group]
    if len(groups) < 2 or max(len(group) for group in groups) < 3:
        return False
    try:
        ipaddress.IPv6Address(candidate.split("%", 1)[0])
    except ValueError:
        return False
    return True


_SECRET_WORDS = (
    r"api[_-]?key|apikey|secret|token|password|passwd|pwd|passphrase|credentials?|auth"
    r"|access[_-]?key|private[_-]?key|client[_-]?secret"
)

# Order matters: the most specific shapes first, so a JWT inside "token=..." is one placeholder.
_SECRET_RULES: Final = (
    _Rule(
        "SECRET",
        Category.SECRET.value,
        re.compile(r"-----BEGIN[ A-Z0-9]*PRIVATE KEY-----[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY-----"),
    ),
    _Rule("SECRET", Category.SECRET.value, re.compile(r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}")),
    _Rule(
        "SECRET",
        Category.SECRET.value,
        re.compile(
            r"(?<![\w-])(?:"
            r"sk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-ant-), project keys (sk-proj-)
            r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
            r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
            r"|AIza[0-9A-Za-z_-]{35}"  # Google
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
            r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
            r")"
        ),
    ),
    _Rule(
        "SECRET",
        Category.SECRET.value,
        re.compile(rf"(?i)\b(?:bearer|basic|token)\s+{_NOT_A_PLACEHOLDER}([A-Za-z0-9._~+/=-]{{16,}})"),
    ),
    _Rule(
        "SECRET",
        Category.SECRET.value,
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_-])*(?:{_SECRET_WORDS})[\"']?\s*[:=]\s*[\"']?"
            rf"{_NOT_A_PLACEHOLDER}([^\s\"',;&<>{{}}\[\]]{{3,}})"
        ),
    ),
)
_URL_RULE: Final = _Rule(
    "URL_PASSWORD",
    Category.URL_CREDENTIALS.value,
    re.compile(rf"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#]*:{_NOT_A_PLACEHOLDER}([^\s/@?#]+)@"),
)
_EMAIL_RULE: Final = _Rule(
    "EMAIL",
    Category.EMAIL.value,
    re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
)
_IP_RULES: Final = (
    _Rule(
        "IP",
        Category.IP_ADDRESS.value,
        re.compile(
            r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\.?\d)"
        ),
    ),
    _Rule(
        "IP",
        Category.IP_ADDRESS.value,
        re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%[\w.]+)?(?![\w:])"),
        validate=_valid_ipv6,
    ),
)


class Redactor:
    """The compiled rules of one `RedactionConfig`; cheap to share, `session()` per document."""

    def __init__(self, config: RedactionConfig | None = None) -> None:
        self.config = config or RedactionConfig()
        rules: list[_Rule] = []
        if self.config.enabled:
            # The user's patterns first: they know their own formats best.
            rules.extend(_Rule(p.name.upper(), p.name, re.compile(p.regex)) for p in self.config.patterns)
            if self.config.url_credentials:
                rules.append(_URL_RULE)
            if self.config.secrets:
                rules.extend(_SECRET_RULES)
            if self.config.emails:
                rules.append(_EMAIL_RULE)
            if self.config.ip_addresses:
                rules.extend(_IP_RULES)
        self._rules = tuple(rules)
        self._restorable = frozenset(self.config.restorable)

    def session(self) -> RedactionSession:
        return RedactionSession(self._rules, self._restorable)

    def redact(self, text: str) -> str:
        """`text` redacted on its own (placeholders numbered from 1)."""
        return self.session().redact(text)


@dataclass(slots=True)
class RedactionSession:
    """The redactions of one document: the same value always maps to the same placeholder."""

    _rules: tuple[_Rule, ...]
    _restorable: frozenset[str]
    _placeholders: dict[tuple[str, str], str] = field(default_factory=dict)  # (label, value) -> placeholder
    _originals: dict[str, tuple[str, str]] = field(default_factory=dict)  # placeholder -> (category, value)
    _counters: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:  # never the originals
        return f"RedactionSession({len(self._originals)} placeholders)"

    @property
    def redaction_count(self) -> int:
        """How many distinct values this session replaced."""
        return len(self._originals)

    def redact(self, text: str) -> str:
        for rule in self._rules:
            text = rule.regex.sub(partial(self._replace, rule), text)
        return text

    def restore(self, text: str) -> str:
        """`text` with the placeholders of restorable categories mapped back to their values."""

        def original(match: re.Match[str]) -> str:
            known = self._originals.get(match.group(0))
            if known is None or known[0] not in self._restorable:
                return match.group(0)
            return known[1]

        return PLACEHOLDER.sub(original, text)

    def _replace(self, rule: _Rule, match: re.Match[str]) -> str:
        group = 1 if match.re.groups else 0
        value = match.group(group)
        if not value or PLACEHOLDER.fullmatch(value) or (rule.validate and not rule.validate(value)):
            return match.group(0)
        placeholder = self._placeholder(rule, value)
        start, end = match.span(group)
        whole = match.group(0)
        offset = match.start(0)
        return whole[: start - offset] + placeholder + whole[end - offset :]

    def _placeholder(self, rule: _Rule, value: str) -> str:
        key = (rule.label, value)
        placeholder = self._placeholders.get(key)
        if placeholder is None:
            number = self._counters.get(rule.label, 0) + 1
            self._counters[rule.label] = number
            placeholder = f"<{rule.label}_{number}>"
            self._placeholders[key] = placeholder
            self._originals[placeholder] = (rule.category, value)
        return placeholder
