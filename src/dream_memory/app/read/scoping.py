"""The reader's scope (docs/read-side.md#scopes): who is reading, and what that reader may see.

Every read door (``dream context``, ``entity``, ``section``, ``search``, ``resolve``, ``why``,
``blame``, the MCP server and the Python API) serves a caller in one scope: ``--scope NAME``,
``--session-key KEY`` (the scope the configured rules give that key), or, for a server or a
scheduled agent, ``DREAM_MEMORY_SCOPE`` / ``DREAM_MEMORY_SESSION_KEY``. A caller who names none
reads as the shared scope. What a scope sees is ``core.scopes``' rule: the shared files, plus a
private scope's own ``scopes/<...>/USER.md`` and ``MEMORY.md``; history entries count as their
session key's scope.

Nothing here reads a file: the rules come from the caller (loaded from the config only when a
session key or history needs them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dream_memory.core import scopes
from dream_memory.core.scopes import SHARED, ScopeRules
from dream_memory.errors import Spelling, UsageError

if TYPE_CHECKING:
    import os

    from dream_memory.core.ports import StoreTree

SCOPE_VARIABLE = "DREAM_MEMORY_SCOPE"
SESSION_KEY_VARIABLE = "DREAM_MEMORY_SESSION_KEY"

# Section names that reach a private scope's own files (``dream section private-user``).
PRIVATE_SECTIONS: dict[str, str] = {"private-user": "USER.md", "private-memory": "MEMORY.md"}
# What a source entry of a scope the reader cannot see shows instead of its content.
OTHER_SCOPE_ENTRY = "an entry of another scope"


@dataclass(frozen=True)
class ReaderScope:
    """A reader's scope and the rules that tell which scope a history entry belongs to.

    ``rules`` None means none were needed (no history is read): every entry then counts as
    shared, which is also what a workspace without rules gets. ``session_key`` is the caller's
    own key when it named one (``dream context`` then shows that session's recent history).
    """

    name: str = SHARED
    rules: ScopeRules | None = None
    session_key: str | None = None

    @property
    def private(self) -> bool:
        return self.name != SHARED

    def sees(self, path: str) -> bool:
        """True when this reader may read the workspace-relative ``path``."""
        return scopes.can_see(self.name, path)

    def problem(self, path: str) -> str | None:
        """Why this reader may not read ``path`` (None when it may); names no content."""
        return scopes.read_problem(self.name, path)

    def sees_entry(self, session_key: str | None) -> bool:
        """True when a history entry with this session key is one this reader may see."""
        if self.rules is None or not self.rules.configured:
            return True
        return self.rules.scope_of(session_key) in scopes.visible_scopes(self.name)

    @property
    def filters_history(self) -> bool:
        """True when some history entries may be hidden from this reader."""
        return self.rules is not None and self.rules.configured

    def own_files(self) -> tuple[str, ...]:
        """A private scope's own files (``scopes/<...>/USER.md``, ``MEMORY.md``); none for shared."""
        return scopes.scope_files(self.name) if self.private else ()

    def own_sections(self) -> dict[str, str]:
        """Section name -> file of a private scope's own files (``private-user`` -> its USER.md)."""
        if not self.private:
            return {}
        return {name: f"{scopes.folder(self.name)}/{base}" for name, base in PRIVATE_SECTIONS.items()}

    def private_section(self, name: str) -> str | None:
        """The file a ``private-user`` / ``private-memory`` section name reaches for this reader;
        None for any other name. A shared reader asking for one gets the error saying why."""
        base = PRIVATE_SECTIONS.get(name.casefold())
        if base is None:
            return None
        if not self.private:
            from dream_memory.errors import NotFound

            raise NotFound.naming(
                lambda o: (
                    f"section {name!r} is a private scope's own file, and this reader's scope is shared",
                    f"give {o('--scope')} NAME or {o('--session-key')} KEY (or DREAM_MEMORY_SCOPE) to read as a "
                    "private scope"
                    if o("--scope")
                    else "a reader's scope is set when it starts, never by a call: one started for a private "
                    "scope reads its own sections",
                )
            )
        return self.own_sections()[name.casefold()]

    def label(self) -> str:
        return "the shared scope" if not self.private else f"scope {self.name}"


SHARED_READER = ReaderScope()


def _flag(option: str) -> Callable[[Spelling], str]:
    return lambda o: o(option)


def _fixed(name: str) -> Callable[[Spelling], str]:
    return lambda o: name


_SCOPE_FLAG = _flag("--scope")


def check_scope_name(name: str, *, where: Callable[[Spelling], str] = _SCOPE_FLAG) -> str:
    """A scope name as given by a caller, or exit 2 naming the problem; ``where`` names where it
    came from (an option, as the face spells it, or a variable)."""
    clean = name.strip()
    problem = scopes.scope_name_problem(clean)
    if problem is not None:
        raise UsageError.naming(
            lambda o: (
                f"{where(o)}: {problem}",
                "a scope is 'shared' or a name such as user:alice (lower-case parts joined by ':')",
            )
        )
    return clean


def caller_scope(
    scope: str | None,
    session_key: str | None,
    env: Mapping[str, str],
    rules: Callable[[], ScopeRules],
    *,
    need_rules: bool = False,
) -> ReaderScope:
    """The caller's scope: ``--scope`` or ``--session-key`` (not both), else the environment's
    ``DREAM_MEMORY_SCOPE`` or ``DREAM_MEMORY_SESSION_KEY`` (not both), else shared.

    ``rules`` is called (the config loaded) only when a session key is given or ``need_rules``
    (the caller reads history, whose entries are judged by their keys)."""
    where_scope, where_key = _SCOPE_FLAG, _flag("--session-key")
    if scope is None and session_key is None:
        scope, session_key = env.get(SCOPE_VARIABLE) or None, env.get(SESSION_KEY_VARIABLE) or None
        where_scope, where_key = _fixed(SCOPE_VARIABLE), _fixed(SESSION_KEY_VARIABLE)
    if scope is not None and session_key is not None:
        raise UsageError.naming(
            lambda o: (
                f"give either {where_scope(o)} or {where_key(o)}, not both",
                f"{where_key(o)} derives the scope from the configured rules (agents.defaults.scopes)",
            )
        )
    loaded = rules() if session_key is not None or need_rules else None
    if session_key is not None:
        if not session_key.strip():
            raise UsageError.naming(lambda o: (f"{where_key(o)} is empty", "give the session key, e.g. telegram:42"))
        assert loaded is not None
        return ReaderScope(loaded.scope_of(session_key), loaded, session_key)
    if scope is not None:
        name = check_scope_name(scope, where=where_scope)
        if need_rules and name != SHARED and (loaded is None or not loaded.configured):
            # Without rules every entry counts as shared: a private reader would be served every
            # person's history (the config not found, say), so it is refused instead.
            raise UsageError.naming(
                lambda o: (
                    f"{where_scope(o)} names the private scope {name!r}, but no scope rules are configured, so "
                    "history entries cannot be told apart by person",
                    "give the config that holds agents.defaults.scopes "
                    f"({', '.join(filter(None, (o('--config'), 'DREAM_CONFIG', '<workspace>/dream.json')))})",
                )
            )
        return ReaderScope(name, loaded)
    return ReaderScope(SHARED, loaded)


def as_reader_scope(scope: str | ReaderScope | None) -> ReaderScope:
    """A scope name (checked) or a ``ReaderScope`` as one; None is the shared reader."""
    if scope is None:
        return SHARED_READER
    if isinstance(scope, ReaderScope):
        return scope
    return ReaderScope(check_scope_name(scope, where=_fixed("scope")))


def private_identities(tree: StoreTree, scope: ReaderScope) -> tuple[set[object], set[object]]:
    """(identities of the private files ``scope`` cannot see, of those it can): device and inode
    of each regular file below ``scopes/``. A symlink or a hard link elsewhere in the store that
    reaches a hidden one is withheld too; one that reaches the reader's own is read, never put
    in the search index (which every reader of the store shares). Empty at a revision: git holds
    no hard links and the read side skips symlinks there, while equal contents share one blob
    (a private USER.md still equal to the template must not hide the shared one)."""
    hidden: set[object] = set()
    own: set[object] = set()
    if tree.revision is not None:
        return hidden, own
    stats: dict[str, os.stat_result] = {}
    listed = set(tree.list_markdown(scopes.SCOPES_DIR, stats))
    for rel, st in stats.items():
        if rel in listed:
            (own if scope.sees(rel) else hidden).add((st.st_dev, st.st_ino))
    return hidden, own
