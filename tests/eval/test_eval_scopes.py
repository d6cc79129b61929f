"""`dream eval`'s scope scenario (docs/benchmarks.md, "The scope scenario"): two private Telegram
chats and a group; every reader is asked everything through context, search and a real MCP
server; a canary of one scope anywhere another scope can read fails the required check, and a
purged canary must be left nowhere."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dream_memory.app.evaluation import builtin_scenarios_root, canary_value, load_scenario
from dream_memory.app.evaluation.scope_checks import purge_items, scope_items
from dream_memory.errors import InputError

SCENARIO = builtin_scenarios_root() / "scopes"


def planted() -> dict[str, str]:
    scenario = load_scenario(SCENARIO)
    assert scenario.scopes is not None
    return {c.placeholder: canary_value(scenario, c) for _, c in scenario.scopes.canaries()}


def test_the_offline_engine_keeps_every_scope_apart_and_the_purge_leaves_nothing(dream, tmp_path: Path) -> None:
    """The bundled scope scenario, run as a user runs it: every private canary is kept in its own
    scope, none reaches another reader (9 probes, MCP included), and the purged one is in no
    file, history line, commit or answer of the kept workspace."""
    proc = dream("eval", "--scenario", "scopes", "--keep", "--json", timeout=180)
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["scenarios"]
    checks = {c["check"]: c for c in result["checks"]}
    assert {"scope_isolation", "purge"} <= set(result["required"])
    assert checks["scope_kept"]["passed"] == checks["scope_kept"]["total"] == 3
    assert checks["scope_isolation"]["passed"] == checks["scope_isolation"]["total"] == 9
    assert checks["purge"]["passed"] == checks["purge"]["total"] == 1
    root = Path(result["workspace"])
    try:
        values = planted()
        purged = values["{{ALICE_SCHOOL}}"]
        assert values["{{ALICE_LOCKER}}"] in (root / "scopes/user/alice/MEMORY.md").read_text(encoding="utf-8")
        # sessions/ are the agent's transcripts, which dream forget never changes (docs/forget.md)
        on_disk = [p for p in root.rglob("*") if p.is_file() and not {".git", "sessions"} & set(p.parts)]
        assert not [p for p in on_disk if purged.encode() in p.read_bytes()]
        log = subprocess.run(["git", "-C", str(root), "log", "-p", "--all"], capture_output=True, text=True, check=True)
        assert purged not in log.stdout and values["{{ALICE_LOCKER}}"] in log.stdout
        shared = subprocess.run(
            ["git", "-C", str(root), "log", "-p", "--all", "--", "USER.md", "memory/MEMORY.md", "entities", "sections"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert not [v for v in values.values() if v in shared]
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


class Views:
    """A workspace's answers, as a test sets them: what each reader's context and search say."""

    def __init__(self, context: dict[str, str], search: dict[str, str] | None = None) -> None:
        self.contexts, self.searches, self.forgotten = context, search or {}, []  # type: list[str]

    def context(self, scope: str) -> str:
        return self.contexts.get(scope, "")

    def search(self, scope: str, query: str) -> str:
        return self.searches.get(scope, "")

    def forget(self, value: str) -> dict[str, Any]:
        self.forgotten.append(value)
        return {"dry_run": False}


def _workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_a_canary_in_another_readers_answers_or_a_shared_file_fails_and_says_where(tmp_path: Path) -> None:
    """Alice's locker code in Bob's search answer, in the shared reader's MCP answers, and in the
    shared USER.md: each is a failed `scope_isolation` item naming the door or the file."""
    scenario = load_scenario(SCENARIO)
    values = planted()
    locker = values["{{ALICE_LOCKER}}"]
    root = _workspace(tmp_path, {"scopes/user/alice/MEMORY.md": f"- {locker}\n", "USER.md": f"- {locker}\n"})
    views = Views({"user:alice": locker}, {"user:bob": f'{{"lines": ["{locker}"]}}'})

    def mcp(root: Path, scope: str, rules: Any, queries: Any) -> list[str]:
        return [f"answer with {locker}"] if scope == "shared" else ["nothing"]

    items = scope_items(scenario, root, views, values, open_git=lambda _: None, mcp=mcp)
    failed = {i.subject: i.detail for i in items if not i.passed}
    assert failed["user:alice {{ALICE_LOCKER}} -> user:bob reader"] == "the user:bob reader's search answers hold it"
    assert failed["user:alice {{ALICE_LOCKER}} -> shared reader"] == "the shared reader's MCP answers hold it"
    assert "USER.md (on disk)" in failed["user:alice {{ALICE_LOCKER}} -> files outside its scope"]
    assert all(locker not in detail for detail in failed.values())  # the value itself is never printed
    kept = {i.subject: i.passed for i in items if i.check == "scope_kept"}
    assert kept["user:alice {{ALICE_LOCKER}}"] is True
    assert kept["user:alice {{ALICE_SCHOOL}}"] is False  # planted, never kept: isolation alone proves nothing


def test_a_purge_that_leaves_the_value_behind_fails(tmp_path: Path) -> None:
    """The purge check runs `forget` and then looks everywhere: a value still on disk (or in an
    answer) fails it, naming where."""
    scenario = load_scenario(SCENARIO)
    assert scenario.scopes is not None
    values = planted()
    school = values["{{ALICE_SCHOOL}}"]
    root = _workspace(tmp_path, {"scopes/user/alice/USER.md": f"- school {school}\n"})
    views = Views({"user:alice": school})
    (item,) = purge_items(scenario.scopes, root, views, values, open_git=lambda _: None, mcp=None)
    assert views.forgotten == [school]
    assert not item.passed
    assert "scopes/user/alice/USER.md (on disk)" in item.detail and "user:alice reader's context" in item.detail


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"session_key": "telegram:-1001"}, "not 'user:alice'"),
        ({"scope": "shared", "session_key": "telegram:-1001"}, "not 'shared'"),
        ({"canaries": []}, "at least one canary"),
    ],
)
def test_a_scope_section_that_does_not_hold_together_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    """A reader whose session key the rules put in another scope, a shared "private" reader, or a
    reader with no canary: the scenario is refused (exit 2 from the CLI), naming the reader."""
    folder = tmp_path / "mine"
    shutil.copytree(SCENARIO, folder)
    data = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    data["scopes"]["readers"][0].update(change)
    (folder / "scenario.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=message) as raised:
        load_scenario(folder)
    assert "readers[0]" in str(raised.value)
