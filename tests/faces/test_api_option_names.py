"""A Python API error names the option the way the method takes it: `as_of`, never the CLI's
`--as-of`, which a Python caller cannot pass. The messages come from the services the CLI shares,
which word them once (errors.DreamError.naming); the Workspace methods re-word them with their
keyword arguments and raise the same exception on (its class, exit code and cause), and the CLI
still names its flags, word for word as before."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dream_memory import Workspace
from dream_memory.adapters.git import GitStore
from dream_memory.app.versioning import apply_commit
from dream_memory.errors import ConfigError, DreamError, InputError, NotFound, RestoreConflict, UsageError
from dream_memory.settings import DEFAULT_GIT_AUTHOR
from dream_memory.testing import FrozenClock, build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]
FLAG = re.compile(r"--[a-z]")
CONFIG = "agents.defaults.scopes (Workspace(config=...), DREAM_CONFIG, <workspace>/dream.json)"


def _commit(ws: Path, files: dict[str, str], message: str) -> str:
    store = GitStore.open(ws, author=DEFAULT_GIT_AUTHOR, clock=FrozenClock(step=60))
    assert store is not None
    with store:
        sha = apply_commit(store, {rel: text.encode("utf-8") for rel, text in files.items()}, message)
    assert sha is not None
    return sha


def _user(ws: Path) -> str:
    return (ws / "USER.md").read_text(encoding="utf-8")


def _initialised(ws: Path, dream: Dream) -> Path:
    assert dream("init", "--workspace", str(ws)).returncode == 0
    return ws


def _conflicting(ws: Path) -> str:
    """Batch 1 adds two lines to USER.md and a later batch rewrites one of them: undoing batch 1
    is a conflict on that line. Returns batch 1's commit."""
    b1 = _user(ws) + "- Prefers tea over coffee\n- Uses vim\n"
    first = _commit(
        ws, {"USER.md": b1, "memory/.dream_cursor": "2\n"}, "dream: 1..2: USER.md +2 -0\n\nDream-Range: 1..2"
    )
    rewritten = b1.replace("- Uses vim\n", "- Uses neovim\n")
    _commit(
        ws, {"USER.md": rewritten, "memory/.dream_cursor": "3\n"}, "dream: 3..3: USER.md +1 -1\n\nDream-Range: 3..3"
    )
    return first


def _rangeless(ws: Path) -> str:
    """A Dream-like commit that records no history range: nothing for a replay to move back."""
    return _commit(ws, {"USER.md": _user(ws) + "- Uses vim\n"}, "dream: USER.md by hand")


def _undone_once(ws: Path, dream: Dream) -> str:
    """A batch undone without a replay; restoring it again with one is refused."""
    sha = _commit(
        ws, {"USER.md": _user(ws) + "- Uses vim\n", "memory/.dream_cursor": "1\n"}, "dream: 1..1\n\nDream-Range: 1..1"
    )
    assert dream("restore", sha, "--workspace", str(ws)).returncode == 0
    return sha


def _nothing(ws: Path) -> str:
    return ""


