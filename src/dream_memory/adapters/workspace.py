"""Creating a workspace from the bundled templates (docs/reference/files.md)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.core import layout
from dream_memory.errors import NoWorkspace

TEMPLATE_FILES: tuple[str, ...] = (layout.SOUL, layout.USER, layout.MEMORY, layout.PROMPTS_README)


def template_text(rel_path: str) -> str:
    """The bundled template for a workspace file."""
    return (resources.files("dream_memory") / "data" / "templates" / rel_path).read_text(encoding="utf-8")


def sample_root() -> Path:
    """The bundled sample workspace (history and memory files) that ``dream demo`` runs on."""
    return Path(str(resources.files("dream_memory") / "data" / "sample"))


def remove_sample_workspace(target: Path) -> None:
    """The temporary folder ``sample_workspace`` made for ``target``, removed with everything in it."""
    shutil.rmtree(target.parent, ignore_errors=True)


def sample_workspace(prefix: str) -> Path:
    """A copy of the sample, with any missing template filled in, as ``workspace`` inside a new
    folder of the system's temporary folder (named after ``prefix``), left for the caller to
    keep. A copy that fails (a full disk, an unwritable temporary folder) is removed again and
    reported as the one OSError error of ``fsutil``: a half-copied sample is of no use to anyone."""
    try:
        parent = Path(tempfile.mkdtemp(prefix=prefix))
    except OSError as exc:
        raise fsutil.os_error(exc, "make a folder for the sample workspace in", tempfile.gettempdir()) from exc
    target = parent / "workspace"
    try:
        copy_sample(target)
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    return target


def copy_sample(target: Path) -> Path:
    """Copy the sample to ``target`` (which must not exist) and fill in any missing template."""
    _copy_tree(sample_root(), target)
    init_workspace(target)
    return target


def _copy_tree(source: Path, target: Path) -> None:
    """``copytree``, raising the first copy's own OSError: ``copytree`` gathers the errors of its
    files into one ``shutil.Error`` whose text is a list of tuples and whose errno is gone, so a
    full disk (exit 1) could not be told from a read-only one (exit 2)."""
    failures: list[OSError] = []

    def copy(src: str, dst: str) -> object:
        try:
            return shutil.copy2(src, dst)
        except OSError as exc:
            failures.append(exc)
            raise

    try:
        shutil.copytree(source, target, copy_function=copy)
    except OSError as exc:
        cause = failures[0] if isinstance(exc, shutil.Error) and failures else exc
        raise fsutil.os_error(cause, "copy the sample workspace to", target) from exc


def init_workspace(root: Path, *, guide_notes: bool = True) -> list[str]:
    """Create the workspace folders and any missing template file; never overwrite. Idempotent.

    ``guide_notes`` False leaves out prompts/README.md: jobs that create a workspace on the fly
    (Dream, append, consolidate) only need the memory files, and an unversioned README would
    otherwise be left untracked in a user's repository. Returns the paths it created.
    """
    if root.exists() and not root.is_dir():
        raise NoWorkspace(
            f"cannot make a workspace at {root}: it is a file, not a folder",
            hint="give --workspace (or DREAM_WORKSPACE) a folder path: a new one, or an existing workspace",
        )
    created: list[str] = []
    path = root
    try:
        for folder in ("memory", layout.SKILLS_DIR, *(("prompts",) if guide_notes else ())):
            path = root / folder
            _make_folder(path)
        for rel in TEMPLATE_FILES if guide_notes else layout.DURABLE_FILES:
            path = root / rel
            if not path.exists():
                fsutil.atomic_write(path, template_text(rel), site="template")
                created.append(rel)
    except OSError as exc:
        # The one table decides the exit code: no permission, a read-only filesystem or a file in
        # the way is exit 2 (fix the workspace first), a full disk exit 1 (running again may work).
        # A folder's own error names the part of its path that failed; a template's names the
        # temp file it was writing, so the template is named instead.
        where = exc.filename if isinstance(exc, NotADirectoryError) and exc.filename else path
        raise fsutil.os_error(exc, f"create workspace {root}:", where) from exc
    return created


def _make_folder(path: Path) -> None:
    """``path`` as a folder, with its parents. A file in the way (there, or where one of its
    parents belongs) is reported as the ENOTDIR it is, naming that file, so the hint says which
    file to move away; mkdir itself says a bare EEXIST, or names the folder it was asked for."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(blocker)) from exc


def is_workspace(root: Path) -> bool:
    """True when ``root`` is a folder holding one of ``layout.WORKSPACE_MARKERS``."""
    return root.is_dir() and any((root / marker).exists() for marker in layout.WORKSPACE_MARKERS)


def require_workspace(root: Path) -> None:
    """NoWorkspace (exit 2) unless ``root`` is a workspace; looks, never creates."""
    if is_workspace(root):
        return
    init = f"`dream init --workspace {root}` creates it"
    if root.is_dir():
        raise NoWorkspace(
            f"{root} is not a dream workspace (no SOUL.md, USER.md or memory/ in it)",
            hint=f"check the path (--workspace, DREAM_WORKSPACE); {init} there",
        )
    what = "a file, not a folder" if root.exists() else "no such folder"
    raise NoWorkspace(f"no workspace at {root} ({what})", hint=f"check the path (--workspace, DREAM_WORKSPACE); {init}")


