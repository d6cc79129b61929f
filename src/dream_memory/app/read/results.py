"""The read side's results: what ``resolve``, ``entity``, ``section``, ``index`` and ``search``
return, rendered the same way by every face (``to_text()`` for a terminal, ``to_json()`` for
``--json`` and MCP)."""

from __future__ import annotations

from typing import Any, NamedTuple

from dream_memory.core.bounded import Page
from dream_memory.core.search import LineHit
from dream_memory.core.terminal import one_line

PROVISIONAL_NOTICE = (
    "> Provisional: from observations.md, unverified ingest output; treat it as a lead to check, not as settled fact."
)


# Values are NamedTuples, not dataclasses: defining a dataclass costs about five times more, and
# these are defined at the start of every read command.
class ResolveResult(NamedTuple):
    path: str
    entity: str
    file: str
    root: str
    index_line: int
    ties: tuple[str, ...] = ()
    revision: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "entity": self.entity,
            "file": self.file,
            "root": self.root,
            "index_line": self.index_line,
            "ties": list(self.ties),
            "revision": self.revision,
        }

    def to_text(self) -> str:
        lines = [self.entity, f"  file: {self.file or '(none)'}", f"  root: {self.root}"]
        if self.ties:
            lines.append(f"  also rooted there: {', '.join(self.ties)} (the earlier index row wins)")
        return "\n".join(lines) + "\n"


class ReadResult(NamedTuple):
    """A bounded page of an entity or section file."""

    kind: str  # "entity" | "section" | "index"
    name: str
    path: str  # store-relative
    text: str
    truncated: bool
    first_line: int
    last_line: int
    next_offset_line: int | None
    provisional: bool = False
    line_cut: bool = False
    revision: str | None = None

    @classmethod
    def from_page(cls, kind: str, name: str, path: str, page: Page, **extra: Any) -> ReadResult:
        return cls(
            kind=kind,
            name=name,
            path=path,
            text=page.text,
            truncated=page.truncated,
            first_line=page.first_line,
            last_line=page.last_line,
            next_offset_line=page.next_line,
            line_cut=page.line_cut,
            **extra,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "revision": self.revision,
            "provisional": self.provisional,
            "truncated": self.truncated,
            "first_line": self.first_line,
            "last_line": self.last_line,
            "next_offset_line": self.next_offset_line,
            "text": self.text,
        }

    def to_text(self) -> str:
        return self.text


class SearchResultItem(NamedTuple):
    path: str
    name: str
    kind: str  # "entity" | "section" | "durable" | "observations" | "history"
    terms_covered: int
    terms_total: int
    name_hits: int
    hit_count: int
    lines: tuple[LineHit, ...]

    @property
    def provisional(self) -> bool:
        return self.kind == "observations"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.provisional:
            data["notice"] = PROVISIONAL_NOTICE
        data.update(
            {
                "path": self.path,
                "name": self.name,
                "kind": self.kind,
                "provisional": self.provisional,
                "terms_covered": self.terms_covered,
                "terms_total": self.terms_total,
                "name_hits": self.name_hits,
                "hit_count": self.hit_count,
                "lines": [{"line": h.line_no, "text": h.text} for h in self.lines],
            }
        )
        return data

    def to_text(self) -> str:
        out = [PROVISIONAL_NOTICE] if self.provisional else []
        label = self.kind if self.name in ("", self.kind) else f"{self.kind} {one_line(self.name)}"
        plural = "" if self.hit_count == 1 else "s"
        out.append(
            f"{one_line(self.path)} ({label}): {self.terms_covered}/{self.terms_total} terms, "
            f"{self.hit_count} hit{plural}"
        )
        width = max((len(str(h.line_no)) for h in self.lines), default=1)
        out += [f"  {h.line_no:>{width}}: {h.text}" for h in self.lines]
        return "\n".join(out) + "\n"


class SearchResult(NamedTuple):
    query: str
    terms: tuple[str, ...]
    max_results: int
    matched: int  # sources matching, excluded ones never counted
    results: tuple[SearchResultItem, ...]
    skipped: tuple[str, ...] = ()  # "path: reason" for files that could not be searched
    revision: str | None = None
    history: bool = False
    # What the user should hear of the search index (not in the JSON: about the machine, not
    # the memory); the faces say them on stderr or in their log.
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "terms": list(self.terms),
            "max_results": self.max_results,
            "matched": self.matched,
            "revision": self.revision,
            "history": self.history,
            "results": [r.to_json() for r in self.results],
            "skipped": list(self.skipped),
        }

    def to_text(self) -> str:
        if not self.results:
            return ""
        blocks = [r.to_text() for r in self.results]
        text = "\n".join(blocks)
        hidden = self.matched - len(self.results)
        if hidden > 0:
            more = "source matches" if hidden == 1 else "sources match"
            text += f"\n({hidden} more {more}; ask for more results, up to 50)\n"
        return text
