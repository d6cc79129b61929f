"""``dream context`` leaves out what holds nothing: files as their template made them, and
headings with nothing under them (issue 17: a fresh workspace put 230 tokens of empty template
headings into every prompt)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from dream_memory.adapters.workspace import template_text
from dream_memory.core.context import Part, adds_nothing, build_context, without_empty_headings

Dream = Callable[..., subprocess.CompletedProcess[str]]


def words(text: str) -> int:
    return len(text.split())


def test_empty_headings_go_and_everything_else_stays() -> None:
    """A heading whose section holds only other empty headings goes; a heading over content (or
    over a subheading with content) stays, and so does every other line, byte for byte."""
    text = "# User\n\nIntro line.\n\n## Profile\n\n## Preferences\n\n- Dark mode\n\n## Work\n\n### Sub\n\n## Last\n"
    assert without_empty_headings(text) == "# User\n\nIntro line.\n\n## Preferences\n\n- Dark mode\n"
    nested = "# A\n\n## B\n\n### C\n\n- fact\n\n## D\n"
    assert without_empty_headings(nested) == "# A\n\n## B\n\n### C\n\n- fact\n"
    assert without_empty_headings("no headings\n") == "no headings\n"


def test_headings_inside_code_fences_are_content() -> None:
    """A ``# comment`` inside a fenced block is not a heading: it is neither removed nor does it
    make the heading above it look empty."""
    text = "## Snippets\n\n```sh\n# deploy\n```\n\n## Empty\n"
    assert without_empty_headings(text) == "## Snippets\n\n```sh\n# deploy\n```\n"


def test_a_file_as_its_template_made_it_adds_nothing() -> None:
    """The USER.md template adds nothing; one fact, even under a template heading, adds something;
    without a template only headings add nothing."""
    template = template_text("USER.md")
    assert adds_nothing(template, template)
    assert not adds_nothing(template.replace("## Preferences\n", "## Preferences\n\n- Dark mode\n"), template)
    assert adds_nothing("# Title\n\n## Empty\n", None)
    assert not adds_nothing("# Title\n\nIntro line.\n", None)


def test_build_context_leaves_out_template_only_files() -> None:
    """Given the templates, a durable file equal to its template is not a part of the block and
    is not named in it; a file with content is there without its empty headings."""
    user = template_text("USER.md").replace("## Preferences\n", "## Preferences\n\n- Dark mode\n")
    parts = [Part("SOUL.md", template_text("SOUL.md")), Part("USER.md", user)]
    templates = {"SOUL.md": template_text("SOUL.md"), "USER.md": template_text("USER.md")}
    block = build_context(parts, [], budget=4000, count_tokens=words, templates=templates)
    assert block.parts == ["USER.md"]
    assert "## SOUL.md" not in block.text and "## Profile" not in block.text
    assert "## Preferences\n\n- Dark mode" in block.text


def test_a_fresh_workspace_gives_no_template_headings(tmp_path: Path, dream: Dream) -> None:
    """After ``dream init`` the block is the header alone: no SOUL.md, USER.md or MEMORY.md
    section and none of their empty headings (measured: 230 tokens before, 46 now); after one
    dreamt fact only USER.md with that fact's heading is added."""
    ws = tmp_path / "ws"
    assert dream("init", "--workspace", str(ws)).returncode == 0
    fresh = dream("context", "--workspace", str(ws), "--json")
    assert fresh.returncode == 0, fresh.stderr
    block = json.loads(fresh.stdout)
    assert block["parts"] == []
    for heading in ("## Profile", "## Preferences", "## Voice", "## Decisions", "## Environment"):
        assert heading not in block["text"]
    assert block["tokens"] < 60
    assert dream("append", "--workspace", str(ws), "- [durable] User prefers dark mode").returncode == 0
    assert dream("run", "--workspace", str(ws), "--model", "offline").returncode == 0
    after = json.loads(dream("context", "--workspace", str(ws), "--json").stdout)
    assert after["parts"] == ["USER.md"]
    assert "## Preferences\n\n- User prefers dark mode" in after["text"]
    assert "## Profile" not in after["text"] and "## Work Context" not in after["text"]
