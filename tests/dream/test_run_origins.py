"""The write policy's line origins within a run: carried from one batch's commit to the next,
they are what a fresh git blame says, commit after commit."""

from __future__ import annotations

import random
from pathlib import Path

from dream_memory.adapters.git import GitStore
from dream_memory.adapters.git.blame import blame
from dream_memory.app.dream.origins import RunOrigins
from dream_memory.app.versioning import apply_commit
from dream_memory.testing import FrozenClock

SUBJECTS = ("dream: 1..20: USER.md +1 -1", "memory: manual edits (USER.md)", "dream: held 3..4 (x)", "other work")


def test_origins_carried_forward_match_a_fresh_blame(tmp_path: Path) -> None:
    """Forty commits that replace, insert, remove, repeat and reorder lines (a person's, Dream's
    and other commits, some leaving the file alone): after each, the origins the run carried
    forward are those a fresh blame finds, line for line (kind, time, subject)."""
    clock = FrozenClock()
    git = GitStore.open(tmp_path, author="t <t@t>", clock=clock, create=True)
    rng = random.Random(7)
    lines = [f"- fact {i}\n" for i in range(12)]
    apply_commit(git, {"USER.md": "".join(lines).encode()}, "memory: init")
    known = RunOrigins()
    for step in range(40):
        roll = rng.random()
        if roll < 0.3:
            lines[rng.randrange(len(lines))] = f"- changed {step}\n"
        elif roll < 0.5:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice([f"- new {step}\n", "- fact 3\n", "\n"]))
        elif roll < 0.7 and len(lines) > 3:
            del lines[rng.randrange(len(lines))]
        elif roll < 0.8:
            rng.shuffle(lines)
        changes: dict[str, bytes | None] = {
            "USER.md": "".join(lines).encode(),
            "memory/MEMORY.md": f"- step {step}\n".encode(),
        }
        clock.advance(60)
        apply_commit(git, changes, rng.choice(SUBJECTS) + f" {step}")
        if step % 3 == 0:  # now and then the run asks; in between it does not (commits to walk)
            fresh = [(o.kind, o.timestamp, o.subject) for o in blame(git, "USER.md")]
            assert known.at_head(git, "USER.md") == fresh, f"step {step}"
    git.close()
