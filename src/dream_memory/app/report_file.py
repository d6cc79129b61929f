"""``dream run --report FILE``: the report file, checked before any work and written after.

Written in place, not by rename: FILE may be /dev/stderr, a pipe or a symlink a CI step reads,
which a rename would replace instead of writing into.

FILE never lands on the workspace's own files: a path that resolves (symlinks followed, ``..``
resolved) inside the workspace or inside the git directory versioning it is refused, exit 2,
before the lock and any model call. The one exception is what the container image documents
(docs/deploy-docker.md, ``--report /workspace/...``, where the mounted workspace is the only
lasting place): a ``.json`` file directly in the workspace's top folder, other than the config
file ``dream.json``. The workspace's .gitignore keeps such a file out of its commits, and nothing
of the workspace lives there. A missing folder outside the workspace is created (a CI step's
``--report reports/run.json``).
"""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters import fsutil
from dream_memory.errors import UsageError

CONFIG_NAME = "dream.json"  # the workspace's config file (docs/reference/files.md)
ELSEWHERE = "write the report outside the workspace (e.g. --report /tmp/dream-report.json)"


def check_report_file(path: Path, workspace: Path | None = None, config: Path | None = None) -> Path:
    """A run must not commit batches and then fail on a report it could never write, nor write a
    report over the workspace's files or the config file the run was started with (``config``,
    wherever it lives: DREAM_CONFIG, --config): checked before any work. Opening for append
    creates the file and keeps what is there."""
    if workspace is not None:
        _refuse_inside(path, workspace)
    if config is not None and _resolved(path) == _resolved(config):
        raise UsageError(
            f"--report: refusing to write the report to {path}: it is the config file this run reads",
            hint=ELSEWHERE,
        )
    try:
        fsutil.touch_for_append(path)
    except OSError as exc:
        error = fsutil.os_error(exc, "write the report to", path)
        raise UsageError(f"--report: {error.message}", hint=error.hint) from exc
    return path


def write_report_file(path: Path, text: str) -> str | None:
    """Write the report; the reason when that failed (the report is on stdout anyway)."""
    try:
        fsutil.checkpoint("report.write", path)
        fsutil.write_in_place(path, text + "\n")
    except OSError as exc:
        return fsutil.os_error(exc, "write the report to", path).message
    return None


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        raise UsageError(
            f"--report: cannot write the report to {path}: its path cannot be resolved ({exc})",
            hint="name a file whose path has no symlink loop",
        ) from exc


def _git_dirs(workspace: Path) -> list[Path]:
    from dream_memory.adapters.git.store import git_dirs

    return [_resolved(folder) for folder in git_dirs(workspace)]


def _refuse_inside(path: Path, workspace: Path) -> None:
    """UsageError when ``path`` resolves inside the workspace (but for the documented top-level
    ``.json`` report) or inside the git directory versioning it."""
    target = _resolved(path)
    shown = str(path) if target == path else f"{path} (resolves to {target})"
    for git_dir in _git_dirs(workspace):
        if target.is_relative_to(git_dir):
            raise UsageError(
                f"--report: refusing to write the report to {shown}: it is inside the git directory "
                f"{git_dir} of the workspace, and would overwrite its files",
                hint=ELSEWHERE,
            )
    root = _resolved(workspace)
    if not target.is_relative_to(root) or _top_level_report(target, root):
        return
    raise UsageError(
        f"--report: refusing to write the report to {shown}: it is inside the workspace {root}, "
        "and would overwrite or add to its files",
        hint=ELSEWHERE + f", or as a .json file in the workspace's top folder other than {CONFIG_NAME}",
    )


def _top_level_report(target: Path, root: Path) -> bool:
    name = target.name.lower()  # DREAM.JSON is dream.json on a case-insensitive filesystem
    return target.parent == root and name.endswith(".json") and name != CONFIG_NAME
