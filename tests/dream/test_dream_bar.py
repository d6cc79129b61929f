"""The live progress bar of `dream run` when stderr is a terminal (a real pty), and its absence
everywhere else: piped stderr, --log-format json, --quiet (issue 17)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from dream_helpers import BIN, Cli, sample_entries, use_server

from dream_memory.adapters.offline import OfflineModel
from dream_memory.testing import build_workspace
from dream_memory.testing.llm_server import Hang, ScriptedLLMServer, from_chat_model

pytestmark = pytest.mark.slow  # real processes on a pty, a second of model time per call

ENTRIES = 60
BATCH = 20


class OnTerminal:
    """`dream run` with stderr on a pty (stdout piped): what the terminal received, with times."""

    def __init__(self, cli: Cli, *args: str, sized: bool = True) -> None:
        master, slave = pty.openpty()
        if sized:  # a terminal 100 columns wide, as a real one reports
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.proc = subprocess.Popen(
            [str(BIN / "dream"), "run", "--batch-size", str(BATCH), *args],
            env={**os.environ, **cli.env, "COLUMNS": "100"},
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
        )
        os.close(slave)
        self.master = master
        self.chunks: list[tuple[float, bytes]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: the last writer closed the pty
                return
            if not data:
                return
            self.chunks.append((time.monotonic(), data))

    def finish(self) -> tuple[int, str, float]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read().decode()
        self.proc.wait(timeout=120)
        ended = time.monotonic()
        self.reader.join(timeout=5)
        os.close(self.master)
        return self.proc.returncode, out, ended

    @property
    def text(self) -> str:
        return b"".join(c for _, c in self.chunks).decode("utf-8", errors="replace")

    def first(self, needle: str) -> float:
        """When ``needle`` had arrived in full."""
        seen = b""
        for at, chunk in self.chunks:
            seen += chunk
            if needle.encode() in seen:
                return at
        raise AssertionError(f"{needle!r} never reached the terminal: {self.text!r}")


def _slow(cli: Cli, seconds: float) -> ScriptedLLMServer:
    offline = from_chat_model(OfflineModel())
    return ScriptedLLMServer(responder=lambda request: Hang(seconds, then=offline(request)))


@pytest.mark.parametrize("sized", [True, False], ids=["sized", "no-size"])
def test_a_terminal_gets_a_live_bar_and_the_batch_lines_as_they_end(isolated: Cli, sized: bool) -> None:
    """On a terminal: a bar (redrawn in place, naming `dream run` and the batches done) and the
    plain line for batch 1 at least a second before the process ends; stdout is the report. A
    terminal that reports no width (a fresh pty, some CI consoles) still gets a bar."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    with _slow(isolated, 1.0) as server:
        use_server(isolated, server)
        run = OnTerminal(isolated, sized=sized)
        code, out, ended = run.finish()
    assert code == 0, run.text
    assert json.loads(out)["status"] == "ok"
    line = f"dream: batch 1..{BATCH} ({BATCH} entries): committed, "
    assert ended - run.first(line) >= 1.0
    text = run.text
    assert "dream run" in text and "\r" in text, text  # tqdm redraws its line with a carriage return
    assert "1/3 batches" in text, text
    assert f"cursor {BATCH}," in text, text


@pytest.mark.parametrize("args", [("--log-format", "json"), ("--quiet",)], ids=["json", "quiet"])
def test_no_bar_with_json_logs_or_quiet_even_on_a_terminal(isolated: Cli, args: tuple[str, ...]) -> None:
    """--log-format json on a terminal: every line is a JSON object, no bar; --quiet: nothing."""
    build_workspace(isolated.workspace, history=sample_entries(5))
    with _slow(isolated, 0.0) as server:
        use_server(isolated, server)
        run = OnTerminal(isolated, *args)
        code, _, _ = run.finish()
    assert code == 0, run.text
    text = run.text
    assert "dream run" not in text
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    if args == ("--quiet",):
        assert lines == []
    else:
        assert lines and all(isinstance(json.loads(line), dict) for line in lines), lines


def test_the_bar_library_is_not_imported_when_stderr_is_not_a_terminal(isolated: Cli, tmp_path: Path) -> None:
    """A scheduled job (stderr piped) never imports tqdm."""
    build_workspace(isolated.workspace, history=sample_entries(3))
    probe = tmp_path / "modules.txt"
    code = (
        "import sys\n"
        "from dream_memory.entrypoints.cli import main\n"
        "sys.argv = ['dream', 'run', '--model', 'offline']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    open({str(probe)!r}, 'w').write(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **isolated.env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "dream: batch 1..3" in done.stderr
    assert "tqdm" not in probe.read_text().split()


def test_the_bar_counts_up_to_the_batches_known_up_front(isolated: Cli) -> None:
    """The bar knows how many batches the run has (pending entries / batch size, capped by
    --max-batches) and spells its unit apart from the number: `0/2 batch`, `? batch/s`, never
    `0batch`."""
    build_workspace(isolated.workspace, history=sample_entries(ENTRIES))
    with _slow(isolated, 0.0) as server:
        use_server(isolated, server)
        run = OnTerminal(isolated, "--max-batches", "2")
        code, _, _ = run.finish()
    assert code == 0, run.text
    text = run.text
    assert "0/2 batches" in text or "1/2 batches" in text, text
    assert "0batch" not in text and "/3" not in text and "?batch/s" not in text, text


def test_no_bar_when_there_is_nothing_to_do(isolated: Cli) -> None:
    """A run with no pending entries draws no bar on the terminal, only its outcome."""
    build_workspace(isolated.workspace, history=[])
    with _slow(isolated, 0.0) as server:
        use_server(isolated, server)
        run = OnTerminal(isolated)
        code, out, _ = run.finish()
    assert code == 0, run.text
    assert json.loads(out)["status"] == "nothing_to_do"
    assert "dream run" not in run.text and "batch/s" not in run.text, run.text
