"""Scopes: which people a memory line belongs to, derived from session keys (docs/scopes.md).

An agent that talks to several people keeps each private conversation apart. The config maps
session-key patterns to scope names (``agents.defaults.scopes``, first match wins)::

    {"telegram:-100*": "shared", "telegram:*": "user:{id}", "*": "user:{key}"}

- ``shared`` is the scope of the workspace's own files (SOUL.md, USER.md, memory/MEMORY.md,
  entities/, sections/, index.md, observations.md). It is the scope of every entry when no rule is
  configured, so a workspace without scopes behaves as before.
- Any other scope owns two files below ``scopes/``: ``user:alice`` has
  ``scopes/user/alice/USER.md`` and ``scopes/user/alice/MEMORY.md``. A name maps to its folder
  one to one (``:`` separates the folder levels), so no two scopes share a file.
- A scope sees its own files and the shared ones; ``shared`` sees only the shared ones. Nothing
  is visible across private scopes.
- A key no rule matches is ``shared``; a ``"*"`` rule last makes unmatched keys private instead.

Templates fill ``{key}`` (the whole session key), ``{channel}`` (before the first ``:``) and
``{id}`` (after it). A filled-in value is case-folded and every character outside
``[a-z0-9._-]`` is written as ``%XX`` (its UTF-8 bytes), so ``alice@example.com`` and
``alice_example.com`` stay two scopes and no value can make a path component of its own.

Pure: no filesystem, no environment. Problems are phrases a config error or a model can read.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dream_memory.core import layout

SHARED = "shared"
SCOPES_DIR = layout.SCOPES_DIR
# The files a private scope owns, by their name in its folder (the shared counterparts'
# basenames, so a reader knows what each holds).
SCOPE_FILES: tuple[str, ...] = ("USER.md", "MEMORY.md")

# A part: lower-case letters, digits, "._-" (not a leading dot) and %XX escapes; "%" alone is
# the empty value.
_COMPONENT = re.compile(r"%|(?:[a-z0-9_-]|%[0-9A-F]{2})(?:[a-z0-9._-]|%[0-9A-F]{2})*")
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_FIELDS = ("key", "channel", "id")
_MAX_NAME = 200


def _lower(char: str) -> str:
    """``char`` in lower case, one character for one, so values differing in more than the case
    of their letters stay apart. ``str.casefold`` merged people: ``straße`` and ``strasse`` (ß
    is "ss"), ``ﬁnn`` and ``finn``; and the Kelvin sign lowers to an ASCII ``k``. A character
    whose lower case is not one character, or is ASCII while it is not, stays as it is."""
    lower = char.lower()
    if char.isascii() or (len(lower) == 1 and not lower.isascii()):
        return lower
    return char


def encode_value(value: str) -> str:
    """A session-key part as one scope-name component: in lower case (``_lower``), ``%XX``
    outside ``[a-z0-9._-]``, a leading dot encoded (no hidden folder), the empty value as ``%``
    (which no encoding yields)."""
    if value == "":
        return "%"
    out: list[str] = []
    for i, char in enumerate(map(_lower, value)):
        if char in _SAFE and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", errors="surrogatepass"))
    return "".join(out)


def scope_name_problem(name: str) -> str | None:
    """Why ``name`` is not a scope name (None when it is): ``shared``, or components of
    ``[a-z0-9._%-]`` (not starting with a dot) joined by ``:``."""
    if not name:
        return "an empty scope name"
    if len(name) > _MAX_NAME:
        return f"a scope name longer than {_MAX_NAME} characters"
    if name == SHARED:
        return None
    for part in name.split(":"):
        if not _COMPONENT.fullmatch(part):
            return (
                f"the scope name {name!r}: each part between ':' must be lower-case letters, digits, "
                "'.', '_', '-' (not starting with '.')"
            )
    return None


def _template_problem(template: str) -> str | None:
    for field in _PLACEHOLDER.findall(template):
        if field not in _FIELDS:
            return f"the scope {template!r} names {{{field}}}; a scope may use {{key}}, {{channel}} and {{id}}"
    literal = _PLACEHOLDER.sub("x", template)
    if "{" in literal or "}" in literal:
        return f"the scope {template!r} has an unmatched brace"
    problem = scope_name_problem(literal)
    return None if problem is None else problem.replace(repr(literal), repr(template))


@dataclass(frozen=True)
class ScopeRules:
    """Session-key patterns (``fnmatch`` globs, case-sensitive) and the scope each maps to, in order."""

    rules: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, mapping: Mapping[str, str] | Iterable[tuple[str, str]]) -> ScopeRules:
        """The rules of a config's ``scopes`` object; ValueError naming the first bad one."""
        pairs = list(mapping.items()) if isinstance(mapping, Mapping) else list(mapping)
        for pattern, template in pairs:
            if not isinstance(pattern, str) or not pattern:
                raise ValueError("a scope rule has an empty session-key pattern")
            if not isinstance(template, str):
                raise ValueError(f"the rule for {pattern!r} must map to a scope name (a string)")
            problem = _template_problem(template)
            if problem is not None:
                raise ValueError(f"the rule for {pattern!r}: {problem}")
        return cls(tuple(pairs))

    @property
    def configured(self) -> bool:
        return bool(self.rules)

    def scope_of(self, session_key: str | None) -> str:
        """The scope of an entry or a caller with this session key (a missing key is ``""``)."""
        key = session_key or ""
        for pattern, template in self.rules:
            if fnmatch.fnmatchcase(key, pattern):
                return _fill(template, key)
        return SHARED


