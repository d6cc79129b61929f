"""Versions as values: a commit's description, a file's change and its unified diff, and the
ignore blocks dream-memory keeps in a repository (pure: strings and ``difflib``, no git).

``adapters.git`` produces these from the repository; the use cases and faces read and render them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from dream_memory.core import layout
from dream_memory.core.bounded import newline_lines, split_lines
from dream_memory.core.provenance import removals_in
from dream_memory.errors import UnknownRevision

GITIGNORE_BEGIN = "# >>> dream-memory: version only the memory files"
GITIGNORE_END = "# <<< dream-memory"
EXCLUDE_BEGIN = "# >>> dream-memory runtime files of"

# Files a workspace holds while it works (locks, the commit journal, migration and compaction
# markers, temp files of atomic writes): never versioned, and kept out of an enclosing
# repository's `git status` through its local .git/info/exclude.
RUNTIME_PATTERNS: tuple[str, ...] = (
    "memory/.*.lock",  # .history.lock, .dream.lock and any lock a later version adds
    layout.HISTORY_LEFT,
    f"{layout.HISTORY_REPLACED}.*",  # history.jsonl kept by name while a rewrite drains it
    layout.DREAM_JOURNAL,
    layout.MIGRATION_MARKER,
    layout.FORGOTTEN_RECORD,
    layout.FORGET_JOURNAL,
    f"{layout.ARCHIVE_DIR}/.pending.json",
    "memory/.*.tmp",
    f"{layout.ARCHIVE_DIR}/.*.tmp",
    f"{layout.SESSIONS_DIR}/*.lock",  # taken by `dream consolidate --update-sessions`
)


def gitignore_lines() -> list[str]:
    """Ignore everything at the workspace root but the tracked paths (docs/reference/files.md, Versioning)."""
    lines = ["/*", "!/.gitignore", f"!/{layout.SOUL}", f"!/{layout.USER}", "!/memory/", "/memory/*"]
    lines += [
        f"!/{layout.MEMORY}",
        f"!/{layout.DREAM_CURSOR}",
        f"!/{layout.DREAM_STATE}",
        f"!/{layout.DREAM_HELD_DIR}/",
        f"!/{layout.SKILLS_DIR}/",
        f"!/{layout.INDEX}",
        f"!/{layout.ENTITIES_DIR}/",
        f"!/{layout.SECTIONS_DIR}/",
        f"!/{layout.OBSERVATIONS}",
        f"!/{layout.SCOPES_DIR}/",  # the private scopes' files (docs/scopes.md)
    ]
    return lines


def merge_gitignore(existing: str | None) -> str | None:
    """The .gitignore with our block in step; None when it already is. User lines are kept as they are."""
    return merge_block(existing, GITIGNORE_BEGIN, GITIGNORE_END, gitignore_lines())


def merge_block(existing: str | None, begin: str, end: str, body: Sequence[str]) -> str | None:
    """``existing`` with the block ``begin``..``end`` holding ``body``; None when it already does.

    Every line outside the block is kept byte for byte (CRLF line ends too), so a user's own
    ignore rules are never rewritten; the block is added at the end the first time, where its
    negations win over earlier user rules.
    """
    ours = [begin, *body, end]
    if not existing:
        return "\n".join(ours) + "\n"
    lines = existing.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    if begin in bare and end in bare[bare.index(begin) :]:
        start = bare.index(begin)
        stop = bare.index(end, start)
        if bare[start : stop + 1] == ours:
            return None
        return "".join(lines[:start]) + "\n".join(ours) + "\n" + "".join(lines[stop + 1 :])
    text = existing if existing.endswith(("\n", "\r")) else existing + "\n"
    separator = "\n" if bare[-1].strip() else ""
    return text + separator + "\n".join(ours) + "\n"


def parse_identity(identity: str) -> bytes:
    return identity.encode("utf-8")


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # "added" | "modified" | "deleted"
    added: int
    removed: int
    diff: str = field(default="", repr=False)
    binary: bool = False

    def to_json(self, *, with_diff: bool = True) -> dict[str, object]:
        data: dict[str, object] = {
            "path": self.path,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
        }
        if with_diff:
            data["diff"] = self.diff
        return data


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    message: str
    time: str  # ISO 8601 with offset
    author: str
    parent: str | None
    files: tuple[FileChange, ...] = ()
    shallow: bool = False  # the oldest commit of a shallow clone: its parent is absent, so no diff

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def body(self) -> str:
        return self.message.partition("\n")[2].strip()

    def trailers(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for line in split_lines(self.body):
            key, sep, value = line.partition(": ")
            if sep and key and key.replace("-", "").isalnum() and key[0].isupper():
                found[key] = value.strip()
        return found

    def to_json(self, *, with_diff: bool = True) -> dict[str, object]:
        return {
            "commit": self.sha,
            "short": self.short,
            "subject": self.subject,
            "time": self.time,
            "author": self.author,
            "parent": self.parent,
            "shallow": self.shallow,
            "files": [f.to_json(with_diff=with_diff) for f in self.files],
            "removed": removals_in(self.message),  # what a Dream batch removed or replaced, and why
        }


def split_range(rev: str) -> tuple[str, str] | None:
    """``A..B`` as (A, B), B empty for HEAD, as git reads it; None for one revision. Three dots
    (git's symmetric difference) would split into A and ``.B``, a name that exists nowhere."""
    if ".." not in rev:
        return None
    if "..." in rev:
        two = re.sub(r"\.{3,}", "..", rev.strip())
        sides = two.split("..")
        raise UnknownRevision(
            f"{rev!r}: a range here takes two dots (A..B: the commits after A up to B), not three",
            hint=f"give {two}" if len(sides) == 2 and all(s.strip() for s in sides) else "give A..B",
        )
    old, _, new = rev.partition("..")
    return old.strip(), new.strip()


def unified_diff(path: str, old: bytes | None, new: bytes | None) -> FileChange:
    status = "added" if old is None else "deleted" if new is None else "modified"
    old_b, new_b = old or b"", new or b""
    if b"\0" in old_b or b"\0" in new_b:
        return FileChange(path, status, 0, 0, f"Binary files a/{path} and b/{path} differ\n", binary=True)
    old_lines = newline_lines(old_b.decode("utf-8", errors="replace"))  # as git diffs them
    new_lines = newline_lines(new_b.decode("utf-8", errors="replace"))
    lines = list(
        difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
        )
    )
    # The two header lines only: a line of the file may itself start with "---" (a markdown rule,
    # front matter) or "++", and counts as the line it is.
    body = lines[2:]
    added = sum(1 for ln in body if ln.startswith("+"))
    removed = sum(1 for ln in body if ln.startswith("-"))
    text = "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)
    return FileChange(path, status, added, removed, text)


def format_time(seconds: int, offset: int) -> str:
    """A commit's time as ISO 8601 with its own UTC offset."""
    return datetime.fromtimestamp(seconds, timezone(timedelta(seconds=offset))).isoformat(timespec="seconds")
