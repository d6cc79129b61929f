"""The read side's use cases: resolve, entity, section, search (CONTRACT section 7).

One library behind two thin faces: the CLI (``dream resolve|entity|section|search``) and the MCP
server. Both get the same result objects from a ``ReadStore`` and render them with the same
``to_text()`` / ``to_json()``, so an agent over MCP and a person in a terminal see the same thing.

Guarantees, each enforced here rather than left to the faces:

- Read-only by construction: store files are opened ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK`` after
  their real path is checked, and nothing is ever created in the store. The one write this module
  can make is the optional search index (``adapters.search_index``), under the user's cache
  folder, and it refuses a cache folder inside the store.
- Paths never leave the store root: File cells and section names are checked lexically (no ``..``,
  no absolute path), then the real path (symlinks followed) must still lie inside the store.
- Bounded: entity and section text is cut at 200 lines / 16 KiB (``core.bounded``), and files
  are read line by line, so a huge file is never read whole; search shows at most three lines of
  at most 240 characters per source, for at most 50 sources.
- Excludes (``DREAM_MEMORY_EXCLUDE``) hide entities from every surface: entity reads are refused,
  search skips their files before the result limit is applied, resolve never returns them, and
  the index as served has their rows removed. This holds for ``--at`` reads too.
- Text from observations.md (unverified ingest output) always comes behind a first line starting
  with ``> Provisional:``.

Reading is done here directly (a store folder or a git revision): the two small tree classes and
the search index are the only I/O.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from dream_memory.adapters.rooted import Beneath, OutsideRoot
from dream_memory.adapters.search_index import IndexedText, IndexRows, OpenIndex, SearchIndex, StatKey, stat_key
from dream_memory.core import layout
from dream_memory.core.bounded import MAX_BYTES, Page, bound_lines, cli_hint, split_lines
from dream_memory.core.index_table import (
    IndexRow,
    IndexTable,
    filtered_index_text,
    parse_index,
    resolve,
    safe_relative,
)
from dream_memory.core.paths import describe, serve_problem
from dream_memory.core.search import (
    DEFAULT_MAX_RESULTS,
    LineHit,
    Query,
    Score,
    as_query,
    clamp_max_results,
    fold_bytes,
    heading_lines,
    preview_lines,
    score_folded,
    score_text,
    top,
)
from dream_memory.errors import InputError, NotFound, Refused, UsageError

PROVISIONAL_NOTICE = (
    "> Provisional: from observations.md, unverified ingest output; treat it as a lead to check, not as settled fact."
)
EXCLUDE_VARIABLE = "DREAM_MEMORY_EXCLUDE"

# Section names that reach the durable workspace files instead of sections/NAME.md.
SECTION_ALIASES: dict[str, str] = {
    "soul": layout.SOUL,
    "user": layout.USER,
    "memory": layout.MEMORY,
    "observations": layout.OBSERVATIONS,
}
DURABLE_NAMES: dict[str, str] = {layout.SOUL: "soul", layout.USER: "user", layout.MEMORY: "memory"}

# Bytes looked at to tell text from binary: a NUL, or bytes that are not UTF-8, mean binary.
_SNIFF_BYTES = 8192
# Search reads whole files; larger ones are skipped and reported rather than read.
MAX_SEARCH_FILE_BYTES = 16 * 1024 * 1024
MAX_NAME_CHARS = 256


# --- results ---------------------------------------------------------------------------------------


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
        label = self.kind if self.name in ("", self.kind) else f"{self.kind} {self.name}"
        plural = "" if self.hit_count == 1 else "s"
        out.append(
            f"{self.path} ({label}): {self.terms_covered}/{self.terms_total} terms, {self.hit_count} hit{plural}"
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


# --- trees: where the bytes come from ---------------------------------------------------------------


class _TooLarge(Exception):
    pass


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


_READ_CHUNK = 256 * 1024


def _read_fd(fd: int, rel: str, limit: int) -> bytes:
    """All bytes of a regular file; a short read is the end (so a small file costs one read)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, _READ_CHUNK)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _TooLarge(rel)
        if len(chunk) < _READ_CHUNK:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _WorkTree:
    """The store folder as it is on disk, reached through ``adapters.rooted.Beneath``: a symlink
    is followed only while it stays inside the store, and a file it leads to must itself be one
    the read side serves (never ``.git/``, raw history or a hidden file)."""

    revision: str | None = None

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.beneath = Beneath(self.root)
        self.real_root = self.beneath.real_root

    def close(self) -> None:
        self.beneath.close()

    def _open_fd(self, rel: str) -> int | None:
        """A read-only descriptor of a regular file inside the store, None when missing."""
        try:
            found = self.beneath.open(rel)
        except OutsideRoot as exc:
            raise Refused(f"{rel} leads outside the store ({exc.why}); it is not served") from None
        except OSError as exc:
            raise Refused(f"{rel} cannot be opened for reading ({exc.strerror})") from exc
        if found is None:
            return None
        fd, real = found
        if real != rel:
            # A symlink inside the store: where it leads must be servable too.
            problem = serve_problem(real, markdown=False) if real != layout.HISTORY else None
            if problem is not None:
                os.close(fd)
                raise Refused(f"{rel} leads to {real} ({problem}); it is not served")
        return fd

    def is_file(self, rel: str) -> bool:
        try:
            found = self.beneath.resolve(rel)
        except OutsideRoot:
            return True  # it exists; reading it will refuse with the reason
        return found is not None and stat.S_ISREG(found[1].st_mode)

    def open_stream(self, rel: str) -> IO[bytes] | None:
        fd = self._open_fd(rel)
        return None if fd is None else os.fdopen(fd, "rb")

    def identity_of(self, rel: str, stream: IO[bytes]) -> object:
        st = os.fstat(stream.fileno())
        return (st.st_dev, st.st_ino)

    def identity(self, rel: str) -> object | None:
        """What makes two names one file (device and inode): hard links and symlinks share it."""
        try:
            fd = self._open_fd(rel)
        except Refused:
            return None
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return (st.st_dev, st.st_ino)

    def read_bytes(self, rel: str, limit: int, *, listed: bool = False) -> bytes | None:
        if listed:
            # Hot path of search (thousands of files just listed as regular files): one openat
            # relative to the folder's descriptor, no symlink followed. Anything else (a symlink
            # swapped in, a file gone) takes the checked path below.
            folder, _, name = rel.rpartition("/")
            fd = self.beneath.open_listed(tuple(folder.split("/")) if folder else (), name)
            if fd is not None:
                try:
                    return _read_fd(fd, rel, limit)
                except (IsADirectoryError, BlockingIOError):
                    return None  # replaced by a folder or a FIFO since it was listed
                finally:
                    os.close(fd)
        checked = self._open_fd(rel)
        if checked is None:
            return None
        try:
            if not stat.S_ISREG(os.fstat(checked).st_mode):
                return None
            return _read_fd(checked, rel, limit)
        finally:
            os.close(checked)

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        """``*.md`` files under ``folder`` (store-relative), sorted; dotfiles skipped, symlinked
        folders not followed, symlinked files kept only when they stay inside the store.
        ``stats`` receives the lstat of each regular file (the search index's freshness proof)."""
        found: list[str] = []
        cached = self.beneath.dir_fd(tuple(folder.split("/")))
        if cached is None:
            return found  # missing, not a folder, or a symlink: not descended into
        lstat = os.lstat
        stack: list[tuple[str, int]] = [(folder, os.dup(cached))]  # ours: the cache may close its own
        while stack:
            current, fd = stack.pop()
            prefix = current + "/"
            # listdir plus one lstat per name relative to the folder's descriptor: the cheapest
            # way Python has to both list and stat (search needs the stat of every file).
            try:
                for name in os.listdir(fd):
                    if name.startswith("."):
                        continue
                    try:
                        st = lstat(name, dir_fd=fd)
                    except OSError:
                        continue
                    mode = st.st_mode
                    if stat.S_ISREG(mode):
                        if name.endswith(".md"):
                            rel = prefix + name
                            found.append(rel)
                            if stats is not None:
                                stats[rel] = st
                    elif stat.S_ISDIR(mode):
                        try:
                            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((prefix + name, child))
                    elif stat.S_ISLNK(mode) and name.endswith(".md") and self.is_file(prefix + name):
                        found.append(prefix + name)
            except OSError:
                pass
            finally:
                os.close(fd)
        found.sort()
        return found