def require_usable_history(root: Path, *, write: bool) -> None:
    """WorkspaceUnusable (exit 2, naming the path, what is wrong and the fix) when history.jsonl
    cannot be used as it is: ``memory`` is a file, history.jsonl is a folder, a link or a file
    this process may not read (or, with ``write``, append to; a missing one then needs a memory
    folder it may create files in). Looked at with the same opens the history log makes, before
    any lock or model call: retrying never helps, and a summary paid for must not be lost to a
    file that was never writable. A missing workspace is ``require_workspace``'s to report."""
    memory = root / "memory"
    history = root / layout.HISTORY
    if memory.exists() and not memory.is_dir():
        raise fsutil.os_error(_os_error(errno.ENOTDIR, memory), "use", memory)
    if not memory.is_dir():
        return
    try:
        fd = os.open(history, (os.O_WRONLY | os.O_APPEND if write else os.O_RDONLY) | fsutil.NOFOLLOW | _NONBLOCK)
    except FileNotFoundError:
        if write and not os.access(memory, os.W_OK | os.X_OK):
            raise fsutil.os_error(_os_error(_denied(memory), memory), "create history in", memory) from None
        return
    except BlockingIOError:
        # A read lease held on it (a compaction asking the kernel whether anyone writes to it;
        # writers.py): a regular file in use, given back within microseconds. The append's own
        # blocking open waits for it; refusing here failed appends racing a compaction.
        return
    except OSError as exc:
        raise fsutil.os_error(exc, "append to" if write else "read", history) from exc
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise fsutil.os_error(_os_error(errno.EISDIR, history), "read", history)
    finally:
        os.close(fd)
    if write and not os.access(memory, os.W_OK | os.X_OK):
        # Appending takes memory/.history.lock and the progress is replaced beside it.
        raise fsutil.os_error(_os_error(_denied(memory), memory), "write history in", memory)


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in history's place must not hang the check


def _os_error(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def _denied(path: Path) -> int:
    """EROFS for a folder on a read-only filesystem, else EACCES (os.access says only no)."""
    try:
        return errno.EROFS if os.statvfs(path).f_flag & os.ST_RDONLY else errno.EACCES
    except OSError:
        return errno.EACCES


def is_template(rel_path: str, text: str | None) -> bool:
    """True when a durable file still holds exactly its bundled template (or does not exist)."""
    if text is None:
        return True
    try:
        return text == template_text(rel_path)
    except (FileNotFoundError, OSError):
        return False


# --- what Dream reads of a workspace besides the memory files (app/dream) ----------------------


def builtin_guide_text() -> str:
    """The bundled Dream guide (data/guide/dream.md)."""
    return (resources.files("dream_memory") / "data" / "guide" / "dream.md").read_text(encoding="utf-8")


def ensure_folder(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)


def is_folder(root: Path) -> bool:
    """True when ``root`` is a folder (through a symlink too: the root is the folder the user chose)."""
    return root.is_dir()


def is_file(path: Path) -> bool:
    """True when ``path`` is a regular file (or a link to one): a config file named explicitly."""
    return path.is_file()


def skill_files(root: Path) -> list[tuple[str, str | None]]:
    """(skill name, its SKILL.md text) for each skills/<name>/SKILL.md, by name."""
    folder = root / layout.SKILLS_DIR
    if not folder.is_dir():
        return []
    return [(skill.parent.name, fsutil.read_text(skill)) for skill in sorted(folder.glob("*/SKILL.md"))]


def private_scope_files(root: Path) -> Iterator[str]:
    """The private scopes' files present below ``scopes/`` (workspace-relative), lazily."""
    from dream_memory.core.scopes import scope_of_path

    base = root / layout.SCOPES_DIR
    if not base.is_dir() or base.is_symlink():
        return
    for path in sorted(base.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and scope_of_path(rel) not in (None, "shared"):
            yield rel


def entity_names(root: Path) -> list[str]:
    """Every page under memory/entities/, as its path there without ``.md``, sorted."""
    folder = root / layout.ENTITIES_DIR
    if not folder.is_dir():
        return []
    return sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.md"))


def archive_paths(root: Path) -> list[str]:
    """memory/archive/history-*.jsonl, as workspace-relative paths."""
    return [p.relative_to(root).as_posix() for p in (root / layout.ARCHIVE_DIR).glob("history-*.jsonl")]


def read_files(root: Path, rel_paths: Iterable[str]) -> dict[str, bytes | None]:
    """Each path's bytes, None for one that is not a file (gone, or a folder)."""
    found: dict[str, bytes | None] = {}
    for rel in rel_paths:
        path = root / rel
        found[rel] = path.read_bytes() if path.is_file() else None
    return found


def is_symlink(root: Path, rel: str) -> bool:
    """True when ``rel`` itself is a symlink (not followed)."""
    return (root / rel).is_symlink()


def locate(root: Path, given: str) -> tuple[str | None, bool]:
    """``given`` (absolute, or relative to the current folder) as a path relative to ``root``
    when it lands inside it; otherwise (None, whether it plainly names something outside: an
    absolute path, or one that exists)."""
    path = Path(given)
    resolved = (path if path.is_absolute() else Path.cwd() / path).resolve()
    base = root.resolve()
    if resolved.is_relative_to(base):
        return resolved.relative_to(base).as_posix(), False
    return None, path.is_absolute() or resolved.exists()
