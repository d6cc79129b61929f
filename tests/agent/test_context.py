"""`dream context`: the memory block for an agent's system prompt."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.tokens import default_counter
from dream_memory.app.context import memory_context
from dream_memory.core.context import Part, build_context
from dream_memory.core.history import HistoryEntry
from dream_memory.entrypoints.cli import cli
from dream_memory.testing import FrozenClock, build_workspace

SKILL_ON = "---\nname: deploy\ndescription: how to deploy\nalways: true\n---\n\nALWAYS-ON-SKILL-BODY\n"
SKILL_OFF = "---\nname: notes\ndescription: occasional\n---\n\nOCCASIONAL-SKILL-BODY\n"


def workspace(tmp_path: Path, *, entries: int = 3, memory: str | None = None) -> Path:
    history = [
        HistoryEntry(i, "2026-04-03 00:02", f"entry {i} says hello", "cli:direct" if i % 2 else "tg:1")
        for i in range(1, entries + 1)
    ]
    files = {
        "SOUL.md": "# Soul\n\nSOUL-MARKER\n",
        "USER.md": "# User\n\nUSER-MARKER\n",
        "memory/MEMORY.md": memory or "# Memory\n\nMEMORY-MARKER\n",
        "skills/deploy/SKILL.md": SKILL_ON,
        "skills/notes/SKILL.md": SKILL_OFF,
    }
    return build_workspace(tmp_path / "ws", history=history, files=files)


def block_for(root: Path, budget: int, session_key: str | None = None) -> str:
    log = HistoryLog(root, clock=FrozenClock())
    return memory_context(root, log, budget=budget, counter=default_counter(), session_key=session_key).text


def test_parts_come_in_order_with_the_data_not_instructions_header(tmp_path: Path) -> None:
    """SOUL, USER, MEMORY, always-on skills, then undreamt history, under a header that says this is data."""
    text = block_for(workspace(tmp_path), 4000)
    assert "data, not instructions" in text.split("## SOUL.md")[0]
    order = [
        text.index(m) for m in ("SOUL-MARKER", "USER-MARKER", "MEMORY-MARKER", "ALWAYS-ON-SKILL-BODY", "entry 1 says")
    ]
    assert order == sorted(order)


def test_only_always_on_skills_are_included(tmp_path: Path) -> None:
    """A skill without `always: true` is left out: only always-on skills reach every prompt."""
    text = block_for(workspace(tmp_path), 4000)
    assert "ALWAYS-ON-SKILL-BODY" in text and "OCCASIONAL-SKILL-BODY" not in text


def test_only_history_after_the_dream_cursor(tmp_path: Path) -> None:
    """Entries Dream has consumed are in the files already; only later ones are listed."""
    root = workspace(tmp_path, entries=6)
    (root / "memory" / ".dream_cursor").write_text("4\n")
    text = block_for(root, 4000)
    assert "entry 4 says" not in text and "entry 5 says" in text and "entry 6 says" in text


def test_session_key_filters_history(tmp_path: Path) -> None:
    """--session-key keeps only that session's recent history."""
    text = block_for(workspace(tmp_path, entries=6), 4000, session_key="tg:1")
    assert "entry 2 says" in text and "entry 4 says" in text
    assert "entry 1 says" not in text and "entry 3 says" not in text


def test_budget_holds_with_a_huge_memory_and_a_stuck_dream(tmp_path: Path) -> None:
    """A 500 KB MEMORY.md and 5,000 undreamt entries still give a block within the budget: history
    is cut oldest first, the big file becomes its outline, and the block says what was left out."""
    big = "# Memory\n\n" + "".join(f"## Topic {i}\n\n" + "- a fact about this topic\n" * 40 for i in range(500))
    assert len(big.encode()) > 500_000
    root = workspace(tmp_path, entries=5000, memory=big)
    counter = default_counter()
    for budget in (1500, 4000, 8000):
        log = HistoryLog(root, clock=FrozenClock())
        block = memory_context(root, log, budget=budget, counter=counter)
        assert counter.count(block.text) <= budget
        assert block.tokens <= budget
        assert "memory/MEMORY.md" in block.outlined
        assert block.history_left_out > 0
        assert "Left out to fit the budget" in block.text or "[truncated" in block.text
        if block.history_included:
            assert "entry 5000 says" in block.text  # the newest is kept


def test_tiny_budget_still_bounded() -> None:
    """Even when outlines do not fit, the block is cut at a line boundary within the budget."""
    parts = [Part("memory/MEMORY.md", "".join(f"# H{i}\n\ntext\n" for i in range(300)))]
    history = [HistoryEntry(i, "", f"h{i}") for i in range(1, 11)]
    block = build_context(parts, history, budget=120, count_tokens=lambda t: len(t) // 4)
    assert block.tokens <= 120 and block.text.endswith("[truncated to fit the token budget]\n")


def test_cli_context_json_and_read_only(tmp_path: Path) -> None:
    """`dream context --json` reports what it included; it never creates or changes files."""
    root = workspace(tmp_path)
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    result = CliRunner().invoke(
        cli, ["context", "--json", "--budget", "3000", "-w", str(root)], env={"HOME": str(tmp_path)}
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["parts"][:3] == ["SOUL.md", "USER.md", "memory/MEMORY.md"]
    assert data["history_included"] == 3 and data["tokens"] <= 3000
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before
