"""No function is more complex than ruff's limits (12 branches, complexity 12, 50 statements, 8
arguments) without a stated reason: every exemption in src says why on its own line."""

from __future__ import annotations

import re

from arch_helpers import PACKAGE, REPO

COMPLEXITY_RULES = ("C901", "PLR0911", "PLR0912", "PLR0913", "PLR0915", "PLR0917")
NOQA = re.compile(r"#\s*noqa:\s*([A-Z0-9, ]+)(.*)$")


def test_every_complexity_exemption_states_its_reason() -> None:
    """A ``# noqa: PLR0912`` (or C901, PLR0915, ...) in src is followed by ``-- <reason>``."""
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = NOQA.search(line)
            if not match or not any(rule in match.group(1) for rule in COMPLEXITY_RULES):
                continue
            reason = match.group(2).strip()
            if not reason.startswith("--") or len(reason) < 12:
                bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not bare, "exemptions without a reason:\n" + "\n".join(bare)
