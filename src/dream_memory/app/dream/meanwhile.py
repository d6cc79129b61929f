"""A batch's changes moved onto the hand edits made to the same files while it ran.

The run committed the hand edits it found when it started; a file edited after that (while the
model was thinking) no longer holds the text the batch read. Writing the batch's text over it
would erase the new lines in no commit at all. So such a file's hand edit is committed first, as
its own commit, and the batch's change is merged into it (core.merge); when the two changed the
same lines, the batch does not land (EditedMeanwhile) and the next run does it again from the
edited text.

An edit is taken once the file has stopped changing (adapters.swap.settled): an editor or nanobot
writing it in place does so in several writes, and read between two of them the file is cut
short. Committed as the person's edit and merged onto, the cut erased the rest of their file.
"""

from __future__ import annotations

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.swap import settled
from dream_memory.app.dream.report import BatchRecord
from dream_memory.app.onto_edits import utf8_or_none
from dream_memory.app.versioning import MANUAL_SUBJECT, commit_disk_state
from dream_memory.core.merge import merge_texts
from dream_memory.errors import DreamError


class EditedMeanwhile(DreamError):
    """A file the batch edits was changed on disk while the batch ran, on the lines the batch
    changes (the hand edit is committed), or was still being written: the batch is not
    committed, and the next run does it again."""


def onto_edits_made_meanwhile(
    git: GitStore, record: BatchRecord, changes: dict[str, tuple[str | None, str]]
) -> dict[str, tuple[str | None, str]]:
    """The batch's changes (path -> the text it read, the text it wrote), moved onto any hand
    edit made to the same files while it ran; a note in ``record`` says so."""
    head = git.head()
    meanwhile: dict[str, bytes | None] = {}
    for path, (before, _) in changes.items():
        now, read = git.read_file(path), None if before is None else before.encode("utf-8")
        # Edited after the batch read the file, or before it (the batch then read the edit, and
        # its commit would carry the person's lines as Dream's).
        committed = git.read_at(head, path) if head is not None else None
        # Line ends count too: a CRLF rewrite riding in Dream's commit made every line Dream's
        # (blame), so a later batch could remove a person's line without holding it.
        if now != read or read != committed:
            meanwhile[path] = now
    if not meanwhile:
        return changes
    still = []
    for path, now in meanwhile.items():
        meanwhile[path], done = settled(git.fs, path, now)
        if not done:
            still.append(path)
    if still:
        raise EditedMeanwhile(
            f"{', '.join(sorted(still))} kept changing on disk while the batch was about to land: nothing was "
            "committed, and the batch runs again next time, from the file as it is then"
        )
    names = sorted(meanwhile)
    body = "\n".join(f"- {path}" for path in names)
    sha = commit_disk_state(git, names, f"{MANUAL_SUBJECT}\n\nEdited outside Dream while it ran:\n{body}")
    kept = f"the hand edit was committed first ({sha[:10]})" if sha else "the hand edit is kept"
    moved = dict(changes)
    overlapping: list[str] = []
    for path, now in meanwhile.items():
        before, after = changes[path]
        text = utf8_or_none(now)
        merged = merge_texts(before, text, after) if before is not None and text is not None else None
        if merged is None or not merged.clean:
            overlapping.append(path)
            continue
        del moved[path]
        if merged.text != text:
            moved[path] = (text, merged.text)
    if overlapping:
        raise EditedMeanwhile(
            f"{', '.join(sorted(overlapping))} changed on disk while the batch ran, on the lines the batch "
            f"changes: {kept}, and the batch runs again next time, from the edited text"
        )
    record.notes.append(
        f"{', '.join(names)} changed on disk while the batch ran: {kept}, and the batch's change merged into it"
    )
    return moved