class _RevisionTree:
    """The store as committed at one revision (symlinks are not regular files there: skipped)."""

    def __init__(self, root: Path, rev: str) -> None:
        from dream_memory.adapters.clock import SystemClock
        from dream_memory.adapters.git import GitStore
        from dream_memory.settings import DEFAULT_GIT_AUTHOR

        git = GitStore.open(root, author=DEFAULT_GIT_AUTHOR, clock=SystemClock(), create=False)
        if git is None:
            raise UsageError(
                f"--at needs a store versioned in git, and {root} is not inside a git repository",
                hint="drop --at to read the files as they are now",
            )
        self.git = git
        self.revision: str | None = git.resolve(rev)
        self.files = git.files_at(self.revision)

    def close(self) -> None:
        self.git.close()

    def read_bytes(self, rel: str, limit: int, *, listed: bool = False) -> bytes | None:
        entry = self.files.get(rel)
        if entry is None:
            return None
        data = self.git.blob(entry[1])
        if len(data) > limit:
            raise _TooLarge(rel)
        return data

    def open_stream(self, rel: str) -> IO[bytes] | None:
        entry = self.files.get(rel)
        return None if entry is None else io.BytesIO(self.git.blob(entry[1]))

    def is_file(self, rel: str) -> bool:
        return rel in self.files

    def identity_of(self, rel: str, stream: IO[bytes]) -> object:
        return self.identity(rel)

    def identity(self, rel: str) -> object | None:
        """The blob: two paths holding the same content are one file here."""
        entry = self.files.get(rel)
        return None if entry is None else entry[1]

    def list_markdown(self, folder: str, stats: dict[str, os.stat_result] | None = None) -> list[str]:
        prefix = folder + "/"
        return sorted(
            p
            for p in self.files
            if p.startswith(prefix) and p.endswith(".md") and not any(part.startswith(".") for part in p.split("/"))
        )


