"""The secret guard: text headed for durable storage loses anything secret-shaped first.

Three layers, applied in this order to every text:

1. Token shapes that name themselves: a provider's prefix and length (``ghp_``, ``hf_``,
   ``dop_v1_``, ``hvs.``, ``shpat_``, ...), whole PEM and PuTTY private keys, webhook URLs with
   their secret path, passwords inside URLs. The rule set was drawn up from gitleaks' and
   detect-secrets' rules (read, not copied) and the kinds users actually paste into chats.
2. Secrets that only their context gives away: an ``Authorization`` header (Bearer, Basic, ...),
   a secret query parameter, a ``Cookie`` header, netrc and command-line passwords, a password
   assignment or a password in prose ("my sudo password is ..."), and a value assigned to a
   name ending in key / token / secret / auth / credentials (``TWILIO_AUTH_TOKEN=...``). These
   rules judge the value: it must look like a credential (digits or symbols, enough entropy, not
   a placeholder, a path or a plain English word), so that memory that merely talks about
   passwords and tokens stays as it is.
3. detect-secrets' own detector plugins, line by line, with its false-positive heuristics.

A finding becomes ``[REDACTED:<kind>]``, extended to the whole run of token characters around it
(a rule that matched only the head of a longer token would otherwise leave its tail behind);
callers get counts per kind, never values. Why: in other memory systems users' keys and bot tokens
reached memory files and public git history.

The rules of layers 1 and 2 and their value judges are ``adapters.secret_rules``; this module
applies them (the marking, the widening, the allowlist) and runs layer 3.
"""

from __future__ import annotations

import logging
import re
import sys
import types
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from dream_memory.adapters.forgotten import PurgedValues
from dream_memory.adapters.secret_rules import ENV_NAME, MARK, SHAPES, TOKEN_TAIL, Hit, Rule, strip_tail
from dream_memory.core.bounded import newline_lines

# detect-secrets detectors we do not use: a public IP address is not a credential, and memory
# legitimately records hosts.
_SKIPPED_DETECTORS = frozenset({"IPPublicDetector"})
_SCANNED_AS = "memory.md"  # the file name detect-secrets is told: its keyword rules depend on the type


