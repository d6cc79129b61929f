"""A secret the guard only recognises whole (a private key's block) never reaches memory in
pieces: Dream shows the model its history entries through the guard, so a model that files one
line of a key as a fact of its own has no line of the key to file.

(Found by `test_canaries_end_to_end.py` failing now and then: the canaries are random, and a
key's body line that happened to begin with "be+" read to the offline engine as an instruction
about the assistant's manner; about 1 canary set in 3,000 has such a line. It was filed in SOUL.md on its own, where the
write guard saw a lone line of base64 and nothing that names a key.)
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.core.history import HistoryEntry
from dream_memory.testing import build_workspace

BODY = [
    # Each of these lines, alone, reads to the offline engine as a fact worth filing: a manner
    # for SOUL.md ("be ..."), a preference ("always"), a decision ("decided").
    "be+Ux3al70TTMZQlb34yeaSds0/ElpWeEwihRPzRaM5cZImh2QHjKDLdpE3rhjV4",
    "q7Lw0c2ZfJ3n8XvR/always/Tg5kP1mB9sD4hY6uW2eA0iO3lK7jN5bV8cX1zQ4",
    "Mx4rT8wP2kL6nB0vC9/decided/Z3fH7jD1sA5gQ8eW4uY2iO6pR0tK3mN9bV1c",
]
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(BODY) + "\n-----END OPENSSH PRIVATE KEY-----"


def test_a_private_key_an_agent_wrote_into_history_reaches_no_memory_file_even_line_by_line(
    tmp_path: Path, dream: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """An agent wrote a private key into history.jsonl itself (no `dream append`, so no guard at
    the door). After a Dream run with the offline engine, which files history line by line, no
    line of the key is in any memory file or commit, the report counts the redaction, and the
    fact around it is still filed."""
    ws = build_workspace(tmp_path / "ws")
    entry = HistoryEntry(
        1, "2026-04-03T09:00:00", f"- [durable] User prefers the deploy key below:\n{KEY}", "telegram:7"
    )
    (ws / "memory" / "history.jsonl").write_text(entry.to_json_line() + "\n", encoding="utf-8")

    done = dream("run", "--model", "offline", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["commits"], report

    memory = {
        p.relative_to(ws).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(ws.rglob("*.md"))
        if ".git" not in p.parts
    }
    assert "User prefers the deploy key below" in memory["USER.md"], "the fact around the key was not filed"
    for rel, text in memory.items():
        assert not [line for line in BODY if line in text], f"a line of the key reached {rel}"
    log = subprocess.run(["git", "-C", str(ws), "log", "-p", "--all"], capture_output=True, text=True, check=True)
    assert not [line for line in BODY if line in log.stdout], "a line of the key reached a commit"
    assert not [line for line in BODY if line in done.stdout + done.stderr]
    assert report["redactions"].get("private_key", 0) >= 1, report["redactions"]
