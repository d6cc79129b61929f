"""`dream forget`'s rewrite of git history: every commit reachable from any ref, with the value
replaced in the files dream-memory writes and in messages, refs and reflogs moved, the objects
nothing reaches pruned, and the force-push each remote then needs (docs/forget.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dream_memory.core import forget as rules
from dream_memory.core import layout

if TYPE_CHECKING:
    from dream_memory.adapters.git import GitStore
    from dream_memory.app.forget import ForgetReport


def _git_scope(rel: str) -> bool:
    """The files the purge rewrites in commits: every file dream-memory writes (memory files,
    and the history files an enclosing repository may carry). Anything else is the user's, and
    is reported when it holds the value (docs/forget.md)."""
    return layout.is_tracked(rel) or layout.matches_any(rel, layout.CARRIED_PATTERNS) or rel == ".gitignore"


def purge_git(git: GitStore, target: rules.Target, report: ForgetReport, *, dry_run: bool) -> None:
    from dream_memory.adapters.git import prune, rewrite

    repo_rules = rewrite.Rules(
        in_scope=_git_scope,
        blob=lambda rel, data: rules.purge_bytes(rel, data, target),
        name=lambda rel: rules.purge_name(rel, target),
        message=lambda message: rules.purge_message(message, target),
        holds=target.holds,
    )
    rewriter = rewrite.Rewriter(git.repo, git.prefix, repo_rules)
    old_head = git.head()
    plan = rewriter.run()
    report.commits = plan.commits
    report.commits_holding = plan.holding
    report.commits_rewritten = plan.rewritten
    report.remotes = prune.remotes(git.repo)
    if plan.outside:
        shown = ", ".join(sorted(plan.outside)[:5])
        report.warnings.append(
            f"{len(plan.outside)} file(s) in git history that are not memory files hold it ({shown}); "
            "dream forget changes only the files dream-memory writes: remove it from those with git filter-repo"
        )
    alternates = prune.alternates(git.repo)
    if alternates:
        report.warnings.append(
            "this repository borrows objects from another (objects/info/alternates): old commits there are not pruned"
        )
    linked = prune.linked_worktrees(git.repo)
    if linked:
        report.warnings.append(
            f"linked worktrees ({', '.join(linked[:3])}): their HEADs follow the rewrite, but their indexes and "
            "files are theirs (what they hold is kept): run `git checkout --force` in each after the purge"
        )
    if dry_run:
        report.refs = rewrite.planned_refs(git.repo, rewriter)
        report.push = _push_commands(git, report.refs, report.remotes)
        _add_remote_warning(report)
        return
    rewrite.store_objects(git.repo, plan)
    report.refs = rewrite.move_refs(git.repo, rewriter)
    report.reflog_lines = rewrite.rewrite_reflogs(git.repo, rewriter)
    rewrite.rewrite_message_files(git.repo, rewriter)
    new_head = git.head()
    if new_head is not None:
        paths = {p for p in git.files_at(old_head) if _git_scope(p)} if old_head else set()
        paths |= {p for p in git.files_at(new_head) if _git_scope(p)}
        git.sync_index(sorted(paths), new_head)
    report.pruned = prune.prune(git.repo.path).objects
    report.push = _push_commands(git, report.refs, report.remotes)
    _add_remote_warning(report)


_UNTRACKED = ("refs/tags/", "refs/notes/")


def _push_commands(git: GitStore, refs: dict[str, tuple[str, str]], remotes: list[str]) -> list[str]:
    """Per remote, one ``git push --force-with-lease`` for the rewritten branches, each leased on
    the id the remote was last seen with (its remote-tracking ref), so a push someone made since
    is never overwritten; then one for the rewritten tags and notes refs (Dream's provenance
    notes among them), leased on their old ids, needed only where the remote holds them."""
    from dream_memory.adapters.git import rewrite

    commands: list[str] = []
    for remote in remotes:
        tracking = f"refs/remotes/{remote}/"
        leases: list[str] = []
        specs: list[str] = []
        branches = {name[len(tracking) :]: old for name, (old, _) in refs.items() if name.startswith(tracking)}
        branches.pop("HEAD", None)
        for branch, old in sorted(branches.items()):
            local = f"refs/heads/{branch}"
            leases.append(f"--force-with-lease={local}:{old}")
            specs.append(
                f"{local if local in refs or rewrite.ref_exists(git.repo, local) else tracking + branch}:{local}"
            )
        if not branches:
            for name, (old, _) in sorted(refs.items()):
                if name.startswith("refs/heads/"):
                    leases.append(f"--force-with-lease={name}:{old}")
                    specs.append(f"{name}:{name}")
        if specs:
            commands.append(" ".join(["git", "push", *leases, remote, *specs]))
        # Tags and notes have no remote-tracking refs, so whether the remote holds them is not
        # known here: a command of their own, leased on the old id, which git refuses ("stale
        # info") where the remote never had them, and the branches' push above is not blocked by it.
        extra = [(name, old) for name, (old, _) in sorted(refs.items()) if name.startswith(_UNTRACKED)]
        if extra:
            leases = [f"--force-with-lease={name}:{old}" for name, old in extra]
            commands.append(" ".join(["git", "push", *leases, remote, *(f"{name}:{name}" for name, _ in extra)]))
    return commands


def _add_remote_warning(report: ForgetReport) -> None:
    if not report.remotes or not report.commits_rewritten:
        return
    report.warnings.append(
        "the old commits are still on the remote and in every clone, fork and pull request made from it: "
        "force-push (the commands above), ask each clone to re-clone, and ask the host to drop forks' and "
        "pull requests' copies (GitHub keeps refs/pull/* and cached views until its support purges them)"
    )
