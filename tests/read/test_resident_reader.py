"""`dream search` answered by a resident reader (`dream mcp`) over the store's unix socket:
real processes, real sockets, temporary stores (docs/read-side.md#the-resident-reader).

Whether the server answered is told by the client process itself: an answered search never
imports click (the one-shot command does), and the client below writes down which it was.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from read_helpers import FILES, read_env, rewrite_in_place, snapshot, write_store

from dream_memory.adapters import read_socket
from dream_memory.app.read import resident

pytestmark = pytest.mark.slow  # each test starts dream mcp as a process (about 1.5 CPU s before it answers)

ONE_SHOT = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'dream'; from dream_memory.entrypoints.cli import main; main()",
]
# The console script's main; at exit it writes to argv[1] whether the CLI (click) was loaded.
CLIENT = [
    sys.executable,
    "-c",
    "import atexit, sys\n"
    "mark = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(mark, 'w').write('one-shot' if 'click' in sys.modules else 'served'))\n"
    "sys.argv[0] = 'dream'\n"
    "from dream_memory.entrypoints.dream_script import main\n"
    "main()\n",
]

Run = tuple[int, str, str]


def big_store(root: Path) -> Path:
    """The sample store plus enough entities for the search index (500 files or more)."""
    extra = {f"entities/e{i:03}.md": f"# e{i}\n\n- filler text number {i}\n" for i in range(520)}
    return write_store(root, {**FILES, **extra})


def folder(store: Path, env: dict[str, str]) -> Path:
    """Where the socket of ``store`` is, for a process with ``env``."""
    found = read_socket.server_folder(str(store), env)
    assert found is not None
    return Path(found)


class Server:
    def __init__(self, store: Path, env: dict[str, str]) -> None:
        self.store = store
        self.folder = folder(store, env)
        self.proc = subprocess.Popen(
            [*ONE_SHOT, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        while read_socket.ask(str(self.folder), {"v": 0}, 1.0) is None:  # answers (declines) once it listens
            if self.proc.poll() is not None:
                raise AssertionError(f"dream mcp ended: {self.proc.stderr.read()!r}")  # type: ignore[union-attr]
            # Not a busy loop: asking ~80,000 times took the CPU the starting server needed (2 cores).
            time.sleep(0.01)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            assert stream is not None
            stream.close()


def make_env(root: Path) -> dict[str, str]:
    store = big_store(root / "store")
    (root / "cache").mkdir()
    return read_env(store, XDG_CACHE_HOME=str(root / "cache"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return make_env(tmp_path)


@pytest.fixture
def store(env: dict[str, str]) -> Path:
    return Path(env["DREAM_MEMORY_STORE"])


@pytest.fixture
def server(store: Path, env: dict[str, str]) -> Iterator[Server]:
    s = Server(store, env)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One store and one server for the comparisons that only ask (none writes or stops the
    server): a server and its index per case cost about a CPU second each. Yields the env."""
    env = make_env(tmp_path_factory.mktemp("shared"))
    s = Server(Path(env["DREAM_MEMORY_STORE"]), env)
    yield env
    s.stop()


