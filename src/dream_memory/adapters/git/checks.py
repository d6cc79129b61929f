"""What a change to the repository must pass before anything is written: every path a memory
file (``core.paths``), no git operation under way, no detached HEAD of a repository we made,
an index dulwich can rewrite without losing what the user staged, no file under a git filter,
and, in a repository not ours, no file its own ignore rules keep out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from dream_memory.adapters.git.base import name_bytes
from dream_memory.adapters.git.reading import Reading
from dream_memory.core.paths import describe, memory_write_problem
from dream_memory.errors import RepositoryStateError, VersionStoreError

if TYPE_CHECKING:
    from dream_memory.adapters.git.ignores import IgnoreRule, OuterIgnores


class Checks(Reading):
    """Refusals made before a commit, a write or a branch switch changes anything."""

    def _check_index(self) -> None:
        """Refuse before anything changes when an index exists that we could not rewrite safely:
        writing a fresh one would unstage everything the user has staged."""
        if self._index_file().exists() and self._open_index() is None:
            raise VersionStoreError(
                f"the git index of {self.root} is in a form dulwich cannot rewrite safely"
                " (split, sparse or unreadable); nothing was changed",
                hint="there: `git update-index --no-split-index` or `git sparse-checkout disable`, then retry",
            )

    def check_paths(self, paths: Iterable[str]) -> None:
        """Refuse, before anything is written, a path a memory commit must never hold: one that
        leaves the workspace, enters .git, or is not a versioned memory file."""
        for rel in paths:
            problem = memory_write_problem(rel, gitignore=self.created)
            if problem is not None:
                raise VersionStoreError(
                    f"refusing to commit or write {describe(rel)}: {problem}; nothing was changed",
                    hint="only the memory files of docs/versioning.md are ever written",
                )

    def outer_ignores(self) -> OuterIgnores:
        from dream_memory.adapters.git.ignores import OuterIgnores

        # info/exclude is the common git folder's: a linked worktree has none of its own
        return OuterIgnores(self.root, Path(self.repo.commondir()), self.prefix, self.repo.get_config_stack())

    def tracks(self, rel: str) -> bool:
        """The index holds ``rel`` (or, with no index, HEAD does): git commits it whatever an
        ignore rule says."""
        index = self._open_index()
        if index is not None:
            return self.repo_path(rel) in index
        return rel in self.entries_at(self.head(), [rel])

    def _tracks_in_workspace(self) -> bool:
        index = self._open_index()
        if index is not None:
            below = name_bytes(self.prefix + "/")
            return any(path.startswith(below) for path in index.paths())
        return bool(self.files_at(self.head()))  # workspace-relative: only what lies in it

    def ignored_workspace(self) -> IgnoreRule | None:
        """The rule by which a repository that is not ours ignores the workspace folder by name
        (``agents/``), when it tracks nothing in it: such a workspace gets a repository of its
        own, which that repository's git never sees. (A rule on what the folder holds,
        ``agents/bot/*``, leaves the folder in sight: a repository there would show in its
        ``git status``, so that case is refused per file instead.)"""
        if self.created or not self.prefix:
            return None
        rule = self.outer_ignores().rule_for(self.prefix, is_dir=True)
        return None if rule is None or self._tracks_in_workspace() else rule

    def check_ignored(self, changes: Mapping[str, bytes | None]) -> None:
        """In a repository that is not ours, refuse, before anything is written, to commit a
        memory file its ignore rules outside the workspace keep out (a project's ``agents/`` or
        ``USER.md`` line) and that it does not track yet: the project said the file must not
        enter it, and a push would publish it. A file it tracks is committed as git would."""
        written = _written(changes)
        if self.created or not written:
            return
        ignores = self.outer_ignores()
        refused: list[tuple[str, IgnoreRule]] = []
        for rel in written:
            shown = self.repo_path(rel).decode("utf-8", "replace")
            rule = ignores.rule_for(shown)
            if rule is not None and not self.tracks(rel):
                refused.append((shown, rule))
        if not refused:
            return
        shown, rule = refused[0]
        others = ", ".join(p for p, _ in refused[1:4]) + (", ..." if len(refused) > 4 else "")
        more = f" (and {len(refused) - 1} more: {others})" if len(refused) > 1 else ""
        where = self.prefix or "."
        if self._tracks_in_workspace():
            # Already holding memory it now ignores: every new memory file would be refused.
            hint = (
                f"un-ignore the memory in {rule.source} (a `!` line after `{rule.pattern}`), or move it "
                f"to a repository of its own: `git -C {self.root} rm -r -q --cached {where}` and "
                f"`git init {self.workspace}`, then run again"
            )
        else:
            hint = (
                f"give the workspace a repository of its own (`git init {self.workspace}`, then run "
                f"again), or un-ignore it in {rule.source} (a `!` line after `{rule.pattern}`)"
            )
        raise RepositoryStateError(
            f"{shown}{more} is ignored by the repository at {self.root} ({rule}): "
            "dream-memory does not commit into a repository a file it ignores; nothing was committed",
            hint=hint,
        )

    def commit_refusal(self, paths: Iterable[str]) -> RepositoryStateError | None:
        """Why a commit of ``paths`` as they are on disk would be refused (a file the enclosing
        repository ignores, or one under a git filter), or None: ``dream doctor`` asks."""
        changes: dict[str, bytes | None] = dict.fromkeys(paths, b"")
        try:
            self.check_filters(changes)
            self.check_ignored(changes)
        except RepositoryStateError as exc:
            return exc
        return None

    def check_filters(self, changes: Mapping[str, bytes | None]) -> None:
        """Refuse, before anything is written, to commit a memory file with a ``filter``
        attribute (git-crypt, git-lfs): dulwich stores the bytes on disk as the blob, without
        running the filter, so with git-crypt the memory would be committed, and pushed, in
        plaintext."""
        written = _written(changes)
        if not written:
            return
        from dream_memory.adapters.git.attributes import Attributes

        attributes = Attributes(self.root, Path(self.repo.commondir()), self._user_attributes())
        for rel in written:
            found = attributes.filter_source(self.repo_path(rel))
            if found is not None:
                name, source = found[0].decode("utf-8", "replace"), found[1]
                shown = self.repo_path(rel).decode("utf-8", "replace")
                if source.name == ".gitattributes" and source.parent != self.root:
                    # A pattern with a slash is read from that file's own folder.
                    shown = str(PurePosixPath(shown).relative_to(source.parent.relative_to(self.root).as_posix()))
                raise RepositoryStateError(
                    f"{rel} has the git filter {name!r} ({source}): dream-memory commits a file as "
                    "it is on disk, without running filters, so the commit would hold it unfiltered "
                    "(with git-crypt: in plaintext); nothing was committed",
                    # A later line of the same file wins, whichever file it is.
                    hint=f"unset the filter for the memory files (a line `{shown} -filter` at the end of "
                    f"{source}), or keep the workspace in a repository of its own",
                )

    def _user_attributes(self) -> Path:
        from dream_memory.adapters.git.ignores import user_wide_file

        return user_wide_file(self.repo.get_config_stack(), b"attributesFile", "attributes", self.root)

    def check_writable(self, paths: Iterable[str]) -> None:
        """Refuse, before a commit is made, to write files that cannot be reached without going
        through a symlink (a commit whose files could not be written would say what is not)."""
        self.check_paths(paths)
        for rel in paths:
            self.fs.check_reachable(rel)

    def in_progress(self) -> tuple[str, str] | None:
        """(the git operation under way in this repository, how to finish or abort it): a merge,
        rebase, cherry-pick, revert or unmerged files; None when there is none."""
        control = Path(self.repo.controldir())
        markers = (
            ("MERGE_HEAD", "a merge", "git merge --abort"),
            ("rebase-merge", "a rebase", "git rebase --abort"),
            ("rebase-apply", "a rebase or `git am`", "git rebase --abort"),
            ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --abort"),
            ("REVERT_HEAD", "a revert", "git revert --abort"),
        )
        found = next(((what, undo) for name, what, undo in markers if (control / name).exists()), None)
        conflicted: list[str] = []
        index = self._open_index()
        if index is not None and index.has_conflicts():
            from dulwich.index import ConflictedIndexEntry  # loaded with the index already

            conflicted = sorted(
                path.decode("utf-8", "replace")
                for path, entry in index.items()
                if isinstance(entry, ConflictedIndexEntry)
            )
        if found is None and not conflicted:
            return None
        what, undo = found or ("a conflicted operation (`git stash pop`, say)", "git checkout --merge or git reset")
        if conflicted:
            shown = ", ".join(conflicted[:3]) + (f" and {len(conflicted) - 3} more" if len(conflicted) > 3 else "")
            what += f" with unmerged files ({shown})"
        return what, f"resolve and commit it (git add, git commit) or abort it ({undo}), then run again"

    def check_can_commit(self) -> None:
        """Refuse to commit while git is in the middle of something, or on a detached HEAD of a
        repository dream-memory made (its commits would belong to no branch and be lost on the
        next checkout). A user's checkout may be detached: CI checks out a commit, not a branch.
        The fix is in the message itself: Dream's report carries only messages."""
        busy = self.in_progress()
        if busy is not None:
            what, fix = busy
            raise RepositoryStateError(f"{self.root} is in the middle of {what}: {fix}; dream-memory committed nothing")
        head = self.head()
        if self.created and head is not None and self.branch() is None:
            raise RepositoryStateError(
                f"HEAD of {self.root} is detached at {head[:10]}, so a commit would belong to no branch: "
                f"check a branch out (git -C {self.root} checkout main) or give dream run --branch NAME; "
                "dream-memory committed nothing"
            )


def _written(changes: Mapping[str, bytes | None]) -> list[str]:
    """The paths a commit of ``changes`` writes (None deletes), sorted."""
    return sorted(rel for rel, data in changes.items() if data is not None)
