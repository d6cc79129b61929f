"""Docs that are generated from the code stay in step with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_generated_reference_pages_match_the_code() -> None:
    """docs/reference/commands.md (the CLI's --help), config.md (the settings schema) and
    exit-codes.md (the outcome table and the error kinds) are exactly what
    scripts/gen_reference.py renders."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_the_reference_check_sees_a_stale_page(tmp_path: Path) -> None:
    """The check is not blind: an exit-codes page that lost a line is reported by name."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.REFERENCE = tmp_path
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    page = tmp_path / "exit-codes.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `locked` | 75", "| `locked` | 1"), encoding="utf-8")
    assert gen.main(["--check"]) == 1


def test_readme_starts_with_the_two_fresh_machine_commands() -> None:
    """The README opens with the command that installs and runs the demo, then the test command."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert block[0].endswith("dream demo") and "pip install" in block[0]
    assert block[1] == "scripts/test"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test" in ci


def test_the_config_reference_says_a_required_key_is_required() -> None:
    """A preset's `model` has no default: the page says "required", not pydantic's marker."""
    text = (REPO / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert "PydanticUndefined" not in text
    assert "| `modelPresets.<name>.model` | string | required |" in text
