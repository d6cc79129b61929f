"""Whether git ignores a memory file of a workspace inside a repository that is not ours, and by
which rule outside the workspace.

Git's verdict comes from the user-wide file (``core.excludesFile``, else
``$XDG_CONFIG_HOME/git/ignore``) lowest, then ``info/exclude`` of the common git folder, then the
``.gitignore`` of each folder from the work tree's top down to the path's own, a deeper file and
a later line winning; a folder excluded by name hides everything below it from any later ``!``
rule. A path counts as ignored here only when git ignores it and a rule from outside the
workspace alone would ignore it too: those files are the project's word on what its repository
must not hold. A ``.gitignore`` inside the workspace is the agent's (nanobot's is ``/*`` plus its
four files, which would ignore every entity and skill Dream writes): it never makes a file
ignored, though its ``!`` lines still count, as they do for git.

Matching is dulwich's ``Pattern.matches`` (dulwich 1.2.15 and later, where it follows git);
tests/git/test_ignore_rules.py compares the verdicts with ``git check-ignore``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dulwich.config import StackedConfig
from dulwich.ignore import IgnoreFilter, Pattern, read_ignore_patterns


def user_wide_file(config: StackedConfig, key: bytes, name: str, root: Path) -> Path:
    """Where git finds a user-wide file (``core.excludesFile``, ``core.attributesFile``): the
    setting, relative to the work tree's top and ``~`` expanded, else ``$XDG_CONFIG_HOME/git/NAME``
    with an empty XDG_CONFIG_HOME read as unset, as git reads it (dulwich made that relative)."""
    try:
        value = config.get((b"core",), key)
        named = value.decode("utf-8", "surrogateescape")
    except KeyError:
        named = os.path.join(os.environ.get("XDG_CONFIG_HOME") or "~/.config", "git", name)
    return root / os.path.expanduser(named)


@dataclass(frozen=True)
class IgnoreRule:
    """The line that ignores a path: the file holding it and the pattern as written."""

    source: str
    pattern: str

    def __str__(self) -> str:
        return f"{self.source}: {self.pattern}"


@dataclass(frozen=True)
class _RuleFile:
    depth: int  # the folder it applies below: that many parts of a path from the top
    source: str
    rules: IgnoreFilter
    outside: bool  # outside the workspace: the project's own word


class OuterIgnores:
    """One repository's ignore files, each read once, judged for paths in the workspace at
    ``prefix`` (relative to the work tree's top ``root``)."""

    def __init__(self, root: Path, common_dir: Path, prefix: str, config: StackedConfig) -> None:
        self.root = root
        self._ignorecase = _boolean(config, b"ignorecase")
        self._prefix_parts = [p for p in prefix.split("/") if p]
        # git resolves a relative core.excludesFile from the work tree's top, and follows
        # symlinks to it and to info/exclude (dotfile managers link them); only the work
        # tree's own .gitignore files are never read through one.
        user_file = user_wide_file(config, b"excludesFile", "ignore", root)
        self._global = [
            _RuleFile(0, str(path), rules, True)
            for path in (user_file, common_dir / "info" / "exclude")
            if (rules := self._read(path, follow=True)) is not None
        ]
        self._folders: dict[tuple[str, ...], _RuleFile | None] = {}

    def _read(self, path: Path, *, follow: bool) -> IgnoreFilter | None:
        """The file's rules; None when it is not a regular file that can be read (git warns and
        goes on without it)."""
        flags = os.O_RDONLY | (0 if follow else getattr(os, "O_NOFOLLOW", 0)) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a FIFO: git reads none either
                os.close(fd)
                return None
            with os.fdopen(fd, "rb") as f:
                return IgnoreFilter(list(read_ignore_patterns(f)), self._ignorecase, path=str(path))
        except OSError:
            return None

    def _folder(self, parts: tuple[str, ...]) -> _RuleFile | None:
        if parts not in self._folders:
            path = self.root.joinpath(*parts) / ".gitignore"
            rules = self._read(path, follow=False)
            outside = len(parts) < len(self._prefix_parts)  # the workspace's own folder is inside
            self._folders[parts] = None if rules is None else _RuleFile(len(parts), str(path), rules, outside)
        return self._folders[parts]

    def rule_for(self, repo_path: str, *, is_dir: bool = False) -> IgnoreRule | None:
        """The rule outside the workspace by which ``repo_path`` (relative to the work tree's
        top) is ignored, or None. Ignored means git ignores it, and the files outside the
        workspace alone would too."""
        parts = repo_path.strip("/").split("/")
        outer = self._verdict(parts, is_dir, outside_only=True)
        if outer is None or self._verdict(parts, is_dir, outside_only=False) is None:
            return None
        return IgnoreRule(outer[0].source, outer[1].pattern.decode("utf-8", "replace"))

    def _verdict(self, parts: list[str], is_dir: bool, *, outside_only: bool) -> tuple[_RuleFile, Pattern] | None:
        """The exclude that decides the entry ``parts`` (git's walk: each folder above it first,
        then the entry), or None when it is not ignored."""
        for end in range(1, len(parts) + 1):
            deciding = self._deciding(parts[:end], end < len(parts) or is_dir, outside_only=outside_only)
            if deciding is not None and deciding[1].is_exclude:
                return deciding
        return None

    def _deciding(self, parts: list[str], is_dir: bool, *, outside_only: bool) -> tuple[_RuleFile, Pattern] | None:
        """The last matching pattern of the deepest file that has one for the entry ``parts``."""
        files = list(self._global)
        for depth in range(len(parts)):  # a folder's file applies to what lies below the folder
            rule_file = self._folder(tuple(parts[:depth]))
            if rule_file is not None:
                files.append(rule_file)
        for rule_file in reversed(files):
            if outside_only and not rule_file.outside:
                continue
            name = os.fsencode("/".join(parts[rule_file.depth :]))
            for pattern in reversed(rule_file.rules.patterns):
                if pattern.matches(name, is_dir):
                    return rule_file, pattern
        return None


def _boolean(config: StackedConfig, name: bytes) -> bool:
    try:
        return config.get_boolean((b"core",), name, False)
    except ValueError:
        return False  # a value git would also refuse: the strict reading is the safe one
