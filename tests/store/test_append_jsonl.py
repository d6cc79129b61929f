"""`dream append --jsonl FILE|-` and `Workspace.append_many`: many entries in one locked,
all-or-nothing append, redacted like single appends (issue 17: 200 `dream append` calls took
496 s on a loaded machine; there was no way to append many in one call)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_memory import Workspace
from dream_memory.errors import InputError
from dream_memory.testing import build_workspace, read_history

# A token shape the secret scanner redacts (a GitHub personal access token).
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def lines(n: int, *, start: int = 0) -> str:
    return "".join(json.dumps({"content": f"- entry {i}", "session_key": "cli:batch"}) + "\n" for i in range(start, n))


def test_a_thousand_lines_become_a_thousand_consecutive_entries(tmp_path: Path, dream) -> None:
    """1,000 lines on stdin: 1,000 entries with consecutive cursors after what was there, in
    order, printed one cursor per line; the counter file ends at the last one."""
    ws = build_workspace(tmp_path / "ws", history=["- already there"])
    done = dream("append", "--jsonl", "-", "--workspace", str(ws), input=lines(1000))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(c) for c in range(2, 1002)]
    entries = read_history(ws)
    assert [e["cursor"] for e in entries] == list(range(1, 1002))
    assert [e["content"] for e in entries[1:]] == [f"- entry {i}" for i in range(1000)]
    assert {e["session_key"] for e in entries[1:]} == {"cli:batch"}
    assert (ws / "memory/.cursor").read_text() == "1001\n"


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("{not json", "not JSON"),
        ('["a list"]', "is not an object"),
        ('"a string"', "is not an object"),
        ('{"content": ""}', '"content" must be a non-empty string'),
        ('{"session_key": "cli:x"}', '"content" must be a non-empty string'),
        ('{"content": "x", "text": "typo"}', "unknown key 'text'"),
        ('{"content": "x", "session_key": 5}', '"session_key" must be a non-empty string'),
        ('{"content": "x", "timestamp": "yesterday"}', '"timestamp" must be'),
    ],
)
def test_a_bad_line_in_the_middle_appends_none(tmp_path: Path, dream, bad: str, problem: str) -> None:
    """One bad line among 1,000 (line 500): exit 2, the message names line 500 and what is wrong
    with it, and history.jsonl is byte-identical (none of the 999 good lines went in)."""
    ws = build_workspace(tmp_path / "ws", history=["- already there"])
    before = (ws / "memory/history.jsonl").read_bytes()
    text = lines(499) + bad + "\n" + lines(1000, start=500)
    done = dream("append", "--jsonl", "-", "--workspace", str(ws), input=text)
    assert done.returncode == 2, done.stderr
    assert "line 500 of the input" in done.stderr and problem in done.stderr, done.stderr
    assert "nothing was appended" in done.stderr and done.stdout == ""
    assert (ws / "memory/history.jsonl").read_bytes() == before


def test_blank_lines_are_skipped_and_line_numbers_count_them(tmp_path: Path, dream) -> None:
    """Blank lines are not entries, but the line number of a bad line counts them (it is the
    line an editor shows)."""
    ws = build_workspace(tmp_path / "ws")
    done = dream("append", "--jsonl", "-", "-w", str(ws), input='\n{"content": "- a"}\n\n{"content": 1}\n')
    assert done.returncode == 2 and "line 4 of the input" in done.stderr
    ok = dream("append", "--jsonl", "-", "-w", str(ws), input='\n{"content": "- a"}\n\n{"content": "- b"}\n')
    assert ok.returncode == 0 and ok.stdout.split() == ["1", "2"]


def test_timestamps_are_kept_and_a_file_works_like_stdin(tmp_path: Path, dream) -> None:
    """--jsonl FILE reads the file; a given timestamp (native or ISO 8601) is stored in the
    history's own format, a missing one is now; --json prints the cursors and redactions."""
    ws = build_workspace(tmp_path / "ws")
    source = tmp_path / "entries.jsonl"
    source.write_text(
        '{"content": "- old fact", "timestamp": "2025-01-02T03:04:05+00:00"}\n'
        '{"content": "- native", "timestamp": "2025-02-03 04:05", "session_key": "telegram:1"}\n'
        '{"content": "- now"}\n',
        encoding="utf-8",
    )
    done = dream("append", "--jsonl", str(source), "--json", "-w", str(ws))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"cursors": [1, 2, 3], "redactions": {}}
    entries = read_history(ws)
    assert [e["timestamp"] for e in entries[:2]] == ["2025-01-02 03:04", "2025-02-03 04:05"]
    assert entries[1]["session_key"] == "telegram:1" and "session_key" not in entries[0]
    assert entries[2]["timestamp"][:2] == "20"


