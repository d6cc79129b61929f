"""Fixtures every test folder may use: a real workspace on disk, the real-workspace corpus, and
the environment of a clean machine (an empty HOME, no DREAM_* variables), for ``dream`` run in
this process (``dream``) or as a process of its own (``dream_process``)."""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace
from dream_memory.testing import clean_env as make_clean_env

REPO_ROOT = Path(__file__).resolve().parent.parent


def fixtures_dir() -> Path:
    """The fixture root: $DREAM_FIXTURES, else the `shared/fixtures` folder beside the checkout."""
    configured = os.environ.get("DREAM_FIXTURES")
    return Path(configured) if configured else REPO_ROOT.parent / "shared" / "fixtures"


FIXTURES_ROOT = fixtures_dir() / "real-workspaces"

# `dream` as a real process, whether or not the console scripts are on PATH.
DREAM = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]

Dream = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temp folder every user can reach (pytest's own lies below a folder only root may enter),
    for the cases run as another uid; folders a test closed are opened again before removal."""
    folder = Path(tempfile.mkdtemp(prefix="dream-open-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh workspace with its templates (no history, no repository)."""
    return build_workspace(tmp_path / "ws")


@pytest.fixture
def fixtures_root() -> Path:
    """The real-workspace corpus under the fixture root (read only; never copied into the project)."""
    if not FIXTURES_ROOT.is_dir():
        pytest.skip(f"{FIXTURES_ROOT} is absent (set DREAM_FIXTURES to the folder holding real-workspaces/)")
    return FIXTURES_ROOT


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """A machine with no configuration at all: HOME is an empty folder (so no git identity and
    no ~/.nanoinfra), no system git config, no DREAM_* variables."""
    return make_clean_env(tmp_path / "home")


@pytest.fixture
def dream(clean_env: dict[str, str]) -> Dream:
    """Run ``dream ARGS...`` in this process on a clean machine (click's CliRunner); returns a
    completed process, as ``dream_process`` does: the exit code, stdout, and stderr (with the
    traceback appended when the command crashed, so `"Traceback" not in stderr` keeps its
    meaning). Every variable of the clean machine is set and every other one unset while it runs.
    ``timeout`` is accepted for the same signature (pytest-timeout bounds the test)."""
    from click.testing import CliRunner

    from dream_memory.entrypoints.cli import cli

    def run(
        *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        del timeout
        merged = {**clean_env, **(env or {})}
        patch: dict[str, str | None] = dict.fromkeys((k for k in os.environ if k not in merged), None)
        patch.update(merged)
        result = CliRunner().invoke(cli, list(args), input=input, env=patch, catch_exceptions=True, prog_name="dream")
        err = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            err += "".join(traceback.format_exception(result.exception))
        return subprocess.CompletedProcess(["dream", *args], result.exit_code, result.stdout, err)

    return run


@pytest.fixture
def dream_process(clean_env: dict[str, str]) -> Dream:
    """Run ``dream ARGS...`` as a separate process on a clean machine; returns the completed
    process. For tests whose point is the process boundary: exit codes of the real interpreter,
    signals and kills, locks held by another process, start-up imports."""

    def run(
        *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*DREAM, *args],
            input=input.encode("utf-8") if isinstance(input, str) else input,
            capture_output=True,
            env={**clean_env, **(env or {})},
            timeout=timeout,
        )
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        )

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that read the real-workspace corpus carry the `fixtures` mark (`-m "not fixtures"`
    leaves them out on a machine without it). The slow tests run first: with `-n 2 --dist
    worksteal` (.ci/run) the long ones start early instead of ending up last on one worker
    while the other waits. A test beside nanobot is slow too: each drives real nanobot processes
    from their own venv (about 1 CPU s each; a fifth of the quick tier's child CPU went there)."""
    for item in items:
        if {"fixtures_root", "fixture_sessions"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.fixtures)
        if item.get_closest_marker("nanobot") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-log",
        metavar="PATH",
        help="append one line per test to PATH: node id, CPU seconds of the test process, CPU seconds"
        " of the child processes it waited for (where the suite's CPU goes: issue 16's CI budget)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """With ``--cpu-log``: each test's own CPU and its children's, from ``getrusage``. Children
    count once reaped (a killed child too); grandchildren count when their parent reaped them."""
    path = item.config.getoption("--cpu-log")
    if not path:
        yield
        return
    import resource

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    yield
    line = f"{item.nodeid}\t{cpu(resource.RUSAGE_SELF) - own:.3f}\t{cpu(resource.RUSAGE_CHILDREN) - children:.3f}\n"
    with open(path, "a", encoding="utf-8") as log:  # one short append per test: xdist workers share it
        log.write(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close the HTTP clients litellm cached. litellm keeps one per endpoint for the life of the
    process (a host reuses it; ``LiteLLMChatModel.close`` leaves it alone), and the suite starts a
    scripted server per test, so each worker ended holding dozens; at exit they were printed as
    ``sys:1: ResourceWarning: unclosed <socket ...>``, noise in which a real leak would hide."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    # Looked up, not assumed: another litellm version may keep its clients elsewhere (then only
    # the lines at exit come back).
    cached = getattr(getattr(litellm, "in_memory_llm_clients_cache", None), "cache_dict", {})
    for client in list(cached.values()):
        close = getattr(client, "close", None)
        # dream's calls are synchronous; an async client's close would only make a coroutine
        if callable(close) and not inspect.iscoroutinefunction(close):
            with contextlib.suppress(Exception):  # closed already, or a client of another kind
                close()
