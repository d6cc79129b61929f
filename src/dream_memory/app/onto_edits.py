"""Writing a commit's files onto edits made since its change was computed.

A commit lands before its files are written (versioning.apply_commit), and nothing stops
another program from writing a memory file meanwhile: nanobot's ``write_user`` while a batch is
being committed, or a person after a run was killed and before the next one finishes its change
(versioning.recover). Writing the commit's version blind would erase that edit from the disk
while no commit holds it. So each file is written only where it still holds what the change was
computed from (its ``base``) or the change's own version; otherwise the change is merged onto
the edit (core.merge) and the merge is written, or, when both changed the same lines, the file
is left as the person wrote it: the change stays in its commit, and the next manual-edits
commit records the file. The check is made again right before each rename
(adapters.swap, which says what window remains); a file that changes under the check is merged
again, a few times at most.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.swap import replace_if_unchanged, settled
from dream_memory.core.merge import merge_texts

# A file still changing after this many merges is left alone: the person is still at it.
_TRIES = 5


@dataclass
class OntoEdits:
    merged: list[str] = field(default_factory=list)  # the change merged into an edit on disk
    kept: list[str] = field(default_factory=list)  # left as edited: the change stays in git only

    def notes(self, when: str, commit: str) -> list[str]:
        """What the report says; ``when`` says when the edits were made."""
        found: list[str] = []
        if self.merged:
            found.append(f"{', '.join(self.merged)} changed on disk {when}: the change was merged into the edit")
        if self.kept:
            found.append(
                f"{', '.join(self.kept)} changed on disk {when}, on the lines the change writes: left as "
                f"edited on disk; the change stays in commit {commit[:10]}, and the next manual-edits "
                "commit records the file as it is"
            )
        return found


@contextmanager
def writing_onto_edits(git: GitStore, bases: dict[str, bytes | None]) -> Iterator[OntoEdits]:
    """While inside, the files ``git.write_files`` writes that ``bases`` names (path -> what the
    file held when its change was computed) are written onto any edit made since."""
    found = OntoEdits()

    def careful(rel: str, data: bytes | None) -> bool:
        if rel not in bases:
            return False
        outcome = write_onto_edit(git, rel, bases[rel], data)
        if outcome != "written":
            getattr(found, outcome).append(rel)
        return True

    git.careful = careful
    try:
        yield found
    finally:
        git.careful = None


def write_onto_edit(git: GitStore, rel: str, base: bytes | None, target: bytes | None) -> str:
    """Write ``target`` at ``rel`` onto whatever edit the file received since it held ``base``:
    "written" (no edit), "merged", or "kept" (the edit and the change collide; nothing written)."""
    now = git.read_file(rel)
    for _ in range(_TRIES):
        edited = now not in (base, target)
        if edited:  # taken once the person's save is whole (adapters.swap.settled)
            now, done = settled(git.fs, rel, now)
            if not done:
                return "kept"
            edited = now not in (base, target)
        data = _merged(base, now, target) if edited else target
        if edited and data is None:
            return "kept"
        if replace_if_unchanged(git.fs, rel, data, now, sync_folder=False):
            return "merged" if edited else "written"
        now = git.read_file(rel)
    return "kept"


def _merged(base: bytes | None, now: bytes | None, target: bytes | None) -> bytes | None:
    """The change base -> target applied to ``now``; None when it cannot be, cleanly: the same
    lines changed, a file created or deleted on one side, or bytes that are not UTF-8."""
    texts = [utf8_or_none(x) for x in (base, now, target)]
    if None in texts:
        return None
    old, edited, new = (t for t in texts if t is not None)
    merged = merge_texts(old, edited, new)
    return merged.text.encode("utf-8") if merged.clean else None


def utf8_or_none(data: bytes | None) -> str | None:
    """The bytes as UTF-8 text; None when missing or not UTF-8 (nothing to merge line by line)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
