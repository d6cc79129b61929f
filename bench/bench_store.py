"""history.jsonl store benchmarks: appends per second (one process, and 8 processes contending
for memory/.history.lock), `dream append --jsonl -` with 1,000 entries as one process against a
single `dream append` process, reading from a cursor (a 1,000-entry file; a 100,000-line archive
reached by a --replay), and compaction.

Every append is durable: an fsync of history.jsonl, then .cursor rewritten atomically (temp file,
fsync, rename, fsync of the folder), all under the cross-process lock; so appends/s is bounded by
the disk's fsync latency, which the table reports beside it.

Run: ``.venv/bin/python bench/bench_store.py [--quick] [--json]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, best_of, main

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.core.history import HistoryEntry
from dream_memory.testing import FrozenClock, build_workspace

CONTENT = "- User prefers dark mode; decided to use PostgreSQL for the event store (ADR-12)"
WRITER = """
import sys, time
from pathlib import Path
from dream_memory.adapters.history_log import HistoryLog
from dream_memory.testing import FrozenClock
log = HistoryLog(Path(sys.argv[1]), clock=FrozenClock(), lock_timeout=300)
n = int(sys.argv[2])
while not Path(sys.argv[3]).exists():
    time.sleep(0.001)
for i in range(n):
    log.append(f"writer entry {i}")
