"""What every command shares: the error boundary, workspace/config options, JSON output.

Command modules import only click and the standard library at module level, so that
``dream --help`` stays fast (no pydantic, dulwich or litellm); use cases are imported inside the
command functions.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dream_memory.core.terminal import for_terminal, json_for_terminal

if TYPE_CHECKING:
    from dream_memory.app.runtime import Runtime
    from dream_memory.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    print(f"dream: warning: {for_terminal(str(message))}", file=sys.stderr)


def _fail(message: str, code: int, *, hint: str | None = None) -> None:
    click.echo(f"dream: error: {for_terminal(message)}" + (f"\n  hint: {for_terminal(hint)}" if hint else ""), err=True)
    raise click.exceptions.Exit(code)


def _stdout_closed(exc: BaseException) -> bool:
    """True when ``exc`` is (or wraps) a broken pipe and it is stdout's reader that went away
    (`dream log | head -1`), not a pipe to some other process."""
    while exc is not None and not isinstance(exc, BrokenPipeError):
        exc = exc.__cause__  # type: ignore[assignment]
    if exc is None:
        return False
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (a test runner's buffer)
        return True


def _quiet_exit_on_closed_stdout() -> None:
    """Like git killed by SIGPIPE: no message, exit 141; stdout is pointed at /dev/null so that
    Python's flush at exit does not print its own complaint."""
    import os

    from dream_memory.app import outcome

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    raise click.exceptions.Exit(outcome.EXIT_BROKEN_PIPE)


class DreamCommand(click.Command):
    """A command whose DreamErrors and returned reports become exit codes (``app.outcome``'s
    table, docs/reference/exit-codes.md); an int result is its exit code.

    This is the one place exit codes happen. It works the same whether the command is reached
    through the ``dream`` group, through an alias script (``dream-run``) or through click's test
    runner.
    """

    def invoke(self, ctx: click.Context) -> Any:
        from dream_memory.app import outcome
        from dream_memory.errors import DreamError

        warnings.showwarning = _show_warning
        try:
            result = super().invoke(ctx)
        except DreamError as exc:
            if _stdout_closed(exc):
                _quiet_exit_on_closed_stdout()
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", outcome.EXIT_INTERRUPTED)
        except OSError as exc:
            if _stdout_closed(exc):
                _quiet_exit_on_closed_stdout()
            # The adapters wrap what they expect; this is the net under the rest.
            error = outcome.os_error(exc)
            _fail(str(error), error.exit_code)
        except RecursionError as exc:
            error = outcome.as_error(exc)
            _fail(error.message, error.exit_code, hint=error.hint)
        code = result if isinstance(result, int) else outcome.exit_code(result)
        if code != 0:
            raise click.exceptions.Exit(code)
        return result


def command(*args: Any, **kwargs: Any) -> Callable[[F], click.Command]:
    kwargs.setdefault("cls", DreamCommand)
    kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
    return click.command(*args, **kwargs)  # type: ignore[no-any-return]


def workspace_options(func: F) -> F:
    """``--workspace`` and ``--config``, on every command (docs/reference/commands.md)."""
    func = click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config file (default: $DREAM_CONFIG, <workspace>/dream.json, ~/.nanoinfra/config.json).",
    )(func)
    return click.option(
        "--workspace",
        "-w",
        # A file here is the commands' own one-line error (naming `dream init`), not click's
        # usage error: the services check the workspace (adapters/workspace.require_workspace).
        metavar="DIRECTORY",
        type=click.Path(),
        default=None,
        help="Workspace folder (default: $DREAM_WORKSPACE, else ~/.nanoinfra/workspaces/default).",
    )(func)


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")


def load_settings(workspace: str | None, config_path: str | None) -> Settings:
    from dream_memory.settings import load_settings as _load

    return _load(workspace, config_path)


def runtime(
    workspace: str | None, config_path: str | None, *, store: str | None = None, require: bool = True
) -> Runtime:
    """The one Runtime of a command: settings resolved once, log lines on stderr. The workspace
    must exist (exit 2 naming the path and `dream init`) unless ``require`` is False: only
    `dream init` makes one, and eval and doctor look at it their own way."""
    from dream_memory.app.runtime import Runtime

    rt = Runtime.load(workspace, config_path).with_store(store)
    if require:
        rt.require_workspace()
    return rt


def emit_json(value: Any) -> None:
    """JSON on stdout through ``json_for_terminal``, the one rendering of every JSON face."""
    click.echo(json_for_terminal(value))


def echo(text: str = "", *, nl: bool = True) -> None:
    """A human rendering on stdout: store and model text may hold escape sequences, which are
    shown, never sent to the terminal (``core.terminal``)."""
    click.echo(for_terminal(text), nl=nl)


def note(message: str) -> None:
    """Progress for humans: stderr, so stdout stays the result (escapes shown, never sent)."""
    click.echo(for_terminal(message), err=True)