def test_an_iso_timestamp_with_an_offset_is_stored_in_utc(tmp_path: Path, dream) -> None:
    """Appends store UTC, so 10:00+02:00 is stored as 08:00 (and 23:30-05:00 as the next day's
    04:30); a naive ISO time and a Z time stay as given."""
    ws = build_workspace(tmp_path / "ws")
    source = "".join(
        json.dumps({"content": f"- entry {i}", "timestamp": stamp}) + "\n"
        for i, stamp in enumerate(
            ["2026-12-01T10:00:00+02:00", "2026-12-01T23:30:00-05:00", "2026-12-01T10:00:00", "2026-12-01T10:00Z"]
        )
    )
    done = dream("append", "--jsonl", "-", "-w", str(ws), input=source)
    assert done.returncode == 0, done.stderr
    assert [e["timestamp"] for e in read_history(ws)] == [
        "2026-12-01 08:00",
        "2026-12-02 04:30",
        "2026-12-01 10:00",
        "2026-12-01 10:00",
    ]


def test_entries_are_redacted_exactly_like_single_appends(tmp_path: Path, dream) -> None:
    """A secret in a --jsonl entry is stored as the same [REDACTED:...] text a single `dream
    append` of that text stores, and the note on stderr counts it."""
    single = build_workspace(tmp_path / "single")
    many = build_workspace(tmp_path / "many")
    text = f"- deploy token is {SECRET}"
    assert dream("append", text, "-w", str(single)).returncode == 0
    done = dream("append", "--jsonl", "-", "-w", str(many), input=json.dumps({"content": text}) + "\n")
    assert done.returncode == 0 and "redacted before storing" in done.stderr
    stored = read_history(many)[0]["content"]
    assert stored == read_history(single)[0]["content"] and SECRET not in stored and "[REDACTED:" in stored


def test_jsonl_takes_no_text_or_session_key(tmp_path: Path, dream) -> None:
    """--jsonl with TEXT or --session-key is bad usage (exit 2), nothing appended."""
    ws = build_workspace(tmp_path / "ws")
    assert dream("append", "--jsonl", "-", "- x", "-w", str(ws), input=lines(1)).returncode == 2
    assert dream("append", "--jsonl", "-", "--session-key", "k", "-w", str(ws), input=lines(1)).returncode == 2
    empty = dream("append", "--jsonl", "-", "-w", str(ws), input="\n\n")
    assert empty.returncode == 2 and "nothing to append" in empty.stderr
    assert not (ws / "memory/history.jsonl").exists()


def test_the_api_appends_the_same_entries(tmp_path: Path, dream) -> None:
    """Workspace.append_many(...) is the same service: the same entries, redactions and cursors
    as `dream append --jsonl`, and a bad entry raises InputError naming it and appends none."""
    cli_ws = build_workspace(tmp_path / "cli")
    api_ws = build_workspace(tmp_path / "api")
    items = [
        {"content": "- one", "session_key": "cli:a", "timestamp": "2025-01-02 03:04"},
        {"content": f"- token {SECRET}", "timestamp": "2025-01-02 03:05"},
    ]
    done = dream("append", "--jsonl", "-", "-w", str(cli_ws), input="".join(json.dumps(i) + "\n" for i in items))
    ws = Workspace(api_ws, env={"HOME": str(tmp_path)})
    appended = ws.append_many(items)
    assert [e.cursor for e in appended.entries] == [1, 2] and done.stdout.split() == ["1", "2"]
    assert read_history(api_ws) == read_history(cli_ws)
    assert appended.redactions and appended.to_json() == {"cursors": [1, 2], "redactions": appended.redactions}
    before = (api_ws / "memory/history.jsonl").read_bytes()
    with pytest.raises(InputError, match=r"entry 2: .*nothing was appended"):
        ws.append_many([{"content": "- fine"}, {"content": "- bad", "when": "now"}])
    assert (api_ws / "memory/history.jsonl").read_bytes() == before