# A filled-in value longer than this keeps its head and a digest of the whole value: a scope name
# past _MAX_NAME is no scope at all, and its entries' facts had nowhere to go (each was reported
# "already in memory"). 22 CJK characters are 198 once encoded.
_MAX_VALUE = 64


def _fill(template: str, key: str) -> str:
    channel, _, ident = key.partition(":")
    values = {"key": key, "channel": channel, "id": ident}
    name = _PLACEHOLDER.sub(lambda m: _bounded(values[m.group(1)]), template)
    if name == SHARED and template != SHARED:
        # A value that reads "shared" ({id} of "mail:Shared") is a person, not the shared files.
        return "%73" + name[1:]
    if len(name) > _MAX_NAME:  # a template that repeats its placeholders: the whole name bounded
        return "%6B%65%79-" + _digest(key)  # "key" escaped
    return name


def _bounded(value: str) -> str:
    """The encoded value, or its head and a digest of it joined by ``%2D%2D``: an escaped "--",
    which ``encode_value`` never writes (it escapes no safe character), so no other value's
    name can be the same. The same trick names the whole-name and ``shared`` cases in ``_fill``."""
    encoded = encode_value(value)
    if len(encoded) <= _MAX_VALUE:
        return encoded
    head = encoded[: _MAX_VALUE - 30]
    cut = head.rfind("%")
    if cut >= len(head) - 2:  # never cut inside a %XX escape
        head = head[:cut]
    return f"{head}%2D%2D{_digest(value)}"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]


# --- where a scope's lines live ---------------------------------------------------------------


def folder(scope: str) -> str:
    """The workspace-relative folder of a private scope (``user:alice`` -> ``scopes/user/alice``)."""
    if scope == SHARED:
        raise ValueError("the shared scope has no folder of its own: its files are the workspace's")
    return f"{SCOPES_DIR}/{scope.replace(':', '/')}"


def scope_files(scope: str) -> tuple[str, ...]:
    """The files a batch of ``scope`` writes: a private scope's own two, or the shared ones' main files."""
    if scope == SHARED:
        return (layout.USER, layout.MEMORY)
    base = folder(scope)
    return tuple(f"{base}/{name}" for name in SCOPE_FILES)


def scope_of_path(path: str) -> str | None:
    """The scope owning a workspace-relative path: a private scope for a path below ``scopes/``
    (None when it is below ``scopes/`` but no scope's file: such a path is nobody's to read or
    write), else ``shared``."""
    if path != SCOPES_DIR and not path.startswith(SCOPES_DIR + "/"):
        return SHARED
    parts = path.split("/")[1:]
    # A ":" inside a folder name would read scopes/user:alice/USER.md as Alice's file, which her
    # readers never open (and Windows cannot name).
    if len(parts) < 2 or parts[-1] not in SCOPE_FILES or any(":" in part for part in parts[:-1]):
        return None
    name = ":".join(parts[:-1])
    return name if scope_name_problem(name) is None and name != SHARED else None


def visible_scopes(scope: str) -> frozenset[str]:
    """The scopes a reader in ``scope`` sees: itself and the shared one."""
    return frozenset({scope, SHARED})


def can_see(scope: str, path: str) -> bool:
    """True when a reader in ``scope`` may read ``path`` (a shared path, or one of its own files)."""
    owner = scope_of_path(path)
    return owner is not None and owner in visible_scopes(scope)


def read_problem(scope: str, path: str) -> str | None:
    """Why a batch or a reader in ``scope`` may not read ``path`` (None when it may)."""
    if can_see(scope, path):
        return None
    return f"{path} belongs to another scope; {_who(scope)} reads only {_readable(scope)}"


def write_problem(scope: str, path: str) -> str | None:
    """Why a batch of ``scope`` may not write ``path`` (None when it may), written for the model:
    facts go to the files of the scope their entries came from, never to another's."""
    owner = scope_of_path(path)
    if owner == scope:
        return None
    allowed = " and ".join(scope_files(scope))
    if scope == SHARED:
        return (
            f"{path} belongs to a private scope; these entries are shared, so their facts go to the "
            f"shared files ({allowed}, entities/, sections/)"
        )
    return (
        f"{path} is {'a shared file' if owner == SHARED else 'another scope'}'s; these entries are "
        f"private to scope {scope}, so their facts go only to {allowed}"
    )


def _who(scope: str) -> str:
    # Worded for both askers: a Dream batch (the model reads it) and a reader (why, blame, MCP).
    return "the shared scope" if scope == SHARED else f"scope {scope}"


def _readable(scope: str) -> str:
    if scope == SHARED:
        return "the shared files"
    return f"the shared files and {folder(scope)}/"


def is_private_file(path: str) -> bool:
    """True for one of a private scope's own files (``scopes/<...>/USER.md`` or ``MEMORY.md``)."""
    owner = scope_of_path(path)
    return owner is not None and owner != SHARED


def counterpart(path: str) -> str:
    """The shared file a scope file stands for (``scopes/user/alice/USER.md`` -> ``USER.md``), so
    the same sections and placement rules apply; any other path is itself."""
    if not is_private_file(path):
        return path
    return layout.USER if path.endswith("/USER.md") else layout.MEMORY


def new_file_text(path: str) -> str:
    """The first lines of a private scope's file Dream creates: what it is and who reads it."""
    scope = scope_of_path(path)
    title = "User" if path.endswith("/USER.md") else "Memory"
    return (
        f"# {title} ({scope})\n\n"
        f"Private to scope {scope}: only its own sessions read these lines,\n"
        "never a shared chat or another scope.\n"
    )
