"""Branches: switching the checked-out branch (``dream run --branch``), creating it from HEAD when
missing, and rewriting only the versioned memory files to the other branch's content.
"""

from __future__ import annotations

from dulwich.refs import Ref

from dream_memory.adapters.git.base import HEADS, git_errors, local_branches, oid
from dream_memory.adapters.git.writing import Writing
from dream_memory.core import layout
from dream_memory.core.paths import branch_name_problem, describe
from dream_memory.errors import RepositoryStateError, UsageError, VersionStoreError


class Branches(Writing):
    """The checked-out branch, switched with the memory files it holds."""

    @git_errors
    def checkout_branch(self, name: str) -> bool:
        """Make ``name`` the checked-out branch; create it from HEAD when missing (True if created).

        Switching to an existing branch that points elsewhere rewrites the versioned memory files
        to that branch's content (only those), after checking that none of them has unsaved edits.
        """
        problem = branch_name_problem(name)
        if problem is not None:
            raise UsageError(
                f"--branch {describe(name)} is not a branch name git accepts ({problem})",
                hint="name a branch as `git check-ref-format --branch` accepts it, e.g. memory/dream",
            )
        busy = self.in_progress()
        if busy is not None:
            what, fix = busy
            raise RepositoryStateError(f"cannot switch to branch {name}: {self.root} is in the middle of {what}: {fix}")
        ref = Ref(HEADS + name.encode("utf-8"))
        existing = local_branches(self.repo).get(name.encode("utf-8"))
        head = self.head()
        if existing is None:
            if head is not None:
                self.repo.refs.add_if_new(ref, oid(head), message=b"branch: created by dream-memory")
            self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
            return True
        target = existing.decode("ascii")
        if self.branch() == name:
            return False
        if target != head:
            dirty = self.dirty(dream_owned=True)  # switching would overwrite them too
            if dirty:
                raise VersionStoreError(
                    f"cannot switch to branch {name}: memory files have uncommitted edits ({', '.join(dirty)})"
                )
            old_files = self.files_at(head)
            new_files = self.files_at(target)
            other = self._other_differences(head, target)
            if other:
                raise VersionStoreError(
                    f"cannot switch to branch {name}: it differs from HEAD outside the memory files ({other[0]}, ...)",
                    hint="check the branch out with git before running Dream",
                )
            writes: dict[str, bytes | None] = {}
            for rel in sorted(set(old_files) | set(new_files)):
                if old_files.get(rel) != new_files.get(rel):
                    writes[rel] = self.blob(new_files[rel][1]) if rel in new_files else None
            self.write_files(writes)
            self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
            self.sync_index(writes, target)
            return False
        self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), ref)
        return False

    @git_errors
    def _other_differences(self, a: str | None, b: str | None) -> list[str]:
        """Repository paths outside this workspace's versioned files that differ between commits."""

        def everything(sha: str | None) -> dict[bytes, bytes]:
            if sha is None:
                return {}
            tree = self._commit(sha).tree
            return {
                e.path: e.sha
                for e in self.repo.object_store.iter_tree_contents(tree)
                if e.path is not None and e.sha is not None
            }

        left, right = everything(a), everything(b)
        out: list[str] = []
        for path in sorted(set(left) | set(right)):
            if left.get(path) == right.get(path):
                continue
            rel = self._rel(path)
            if rel is None or not (self.is_versioned(rel) or layout.matches_any(rel, layout.CARRIED_PATTERNS)):
                out.append(path.decode("utf-8", errors="replace"))
        return out
