"""The ``filter`` attribute git gives a path, read the way git reads it: the work tree's
``.gitattributes`` from the repository's top folder down to the path's own (a deeper file wins,
and a later line within one file), then ``$GIT_DIR/info/attributes`` over all of them, with
``[attr]`` macros (as git-crypt's documentation suggests: ``[attr]crypt filter=git-crypt``)
expanded, and the user-wide file (``core.attributesFile``, else
``$XDG_CONFIG_HOME/git/attributes``) below all of them. dulwich's own reader expands no macro,
and which files it reads changed within the versions this package accepts.
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from dulwich.attrs import Pattern, parse_git_attributes

from dream_memory.errors import RepositoryStateError

AttributeValue = bytes | bool | None
Rules = list[tuple[bytes, dict[bytes, AttributeValue]]]
_MACRO = b"[attr]"


class Attributes:
    """One repository's attribute files, each read and parsed once however many paths ask."""

    def __init__(self, root: Path, control: Path, user_file: Path | None = None) -> None:
        self.root = root
        self.control = control
        self.user_file = user_file  # core.attributesFile, else $XDG_CONFIG_HOME/git/attributes
        self._parsed: dict[Path, Rules | None] = {}

    def filter_of(self, repo_path: bytes) -> bytes | None:
        """The filter driver git would run on ``repo_path`` (relative to ``root``, the work
        tree's top), or None when the attribute is unset or unspecified."""
        found = self.filter_source(repo_path)
        return None if found is None else found[0]

    def filter_source(self, repo_path: bytes) -> tuple[bytes, Path] | None:
        """``filter_of``'s driver with the file whose line set it (the one a person must edit)."""
        parts = repo_path.split(b"/")
        files = [(self.user_file, 0)] if self.user_file is not None else []  # the lowest
        files += [
            (
                self.root.joinpath(*(p.decode("utf-8", "surrogateescape") for p in parts[:depth])) / ".gitattributes",
                depth,
            )
            for depth in range(len(parts))
        ]
        files.append((self.control / "info" / "attributes", 0))
        macros: dict[bytes, dict[bytes, AttributeValue]] = {}
        found: AttributeValue = None
        source = self.root / ".gitattributes"
        for path, depth in files:
            below = b"/".join(parts[depth:])
            for pattern, attrs in self._rules(path) or ():
                if pattern.startswith(_MACRO):
                    if depth == 0:  # git accepts macros only at the top and in info/attributes
                        macros[pattern[len(_MACRO) :]] = attrs
                    continue
                if not Pattern(pattern).match(below):
                    continue
                for name, value in attrs.items():
                    if name == b"filter":
                        found, source = value, path
                    elif value is True and b"filter" in macros.get(name, {}):
                        found, source = macros[name][b"filter"], path
        return (found, source) if isinstance(found, bytes) else None

    def _rules(self, path: Path) -> Rules | None:
        if path not in self._parsed:
            # git warns and goes on without a user-wide file it cannot read (a service user's
            # HOME in someone else's folder); the repository's own files must be read
            data = _read(path, required=path != self.user_file)
            self._parsed[path] = (
                None if data is None else [(p, dict(a)) for p, a in parse_git_attributes(BytesIO(data))]
            )
        return self._parsed[path]


def _read(path: Path, *, required: bool = True) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None  # git ignores a folder named .gitattributes too
    except OSError as exc:
        if not required:
            return None
        raise RepositoryStateError(
            f"cannot read {path} ({exc.strerror}): it may set a git filter on a memory file; nothing was committed",
            hint="make it readable, or remove it",
        ) from exc
