"""The default write policy on real work: the offline engine's ordinary Dream flows (the demo,
Dream rewriting its own recent lines), and on copies of real agent workspaces (the fixture
corpus) Dream's additions land while no line the workspace came with is replaced or removed
without review."""

from __future__ import annotations

import shutil
from pathlib import Path

from dream_helpers import Cli, git


def _workspaces(root: Path) -> list[Path]:
    found = []
    for entry in sorted(root.iterdir()):
        ws = entry / "workspace" if (entry / "workspace").is_dir() else entry
        if (ws / "memory" / "history.jsonl").is_file() or (ws / "memory" / "HISTORY.md").is_file():
            found.append(ws)
    return found


def test_the_demo_holds_nothing_and_dream_rewrites_its_own_recent_lines(isolated: Cli) -> None:
    """`dream demo` (offline engine, bundled sample): nothing is held, and its second batch's
    replacement of a line the first batch wrote lands."""
    result = isolated.run("demo", "--no-keep")
    assert result.exit_code == 0, result.output
    assert '"held": []' in result.stdout and '"status": "ok"' in result.stdout
    assert '"removed": 1' in result.stdout  # batch 21..40 replaces a USER.md line of batch 1..20


def test_on_real_workspaces_additions_land_and_no_imported_line_is_lost_unreviewed(
    isolated: Cli, fixtures_root: Path, tmp_path: Path
) -> None:
    """Each corpus workspace with history, copied: an offline Dream run of up to 5 batches. No
    line its files held at `memory: init` is gone from HEAD (a rewrite the offline engine tried,
    in AlexEgorov85's MEMORY.md, waits for review instead), and additions land."""
    added = held = 0
    for source in _workspaces(fixtures_root):
        ws = tmp_path / source.parent.name / source.name
        shutil.copytree(source, ws, symlinks=True)
        code, report = isolated.run_json("run", "--workspace", str(ws), "--model", "offline", "--max-batches", "5")
        assert code == 0, (source, report["errors"])
        added += sum(f["added"] for f in report["files_changed"])
        held += len(report["held"])
        init = git(ws, "rev-list", "--max-parents=0", "HEAD").strip()
        removed = [
            line[1:]
            for line in git(ws, "diff", init, "HEAD", "--", ".", ":!memory/.dream*").splitlines()
            if line.startswith("-") and not line.startswith("---") and line[1:].strip()
        ]
        assert removed == [], source
        for item in report["held"]:  # each held change still has its line in the file
            assert all(
                line in (ws / item["path"]).read_text(encoding="utf-8") for line in _removed(isolated, ws, item["id"])
            )
    assert added > 0
    print(f"corpus: {added} lines added, {held} change(s) held")


def _removed(isolated: Cli, ws: Path, held_id: str) -> list[str]:
    _, shown = isolated.run_json("review", "show", held_id, "--json", "--workspace", str(ws))
    return list(shown["removed"])