Prepare = Callable[[Path], str]
# (id, prepare the workspace (returns a commit, or ""), the API call, its exception class, what the
# API's message says, the CLI's command for the same input, what the CLI's message says)
CASES: list[tuple[str, Prepare, Callable[[Workspace, str], Any], type[DreamError], str, list[str], str]] = [
    ("as_of-not-a-date", _nothing, lambda w, _: w.section("memory", as_of="nope"), InputError,
     "as_of 'nope' is not a date", ["section", "memory", "--as-of", "nope"], "--as-of 'nope' is not a date"),
    ("as_of-no-such-month", _nothing, lambda w, _: w.entity("ledger-api", as_of="2026-13-45"), InputError,
     "as_of '2026-13-45' is not a date: month must be in 1..12", ["entity", "ledger-api", "--as-of", "2026-13-45"],
     "--as-of '2026-13-45' is not a date: month must be in 1..12"),
    ("as_of-bad-offset", _nothing, lambda w, _: w.section("memory", as_of="2026-04-05 10:00+99:99"), InputError,
     "as_of '2026-04-05 10:00+99:99' is not a date: the offset +99:99", ["section", "memory", "--as-of",
     "2026-04-05 10:00+99:99"], "--as-of '2026-04-05 10:00+99:99' is not a date: the offset +99:99"),
    ("as_of-before-the-first-commit", _nothing, lambda w, _: w.section("memory", as_of="2000-01-01"), InputError,
     "as_of 2000-01-01 is before the store's first commit", ["section", "memory", "--as-of", "2000-01-01"],
     "--as-of 2000-01-01 is before the store's first commit"),
    ("offset_line", _nothing, lambda w, _: w.section("memory", offset_line=0), InputError,
     "offset_line starts at 1", ["section", "memory", "--offset-line", "0"],
     "Invalid value for '--offset-line': 0 is not in the range x>=1"),
    ("no-model-configured", _nothing, lambda w, _: w.dream(), ConfigError,
     "hint: choose one with model=... (a preset name", ["run"],
     "hint: choose one with --model (a preset name"),
    ("private-section-on-shared", _nothing, lambda w, _: w.section("private-user"), NotFound,
     "hint: give scope NAME or session_key KEY (or DREAM_MEMORY_SCOPE) to read as a private scope",
     ["section", "private-user"], "hint: give --scope NAME or --session-key KEY (or DREAM_MEMORY_SCOPE)"),
    ("scope-and-session_key", _nothing, lambda w, _: w.context(scope="shared", session_key="cli:direct"), UsageError,
     "give either scope or session_key, not both\n  hint: session_key derives the scope",
     ["context", "--scope", "shared", "--session-key", "cli:direct"],
     "give either --scope or --session-key, not both\n  hint: --session-key derives the scope"),
    ("session_key-empty", _nothing, lambda w, _: w.search("tea", session_key=" "), UsageError,
     "session_key is empty", ["search", "tea", "--session-key", " "], "--session-key is empty"),
    ("scope-not-a-name", _nothing, lambda w, _: w.resolve(".", scope="Bad Name"), UsageError,
     "scope: the scope name 'Bad Name'", ["resolve", ".", "--scope", "Bad Name"], "--scope: the scope name 'Bad Name'"),
    ("private-scope-without-rules", _nothing, lambda w, _: w.context(scope="user:alice"), UsageError,
     f"scope names the private scope 'user:alice', but no scope rules are configured, so history entries cannot be "
     f"told apart by person\n  hint: give the config that holds {CONFIG}", ["context", "--scope", "user:alice"],
     "--scope names the private scope 'user:alice'"),
    ("context-budget", _nothing, lambda w, _: w.context(budget=5), InputError,
     "the context budget (budget) must be a whole number", ["context", "--budget", "5"],
     "the context budget (budget, --budget) must be a whole number"),
    ("append-session_key-empty", _nothing, lambda w, _: w.append("tea", session_key=" "), InputError,
     "session_key must not be empty", ["append", "tea", "--session-key", " "], "--session-key must not be empty"),
    ("review-nothing-named", _nothing, lambda w, _: w.review("accept"), InputError,
     "name the held changes (dream review lists their ids), or give every=True", ["review", "accept"],
     "name the held changes (dream review lists their ids), or give --all"),
    ("review-ids-and-all", _nothing, lambda w, _: w.review("accept", "abc", every=True), UsageError,
     "give ids or every=True, not both", ["review", "accept", "abc", "--all"], "give ids or --all, not both"),
    ("forget-neither", _nothing, lambda w, _: w.forget(), UsageError,
     "give exactly one of value TEXT and entity NAME", ["forget"], "give exactly one of --purge TEXT and --entity NAME"),
    ("run-batch_size", _nothing, lambda w, _: w.dream(model="offline", batch_size=0), InputError,
     "the batch size (batch_size) must be", ["run", "--model", "offline", "--batch-size", "0"],
     "the batch size (batch_size, --batch-size) must be"),
    ("run-max_batches", _nothing, lambda w, _: w.dream(model="offline", max_batches=0), InputError,
     "max batches (max_batches) must be", ["run", "--model", "offline", "--max-batches", "0"],
     "max batches (max_batches, --max-batches) must be"),
    ("run-max_cost", _nothing, lambda w, _: w.dream(model="offline", max_cost=-1), InputError,
     "the run's cost budget in USD (max_cost) must be", ["run", "--model", "offline", "--max-cost", "-1"],
     "the run's cost budget in USD (max_cost, --max-cost) must be"),
    ("consolidate-no-sessions", _nothing, lambda w, _: w.consolidate(model="offline", sessions=[]), UsageError,
     "say which sessions to consolidate\n  hint: leave sessions out (None) for every session of the workspace",
     ["consolidate", "--model", "offline"],
     "hint: pass --all for every session of the workspace, or --session FILE (repeatable)"),
    ("consolidate-budget", _nothing, lambda w, _: w.consolidate(model="offline", budget=-1), InputError,
     "the consolidation budget (budget) must be", ["consolidate", "--model", "offline", "--all", "--budget", "-1"],
     "the consolidation budget (budget, --budget) must be"),
    ("restore-conflict", _conflicting, lambda w, sha: w.restore(sha), RestoreConflict,
     "hint: re-run with force=True to take the restore's side in those lines only", ["restore", "{sha}"],
     "hint: re-run with --force to take the restore's side in those lines only"),
    ("restore-replay-without-range", _rangeless, lambda w, sha: w.restore(sha, replay=True), UsageError,
     "records no history range (Dream-Range), so replay=True has nothing to move back",
     ["restore", "{sha}", "--replay"], "records no history range (Dream-Range), so --replay has nothing to move back"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("prepare", "call", "kind", "api_says", "command", "cli_says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_an_api_error_names_the_methods_own_argument(
    tmp_path: Path,
    dream: Dream,
    clean_env: dict[str, str],
    prepare: Prepare,
    call: Callable[[Workspace, str], Any],
    kind: type[DreamError],
    api_says: str,
    command: list[str],
    cli_says: str,
) -> None:
    """Before, each of these told a Python caller to pass a CLI flag (--as-of, --scope, --all,
    --force, ...); the CLI's message for the same input is unchanged."""
    api_ws = _initialised(build_workspace(tmp_path / "api"), dream)
    cli_ws = _initialised(build_workspace(tmp_path / "cli"), dream)
    api_sha, cli_sha = prepare(api_ws), prepare(cli_ws)

    with pytest.raises(kind) as raised:
        call(Workspace(api_ws, env=clean_env), api_sha)
    error = raised.value
    text = str(error)
    assert api_says in text, text
    assert not FLAG.search(text), text
    assert text == (f"{error.message}\n  hint: {error.hint}" if error.hint else error.message)

    args = [a.replace("{sha}", cli_sha) for a in command]
    done = dream(*args, "--workspace", str(cli_ws))
    assert done.returncode == error.exit_code, done.stdout + done.stderr
    assert cli_says in done.stderr, done.stderr


def test_the_api_keeps_the_exception_its_cause_and_exit_code(tmp_path: Path, dream: Dream) -> None:
    """Re-worded, the error is still the one the service raised: an InputError with exit code 2
    and the ValueError that made the date invalid as its cause."""
    ws = _initialised(build_workspace(tmp_path / "ws"), dream)
    with pytest.raises(InputError) as raised:
        Workspace(ws).section("memory", as_of="2026-02-30")
    assert raised.value.exit_code == 2
    assert isinstance(raised.value.__cause__, ValueError)
    assert str(raised.value).startswith("as_of '2026-02-30' is not a date: day is out of range for month")
    assert raised.value.spelled(lambda flag: flag).startswith("--as-of '2026-02-30' is not a date")


def test_drop_as_of_on_a_store_without_git(tmp_path: Path, dream: Dream, clean_env: dict[str, str]) -> None:
    ws = build_workspace(tmp_path / "plain")
    with pytest.raises(UsageError) as raised:
        Workspace(ws, env=clean_env).section("memory", as_of="2026-04-04")
    assert "as_of needs a store versioned in git" in str(raised.value) and not FLAG.search(str(raised.value))
    assert raised.value.hint == "drop as_of to read the files as they are now"
    done = dream("section", "memory", "--as-of", "2026-04-04", "--workspace", str(ws))
    assert "hint: drop --as-of to read the files as they are now" in done.stderr, done.stderr


def test_a_replay_of_a_batch_undone_without_one(tmp_path: Path, dream: Dream, clean_env: dict[str, str]) -> None:
    """The message names replay=True; the hint's `dream restore ... --replay` is a command to run,
    which the API leaves as it is (as it does `dream init --workspace` for a missing workspace)."""
    api_ws = _initialised(build_workspace(tmp_path / "api"), dream)
    cli_ws = _initialised(build_workspace(tmp_path / "cli"), dream)
    api_sha, cli_sha = _undone_once(api_ws, dream), _undone_once(cli_ws, dream)
    with pytest.raises(UsageError) as raised:
        Workspace(api_ws, env=clean_env).restore(api_sha, replay=True)
    assert ", without replay=True; nothing was changed" in raised.value.message, raised.value.message
    done = dream("restore", cli_sha, "--replay", "--workspace", str(cli_ws))
    assert done.returncode == 2 and ", without --replay; nothing was changed" in done.stderr, done.stderr


def _section_as_of(workspace: str, as_of: str) -> str:
    return Workspace(workspace).section("memory", as_of=as_of).text


def test_an_error_worded_for_the_api_crosses_a_process_pool_as_itself(tmp_path: Path) -> None:
    """A Workspace call made in a process pool's worker: its InputError reaches the caller as an
    InputError with the API's words (pickled without the service's wording, a closure pickle
    refuses: the caller got an AttributeError "Can't pickle local object" instead)."""
    from concurrent.futures import ProcessPoolExecutor

    ws = build_workspace(tmp_path / "ws")
    Workspace(ws).init()
    with ProcessPoolExecutor(1) as pool, pytest.raises(InputError) as raised:
        pool.submit(_section_as_of, str(ws), "nope").result()
    assert raised.value.exit_code == 2
    assert str(raised.value).startswith("as_of 'nope' is not a date"), str(raised.value)
    conflict = RestoreConflict("USER.md changed since", ["USER.md"])
    with ProcessPoolExecutor(1) as pool:
        back = pool.submit(_pickled_back, conflict).result()
    assert type(back) is RestoreConflict and back.paths == ["USER.md"] and str(back) == str(conflict)


def _pickled_back(error: DreamError) -> DreamError:
    return error
