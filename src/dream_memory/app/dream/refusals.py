"""What a Dream run refuses before it changes anything (dry runs included): each state in which
dreaming would commit something wrong, named with the way out (exit 2)."""

from __future__ import annotations

from pathlib import Path

from dream_memory.adapters.workspace import private_scope_files
from dream_memory.app.dream.options import DreamContext
from dream_memory.errors import UsageError


def refuse_before_any_change(ctx: DreamContext) -> None:
    _refuse_after_an_interrupted_forget(ctx.root)
    _refuse_private_scopes_without_rules(ctx)


def _refuse_after_an_interrupted_forget(root: Path) -> None:
    """Beyond the commit, a run would dream from entries still holding the value; a dry run is
    refused too, so what it shows is what the run would do."""
    from dream_memory.app.history import refuse_while_a_purge_is_unfinished

    refuse_while_a_purge_is_unfinished(root, "dream run")


def _refuse_private_scopes_without_rules(ctx: DreamContext) -> None:
    """A workspace that keeps private scopes, run without its scope rules (a scheduled job that
    lost DREAM_CONFIG, a config file not found): every entry would be shared, and private ones
    would be filed into the files every reader is served."""
    if ctx.options.scopes.configured:
        return
    kept = next(private_scope_files(ctx.root), None)
    if kept is not None:
        raise UsageError(
            f"this workspace keeps private scopes ({kept}), but no scope rules are configured: dreaming now would "
            "file private entries into the shared files every reader is served",
            hint="give the config that holds agents.defaults.scopes (--config, DREAM_CONFIG, <workspace>/dream.json); "
            "to stop using scopes, move the scopes/ folder out of the workspace first",
        )