SINGLE_WRITER = """
import sys
from pathlib import Path
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
log = HistoryLog(Path(sys.argv[1]), clock=FrozenClock(), lock_timeout=120)
Path(sys.argv[2]).touch()
for i in range(int(sys.argv[3])):
    log.append(f"- single {i}")
"""


@pytest.mark.slow  # real processes side by side
def test_beside_a_concurrent_appender_the_batch_stays_consecutive(tmp_path: Path) -> None:
    """While another process appends single entries under the history lock, two `dream append
    --jsonl -` processes of 1,000 lines each land whole: every one of the 2,300 entries is there
    once, no cursor is used twice, and each batch's cursors are consecutive (nothing interleaved)."""
    ws = build_workspace(tmp_path / "ws")
    started = tmp_path / "started"
    writer = subprocess.Popen([sys.executable, "-c", SINGLE_WRITER, str(ws), str(started), "300"])
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    cmd = [sys.executable, "-c", "from dream_memory.entrypoints.cli import main; main()", "append", "--jsonl", "-"]
    env = {"HOME": str(tmp_path), "DREAM_WORKSPACE": str(ws), "DREAM_CONFIG": "", "PATH": "/usr/bin:/bin"}
    batches = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(2)
    ]
    outs = [
        p.communicate(lines(1000).replace("entry", f"batch{n} entry").encode("utf-8"), timeout=120)
        for n, p in enumerate(batches)
    ]
    assert writer.wait(timeout=120) == 0
    for p, (out, err) in zip(batches, outs, strict=True):
        assert p.returncode == 0, err.decode()
        cursors = [int(c) for c in out.split()]
        assert cursors == list(range(cursors[0], cursors[0] + 1000))
    entries = read_history(ws)
    assert len(entries) == 2300 and len({e["cursor"] for e in entries}) == 2300
    contents = [e["content"] for e in entries]
    assert len(set(contents)) == 2300
    for n, (out, _) in enumerate(outs):
        by_cursor = {e["cursor"]: e["content"] for e in entries}
        assert [by_cursor[int(c)] for c in out.split()] == [f"- batch{n} entry {i}" for i in range(1000)]


def test_a_missing_jsonl_file_or_a_file_as_workspace_is_a_one_line_error(tmp_path: Path, dream_process) -> None:
    """`dream append --jsonl /nonexistent` and `--workspace <a file>` (a real process): exit 2 with
    the one-line `dream: error:` form naming the path (and `dream init --workspace PATH` for the
    workspace), never click's three-line usage error; nothing is written."""
    ws = build_workspace(tmp_path / "ws")
    missing = dream_process("append", "--jsonl", str(tmp_path / "nonexistent.jsonl"), "--workspace", str(ws))
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.startswith(f"dream: error: --jsonl: no such file {tmp_path / 'nonexistent.jsonl'}\n")
    assert "Usage:" not in missing.stderr and "Try '" not in missing.stderr
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a workspace\n")
    for args in (("append", "- x"), ("status",), ("init",)):
        proc = dream_process(*args, "--workspace", str(a_file))
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("dream: error: ") and str(a_file) in proc.stderr.splitlines()[0], proc.stderr
        assert "Usage:" not in proc.stderr, proc.stderr
    assert f"dream init --workspace {a_file}" in dream_process("status", "--workspace", str(a_file)).stderr
    assert a_file.read_text() == "not a workspace\n" and read_history(ws) == []


def test_a_utf8_byte_order_mark_on_jsonl_input_is_dropped(tmp_path: Path, dream_process) -> None:
    """A --jsonl file saved with a UTF-8 byte-order mark (as some Windows editors do) is read as
    if it had none: every line becomes an entry and no content starts with U+FEFF."""
    ws = build_workspace(tmp_path / "ws")
    source = tmp_path / "bom.jsonl"
    source.write_bytes(b'\xef\xbb\xbf{"content": "- first"}\n{"content": "- second"}\n')
    proc = dream_process("append", "--jsonl", str(source), "--workspace", str(ws))
    assert (proc.returncode, proc.stdout) == (0, "1\n2\n"), proc.stderr
    assert [e["content"] for e in read_history(ws)] == ["- first", "- second"]
