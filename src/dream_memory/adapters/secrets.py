"""The secret guard: text headed for durable storage loses anything secret-shaped first.

Detection is detect-secrets, used as a library (its detector plugins, offline, line by line, with
its own false-positive heuristics), plus a few high-signal patterns it does not cover the way we
need: whole PEM private-key blocks (its detector sees only the BEGIN line), passwords inside URLs,
and token shapes it misses. A finding becomes ``[REDACTED:<kind>]``; callers get counts per kind,
never values. LESSONS: users' keys and bot tokens reached memory files and public git history.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# (kind, pattern). A pattern with a named group "secret" redacts only that group.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("url_password", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s@/]+)@", re.IGNORECASE)),
    ("telegram_bot_token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])")),
    ("slack_token", re.compile(r"\bxox[abposr]-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]{6,}\b")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    (
        "aws_secret_key",
        re.compile(
            r"(?i)aws.{0,24}?(?:secret|private).{0,24}?[=:]\s*['\"]?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    (
        "openai_key",
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])"),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{40,}(?![A-Za-z0-9_-])")),
    ("api_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])")),
    # Tokens above may end in "-", where a trailing \b fails: the match would be missed (fixed
    # length) or stop short of the tail, so they end at "no further token character" instead.
    ("stripe_key", re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}\b")),
)

# detect-secrets detectors we do not use: a public IP address is not a credential, and memory
# legitimately records hosts.
_SKIPPED_DETECTORS = frozenset({"IPPublicDetector"})


def _kind_of(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@cache
def _plugins() -> tuple[Any, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    return tuple(cls() for cls in classes if cls.__name__ not in _SKIPPED_DETECTORS)


def _looks_harmless(value: str, line: str) -> bool:
    """detect-secrets' own false-positive heuristics (UUIDs, templates, $VARS, sequences)."""
    from detect_secrets.filters import heuristic

    return bool(
        heuristic.is_potential_uuid(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_indirect_reference(line)
        or value.startswith("[REDACTED")
    )


@dataclass
class SecretScanner:
    """The Redactor port. ``allowlist`` holds regexes; a finding matching one is kept."""

    allowlist: Iterable[str] = ()
    _allow: tuple[re.Pattern[str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._allow = tuple(re.compile(p) for p in self.allowlist)

    def _allowed(self, value: str) -> bool:
        return any(p.search(value) for p in self._allow)

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}

        def mark(kind: str) -> str:
            counts[kind] = counts.get(kind, 0) + 1
            return f"[REDACTED:{kind}]"

        for kind, pattern in _PATTERNS:
            text = pattern.sub(functools.partial(self._replace_match, kind=kind, mark=mark), text)
        if any(c.isalnum() for c in text):
            text = "".join(self._redact_line(line, mark) for line in text.splitlines(keepends=True))
        return text, counts

    def _replace_match(self, match: re.Match[str], *, kind: str, mark: Callable[[str], str]) -> str:
        whole = match.group(0)
        if "secret" in match.re.groupindex:
            value = match.group("secret")
            if self._allowed(value) or value.startswith("[REDACTED"):
                return whole
            start = match.start("secret") - match.start()
            return whole[:start] + mark(kind) + whole[start + len(value) :]
        if self._allowed(whole):
            return whole
        return mark(kind)

    def _redact_line(self, line: str, mark: Callable[[str], str]) -> str:
        findings: list[tuple[str, str]] = []
        for plugin in _plugins():
            try:
                found = plugin.analyze_line(filename="memory.md", line=line, line_number=0)
            except Exception:
                continue
            for secret in found:
                value = secret.secret_value
                if value and not self._allowed(value) and not _looks_harmless(value, line):
                    findings.append((value, _kind_of(secret.type)))
        # Longest first, so a value containing another is replaced whole.
        for value, kind in sorted(set(findings), key=lambda item: -len(item[0])):
            if value in line:
                line = line.replace(value, mark(kind))
        return line


def merge_counts(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    for kind, n in more.items():
        total[kind] = total.get(kind, 0) + n
    return total
