"""A memory file a person emptied (or left blank) gets the facts meant for it. The offline engine
read the empty file as "\\n" and quoted that in its edit, which was refused: the fact was dropped,
the batch committed with the cursor past its entry, and the report read ok with only a note that
facts "may not all be applied" (found by an independent review)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.testing import build_workspace

Dream = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.parametrize("emptied", ["", "\n", "\n\n  \n"], ids=["empty", "one-newline", "blank-lines"])
def test_the_fact_for_an_emptied_file_is_written_into_it(dream: Dream, tmp_path: Path, emptied: str) -> None:
    ws = build_workspace(tmp_path / "ws")
    (ws / "USER.md").write_text(emptied, encoding="utf-8")
    for fact in ("- [durable] User's name is Maya.", "- [memory] The project deadline is in March."):
        assert dream("append", "-w", str(ws), fact).returncode == 0
    run = dream("run", "-w", str(ws), "--model", "offline", "--json")
    report = json.loads(run.stdout)
    assert run.returncode == 0 and report["status"] == "ok", report
    assert (ws / "USER.md").read_text(encoding="utf-8") == "## Profile\n\n- User's name is Maya.\n"
    assert "deadline is in March" in (ws / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    notes = [note for batch in report["batches"] for note in batch["notes"]]
    assert not any("may not all be applied" in note for note in notes), notes
