"""The staging copy Dream's tools work on: reads fall through to disk, writes stay in memory.

Nothing reaches the workspace until the whole batch is judged and committed (aider's habit:
apply edits to a staging copy, write only when the batch is valid). The staging copy is also the
ToolExecutor of the phase-2 loop: every refusal is a result the model reads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dream_memory.core import policy
from dream_memory.core.agent_loop import ToolOutcome
from dream_memory.core.bounded import newline_lines
from dream_memory.core.edits import apply_edit, create_file
from dream_memory.core.markdown import find_section, outline
from dream_memory.core.merge import line_opcodes
from dream_memory.core.ports import NoRedaction, Redactor
from dream_memory.errors import EditRejected, ToolDenied

_READ_LIMIT_BYTES = 2 * 1024 * 1024  # a memory file larger than this is not read whole


def _writable_text(rel: str, text: str) -> str:
    """``text`` when Dream could read it back next run; EditRejected (a tool error for the model)
    otherwise. Reads refuse files over the size limit, binary files and invalid UTF-8, so a write
    that broke one of those rules would leave a file no later run can edit (an 8 MB MEMORY.md,
    a NUL byte), or crash the commit (a lone surrogate cannot be encoded)."""
    if "\0" in text:
        raise EditRejected(f"the text for {rel} holds a NUL byte; memory files are plain text, send it without")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise EditRejected(
            f"the text for {rel} holds a lone UTF-16 surrogate, which is not valid UTF-8; send plain text"
        ) from None
    if size > _READ_LIMIT_BYTES:
        raise EditRejected(
            f"{rel} would be {size} bytes, larger than the {_READ_LIMIT_BYTES} bytes Dream reads back; keep "
            "memory concise: summarize, or move details into entities/<name>.md"
        )
    return text


class StagingWorkspace:
    def __init__(
        self,
        root: Path,
        *,
        count_tokens: Callable[[str], int],
        file_budget_tokens: int,
        redactor: Redactor | None = None,
        write_check: Callable[[str, str | None, str], str | None] | None = None,
        scope: str = "shared",
    ) -> None:
        self.root = root
        # The batch's scope (core.scopes): the tools read what it may see and write its files only.
        self.scope = scope
        # The write policy's pins: why an edit (path, text on disk, text after) may not be made.
        self.write_check = write_check
        self._real_root = root.resolve()
        self.count_tokens = count_tokens
        self.file_budget_tokens = file_budget_tokens
        self.redactor = redactor or NoRedaction()
        # Texts as the tools and Dream see them: a file written with CRLF line ends throughout
        # (a Windows editor's) is seen with LF ones, and its changes go back with CRLF. Seen as
        # it is, the lines Dream wrote itself (the offline engine's, index rows) were LF among
        # CRLF ones, and a line holding only "\r" did not read as blank.
        self.overlay: dict[str, str] = {}
        self._disk_cache: dict[str, str | None] = {}
        self._crlf: set[str] = set()
        self.redactions: dict[str, int] = {}
        self.unreadable: dict[str, str] = {}  # memory files Dream could not read, and why

    # --- reading -----------------------------------------------------------------------------

    def _check_no_symlink(self, rel: str) -> Path:
        """The real path of ``rel``; refuses any symlink on the way or a path resolving outside."""
        current = self.root
        for part in rel.split("/"):
            current = current / part
            if current.is_symlink():
                raise ToolDenied(f"{rel} goes through a symbolic link; Dream does not follow links")
        resolved = current.resolve()
        if resolved != self._real_root and self._real_root not in resolved.parents:
            raise ToolDenied(f"{rel} resolves outside the workspace")
        return current

    def disk_text(self, rel: str) -> str | None:
        if rel in self._disk_cache:
            return self._disk_cache[rel]
        path = self._check_no_symlink(rel)
        if not path.exists():
            text = None
        elif not path.is_file():
            raise ToolDenied(f"{rel} is not a regular file")
        else:
            size = path.stat().st_size
            if size > _READ_LIMIT_BYTES:
                raise ToolDenied(f"{rel} is {size} bytes, too large for Dream to edit safely")
            data = path.read_bytes()
            if b"\0" in data:
                raise ToolDenied(f"{rel} is a binary file")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolDenied(f"{rel} is not valid UTF-8 text; Dream leaves it alone") from None
            lf = _lf(text)
            # CRLF throughout, and back exactly: no LF line, no "\r\r\n" (which would read as
            # "\r\n" again and be written back one "\r" short)
            if lf != text and "\r\n" not in lf and lf.replace("\n", "\r\n") == text:
                self._crlf.add(rel)
                text = lf
        self._disk_cache[rel] = text
        return text

    def _as_on_disk(self, rel: str, text: str) -> str:
        """``text`` with the line ends of ``rel`` on disk."""
        return _lf(text).replace("\n", "\r\n") if rel in self._crlf else text

    def read(self, rel: str) -> str | None:
        """Current staged text of a (policy-checked) path, None when it does not exist."""
        if rel in self.overlay:
            return self.overlay[rel]
        return self.disk_text(rel)

    def read_text(self, path: str) -> str | None:
        """FileView port: the staged text of a workspace file (no policy: used by Dream itself)."""
        return self.read(policy.normalize(path))

    # --- the tools ---------------------------------------------------------------------------

    def execute(self, name: str, arguments: dict[str, object]) -> ToolOutcome:
        try:
            if name == "read_file":
                outcome = self._read_file(arguments)
            elif name == "edit_file":
                outcome = self._edit_file(arguments)
            elif name == "write_file":
                outcome = self._write_file(arguments)
            else:
                outcome = ToolOutcome(False, f"unknown tool {name!r}")
        except EditRejected as exc:  # ToolDenied included
            outcome = ToolOutcome(False, str(exc.message))
        if outcome.ok:
            return outcome
        # A refusal quotes what the model sent (a path, a line of the file): it is kept in the
        # batch's errors, which reach the report, stderr, the state and a set-aside commit.
        clean, _ = self.redactor.redact(outcome.text)
        return ToolOutcome(False, clean, outcome.changed)

    def _checked_path(self, raw: object, check: Callable[[object], str]) -> str:
        """A policy-checked path that holds nothing secret-shaped: a file name is committed, listed
        in reports and commit subjects, and cannot be redacted after the fact."""
        rel = check(raw)
        if self.redactor.redact(rel)[0] != rel:
            raise ToolDenied("the path holds a secret-shaped value; name the file after what it is about")
        return rel

    def _string_arg(self, arguments: dict[str, object], key: str, *, required: bool = True) -> str:
        value = arguments.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise EditRejected(f"argument {key!r} must be a string")
        return value

    def _read_file(self, arguments: dict[str, object]) -> ToolOutcome:
        rel = self._checked_path(arguments.get("path"), lambda raw: policy.check_readable(raw, self.scope))
        text = self.read(rel)
        if text is None:
            return ToolOutcome(False, f"{rel} does not exist (create it with write_file)")
        section = arguments.get("section")
        if section:
            if not isinstance(section, str):
                raise EditRejected("argument 'section' must be a heading text")
            found = find_section(text, section)
            if found is None:
                return ToolOutcome(False, f"{rel} has no section {section!r}. Its outline:\n{outline(text)}")
            return ToolOutcome(True, found.text)
        if self.count_tokens(text) > self.file_budget_tokens:
            return ToolOutcome(
                True,
                f"{rel} is large; here is its outline. Read a section with read_file(path, section=<heading>).\n"
                + outline(text),
            )
        return ToolOutcome(True, text)

    def _redact_new(self, rel: str, text: str) -> str:
        """``text`` with every secret in the lines the batch wrote redacted, each run of them
        whole: a secret sent in two pieces (half a token per edit, a key's body in one call and
        its BEGIN line in the next) is whole only in the file, so an edit's own text is never
        redacted alone (its BEGIN line redacted first, the body that follows would no longer
        read as a key). Lines the file held on disk are the person's and stay as they are; the
        line above a run is read with it (``password:`` there, the value below)."""
        disk = self.disk_text(rel)
        old, new = newline_lines(disk or ""), newline_lines(text)
        pieces: list[str] = []
        for tag, _, _, j1, j2 in line_opcodes(old, new):
            written = "".join(new[j1:j2])
            if tag == "equal":
                pieces.append(written)
                continue
            above = new[j1 - 1] if j1 else ""
            clean, counts = self.redactor.redact(above + written)
            if not clean.startswith(above):  # the line above holds a secret of its own: the person's
                clean, counts = self.redactor.redact(written)
                above = ""
            for kind, n in counts.items():
                self.redactions[kind] = self.redactions.get(kind, 0) + n
            pieces.append(clean[len(above) :])
        return "".join(pieces)

    def _edit_file(self, arguments: dict[str, object]) -> ToolOutcome:
        rel = self._checked_path(arguments.get("path"), lambda raw: policy.check_writable(raw, self.scope))
        old_text = self._string_arg(arguments, "old_text", required=False)
        new_text = _writable_text(rel, self._string_arg(arguments, "new_text"))
        current = self.read(rel)
        updated = self._redact_new(rel, _writable_text(rel, apply_edit(current, old_text, new_text, rel)))
        if updated == current:
            raise EditRejected(f"no-op edit of {rel}: the file would not change")
        self._check_pins(rel, updated)
        self.overlay[rel] = updated
        verb = "created" if current is None else "edited"
        return ToolOutcome(
            True,
            f"{verb} {rel}: replaced {old_text.count(chr(10)) + bool(old_text)} line(s) "
            f"with {new_text.count(chr(10)) + bool(new_text)}",
            changed=True,
        )

    def _write_file(self, arguments: dict[str, object]) -> ToolOutcome:
        rel = self._checked_path(arguments.get("path"), lambda raw: policy.check_writable(raw, self.scope))
        content = _writable_text(rel, self._string_arg(arguments, "content"))
        created = self._redact_new(rel, _writable_text(rel, create_file(self.read(rel), content, rel)))
        self._check_pins(rel, created)
        self.overlay[rel] = created
        return ToolOutcome(True, f"created {rel}", changed=True)

    def _check_pins(self, rel: str, updated: str) -> None:
        if self.write_check is not None:
            problem = self.write_check(rel, self.disk_text(rel), updated)
            if problem is not None:
                raise ToolDenied(problem)

    # --- the result --------------------------------------------------------------------------

    def write(self, rel: str, text: str) -> None:
        """Stage a change made by Dream itself (not the model), e.g. an entity's index row."""
        self.overlay[rel] = text

    def changes(self) -> dict[str, tuple[str | None, str]]:
        """path -> (text on disk, staged text), for staged files that differ from disk, each
        with the file's own line ends."""
        found: dict[str, tuple[str | None, str]] = {}
        for rel, text in sorted(self.overlay.items()):
            disk = self.disk_text(rel)
            if disk != text:
                found[rel] = (None if disk is None else self._as_on_disk(rel, disk), self._as_on_disk(rel, text))
        return found

    def snapshot(self) -> dict[str, str]:
        """The staged texts, with their files' line ends (as ``changes`` gives them)."""
        return {rel: self._as_on_disk(rel, text) for rel, text in self.overlay.items()}


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")
