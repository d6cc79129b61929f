"""A memory or history line is what ends at a newline, nothing else. Python's ``str.splitlines``
also breaks at U+2028, U+2029, U+0085, form feed, vertical tab and U+001C..1E, which chat text
and pasted documents hold; JSON leaves them unescaped inside a string. Before, the read and edit
paths that used it cut such a line in two: `dream append --jsonl` refused a valid line, the
offline engine kept only the text before the character, rewriting index.md turned the character
into a newline, and provenance gave the line numbers of the cut text, not the file's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dream_memory.core.edits import apply_edit
from dream_memory.core.versions import unified_diff
from dream_memory.testing import clean_env
from dream_memory.testing.hostile import Outcome, cli

BREAKS = ["\u2028", "\u2029", "\x85", "\x0c", "\x1e"]
RAW_IN_JSON = BREAKS[:3]  # json.dumps escapes the control characters, not these


def _ws(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    env = clean_env(tmp_path / "home", DREAM_WORKSPACE=str(ws))
    assert cli("init", env=env).code == 0
    return ws, env


def _run(env: dict[str, str]) -> dict[str, object]:
    done: Outcome = cli("run", "--model", "offline", env=env)
    assert done.code == 0 and done.crash is None, done
    report = json.loads(done.out)
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize("sep", RAW_IN_JSON, ids=[f"U+{ord(c):04X}" for c in RAW_IN_JSON])
def test_a_jsonl_line_holding_a_line_separator_is_one_entry(tmp_path: Path, sep: str) -> None:
    ws, env = _ws(tmp_path)
    line = json.dumps({"content": f"- [durable] the hint is{sep}KEEP-ME"}, ensure_ascii=False)
    assert sep in line  # written raw, as json.dumps(ensure_ascii=False) and nanobot write it
    done = cli("append", "--jsonl", "-", env=env, input=line + "\n")
    assert done.code == 0, done
    stored = [json.loads(x) for x in (ws / "memory" / "history.jsonl").read_text(encoding="utf-8").split("\n") if x]
    assert stored[-1]["content"] == f"- [durable] the hint is{sep}KEEP-ME"


@pytest.mark.parametrize("sep", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_the_offline_engine_keeps_the_text_after_a_line_separator(tmp_path: Path, sep: str) -> None:
    ws, env = _ws(tmp_path)
    assert cli("append", f"- [durable] User's wifi password hint is{sep}KEEP-AFTER", env=env).code == 0
    _run(env)
    assert f"hint is{sep}KEEP-AFTER" in (ws / "USER.md").read_text(encoding="utf-8")


def test_adding_an_entity_keeps_index_md_rows_holding_a_line_separator(tmp_path: Path) -> None:
    ws, env = _ws(tmp_path)
    row = "| old-thing | entities/old-thing.md | note\u2028more\x0cstill the row |"
    (ws / "entities").mkdir()
    (ws / "entities" / "old-thing.md").write_text("# old-thing\n\n- kept\n", encoding="utf-8")
    (ws / "index.md").write_text(f"# Index\n\n| Entity | File | Repos |\n|---|---|---|\n{row}\n", encoding="utf-8")
    assert cli("append", "- [entity] new-thing: a service added today", env=env).code == 0
    _run(env)
    text = (ws / "index.md").read_text(encoding="utf-8")
    assert row in text.split("\n")
    assert "| new-thing | entities/new-thing.md |" in text


def test_provenance_line_numbers_are_the_files_own(tmp_path: Path) -> None:
    ws, env = _ws(tmp_path)
    memory = ws / "memory" / "MEMORY.md"
    text = memory.read_text(encoding="utf-8")
    # A hand-written line holding two separators, above where Dream adds its fact.
    memory.write_text(
        text.replace("## Decisions\n", "## Decisions\n\n- a\u2028b\u2029c by hand\n", 1), encoding="utf-8"
    )
    assert cli("append", "- Decisions: the HTTP router is chi.", env=env).code == 0
    report = _run(env)
    batches = report["batches"]
    assert isinstance(batches, list)
    (fact,) = batches[0]["provenance"]["facts"]
    shown = [line for line in fact["lines"] if "router is chi" in line["text"]]
    assert shown, fact
    lines = memory.read_text(encoding="utf-8").split("\n")
    for line in shown:
        assert lines[line["line"] - 1] == line["text"], (line, lines)


USER_WITH_SEPARATORS = (
    "# User\n\n## Profile\n\n- notes by hand: a{sep}b\n- lives in Lyon\n\n## Preferences\n\n- Likes tea\n"
)


@pytest.mark.parametrize("sep", [*BREAKS, "\r"], ids=[f"U+{ord(c):04X}" for c in [*BREAKS, "\r"]])
def test_a_fact_filed_below_a_line_holding_a_separator_moves_no_line(tmp_path: Path, sep: str) -> None:
    """The offline engine found the section by one rule for where lines end and spliced the file
    by another (``str.splitlines``): with U+2028 or a form feed in a line above the section, the new
    bullet went in one line too early. The heading was glued to the end of the person's line, the
    text after the separator was lost, and a line of the section was written twice."""
    ws, env = _ws(tmp_path)
    before = USER_WITH_SEPARATORS.format(sep=sep)
    (ws / "USER.md").write_text(before, encoding="utf-8", newline="")
    assert cli("append", "- [durable] User prefers dark mode", env=env).code == 0
    _run(env)
    after = (ws / "USER.md").read_bytes().decode("utf-8")
    assert after == before.replace("- Likes tea\n", "- Likes tea\n- User prefers dark mode\n"), repr(after)


@pytest.mark.parametrize("sep", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_a_models_loose_edit_below_a_line_holding_a_separator_replaces_the_line_it_quoted(sep: str) -> None:
    """An ``edit_file`` call whose old_text matches only once trailing spaces or indentation are
    ignored was numbered by one rule for where lines end and spliced by another: it replaced the
    text after the separator, a line of the person's, and left the quoted line as it was."""
    text = USER_WITH_SEPARATORS.format(sep=sep)
    for quoted in ("- lives in Lyon   ", "    - lives in Lyon"):
        edited = apply_edit(text, quoted, "- lives in Porto", "USER.md")
        assert edited == text.replace("- lives in Lyon\n", "- lives in Porto\n"), repr(edited)