"""


def _fsync_ms(folder: Path) -> float:
    path = folder / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        start = time.perf_counter()
        for _ in range(50):
            os.write(fd, b"x")
            os.fsync(fd)
        return (time.perf_counter() - start) / 50 * 1000
    finally:
        os.close(fd)


def _write_history(path: Path, first: int, count: int, month: str = "2026-04") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for cursor in range(first, first + count):
            entry = HistoryEntry(cursor, f"{month}-03 00:02", f"{CONTENT} #{cursor}", "cli:direct")
            handle.write(entry.to_json_line() + "\n")


def bench_appends(tmp: Path, quick: bool) -> Section:
    single_n = 200 if quick else 1000
    per_writer = 50 if quick else 250
    ws = build_workspace(tmp / "append-one")
    log = HistoryLog(ws, clock=FrozenClock())
    start = time.perf_counter()
    for i in range(single_n):
        log.append(f"{CONTENT} {i}")
    single = single_n / (time.perf_counter() - start)

    ws8 = build_workspace(tmp / "append-eight")
    go = tmp / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(ws8), str(per_writer), str(go)]) for _ in range(8)]
    time.sleep(1.5)  # let the interpreters start; the clock starts when all may go
    start = time.perf_counter()
    go.touch()
    for proc in procs:
        proc.wait()
    elapsed = time.perf_counter() - start
    total = 8 * per_writer
    entries = HistoryLog(ws8, clock=FrozenClock()).scan().entries
    assert len({e.cursor for e in entries}) == total
    fsync = _fsync_ms(tmp)
    return Section(
        key="store.append",
        title="Appends to history.jsonl (durable, under memory/.history.lock)",
        columns=["writers", "entries", "appends/s", "ms per append"],
        rows=[
            [1, single_n, single, 1000 / single],
            [8, total, total / elapsed, elapsed * 1000 / total],
        ],
        command="python bench/bench_store.py" + (" --quick" if quick else ""),
        notes=[f"fsync of one small write on this disk: {fsync:.2f} ms; an append does three fsyncs."],
        deterministic={"entries_8_writers": float(total)},
    )


DREAM = [sys.executable, "-c", "from dream_memory.entrypoints.cli import main; main()"]


def _dream_seconds(ws: Path, args: list[str], stdin: bytes) -> tuple[float, str]:
    env = {**os.environ, "HOME": str(ws.parent), "DREAM_WORKSPACE": str(ws), "DREAM_CONFIG": ""}
    start = time.perf_counter()
    done = subprocess.run([*DREAM, *args], input=stdin, capture_output=True, env=env, check=True)
    return time.perf_counter() - start, done.stdout.decode("utf-8")


def bench_append_jsonl(tmp: Path, quick: bool) -> Section:
    """Issue 17's target: 1,000 entries through `dream append --jsonl -` in under 2 s, one process,
    the same cost as a single `dream append` process plus the writing (gated as a same-run ratio)."""
    lines = 1000
    payload = "".join(
        json.dumps({"content": f"{CONTENT} {i}", "session_key": "cli:direct"}) + "\n" for i in range(lines)
    ).encode("utf-8")
    repeat = 3  # best of 3 in both modes: one run of each, on a busy machine, moved the ratio 1.1x -> 1.6x
    many: list[float] = []
    one: list[float] = []
    consecutive = True
    for round_ in range(repeat):
        ws = build_workspace(tmp / f"jsonl-{round_}")
        seconds, out = _dream_seconds(ws, ["append", "--jsonl", "-"], payload)
        cursors = [int(c) for c in out.split()]
        consecutive = consecutive and cursors == list(range(1, lines + 1))
        many.append(seconds)
        one.append(_dream_seconds(ws, ["append", "-"], CONTENT.encode("utf-8"))[0])
    stored = len(HistoryLog(ws, clock=FrozenClock()).scan().entries)
    assert stored == lines + 1 and consecutive
    best_many, best_one = min(many), min(one)
    return Section(
        key="store.append_jsonl",
        title="`dream append --jsonl -`: 1,000 entries in one process (one locked write)",
        columns=["command", "entries", "s (best of runs)"],
        rows=[
            ["dream append --jsonl - (1,000 lines)", lines, best_many],
            ["dream append - (one entry)", 1, best_one],
        ],
        command="python bench/bench_store.py" + (" --quick" if quick else ""),
        notes=[
            f"Target (issue 17): under 2 s for 1,000 lines; {best_many:.2f} s here, "
            f"{best_many / best_one:.2f}x one single-entry append process. Both times include the "
            "interpreter's start-up. The cursors come out consecutive (1..1000)."
        ],
        deterministic={"jsonl_entries": float(stored - 1), "jsonl_consecutive": 1.0 if consecutive else 0.0},
        ratios={"jsonl_1000_over_one_append": best_many / best_one},
    )


def bench_reads(tmp: Path, quick: bool) -> Section:
    archive_lines = 20_000 if quick else 100_000
    ws = build_workspace(tmp / "read")
    _write_history(ws / "memory/history.jsonl", archive_lines + 1, 1000)
    _write_history(ws / "memory/archive/history-2026-03.jsonl", 1, archive_lines, "2026-03")
    (ws / "memory/.dream_cursor").write_text(f"{archive_lines + 500}\n", encoding="utf-8")
    log = HistoryLog(ws, clock=FrozenClock())
    pending = log.entries_after(archive_lines + 500)
    replay = log.entries_after(10)
    assert len(pending) == 500 and len(replay) == archive_lines + 1000 - 10
    t_pending = best_of(lambda: log.entries_after(archive_lines + 500), 5)
    t_scan = best_of(lambda: log.scan(report=False), 5)
    t_replay = best_of(lambda: log.entries_after(10), 3)
    return Section(
        key="store.read",
        title="Reading history from a cursor",
        columns=["read", "entries returned", "ms"],
        rows=[
            ["scan of a 1,000-entry history.jsonl", 1000, t_scan * 1000],
            ["entries after .dream_cursor (archive byte-scanned, not parsed)", len(pending), t_pending * 1000],
            [f"entries after cursor 10 (--replay; {archive_lines:,}-line archive)", len(replay), t_replay * 1000],
        ],
        command="python bench/bench_store.py" + (" --quick" if quick else ""),
        notes=["The archive is only parsed when a byte-level scan shows it holds a cursor above the one asked for."],
        # 21,000 entries parsed beside 500 is not comparable work, and the 500 take 10 ms: their
        # ratio failed the quick gate at 2.08x-2.23x under load with no code change (issue 21).
        # Reported; the counts are gated.
        deterministic={"replay_entries": float(len(replay)), "pending_entries": float(len(pending))},
        reported={"replay_over_pending": t_replay / t_pending},
    )


def bench_compaction(tmp: Path, quick: bool) -> Section:
    rows = []
    for total in (2_000, 10_000) if not quick else (2_000,):
        ws = build_workspace(tmp / f"compact-{total}")
        _write_history(ws / "memory/history.jsonl", 1, total)
        log = HistoryLog(ws, clock=FrozenClock())
        start = time.perf_counter()
        result = log.compact(dream_cursor=total, max_entries=1000)
        elapsed = time.perf_counter() - start
        assert result.archived == total - 1000
        rows.append([total, result.archived, elapsed * 1000])
    return Section(
        key="store.compact",
        title="Compaction to 1,000 entries (every entry consumed)",
        columns=["entries before", "moved to memory/archive/", "ms"],
        rows=rows,
        command="python bench/bench_store.py" + (" --quick" if quick else ""),
        deterministic={"archived_2000": float(rows[0][1])},
    )


def run(quick: bool) -> list[Section]:
    with tempfile.TemporaryDirectory(prefix="dream-bench-store-") as tmp:
        root = Path(tmp)
        return [
            bench_appends(root, quick),
            bench_append_jsonl(root, quick),
            bench_reads(root, quick),
            bench_compaction(root, quick),
        ]


if __name__ == "__main__":
    main(run)