def _kind_of(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@cache
def _plugins() -> tuple[Any, ...]:
    classes: list[Any] = list(_detector_classes().values())
    return tuple(cls() for cls in classes if cls.__name__ not in _SKIPPED_DETECTORS)


def _detector_classes() -> dict[Any, Any]:
    """detect-secrets' detectors, loaded with the host's warnings left as they were: its logger
    module calls ``logging.captureWarnings(True)`` as it loads, which sent every later warning of
    the process (a config's UserWarning included, and a host's own) to the logging module, where
    a host's handlers could swallow them. That is undone here, unless capture was on already (then
    the call changed nothing)."""
    shown = warnings.showwarning
    try:
        return _load_detector_classes()
    finally:
        if warnings.showwarning is not shown:
            logging.captureWarnings(False)  # puts `shown` back


def _load_detector_classes() -> dict[Any, Any]:
    """detect-secrets' detectors, loaded without ``requests`` when that works: its modules import
    requests only to verify a secret online, which we never ask of them, and requests with urllib3
    were 0.25 of the 0.4 CPU s that loading detect-secrets cost every command that writes. Its
    modules get a stand-in (``_RequestsStandIn``) while they load; it leaves ``sys.modules`` at
    once, so any later ``import requests`` (litellm's, a user's) gets the real package, and so do
    detect-secrets' modules through the stand-in from then on. A version that imports more of
    requests than its top-level name fails the quick way and is loaded the ordinary way."""
    if "requests" not in sys.modules:
        loaded = set(sys.modules)
        stand_in = _RequestsStandIn("requests")
        sys.modules["requests"] = stand_in
        try:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

            return dict(get_mapping_from_secret_type_to_class())
        except ImportError:
            for name in set(sys.modules) - loaded:  # half-loaded modules holding the stand-in
                del sys.modules[name]
        finally:
            if sys.modules.get("requests") is stand_in:
                del sys.modules["requests"]
            stand_in.loading = False
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return dict(get_mapping_from_secret_type_to_class())


class _NotLoaded(Exception):
    """Any name of ``requests`` while detect-secrets loads: fit for an annotation or an ``except``
    clause, as its modules use those names at import."""


class _RequestsStandIn(types.ModuleType):
    """``requests`` to detect-secrets' modules: placeholders while they load, the real package
    (imported then, on first use) afterwards."""

    loading = True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self.loading:
            return self if name == "exceptions" else _NotLoaded
        import requests  # the real package, only if detect-secrets ever uses it

        return getattr(requests, name)


_QUOTES = ("'", '"', "`")
_QUOTE_GROUP = "([\\'\"`])"


@cache
def _needs_quote(detector: str) -> bool:
    """Whether every pattern of detect-secrets' keyword detector, for the file type we scan as,
    requires a quote character (a group of them at the top level, not optional): then a line
    without one gives it nothing to find. Read off the installed version's patterns, so a
    version that drops the quote leaves the detector running on every line."""
    if detector != "KeywordDetector":
        return False
    from detect_secrets.plugins import keyword
    from detect_secrets.util.filetype import determine_file_type

    table = keyword.REGEX_BY_FILETYPE.get(
        determine_file_type(_SCANNED_AS), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    )
    return bool(table) and all(_required_at_top(pattern.pattern, _QUOTE_GROUP) for pattern in table)


def _required_at_top(source: str, group: str) -> bool:
    """``group`` occurs in ``source`` outside every other group, with no quantifier after it and
    no alternation at the top level (which would make every part optional)."""
    at = source.find(group)
    if at < 0 or source[at + len(group) : at + len(group) + 1] in ("?", "*", "{"):
        return False
    return _outside(source[:at])[1] == 0 and "|" not in _outside(source)[0]


def _outside(source: str) -> tuple[str, int]:
    """The characters of a pattern outside any group or class, and the group depth at its end."""
    out: list[str] = []
    i, opened, depth = 0, -1, 0  # opened: where the class we are in starts (-1: none)
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if opened >= 0:  # a "]" right after "[" or "[^" is a member
            first = opened + (2 if source[opened + 1 : opened + 2] == "^" else 1)
            opened = -1 if char == "]" and i > first else opened
        elif char == "[":
            opened = i
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            out.append(char)
        i += 1
    return "".join(out), depth


def _object_id(secret_type: str, value: str) -> bool:
    """A quoted git object id or sha256 digest: high entropy, but memory records them on purpose.
    (A hex credential beside a key/token/secret name is caught by the assignment rule.)"""
    return secret_type == "Hex High Entropy String" and len(value) in (40, 64)


def _looks_harmless(value: str, line: str) -> bool:
    """detect-secrets' own false-positive heuristics (UUIDs, templates, $VARS, sequences)."""
    from detect_secrets.filters import heuristic

    return bool(
        heuristic.is_potential_uuid(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_indirect_reference(line)
        or value.startswith(MARK)
    )


@dataclass
class SecretScanner:
    """The Redactor port. ``allowlist`` holds regexes; a finding matching one is kept.

    ``purged``: the values ``dream forget`` removed (known by keyed hash only). They are replaced
    first, before any other rule and whatever the allowlist says: a value someone asked to have
    forgotten never comes back through a later append or Dream edit (docs/forget.md)."""

    allowlist: Iterable[str] = ()
    purged: PurgedValues | None = None
    _allow: tuple[re.Pattern[str], ...] = field(init=False, repr=False)
    # Layer 3 per line is most of a scan, and a run scans the same lines again and again (each
    # edit rescans the whole file, each batch the same memory files): its verdict depends on the
    # line and the allowlist only, so it is kept, with the kinds it marked to count them again.
    _lines: dict[str, tuple[str, tuple[str, ...]]] = field(init=False, repr=False, compare=False, default_factory=dict)
    # The same for layers 1 and 2's line-local rules, by (segment, line).
    _shaped: dict[tuple[int, str], tuple[str, tuple[tuple[int, str], ...]]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self._allow = tuple(re.compile(p) for p in self.allowlist)

    def _allowed(self, value: str) -> bool:
        return any(p.search(value) for p in self._allow)

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}
        if not text:
            return text, counts
        if self.purged is not None:
            text, found = self.purged.scrub(text)
            if found:
                counts["forgotten"] = found
        text = self._shapes(text, counts)
        if any(c.isalnum() for c in text):
            text = "".join(
                self._redact_line(piece, counts) for line in text.splitlines(keepends=True) for piece in _pieces(line)
            )
        return text, counts

    def _shapes(self, text: str, counts: dict[str, int]) -> str:
        """Layers 1 and 2, rule by rule in SHAPES' order. A run of line-local rules goes line by
        line, each line's result remembered like layer 3's: the rules' regexes are most of a
        scan's time, and a run rescans the same memory lines batch after batch."""
        marks: list[tuple[int, str]] = []  # (rule index, kind): counted in rule order, as before
        for first, rules in _SEGMENTS:
            if not _LOCAL[first]:
                found: dict[str, int] = {}
                text = self._apply(rules[0], text, found)
                marks += [(first, kind) for kind, n in found.items() for _ in range(n)]
                continue
            out: list[str] = []
            for line in newline_lines(text):  # only at newlines: a rule's class may hold "\r" or U+2028
                known = self._shaped.get((first, line))
                if known is None:
                    known = self._shape_line(first, rules, line)
                    if len(line) <= _LINE_KEPT_CHARS:
                        if len(self._shaped) >= _LINES_KEPT:
                            self._shaped.clear()
                        self._shaped[(first, line)] = known
                out.append(known[0])
                marks += known[1]
            text = "".join(out)
        for _, kind in sorted(marks, key=lambda mark: mark[0]):
            counts[kind] = counts.get(kind, 0) + 1
        return text

    def _shape_line(self, first: int, rules: tuple[Rule, ...], line: str) -> tuple[str, tuple[tuple[int, str], ...]]:
        marks: list[tuple[int, str]] = []
        for index, rule in enumerate(rules, start=first):
            # Most rules find nothing in most lines: one search says so without _apply's spans,
            # judges and rebuilt text (seventy rules' overhead was most of a new line's scan).
            if rule.pattern.search(line) is None:
                continue
            found: dict[str, int] = {}
            line = self._apply(rule, line, found)
            marks += [(index, kind) for kind, n in found.items() for _ in range(n)]
        return line, tuple(marks)

    def _spans(self, rule: Rule, text: str) -> Iterator[tuple[int, int]]:
        for match in rule.pattern.finditer(text):
            groups = match.groupdict()
            if groups.get("quoted") is not None:  # a quoted value: the quotes are not the secret
                start, end = match.span("quoted")
            elif "secret" in groups and groups["secret"] is not None:
                start, end = match.span("secret")
                if not rule.extend:  # a value in prose may end the sentence: "... is hunter2."
                    end = start + len(strip_tail(text[start:end]))
            else:
                start, end = match.span()
            value = text[start:end]
            if not value or value.startswith(MARK) or self._allowed(value) or self._allowed(match.group(0)):
                continue
            if rule.judge is not None and not rule.judge(Hit(value, start, end, text, groups)):
                continue
            if rule.body_above:
                start = _body_start(text, start)
            if rule.extend:
                while end < len(text) and text[end] in TOKEN_TAIL:
                    end += 1
                while start > 0 and text[start - 1] in TOKEN_TAIL:
                    start -= 1
            yield start, end

    def _apply(self, rule: Rule, text: str, counts: dict[str, int]) -> str:
        spans = list(self._spans(rule, text))
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for span_start, end in spans:
            start = max(span_start, last)  # widened into the previous finding: one marker covers both
            if start >= end:
                continue
            out.append(text[last:start])
            out.append(_mark(rule.kind, counts))
            last = end
        out.append(text[last:])
        return "".join(out)

    def _redact_line(self, line: str, counts: dict[str, int]) -> str:
        known = self._lines.get(line)
        if known is None:
            found: dict[str, int] = {}
            known = (self._scan_line(line, found), tuple(k for k, n in found.items() for _ in range(n)))
            if len(line) <= _LINE_KEPT_CHARS:
                if len(self._lines) >= _LINES_KEPT:
                    self._lines.clear()
                self._lines[line] = known
        for kind in known[1]:
            counts[kind] = counts.get(kind, 0) + 1
        return known[0]

    def _scan_line(self, line: str, counts: dict[str, int]) -> str:
        findings: list[tuple[str, str]] = []
        quoted = any(q in line for q in _QUOTES)
        for plugin in _plugins():
            if not quoted and _needs_quote(type(plugin).__name__):
                continue  # it cannot match (half a plain line's layer-3 time went to it)
            try:
                found = plugin.analyze_line(filename=_SCANNED_AS, line=line, line_number=0)
            except Exception:
                continue
            for secret in found:
                value = secret.secret_value
                if not value or ENV_NAME.fullmatch(value) or _object_id(secret.type, value):
                    continue
                if not self._allowed(value) and not _looks_harmless(value, line):
                    findings.append((value, _kind_of(secret.type)))
        # Longest first, so a value containing another is replaced whole.
        for value, kind in sorted(set(findings), key=lambda item: -len(item[0])):
            if value not in line:
                continue
            pieces = line.split(value)
            rebuilt = [pieces[0]]
            for piece in pieces[1:]:
                # Swallow the rest of the token, so no tail of a longer secret stays behind.
                tail = 0
                while tail < len(piece) and piece[tail] in TOKEN_TAIL:
                    tail += 1
                rebuilt.append(_mark(kind, counts) + piece[tail:])
            line = "".join(rebuilt)
        return line


# What can match a newline or read a text's ends; a negated class must exclude the newline.
_NOT_LOCAL_ESCAPES = frozenset({r"\s", r"\D", r"\W", r"\n", r"\A", r"\Z", r"\B"})


_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}[ \t]*\r?")


def _body_start(text: str, start: int) -> int:
    """Where the base64 lines right above a match starting a line begin (``start`` if none)."""
    while start > 0 and text[start - 1] == "\n":
        above = text.rfind("\n", 0, start - 1) + 1
        if not _BODY_LINE.fullmatch(text, above, start - 1):
            break
        start = above
    return start


def _line_local(rule: Rule) -> bool:
    """Whether every match of ``rule`` lies inside one line and is judged by that line alone, so
    running it line by line (each line keeping its newline) gives what one run over the text gives.

    Read off the pattern, conservatively: none of ``\\s \\D \\W \\n \\A \\Z \\B`` (outside a negated
    class), no ``^`` or ``$``, no DOTALL or MULTILINE, no negated class that lets a newline in,
    and a judge that reads only the value. ``\\b`` and lookarounds at a line's edge see the
    newline in the whole text and nothing in the line: with the rest excluded they agree.
    """
    if rule.reads_around or rule.body_above or rule.pattern.flags & (re.DOTALL | re.MULTILINE):
        return False
    source = rule.pattern.pattern
    i, klass, negated, members = 0, False, False, ""
    while i < len(source):
        char = source[i]
        if char == "\\":
            pair = source[i : i + 2]
            if pair in _NOT_LOCAL_ESCAPES and not (klass and negated):
                return False
            members += pair if klass else ""
            i += 2
            continue
        if klass:
            if char == "]" and members:
                if negated and r"\n" not in members and r"\s" not in members:
                    return False
                klass = False
            else:
                members += char
        elif char == "[":
            negated = source[i + 1 : i + 2] == "^"
            klass, members = True, ""
            i += 2 if negated else 1
            if source[i : i + 1] == "]":  # a leading "]" is a member
                members, i = "]", i + 1
            continue
        elif char in "\n^$" or source.startswith(("(?s", "(?m"), i):
            return False
        i += 1
    return True


def _segment(local: tuple[bool, ...]) -> tuple[tuple[int, tuple[Rule, ...]], ...]:
    """SHAPES as (index of its first rule, its rules): each rule that must see the whole text
    alone, each run of line-local rules between them together, in SHAPES' order."""
    segments: list[tuple[int, tuple[Rule, ...]]] = []
    for index, rule in enumerate(SHAPES):
        if local[index] and segments and local[segments[-1][0]]:
            segments[-1] = (segments[-1][0], (*segments[-1][1], rule))
        else:
            segments.append((index, (rule,)))
    return tuple(segments)


_LOCAL = tuple(_line_local(rule) for rule in SHAPES)
_SEGMENTS = _segment(_LOCAL)


# Lines whose verdicts are kept (a few MB at most: short lines only); past it the memo starts again.
_LINES_KEPT = 20_000
_LINE_KEPT_CHARS = 500  # longer lines are rare, and each one kept would weigh what it is long

# detect-secrets' line scan takes time quadratic in the line's length (a 1 MB line took minutes):
# long lines go to it in pieces cut after a space, never inside a word.
_PIECE = 2000


def _pieces(line: str) -> Iterator[str]:
    while len(line) > _PIECE:
        cut = line.rfind(" ", _PIECE // 2, _PIECE) + 1 or _PIECE
        yield line[:cut]
        line = line[cut:]
    yield line


def _mark(kind: str, counts: dict[str, int]) -> str:
    counts[kind] = counts.get(kind, 0) + 1
    return f"[REDACTED:{kind}]"
