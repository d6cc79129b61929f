"""The ignore rules of a repository that is not ours, from the files that lie outside the
workspace, read the way git reads them: the user-wide file (``core.excludesFile``, else
``$XDG_CONFIG_HOME/git/ignore``) lowest, then ``$GIT_DIR/info/exclude``, then the ``.gitignore``
of each folder from the work tree's top down to the workspace's parent, a deeper file and a later
line winning; a folder excluded by name hides everything below it from any later ``!`` rule.

Only files outside the workspace count: they are the project's word on what its repository must
not hold. A ``.gitignore`` inside the workspace is the agent's (nanobot's is ``/*`` plus its four
files, which would ignore every entity and skill Dream writes) and is never read here.
tests/git/test_ignore_rules.py compares the verdicts with ``git check-ignore``.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from dulwich.config import StackedConfig
from dulwich.ignore import IgnoreFilter, default_user_ignore_filter_path, read_ignore_patterns


@dataclass(frozen=True)
class IgnoreRule:
    """The line that ignores a path: the file holding it and the pattern as written."""

    source: str
    pattern: str

    def __str__(self) -> str:
        return f"{self.source}: {self.pattern}"


class OuterIgnores:
    """One repository's ignore files outside the workspace at ``prefix``, each read once."""

    def __init__(self, root: Path, control: Path, prefix: str, config: StackedConfig) -> None:
        self.root = root
        ignorecase = _boolean(config, b"ignorecase")
        self._ignorecase = ignorecase
        user_file = Path(os.path.expanduser(default_user_ignore_filter_path(config)))
        # (depth of the folder the file applies below, where it is, its filter)
        self._global = [
            (0, str(path), f)
            for path in (user_file, control / "info" / "exclude")
            if (f := self._read(path)) is not None
        ]
        parts = [p for p in prefix.split("/") if p]
        self._folders = [
            (depth, str(path), f)
            for depth in range(len(parts))  # the workspace's own folder is the agent's: left out
            if (f := self._read(path := root.joinpath(*parts[:depth]) / ".gitignore")) is not None
        ]

    def _read(self, path: Path) -> IgnoreFilter | None:
        try:
            # git reads no .gitignore through a symlink; neither do we
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EISDIR, errno.EACCES):
                return None
            raise
        with os.fdopen(fd, "rb") as f:
            return IgnoreFilter(list(read_ignore_patterns(f)), self._ignorecase)

    def rule_for(self, repo_path: str, *, is_dir: bool = False) -> IgnoreRule | None:
        """The rule that makes git ignore ``repo_path`` (relative to the work tree's top), or
        None when it is not ignored. A folder above it that is ignored ignores it too."""
        parts = repo_path.strip("/").split("/")
        for end in range(1, len(parts) + 1):
            folder = end < len(parts) or is_dir
            rule = self._last_match(parts[:end], folder)
            if rule is not None and rule[0]:
                return rule[1]
        return None

    def _last_match(self, parts: list[str], is_dir: bool) -> tuple[bool, IgnoreRule] | None:
        found: tuple[bool, IgnoreRule] | None = None
        # a file in folder D applies to what lies below D: depth < len(parts)
        for depth, source, rules in [*self._global, *(f for f in self._folders if f[0] < len(parts))]:
            below = "/".join(parts[depth:]) + ("/" if is_dir else "")
            for pattern in rules.find_matching(below):
                found = (pattern.is_exclude, IgnoreRule(source, pattern.pattern.decode("utf-8", "replace")))
        return found


def _boolean(config: StackedConfig, name: bytes) -> bool:
    try:
        return config.get_boolean((b"core",), name, False)
    except ValueError:
        return False  # a value git would also refuse: the strict reading is the safe one