# --- reading helpers ---------------------------------------------------------------------------------


def looks_binary(head: bytes) -> bool:
    """A NUL byte, or bytes that cannot start valid UTF-8 text, in the first block."""
    if b"\0" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return True
    return False


def _stream_lines(stream: IO[bytes], first: bytes, max_line_bytes: int) -> Iterator[str]:
    """Lines of a stream without endings, each read with a cap so a huge line is never held whole
    (the rest of an over-long line is skipped)."""
    buffered = io.BufferedReader(_Prefixed(first, stream))
    while True:
        chunk = buffered.readline(max_line_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield chunk[:-1].rstrip(b"\r").decode("utf-8", errors="replace")
            continue
        if len(chunk) >= max_line_bytes:
            while True:
                rest = buffered.readline(64 * 1024)
                if not rest or rest.endswith(b"\n"):
                    break
            yield chunk.decode("utf-8", errors="ignore")
            continue
        yield chunk.rstrip(b"\r").decode("utf-8", errors="replace")


class _Prefixed(io.RawIOBase):
    """A raw stream that yields ``prefix`` and then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream: IO[bytes]) -> None:
        self._prefix = prefix
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(view))
        view[: len(data)] = data
        return len(data)


def _history_text(data: bytes) -> str:
    """history.jsonl as searchable text: one line per physical line, entries rendered readably."""
    from dream_memory.core.history import parse_lines, split_physical_lines

    rendered: list[str] = []
    for parsed in parse_lines(split_physical_lines(data.decode("utf-8", errors="replace"))):
        parts = [f"cursor {e.cursor} · {e.timestamp} · {' '.join(e.content.split())}" for e in parsed.entries]
        rendered.append(" | ".join(parts))
    return "\n".join(rendered)


def _mcp_hint(tool: str) -> Callable[[int], str]:
    def hint(next_line: int) -> str:
        return f"{tool}(offsetLine={next_line})"

    return hint


def hint_for(surface: str, kind: str) -> Callable[[int], str]:
    """How the ``[truncated]`` marker tells the reader to go on, per surface."""
    if surface == "mcp":
        return _mcp_hint("dream_entity" if kind == "entity" else "dream_section")
    return cli_hint


# Below this many searchable files, reading them directly is as fast as the index: none is kept.
CACHE_MIN_FILES = 500


# --- the store ---------------------------------------------------------------------------------------


@dataclass
class ReadStore:
    """A read-only view of one store folder, now or at a git revision, with excludes applied.

    ``home`` expands ``~`` in the index's Repos cells (default: the current user's home).
    ``cache_dir`` (e.g. ``~/.cache/dream-memory``) lets search keep a ``SearchIndex`` there for
    stores of at least ``cache_min_files`` files; None (the default) searches without one.
    """

    root: Path
    excludes: frozenset[str] = frozenset()
    at: str | None = None
    home: str | None = None
    cache_dir: Path | None = None
    cache_min_files: int = CACHE_MIN_FILES
    _tree: _WorkTree | _RevisionTree = field(init=False, repr=False)
    _index: tuple[IndexTable, str] | None = field(init=False, default=None, repr=False)
    _index_text: str | None = field(init=False, default=None, repr=False)
    _excluded_ids: set[object] | None = field(init=False, default=None, repr=False)
    # How the last search was answered: files answered by the index, files read, files (re-)indexed,
    # whether the index was built.
    last_search_stats: dict[str, int] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(os.path.abspath(self.root))
        self.excludes = frozenset(e.strip().casefold() for e in self.excludes if e.strip())
        if not self.root.is_dir():
            raise InputError(
                f"the store folder {self.root} does not exist",
                hint="set --store, DREAM_MEMORY_STORE or --workspace to a folder holding index.md",
            )
        if self.home is None:
            self.home = str(Path.home())
        self._tree = _WorkTree(self.root) if self.at is None else _RevisionTree(self.root, self.at)

    @property
    def revision(self) -> str | None:
        return self._tree.revision

    def close(self) -> None:
        self._tree.close()

    def __enter__(self) -> ReadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the index ---------------------------------------------------------------------------

    def _index_text_now(self) -> str:
        if self._index_text is None:
            try:
                data = self._tree.read_bytes(layout.INDEX, MAX_SEARCH_FILE_BYTES)
            except _TooLarge:
                raise Refused(f"{layout.INDEX} is larger than {MAX_SEARCH_FILE_BYTES} bytes; not read") from None
            self._index_text = "" if data is None else data.decode("utf-8", errors="replace")
        return self._index_text

    def _index_source(self) -> tuple[IndexTable, str]:
        if self._index is None:
            text = self._index_text_now()
            self._index = (parse_index(text, home=self.home), text)
        return self._index

    @property
    def index(self) -> IndexTable:
        return self._index_source()[0]

    @property
    def index_problems(self) -> tuple[str, ...]:
        """Rows of index.md that could not be used, if index.md was parsed (search may not need to)."""
        return self._index[0].problems if self._index is not None else ()

    def _find_row(self, name: str) -> IndexRow | None:
        """The index row of one entity, parsing only the lines that mention it when possible."""
        if self._index is not None:
            return self._index[0].find(name)
        text = self._index_text_now()
        row = parse_index(text, home=self.home, only=name).find(name)
        return row if row is not None else self.index.find(name)

    def is_excluded_name(self, name: str) -> bool:
        return name.strip().casefold() in self.excludes

    def _excluded_files(self, rows: Iterable[tuple[str, str]] | None = None) -> set[str]:
        """Files of excluded entities (casefolded). With ``--at``, the rows of today's index count
        too, so an entity excluded now stays hidden in a revision that mapped it elsewhere."""
        if not self.excludes:
            return set()
        pairs = list(rows) if rows is not None else [(r.entity, r.file) for r in self.index.rows]
        if isinstance(self._tree, _RevisionTree):
            now = _WorkTree(self.root)
            try:
                today = now.read_bytes(layout.INDEX, MAX_SEARCH_FILE_BYTES)
            except (Refused, _TooLarge):
                today = None
            finally:
                now.close()
            if today:
                pairs += [
                    (r.entity, r.file) for r in parse_index(today.decode("utf-8", "replace"), home=self.home).rows
                ]
        files: set[str] = set()
        for entity, file in pairs:
            if entity.casefold() in self.excludes:
                rel = safe_relative(file) if file else None
                if rel:
                    files.add(rel.casefold())
        return files

    def _excluded_identities(self) -> set[object]:
        """The file identities (device and inode; the blob with ``--at``) of every excluded
        entity's file: a second name for the same file (a hard link, a symlink, another index
        row spelling the path differently) is withheld too."""
        if self._excluded_ids is None:
            ids: set[object] = set()
            if self.excludes:
                excluded = self._excluded_files()
                rels = {
                    rel
                    for entity, file in [(r.entity, r.file) for r in self.index.rows]
                    if entity.casefold() in self.excludes and file and (rel := safe_relative(file))
                }
                rels.update(
                    rel for rel in self._tree.list_markdown(layout.ENTITIES_DIR) if self.is_excluded_path(rel, excluded)
                )
                for rel in rels:
                    ident = self._tree.identity(rel)
                    if ident is not None:
                        ids.add(ident)
            self._excluded_ids = ids
        return self._excluded_ids

    def _refuse_same_file(self, rel: str, ident: object) -> None:
        if ident is not None and ident in self._excluded_identities():
            raise Refused(
                f"{rel} is the same file as an entity excluded by {EXCLUDE_VARIABLE} (a link or a second "
                "index row); it is not served"
            )

    def is_excluded_path(self, rel: str, excluded_files: set[str] | None = None) -> bool:
        """True for a file that belongs to an excluded entity (by the index, or by its name under
        entities/)."""
        if not self.excludes:
            return False
        files = self._excluded_files() if excluded_files is None else excluded_files
        if rel.casefold() in files:
            return True
        if rel.startswith(layout.ENTITIES_DIR + "/") and rel.endswith(".md"):
            stem = rel.rsplit("/", 1)[-1][:-3]
            under = rel[len(layout.ENTITIES_DIR) + 1 : -3]
            return stem.casefold() in self.excludes or under.casefold() in self.excludes
        return False

    def entity_names(self) -> list[str]:
        """Known, visible entities: index rows first, then entity files without a row."""
        names = [n for n in self.index.names() if not self.is_excluded_name(n)]
        known = {n.casefold() for n in names}
        excluded_files = self._excluded_files()
        for rel in self._tree.list_markdown(layout.ENTITIES_DIR):
            name = rel[len(layout.ENTITIES_DIR) + 1 : -3]
            if name.casefold() not in known and not self.is_excluded_path(rel, excluded_files):
                names.append(name)
                known.add(name.casefold())
        return names

    def section_names(self) -> list[str]:
        excluded_files = self._excluded_files()
        names = [
            rel[len(layout.SECTIONS_DIR) + 1 : -3]
            for rel in self._tree.list_markdown(layout.SECTIONS_DIR)
            if not self.is_excluded_path(rel, excluded_files)
        ]
        return [*SECTION_ALIASES, *names]

    # --- resolve ----------------------------------------------------------------------------

    def resolve(self, path: str) -> ResolveResult:
        """The entity whose repo root contains ``path`` (made absolute; ``~`` expanded)."""
        if not path.strip() or "\0" in path:
            raise InputError("give a path to resolve")
        raw = path.strip()
        if raw == "~" or raw.startswith("~/"):
            raw = (self.home or "").rstrip("/") + raw[1:]
        absolute = os.path.abspath(raw)
        table = self.index
        if not table.rows:
            raise NotFound(
                f"no entity resolves {absolute}: {self.root / layout.INDEX} has no Entity/File/Repos table rows"
            )
        found = resolve(table.rows, absolute, excluded=self.excludes)
        if found is None:
            real = os.path.realpath(absolute)
            if real != absolute:
                found = resolve(table.rows, real, excluded=self.excludes)
        if found is None:
            raise NotFound(
                f"no entity resolves {absolute}: no Repos root in {layout.INDEX} contains it",
                hint="roots match whole path components; dream search finds entities by text",
            )
        if found.file:
            self._checked_file(found.entity, found.file, found.line_no)
        return ResolveResult(
            path=absolute,
            entity=found.entity,
            file=found.file,
            root=found.root,
            index_line=found.line_no,
            ties=found.ties,
            revision=self.revision,
        )

    # --- entity / section ---------------------------------------------------------------------

    def _checked_file(self, entity: str, cell: str, line_no: int) -> str:
        rel = safe_relative(cell)
        if rel is None:
            raise Refused(
                f"{layout.INDEX} line {line_no}: the File cell of entity {entity!r} points outside the store",
                hint="File must be a path relative to the store, without '..'",
            )
        problem = serve_problem(rel)
        if problem is not None:
            raise Refused(
                f"{layout.INDEX} line {line_no}: the File cell of entity {entity!r} names {describe(rel)} "
                f"({problem}); it is not served",
                hint="File must name a markdown file of the store, such as entities/NAME.md",
            )
        return rel

    def _entity_file(self, name: str) -> tuple[str, str]:
        """(display name, store-relative file) for an entity, or NotFound/Refused."""
        clean = _check_name(name, "entity")
        if self.is_excluded_name(clean):
            raise Refused(
                f"entity {clean!r} is excluded by {EXCLUDE_VARIABLE}; it is not served",
                hint=f"remove it from {EXCLUDE_VARIABLE} to read it",
            )
        row: IndexRow | None = self._find_row(clean)
        if row is not None and row.file:
            return row.entity, self._checked_file(row.entity, row.file, row.line_no)
        fallback = safe_relative(f"{layout.ENTITIES_DIR}/{clean}.md")
        if fallback is not None and serve_problem(fallback) is None and self._tree.is_file(fallback):
            return (row.entity if row else clean), fallback
        known = self.entity_names()[:12]
        where = (
            f"{layout.INDEX} has a row for it but no File"
            if row
            else f"not in {layout.INDEX} nor {layout.ENTITIES_DIR}/"
        )
        raise NotFound(
            f"no entity named {clean!r} ({where})",
            hint=("known entities: " + ", ".join(known)) if known else "the store has no entities yet",
        )

    def _page(self, kind: str, name: str, rel: str, *, offset_line: int, hint: Callable[[int], str]) -> ReadResult:
        if offset_line < 1:
            raise InputError("--offset-line starts at 1")
        if self.is_excluded_path(rel):
            raise Refused(f"{rel} belongs to an entity excluded by {EXCLUDE_VARIABLE}; it is not served")
        stream = self._tree.open_stream(rel)
        if stream is None:
            raise NotFound(f"{kind} {name!r}: {rel} does not exist" + self._at_suffix())
        provisional = rel == layout.OBSERVATIONS
        with stream:
            if self.excludes:
                self._refuse_same_file(rel, self._tree.identity_of(rel, stream))
            head = stream.read(_SNIFF_BYTES)
            if looks_binary(head):
                raise Refused(f"{rel} is not a UTF-8 text file; the read side serves text only")
            page = bound_lines(
                _stream_lines(stream, head, MAX_BYTES + 1),
                offset_line=offset_line,
                header=PROVISIONAL_NOTICE if provisional else "",
                hint=hint,
            )
        return ReadResult.from_page(kind, name, rel, page, provisional=provisional, revision=self.revision)

    def _at_suffix(self) -> str:
        return f" at {self.revision[:12]}" if self.revision else ""

    def entity(self, name: str, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """An entity's file, bounded; refused when the entity is excluded."""
        display, rel = self._entity_file(name)
        return self._page("entity", display, rel, offset_line=offset_line, hint=hint)

    def section_file(self, name: str) -> tuple[str, str]:
        clean = _check_name(name, "section")
        alias = SECTION_ALIASES.get(clean.casefold())
        if alias is not None:
            return clean.casefold(), alias
        base = clean[:-3] if clean.endswith(".md") else clean
        rel = safe_relative(f"{layout.SECTIONS_DIR}/{base}.md") if safe_relative(base) == base else None
        if rel is None or serve_problem(rel) is not None:
            raise Refused(f"section name {clean!r} would leave the {layout.SECTIONS_DIR}/ folder; it is not served")
        if not self._tree.is_file(rel):
            names = self.section_names()
            raise NotFound(
                f"no section named {clean!r} ({rel} does not exist{self._at_suffix()})",
                hint="sections: " + ", ".join(names[:16]),
            )
        return base, rel

    def section(self, name: str, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """``sections/NAME.md``, or SOUL.md / USER.md / memory/MEMORY.md / observations.md for
        soul / user / memory / observations; bounded."""
        display, rel = self.section_file(name)
        return self._page("section", display, rel, offset_line=offset_line, hint=hint)

    def index_page(self, *, offset_line: int = 1, hint: Callable[[int], str] = cli_hint) -> ReadResult:
        """index.md as served: excluded entities' rows removed, bounded."""
        table, text = self._index_source()
        shown = filtered_index_text(text, table, self.excludes)
        page = bound_lines(split_lines(shown), offset_line=offset_line, hint=hint)
        return ReadResult.from_page("index", "index", layout.INDEX, page, revision=self.revision)

    # --- search -----------------------------------------------------------------------------

    def _sources(
        self,
        history: bool,
        rows: list[tuple[str, str]],
        stats: dict[str, os.stat_result] | None = None,
        refused: dict[str, str] | None = None,
    ) -> list[tuple[str, str, str, bool]]:
        """(path, name, kind, listed) of every searchable file, excluded ones already left out;
        index rows naming a file the read side never serves go to ``refused`` (path: reason)."""
        excluded_files = self._excluded_files(rows)
        if self.excludes and stats is None and isinstance(self._tree, _WorkTree):
            stats = {}  # the identities of the listed files, to withhold links to excluded ones
        by_file: dict[str, str] = {}
        for entity, file in rows:
            rel = safe_relative(file) if file else None
            if rel and entity.casefold() not in self.excludes:
                problem = serve_problem(rel)
                if problem is None:
                    by_file.setdefault(rel, entity)
                elif refused is not None:
                    refused[rel] = f"not served ({problem})"
        sources: list[tuple[str, str, str, bool]] = []
        seen: set[str] = set()

        def add(rel: str, name: str, kind: str, listed: bool = False) -> None:
            if rel in seen or self.is_excluded_path(rel, excluded_files):
                return
            seen.add(rel)
            sources.append((rel, name, kind, listed))

        for rel, name in DURABLE_NAMES.items():
            add(rel, name, "durable")
        add(layout.OBSERVATIONS, "observations", "observations")
        # The listed folders hold nearly every source of a large store: added inline (no excludes
        # to check in the common case) rather than through add().
        entities = self._tree.list_markdown(layout.ENTITIES_DIR, stats)
        sections = self._tree.list_markdown(layout.SECTIONS_DIR, stats)
        if self.excludes:
            entities = [rel for rel in entities if not self.is_excluded_path(rel, excluded_files)]
            sections = [rel for rel in sections if not self.is_excluded_path(rel, excluded_files)]
        start = len(layout.ENTITIES_DIR) + 1
        sources += [(rel, by_file.get(rel, rel[start:-3]), "entity", True) for rel in entities if rel not in seen]
        seen.update(entities)
        start = len(layout.SECTIONS_DIR) + 1
        sources += [(rel, rel[start:-3], "section", True) for rel in sections if rel not in seen]
        seen.update(sections)
        for rel, name in sorted(by_file.items()):
            if rel not in seen and rel != layout.INDEX:
                add(rel, name, "entity")
        if history:
            add(layout.HISTORY, "history", "history")
        if self.excludes and (ids := self._excluded_identities()):
            kept: list[tuple[str, str, str, bool]] = []
            for source in sources:
                rel, listed = source[0], source[3]
                st = stats.get(rel) if stats is not None and listed else None
                ident = (st.st_dev, st.st_ino) if st is not None else self._tree.identity(rel)
                if ident not in ids:
                    kept.append(source)
            sources = kept
        return sources

    def _search_index(self) -> SearchIndex | None:
        if self.cache_dir is None or not isinstance(self._tree, _WorkTree):
            return None
        return SearchIndex.for_store(self.cache_dir, self._tree.real_root)

    def _index_key(self) -> StatKey | None:
        try:
            st = os.lstat(self.root / layout.INDEX)
        except OSError:
            return None
        return stat_key(st) if stat.S_ISREG(st.st_mode) else None

    def search(
        self, query: Query | str, *, max_results: int = DEFAULT_MAX_RESULTS, history: bool = False
    ) -> SearchResult:
        """Sources matching ``query``, best first; excluded entities are skipped before the limit."""
        q = as_query(query)
        limit = clamp_max_results(max_results)
        index = self._search_index()
        opened = index.open() if index is not None else None
        try:
            return self._search(q, limit, history, index, opened)
        finally:
            if opened is not None:
                opened.close()
                if index is not None and opened.corrupt:
                    index.remove()  # damaged in a way opening it did not show: built again

    def _search(
        self, q: Query, limit: int, history: bool, index: SearchIndex | None, opened: OpenIndex | None
    ) -> SearchResult:
        index_key = self._index_key() if index is not None else None
        rows_read_ns = time.time_ns()
        recorded = opened.rows_for(index_key) if opened is not None else None
        rows = recorded.rows if recorded is not None else [(r.entity, r.file) for r in self.index.rows]
        stats: dict[str, os.stat_result] | None = {} if index is not None else None
        refused: dict[str, str] = {}
        sources = self._sources(history, rows, stats, refused)
        use_index = index is not None and len(sources) >= self.cache_min_files and not index.busy
        if index is not None and len(sources) < self.cache_min_files and opened is not None:
            opened.close()
            opened = None
            index.remove()  # the store shrank below the size that keeps an index: drop it whole
        if not use_index and opened is not None:
            opened.close()
            opened = None

        # "path: reason" for files not searched, reported in source order however they were met.
        skip_reasons: dict[str, str] = {}
        candidates: list[tuple[Score, str, tuple[str, str]]] = []
        to_read: list[tuple[str, str, str, bool, bool]] = []  # (rel, name, kind, listed, index it)
        if opened is not None:
            candidates += self._indexed_candidates(opened, q, sources, stats or {}, skip_reasons, to_read)
        else:
            to_read = [(rel, name, kind, listed, use_index and listed) for rel, name, kind, listed in sources]

        fresh: list[IndexedText] = []  # files read now, for the index
        for rel, name, kind, listed, index_it in to_read:
            st = stats.get(rel) if stats is not None and index_it else None
            read_ns = time.time_ns()
            try:
                data = self._tree.read_bytes(rel, MAX_SEARCH_FILE_BYTES, listed=listed)
            except _TooLarge:
                reason = f"larger than {MAX_SEARCH_FILE_BYTES // (1024 * 1024)} MiB"
                skip_reasons[rel] = reason
                if st is not None:
                    fresh.append(IndexedText(rel, stat_key(st), read_ns, None, skip=reason))
                continue
            except Refused as exc:
                skip_reasons[rel] = exc.message
                continue
            if data is None:
                continue
            if b"\0" in data:
                skip_reasons[rel] = "binary"
                if st is not None:
                    fresh.append(IndexedText(rel, stat_key(st), read_ns, None, skip="binary"))
                continue
            if kind == "history":
                # history.jsonl is JSON: entries are rendered first, so escapes do not hide words.
                score = score_text(_history_text(data), name, q)
            else:
                folded = fold_bytes(data)
                headings = heading_lines(folded)
                score = score_folded(folded, name, q, headings=headings)
                if st is not None:
                    fresh.append(IndexedText(rel, stat_key(st), read_ns, folded, headings))
            if score is not None:
                candidates.append((score, rel, (name, kind)))
        skipped = [f"{rel}: {skip_reasons[rel]}" for rel, _, _, _ in sources if rel in skip_reasons]
        skipped += [f"{rel}: {reason}" for rel, reason in sorted(refused.items())]

        rebuilt = indexed = False
        if use_index and index is not None:
            kept: IndexRows | None = None  # never kept while an exclude is set (they would name it)
            if not self.excludes and index_key is not None:
                kept = recorded if recorded is not None else IndexRows(index_key, rows, rows_read_ns)
            if opened is None:
                rebuilt = indexed = not index.unsupported and index.build(fresh, kept)
            else:
                purge: set[str] = set()
                if self.excludes:
                    excluded = self._excluded_files(rows)
                    purge = {rel for rel in opened.files.rels if self.is_excluded_path(rel, excluded)}
                keep = {rel for rel, _, _, listed in sources if listed}
                indexed = opened.update(fresh, keep, kept, purge)
        self.last_search_stats = {
            "sources": len(sources),
            "from_cache": len(sources) - len(to_read),
            "read": len(to_read),
            "indexed": len(fresh) if indexed else 0,
            "rebuilt": int(rebuilt),
        }

        items: list[SearchResultItem] = []
        for score, rel, (name, kind) in top(candidates, limit):
            data = self._tree.read_bytes(rel, MAX_SEARCH_FILE_BYTES) or b""
            text = _history_text(data) if kind == "history" else data.decode("utf-8", errors="replace")
            items.append(
                SearchResultItem(
                    path=rel,
                    name=name,
                    kind=kind,
                    terms_covered=score.terms_covered,
                    terms_total=len(q.terms),
                    name_hits=score.name_hits,
                    hit_count=score.hit_count,
                    lines=preview_lines(text, q),
                )
            )
        return SearchResult(
            query=q.text,
            terms=q.terms,
            max_results=limit,
            matched=len(candidates),
            results=tuple(items),
            skipped=tuple(skipped),
            revision=self.revision,
            history=history,
        )

    @staticmethod
    def _indexed_candidates(
        opened: OpenIndex,
        q: Query,
        sources: list[tuple[str, str, str, bool]],
        stats: dict[str, os.stat_result],
        skip_reasons: dict[str, str],
        to_read: list[tuple[str, str, str, bool, bool]],
    ) -> list[tuple[Score, str, tuple[str, str]]]:
        """Score the sources the index may answer for; the others go to ``to_read`` (those read
        because they changed are indexed again; those the index cannot hold are not)."""
        answered, rest = opened.partition(sources, stats)
        for source in rest:
            rel, _, _, listed = source
            st = stats.get(rel) if listed else None
            to_read.append((*source, st is not None and not opened.always_direct(rel, st)))
        if skips := opened.files.skips:
            skip_reasons.update((source[0], skips[source[0]]) for source in answered.values() if source[0] in skips)
        matches = opened.match(q.folded_terms) if answered else None
        if matches is None:
            # The index would be slower than the files (or was not needed): read them.
            to_read.extend((*source, False) for source in answered.values())
            return []
        # Scored as score_folded() would from the text (a test holds them equal), inlined because
        # a common word gets here once per file of the store.
        terms = q.terms
        per_terms = list(zip(matches.counts, matches.in_headings, strict=True))
        phrase_files = matches.phrase_files
        scored: list[tuple[Score, str, tuple[str, str]]] = []
        for fid in matches.files():
            hit = answered.get(fid)
            if hit is None:
                continue  # changed, excluded or gone: answered from the store, or not at all
            rel, name, kind, listed = hit
            if fid in phrase_files:
                to_read.append((rel, name, kind, listed, False))  # a phrase is counted in the text
                continue
            covered = hits = name_hits = 0
            for per_term, heads in per_terms:
                n = per_term.get(fid, 0)
                if n:
                    covered += 1
                    hits += n
                    name_hits += fid in heads
            if covered:
                folded_name = name.casefold()
                for term in terms:
                    name_hits += term in folded_name
                scored.append((Score(covered, name_hits, hits), rel, (name, kind)))
        return scored


def _check_name(name: str, what: str) -> str:
    clean = name.strip()
    if not clean:
        raise InputError(f"give the {what} name to read")
    if len(clean) > MAX_NAME_CHARS or "\0" in clean or any(ord(c) < 32 for c in clean):
        raise InputError(f"that {what} name is not usable (too long or holding control characters)")
    return clean


# --- library entry points ------------------------------------------------------------------------------


def search_store(
    store: Path | str,
    query: Query | str,
    max_results: int = DEFAULT_MAX_RESULTS,
    excludes: Iterable[str] = (),
    *,
    history: bool = False,
    at: str | None = None,
    cache_dir: Path | None = None,
) -> SearchResult:
    """Search a store folder (for Dream, ``dream context`` and other callers without the CLI).

    ``cache_dir`` lets a large store keep a ``SearchIndex`` there (outside the store)."""
    with ReadStore(Path(store), excludes=frozenset(excludes), at=at, cache_dir=cache_dir) as reader:
        return reader.search(query, max_results=max_results, history=history)


def read_entity(store: Path | str, name: str, excludes: Iterable[str] = (), *, offset_line: int = 1) -> ReadResult:
    with ReadStore(Path(store), excludes=frozenset(excludes)) as reader:
        return reader.entity(name, offset_line=offset_line)


def read_section(store: Path | str, name: str, excludes: Iterable[str] = (), *, offset_line: int = 1) -> ReadResult:
    with ReadStore(Path(store), excludes=frozenset(excludes)) as reader:
        return reader.section(name, offset_line=offset_line)


def resolve_path(store: Path | str, path: str, excludes: Iterable[str] = ()) -> ResolveResult:
    with ReadStore(Path(store), excludes=frozenset(excludes)) as reader:
        return reader.resolve(path)
