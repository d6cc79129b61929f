"""Search as values: query terms, scoring, deterministic ranking, previews, relevant sections.

Used by ``dream search`` and the MCP tool, and as a library by Dream (sections relevant to a
batch) and ``dream context``. It works on bytes and texts handed to it; reading them is the
caller's business.

Matching is case-insensitive substring matching of each term; a source matches when it holds at
least one term. Sources rank by, in order: terms covered, terms found in the source's name or its
headings, total hits, then path, so the same store and query always give the same answer.

Speed: a store can hold tens of megabytes. ``term_counts`` works on the raw bytes folded by
``fold_bytes`` (C-level ``bytes.lower``/``in``/``count`` for ASCII text), so only the few sources
that are shown are ever decoded and split into lines. ``score`` is the one ranking rule, fed
either by ``term_counts`` or by the search index's per-term counts.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, TypeVar

from dream_memory.errors import InputError

DEFAULT_MAX_RESULTS = 10
MAX_RESULTS_LIMIT = 50
MAX_LINES_PER_SOURCE = 3
PREVIEW_WIDTH = 240
MAX_QUERY_CHARS = 1000
MAX_TERMS = 16

T = TypeVar("T")

# A "quoted phrase" is one term; anything else splits on whitespace. An unbalanced quote is just
# dropped from its word.
_TOKEN = re.compile(r'"([^"]+)"|(\S+)')


@dataclass(frozen=True)
class Query:
    text: str
    terms: tuple[str, ...]  # casefolded, distinct, in query order

    @cached_property
    def folded_terms(self) -> tuple[bytes, ...]:
        """The terms as UTF-8 bytes, for matching text folded by ``fold_bytes``."""
        # surrogateescape: a query from argv bytes that are not UTF-8 holds lone surrogates. Other
        # lone surrogates (a JSON "\\ud800" over MCP) get bytes no folded text holds.
        return tuple(_term_bytes(t) for t in self.terms)


def _term_bytes(term: str) -> bytes:
    try:
        return term.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return term.encode("utf-8", errors="surrogatepass")


def parse_query(text: str) -> Query:
    """Terms of a query: words, or "quoted phrases"; case-insensitive, duplicates dropped."""
    raw = text.strip()
    if not raw:
        raise InputError("the search query is empty", hint="give at least one word to look for")
    if len(raw) > MAX_QUERY_CHARS:
        raise InputError(f"the search query is longer than {MAX_QUERY_CHARS} characters")
    terms: list[str] = []
    for phrase, word in _TOKEN.findall(raw):
        part = phrase or word.strip('"')
        term = " ".join(part.split()).casefold()
        if term and term not in terms:
            terms.append(term)
    if not terms:
        raise InputError("the search query has no words in it")
    if len(terms) > MAX_TERMS:
        raise InputError(f"the search query has {len(terms)} terms; at most {MAX_TERMS} are allowed")
    return Query(raw, tuple(terms))


def terms_query(terms: Iterable[str]) -> Query | None:
    """A query of words a program picked (a Dream batch's distinctive words), None when there is
    none. Not through ``parse_query``: its limits are for what a person types, and a batch of
    digests or of two-letter words is no mistake anyone can fix (such a batch once failed every
    run with exit 2)."""
    found = tuple(dict.fromkeys(t for t in (" ".join(term.split()).casefold() for term in terms) if t))
    return Query(" ".join(found), found) if found else None


def as_query(query: Query | str) -> Query:
    return query if isinstance(query, Query) else parse_query(query)


def check_max_results(value: int) -> int:
    """The one rule for how many sources a search returns, on every face (CLI, API, MCP, the
    model's memory_search): 1..50, anything else refused (exit 2), never quietly changed."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RESULTS_LIMIT:
        raise InputError(
            f"max results must be 1..{MAX_RESULTS_LIMIT} (got {value!r})",
            hint=f"ask for at most {MAX_RESULTS_LIMIT} sources; a line at the end says how many more match",
        )
    return value


# --- scoring -------------------------------------------------------------------------------------


class Score(NamedTuple):
    """How well a source matches (a tuple: one is made per matching file of the store)."""

    terms_covered: int
    name_hits: int  # terms found in the source's name, plus terms found in its headings
    hit_count: int  # occurrences of all terms


def sort_key(score: Score, path: str) -> tuple[int, int, int, str]:
    return (-score.terms_covered, -score.name_hits, -score.hit_count, path)


def fold_bytes(data: bytes) -> bytes:
    """UTF-8 bytes folded for matching: ``lower()`` for ASCII (fast, and equal to casefold there),
    else decoded, casefolded and encoded again. Query terms are folded the same way."""
    if data.isascii():
        return data.lower()
    return data.decode("utf-8", errors="replace").casefold().encode("utf-8")


def heading_lines(folded: bytes) -> bytes:
    """Markdown ATX heading lines of a folded text, joined by newlines (cheap: ``find`` on ``\\n#``)."""
    found: list[bytes] = []
    pos = 0 if folded.startswith(b"#") else folded.find(b"\n#")
    while pos != -1:
        start = pos if pos == 0 and folded.startswith(b"#") else pos + 1
        end = folded.find(b"\n", start)
        line = folded[start:] if end == -1 else folded[start:end]
        marks = len(line) - len(line.lstrip(b"#"))
        if marks <= 6 and (len(line) == marks or line[marks : marks + 1] in (b" ", b"\t")):
            found.append(line)
        if end == -1:
            break
        pos = folded.find(b"\n#", end)
    return b"\n".join(found)


def term_counts(folded: bytes, query: Query, headings: bytes | None = None) -> tuple[list[int], list[bool]]:
    """Occurrences of each query term in a text folded by ``fold_bytes``, and per term whether a
    heading holds it (``headings`` from ``heading_lines``, computed when not given)."""
    counts = [folded.count(t) if t in folded else 0 for t in query.folded_terms]
    if not any(counts):
        return counts, [False] * len(counts)
    heads = heading_lines(folded) if headings is None else headings
    return counts, [bool(n) and t in heads for t, n in zip(query.folded_terms, counts, strict=True)]


def score(counts: Sequence[int], in_headings: Sequence[bool], name: str, query: Query) -> Score | None:
    """The one ranking rule, whether the counts come from the text (``term_counts``) or from the
    search index: terms covered, then terms in the name or a heading, then total hits. None when
    no term occurs."""
    covered = hits = name_hits = 0
    for n, heading in zip(counts, in_headings, strict=True):
        if n:
            covered += 1
            hits += n
            name_hits += heading
    if not covered:
        return None
    folded_name = name.casefold()
    for term in query.terms:
        name_hits += term in folded_name
    return Score(covered, name_hits, hits)


def top(candidates: Iterable[tuple[Score, str, T]], limit: int) -> list[tuple[Score, str, T]]:
    """The best ``limit`` candidates (score, path, payload), best first, deterministically."""
    return heapq.nsmallest(limit, candidates, key=lambda c: sort_key(c[0], c[1]))


# --- previews ------------------------------------------------------------------------------------


# Values are NamedTuples, not dataclasses: defining a dataclass costs about five times more, and
# these are defined at the start of every read command.
class LineHit(NamedTuple):
    line_no: int  # 1-based
    text: str  # the line, clipped to PREVIEW_WIDTH characters around the first hit


def _clip(line: str, folded: str, terms: Sequence[str], width: int) -> str:
    if len(line) <= width:
        return line
    positions = [folded.find(t) for t in terms if t in folded]
    first = min(positions) if positions else 0
    first = min(first, len(line))
    start = max(0, min(first - width // 4, len(line) - width))
    end = start + width
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")


def preview_lines(
    text: str, query: Query, *, limit: int = MAX_LINES_PER_SOURCE, width: int = PREVIEW_WIDTH
) -> tuple[LineHit, ...]:
    """Up to ``limit`` matching lines, the ones holding most terms first (then earliest), shown
    in file order."""
    scored: list[tuple[int, int, str, str]] = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        raw = line.rstrip("\r")
        folded = raw.casefold()
        count = sum(1 for t in query.terms if t in folded)
        if count:
            scored.append((-count, line_no, raw, folded))
    best = sorted(heapq.nsmallest(limit, scored), key=lambda s: s[1])
    return tuple(LineHit(line_no, _clip(raw, folded, query.terms, width)) for _, line_no, raw, folded in best)


# --- sections of one markdown text ---------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")


class TextSection(NamedTuple):
    """A heading-delimited part of a markdown text; level 0 is the text before the first heading."""

    heading: str
    level: int
    start_line: int  # 1-based, the heading line itself
    end_line: int  # inclusive
    text: str
    terms_covered: int = 0
    hit_count: int = 0
    heading_hits: int = 0


def split_sections(markdown: str) -> list[TextSection]:
    """Every heading starts a section (any level); headings inside code fences do not count."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections: list[TextSection] = []
    start, heading, level = 1, "", 0
    fence: str | None = None

    def close(end: int) -> None:
        body = lines[start - 1 : end]
        if level == 0 and not any(line.strip() for line in body):
            return
        sections.append(TextSection(heading, level, start, end, "\n".join(body) + ("\n" if body else "")))

    for i, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is not None:
            continue
        match = _HEADING.match(line)
        if match:
            close(i - 1)
            start, heading, level = i, (match.group(2) or "").strip(), len(match.group(1))
    close(len(lines))
    return sections


def relevant_sections(markdown: str, query: Query | str, *, max_sections: int | None = None) -> list[TextSection]:
    """The sections of one markdown text that hold a query term, most relevant first.

    Ranked like search: terms covered, terms in the heading, hits, then position in the text.
    """
    q = as_query(query)
    ranked: list[tuple[tuple[int, int, int, int], TextSection]] = []
    for section in split_sections(markdown):
        folded = section.text.casefold()
        covered = [t for t in q.terms if t in folded]
        if not covered:
            continue
        heading = section.heading.casefold()
        heading_hits = sum(1 for t in covered if t in heading)
        hits = sum(folded.count(t) for t in covered)
        scored = TextSection(
            section.heading,
            section.level,
            section.start_line,
            section.end_line,
            section.text,
            terms_covered=len(covered),
            hit_count=hits,
            heading_hits=heading_hits,
        )
        ranked.append(((-len(covered), -heading_hits, -hits, section.start_line), scored))
    ranked.sort(key=lambda item: item[0])
    result = [section for _, section in ranked]
    return result if max_sections is None else result[: max(0, max_sections)]