@pytest.mark.parametrize("sep", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_a_diff_counts_lines_as_git_does(tmp_path: Path, sep: str) -> None:
    """`dream review show`, `dream log -p` and the pull request's body showed a line holding U+2028
    or a form feed as two lines, the first marked "No newline at end of file"."""
    before = USER_WITH_SEPARATORS.format(sep=sep)
    after = before.replace("- lives in Lyon", "- lives in Porto").replace(f"a{sep}b", f"a{sep}c")
    change = unified_diff("USER.md", before.encode(), after.encode())
    assert "No newline" not in change.diff
    assert (change.added, change.removed) == (2, 2)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "USER.md").write_text(before, encoding="utf-8", newline="")
    subprocess.run(["git", "-C", str(repo), "add", "USER.md"], check=True)
    (repo / "USER.md").write_text(after, encoding="utf-8", newline="")
    numstat = subprocess.run(
        ["git", "-C", str(repo), "diff", "--numstat"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert numstat[:2] == ["2", "2"]


def test_a_diff_counts_lines_starting_with_dashes_or_pluses() -> None:
    """A markdown rule (`---`), front matter's fences and a `-- signed` line were left out of a
    diff's counts, which feed commit subjects, `dream log`, restore's output and the run report:
    removing two such lines read `+0 -0`."""
    before = "---\nname: ada\n---\n# User\n\n- likes tea\n---\n-- signed, Ada\n+++ note\n"
    change = unified_diff("USER.md", before.encode(), b"# User\n\n- likes tea\n")
    assert (change.added, change.removed) == (0, 6)
    change = unified_diff("USER.md", b"# User\n", b"# User\n---\n++ more\n")
    assert (change.added, change.removed) == (2, 0)