def one_shot(args: list[str], env: dict[str, str]) -> Run:
    done = subprocess.run([*ONE_SHOT, "search", *args], env=env, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def client(args: list[str], env: dict[str, str], tmp_path: Path) -> tuple[Run, str]:
    mark = tmp_path / "how"
    done = subprocess.run([*CLIENT, str(mark), "search", *args], env=env, capture_output=True, text=True, check=False)
    return (done.returncode, done.stdout, done.stderr), mark.read_text()


ANSWERED = [
    ["flakes"],
    ["flakes", "--json"],
    ["colmena flakes", "--max-results", "2"],
    ["Colmena", "--max-results=1", "--json"],
    ['"dark mode"'],
    ["nothing-matches-this"],
    ["nothing-matches-this", "--json"],
    ["flakes", "--no-cache"],
    ["flakes", "--scope", "telegram:42"],
    ["filler", "--max-results", "50"],
]


@pytest.mark.parametrize("args", ANSWERED, ids=" ".join)
def test_a_served_search_prints_what_the_one_shot_search_prints(
    shared: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    env = shared
    expected = one_shot(args, env)
    assert expected[0] == 0
    assert client(args, env, tmp_path) == (expected, "served")


@pytest.mark.parametrize(
    "args",
    [
        [""],  # empty query: exit 2
        ["flakes", "--max-results", "0"],  # exit 2
        ["flakes", "--bogus"],  # click's usage error
        ["flakes", "--at", "HEAD"],  # not a repository
        ["flakes", "--history"],  # needs the config file
        ["flakes", "--help"],
        ["flakes", "--scope", "a", "--session-key", "b"],
    ],
    ids=" ".join,
)
def test_errors_help_and_history_are_the_one_shot_commands_own(
    shared: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    assert client(args, shared, tmp_path) == (one_shot(args, shared), "one-shot")


def test_the_clients_environment_shapes_the_answer_not_the_servers(
    server: Server, env: dict[str, str], tmp_path: Path
) -> None:
    hidden = {**env, "DREAM_MEMORY_EXCLUDE": "secret,nix-old"}
    expected = one_shot(["flakes"], hidden)
    assert "secret" not in expected[1]
    assert client(["flakes"], hidden, tmp_path) == (expected, "served")
    # named by --store rather than the environment: the same store, served
    by_option = {k: v for k, v in env.items() if k not in ("DREAM_MEMORY_STORE", "DREAM_WORKSPACE")}
    args = ["flakes", "--store", str(server.store)]
    assert client(args, by_option, tmp_path) == (one_shot(args, by_option), "served")


def test_an_in_place_edit_is_seen_through_the_server(server: Server, env: dict[str, str], tmp_path: Path) -> None:
    assert client(["pytest"], env, tmp_path)[1] == "served"  # the index and the watch are warm
    rewrite_in_place(server.store / "entities" / "dream.md", b"pytest", b"flakes")
    run, how = client(["flakes", "--max-results", "50"], env, tmp_path)
    assert how == "served"
    assert "entities/dream.md" in run[1]
    assert run == one_shot(["flakes", "--max-results", "50"], env)
    assert client(["pytest"], env, tmp_path)[0][1] == ""


def test_a_stale_socket_falls_back_and_the_next_server_replaces_it(
    store: Path, env: dict[str, str], tmp_path: Path
) -> None:
    first = Server(store, env)
    first.stop()  # SIGKILL: the socket is left behind
    sock = first.folder / read_socket.SOCKET_NAME
    assert stat.S_ISSOCK(sock.lstat().st_mode)
    assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "one-shot")
    second = Server(store, env)
    try:
        assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "served")
        # a second live server does not take the socket over: the first one keeps answering
        third = subprocess.Popen([*ONE_SHOT, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert client(["flakes"], env, tmp_path)[1] == "served"
        finally:
            assert third.stdin is not None and third.stdout is not None
            third.stdin.close()
            third.wait()
            third.stdout.close()
        assert client(["flakes"], env, tmp_path)[1] == "served"  # its exit removed nothing of ours
    finally:
        second.stop()


def test_a_socket_folder_open_to_others_is_not_trusted(server: Server, env: dict[str, str], tmp_path: Path) -> None:
    server.folder.chmod(0o755)
    try:
        assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "one-shot")
    finally:
        server.folder.chmod(0o700)
    assert client(["flakes"], env, tmp_path)[1] == "served"


def test_a_socket_folder_that_is_a_symlink_or_holds_no_socket_is_not_used(
    store: Path, env: dict[str, str], tmp_path: Path
) -> None:
    elsewhere = big_store(tmp_path / "elsewhere")
    other = Server(elsewhere, {**env, "DREAM_MEMORY_STORE": str(elsewhere), "DREAM_WORKSPACE": str(elsewhere)})
    ours = folder(store, env)
    try:  # a live server's socket is what the symlink leads to
        ours.symlink_to(other.folder)
        assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "one-shot")
    finally:
        other.stop()
    ours.unlink()
    ours.mkdir(mode=0o700)
    (ours / read_socket.SOCKET_NAME).write_text("not a socket")
    assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "one-shot")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_socket_owned_by_another_user_is_not_used(server: Server, env: dict[str, str], tmp_path: Path) -> None:
    sock = server.folder / read_socket.SOCKET_NAME
    os.chown(sock, 65534, 65534, follow_symlinks=False)
    assert client(["flakes"], env, tmp_path) == (one_shot(["flakes"], env), "one-shot")


def test_a_request_for_another_store_is_declined(server: Server, env: dict[str, str], tmp_path: Path) -> None:
    other = big_store(tmp_path / "other")
    answer = read_socket.ask(
        str(server.folder), {"v": resident.PROTOCOL, "argv": ["flakes", "--store", str(other)], "env": env}, 5.0
    )
    assert answer == {"fallback": "another store"}
    assert read_socket.ask(str(server.folder), {"v": resident.PROTOCOL + 1, "argv": [], "env": {}}, 5.0) == {
        "fallback": "not a request of this version"
    }


def test_a_server_killed_mid_request_leaves_the_client_answering(
    server: Server, env: dict[str, str], tmp_path: Path
) -> None:
    server.proc.send_signal(signal.SIGSTOP)  # it accepts nothing now; the kernel queues the connection
    mark = tmp_path / "how"
    proc = subprocess.Popen(
        [*CLIENT, str(mark), "search", "flakes"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    fds = Path(f"/proc/{proc.pid}/fd")
    while proc.poll() is None and not any(_link(fds / fd).startswith("socket:") for fd in _listdir(fds)):
        time.sleep(0.01)  # until the client is connected and waiting
    server.proc.kill()
    out, err = proc.communicate()
    assert ((proc.returncode, out, err), mark.read_text()) == (one_shot(["flakes"], env), "one-shot")


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _link(path: Path) -> str:
    """Where a /proc fd link points; "" once the starting client has closed that fd (CI hit an
    fd closed between the listing and the look)."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def test_a_server_and_its_searches_leave_the_store_untouched(store: Path, env: dict[str, str], tmp_path: Path) -> None:
    before = snapshot(store)
    server = Server(store, env)
    try:
        assert client(["flakes"], env, tmp_path)[1] == "served"
    finally:
        assert server.proc.stdin is not None
        server.proc.stdin.close()  # the MCP client went away: the server ends
        server.proc.wait()
        server.stop()
    assert snapshot(store) == before
    assert not (server.folder / read_socket.SOCKET_NAME).exists()  # an orderly exit removes the socket
