"""The package's one error root and its kinds.

Adapters wrap third-party exceptions into these (``raise ... from exc``); the CLI turns them into
exit codes in exactly one place (``entrypoints.cli``). Each kind carries its exit code so the
mapping lives next to the meaning rather than in a table someone has to keep in step.

Messages are written for the person reading a terminal or a CI log: they name the file, field,
path or variable at fault and say what to do, and they never echo a value that might be secret.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

Spelling = Callable[[str], str]
"""How a face spells an option the caller gave, from its CLI flag: "--as-of" -> "asOf" for the
MCP tools; "" when the face takes no such option (an MCP server's scope is fixed at start)."""
Wording = Callable[[Spelling], tuple[str, "str | None"]]


def cli_spelling(option: str) -> str:
    return option


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 75


class DreamError(Exception):
    """Root of every error this package raises on purpose."""

    exit_code: int = EXIT_FAILED
    wording: Wording | None = None  # set by naming(): the text for a face that spells options its own way

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return _with_hint(self.message, self.hint)

    @classmethod
    def naming(cls, wording: Wording) -> Self:
        """An error whose message or hint names an option the caller gives. The service words it
        once, as a function of the option's spelling; ``message`` and ``hint`` are the CLI's, and
        ``spelled`` renders it for a face whose options are not the CLI's flags (an MCP client
        told to pass --as-of cannot: its tools take asOf)."""
        message, hint = wording(cli_spelling)
        error = cls(message, hint=hint)
        error.wording = wording
        return error

    def spelled(self, spelling: Spelling) -> str:
        """``str(self)`` with the options named as ``spelling`` names them."""
        if self.wording is None:
            return str(self)
        return _with_hint(*self.wording(spelling))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled without ``wording`` (a closure, which pickle refuses: an error raised in a
        process pool's worker reached its caller as an AttributeError, not as itself) and rebuilt
        without calling ``__init__``, whose arguments differ by kind (RestoreConflict's paths)."""
        state = {name: value for name, value in vars(self).items() if name != "wording"}
        return (_rebuilt, (type(self), self.args, state))

    def respell(self, spelling: Spelling) -> None:
        """Word this error in place as ``spelling`` names the options, for a face that raises it
        on to its caller (the Python API): the same object, so its class, exit code, cause and
        traceback are the ones the service gave it."""
        if self.wording is not None:
            self.message, self.hint = self.wording(spelling)
            self.args = (self.message,)


def _with_hint(message: str, hint: str | None) -> str:
    return f"{message}\n  hint: {hint}" if hint else message


def _rebuilt(kind: type[DreamError], args: tuple[Any, ...], state: dict[str, Any]) -> DreamError:
    error = kind.__new__(kind, *args)
    error.args = args
    vars(error).update(state)
    return error


class UsageError(DreamError):
    """The command line asked for something that cannot be done as asked."""

    exit_code = EXIT_USAGE


class ConfigError(DreamError):
    """A configuration file, preset or environment variable is wrong or missing."""

    exit_code = EXIT_USAGE


class InputError(DreamError):
    """Input data (a history line, a session file, an index table, an argument) is unusable."""

    exit_code = EXIT_USAGE


class NoWorkspace(InputError):
    """The path names no workspace (docs/reference/files.md says what counts as one); only
    ``dream init`` creates one, so a mistyped path never becomes a new, empty workspace."""


class HistoryError(DreamError):
    """history.jsonl or its cursors cannot be read or written."""


class WorkspaceError(DreamError):
    """A workspace file cannot be read or written."""


class WorkspaceUnusable(WorkspaceError):
    """The workspace cannot be used as it is: no permission, a read-only filesystem, a folder
    where a file belongs. Running again will not help until someone fixes it, hence exit 2."""

    exit_code = EXIT_USAGE


class VersionStoreError(DreamError):
    """The git repository cannot be read or written."""


class UnknownRevision(VersionStoreError):
    """A commit prefix or range names nothing, or more than one thing."""

    exit_code = EXIT_USAGE


class UnsafeTree(VersionStoreError):
    """A commit holds a path that would lead outside the workspace or into ``.git`` (a crafted
    tree); it is never written, deleted or served."""

    exit_code = EXIT_USAGE


class RepositoryStateError(VersionStoreError):
    """The repository is in a state no commit may be made in (a merge or rebase in progress,
    unmerged files, a detached HEAD of dream-memory's own repository); nothing was changed."""

    exit_code = EXIT_USAGE


class RepositoryChanged(VersionStoreError):
    """The repository's pack files were replaced while they were read (a repack by ``dream
    forget`` or ``git gc``); running the command again reads the new ones."""

    exit_code = EXIT_LOCKED


class RestoreConflict(VersionStoreError):
    """A restore would overwrite later work; nothing was changed."""

    def __init__(
        self, message: str, paths: list[str], *, hint: str | None = None, forcing: str = "put the files back anyway"
    ) -> None:
        """The hint is ``hint``, else to re-run with the force option, which does ``forcing``."""
        super().__init__(message, hint=hint or f"re-run with --force to {forcing}")
        self.paths = paths
        if hint is None:
            self.wording = lambda o: (message, f"re-run with {o('--force')} to {forcing}")


class NotFound(DreamError):
    """The read side found no entity, section or resolution for the request."""


class Refused(DreamError):
    """The read side refuses the request (excluded entity, path outside the store, binary)."""


class Withheld(Refused):
    """The read side withholds an entity or a file: excluded, or of a scope the reader cannot see."""


class ModelError(DreamError):
    """A model call failed.

    ``retryable`` marks transient failures (rate limit, timeout, connection, 5xx) that are retried
    with backoff and never count against a batch; everything else (auth, bad request) is final.
    ``kind`` is a short machine-readable tag used in reports: ``auth``, ``rate_limit``,
    ``timeout``, ``connection``, ``server``, ``bad_request``, ``bad_reply``, ``budget``.
    """

    def __init__(self, message: str, *, kind: str, retryable: bool, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.retryable = retryable


class BadReply(ModelError):
    """The model answered, but not with something usable (empty, cut off, error text, stray tools).

    A content failure: it counts against the batch, unlike transport errors.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, kind="bad_reply", retryable=False, hint=hint)


class EditRejected(DreamError):
    """An edit_file/write_file call cannot be applied; the message is written for the model."""


class ToolDenied(EditRejected):
    """A tool call names a path Dream may not touch; the message is written for the model."""


class LockBusy(DreamError):
    """Another process holds the lock; nothing was done."""

    exit_code = EXIT_LOCKED


class NotAvailable(UsageError):
    """A command exists in the interface but is not built yet."""
