"""What one reader of a store may not see: the entities ``DREAM_MEMORY_EXCLUDE`` names, and the
files below ``scopes/`` of scopes other than its own, under any name (an index row's File, a
symlink, a hard link: by file identity). ``app.read.store.ReadStore`` reads through these rules;
they live here so the store's reads and its withholding can each be read whole.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

from dream_memory.app.read.scoping import ReaderScope, private_identities
from dream_memory.app.read.text import EXCLUDE_VARIABLE, MAX_SEARCH_FILE_BYTES, SECTION_ALIASES
from dream_memory.core import layout
from dream_memory.core.index_table import IndexRow, IndexTable, name_key, parse_index, safe_relative
from dream_memory.core.ports import StoreTree, TooLarge
from dream_memory.errors import Refused, Withheld


class Withholding(ABC):
    """The excludes and scope rules of ``ReadStore`` (whose fields these are)."""

    root: object
    excludes: frozenset[str]
    home: str | None
    scope: ReaderScope
    open_tree: Callable[..., StoreTree]
    _tree: StoreTree
    _excluded_ids: set[object] | None
    _private_ids: tuple[set[object], set[object]] | None

    @property
    @abstractmethod
    def index(self) -> IndexTable:
        """The store's index table, as ``ReadStore`` parses it (once, on first use)."""

    def is_excluded_name(self, name: str) -> bool:
        return name_key(name) in self.excludes

    def excluded_files(self, rows: Iterable[tuple[str, str]] | None = None) -> set[str]:
        """Files of excluded entities (casefolded). With ``--at``, the rows of today's index count
        too, so an entity excluded now stays hidden in a revision that mapped it elsewhere."""
        if not self.excludes:
            return set()
        pairs = list(rows) if rows is not None else [(r.entity, r.file) for r in self.index.rows]
        if self._tree.revision is not None:
            pairs += self._rows_of_today()
        files: set[str] = set()
        for entity, file in pairs:
            if name_key(entity) in self.excludes:
                rel = safe_relative(file) if file else None
                if rel:
                    files.add(name_key(rel))
        return files

    def _rows_of_today(self) -> list[tuple[str, str]]:
        """The (entity, file) rows of index.md as it is now (read with ``--at``)."""
        now = self.open_tree(self.root, None)
        try:
            today = now.read(layout.INDEX, MAX_SEARCH_FILE_BYTES)
        except (Refused, TooLarge):
            today = None
        finally:
            now.close()
        if not today:
            return []
        return [(r.entity, r.file) for r in parse_index(today.decode("utf-8", "replace"), home=self.home).rows]

    def excluded_identities(self) -> set[object]:
        """The file identities (device and inode; the blob with ``--at``) of every excluded
        entity's file: a second name for the same file (a hard link, a symlink, another index
        row spelling the path differently) is withheld too."""
        if self._excluded_ids is None:
            ids: set[object] = set()
            if self.excludes:
                excluded = self.excluded_files()
                rels = {
                    rel
                    for entity, file in [(r.entity, r.file) for r in self.index.rows]
                    if name_key(entity) in self.excludes and file and (rel := safe_relative(file))
                }
                rels.update(
                    rel for rel in self._tree.list_markdown(layout.ENTITIES_DIR) if self.is_excluded_path(rel, excluded)
                )
                for rel in rels:
                    ident = self._tree.identity(rel)
                    if ident is not None:
                        ids.add(ident)
            self._excluded_ids = ids
        return self._excluded_ids

    def _refuse_same_file(self, rel: str, ident: object) -> None:
        if ident is not None and ident in self.excluded_identities():
            raise Withheld(
                f"{rel} is the same file as an entity excluded by {EXCLUDE_VARIABLE} (a link or a second "
                "index row); it is not served"
            )

    def hidden_identities(self) -> set[object]:
        """The identities of the files below ``scopes/`` this reader's scope cannot see: a link
        or a second name for one of them is withheld like the file itself."""
        if self._private_ids is None:
            self._private_ids = private_identities(self._tree, self.scope)
        return self._private_ids[0]

    def own_identities(self) -> set[object]:
        """The identities of this reader's own private files (a link to one is never indexed)."""
        self.hidden_identities()
        assert self._private_ids is not None
        return self._private_ids[1]

    def _refuse_hidden(self, rel: str, ident: object | None = None) -> None:
        problem = self.scope.problem(rel)
        if problem is None and ident is not None and ident in self.hidden_identities():
            problem = f"{rel} is the same file as one of another scope (a link to it)"
        if problem is not None:
            raise Withheld(f"{problem}; it is not served", hint=f"this reader reads as {self.scope.label()}")

    def is_excluded_path(self, rel: str, excluded_files: set[str] | None = None) -> bool:
        """True for a file that belongs to an excluded entity (by the index, or by its name under
        entities/)."""
        if not self.excludes:
            return False
        files = self.excluded_files() if excluded_files is None else excluded_files
        if name_key(rel) in files:
            return True
        if rel.startswith(layout.ENTITIES_DIR + "/") and rel.endswith(".md"):
            stem = rel.rsplit("/", 1)[-1][:-3]
            under = rel[len(layout.ENTITIES_DIR) + 1 : -3]
            return name_key(stem) in self.excludes or name_key(under) in self.excludes
        return False

    def withholds(self, rel: str) -> bool:
        """True for a file of an excluded entity: by its path, or as the same file under another
        name (a link, another row's File)."""
        if not self.excludes:
            return False
        if self.is_excluded_path(rel):
            return True
        ident = self._tree.identity(rel)
        return ident is not None and ident in self.excluded_identities()

    def _unseen(self, rows: Iterable[IndexRow]) -> frozenset[str]:
        """The entities (name keys) whose File this reader may not read, by its path or as a link
        to such a file (another scope's, an excluded entity's): not even their names are shown
        to it, since a name alone can say whom the scope is about."""
        return frozenset(
            name_key(r.entity) for r in rows if r.file and (rel := safe_relative(r.file)) and self._hides(rel)
        )

    def _hides(self, rel: str) -> bool:
        hidden = self.hidden_identities() | self.excluded_identities()
        return not self.scope.sees(rel) or (bool(hidden) and self._tree.identity(rel) in hidden)

    def entity_names(self) -> list[str]:
        """Known, visible entities: index rows first, then entity files without a row (the
        "known entities" of a hint: another scope's never among them)."""
        unseen = self._unseen(self.index.rows)
        names = [n for n in self.index.names() if not self.is_excluded_name(n) and name_key(n) not in unseen]
        known = {n.casefold() for n in names}
        excluded_files = self.excluded_files()
        for rel in self._tree.list_markdown(layout.ENTITIES_DIR):
            name = rel[len(layout.ENTITIES_DIR) + 1 : -3]
            if name.casefold() not in known and not self.is_excluded_path(rel, excluded_files) and not self._hides(rel):
                names.append(name)
                known.add(name.casefold())
        return names

    def section_names(self) -> list[str]:
        excluded_files = self.excluded_files()
        names = [
            rel[len(layout.SECTIONS_DIR) + 1 : -3]
            for rel in self._tree.list_markdown(layout.SECTIONS_DIR)
            if not self.is_excluded_path(rel, excluded_files)
        ]
        return [*SECTION_ALIASES, *self.scope.own_sections(), *names]
