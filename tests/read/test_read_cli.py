"""The read commands as a user runs them: real processes, exit codes, stdout and stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from read_helpers import read_env, snapshot

DREAM = str(Path(sys.executable).with_name("dream"))


def run(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DREAM, *args], env=read_env(store, **env), capture_output=True, text=True, timeout=60, check=False
    )


CASES = [
    # (args, extra env, exit code, text expected on stdout or stderr)
    (["entity", "nix-config"], {}, 0, "uses flakes"),
    (["entity", "nope"], {}, 1, "no entity named 'nope'"),
    (["entity", "secret"], {"DREAM_MEMORY_EXCLUDE": "Secret, other"}, 1, "excluded by DREAM_MEMORY_EXCLUDE"),
    (["section", "user"], {}, 0, "dark mode"),
    (["section", "nope"], {}, 1, "no section named"),
    (["section", "../index"], {}, 1, "would leave the sections/ folder"),
    (["resolve", "/home/u/system/nix-config/hosts"], {}, 0, "nix-config"),
    (["resolve", "/home/u/system/nix-configx"], {}, 1, "no entity resolves"),
    (["search", "colmena"], {}, 0, "sections/deploys.md"),
    (["search", "zzz-nothing"], {}, 0, "no source matches"),
    (["search", "colmena", "--no-cache", "--history"], {}, 0, "sections/deploys.md"),
    (["search", "   "], {}, 2, "query is empty"),
    (["search", "flakes", "--max-results", "0"], {}, 2, "max results must be 1..50 (got 0)"),
    (["search", "flakes", "--max-results", "51"], {}, 2, "max results must be 1..50 (got 51)"),
    (["entity", "nix-config", "--offset-line", "0"], {}, 2, "--offset-line"),
    (["entity", "nix-config", "--at", "HEAD"], {}, 2, "not inside a git repository"),
    (["entity"], {}, 2, "Missing argument"),
    (["entity", "x", "--store", "/nonexistent/store"], {}, 2, "does not exist"),
]


@pytest.mark.parametrize(("args", "env", "code", "expected"), CASES, ids=[" ".join(c[0]) or "none" for c in CASES])
def test_exit_codes(store: Path, args: list[str], env: dict[str, str], code: int, expected: str) -> None:
    """0 on success, 1 for an unknown/excluded entity, unknown section or unresolved path, 2 for bad
    usage; the reason is on stderr, results alone on stdout."""
    done = run(store, *args, **env)
    assert done.returncode == code, done.stderr
    assert expected in (done.stdout + done.stderr)
    if code:
        assert done.stdout == ""


def test_json_everywhere(store: Path) -> None:
    """Every read command prints one JSON document with --json."""
    resolved = json.loads(run(store, "resolve", "~/dots", "--json").stdout)
    assert resolved["entity"] == "nix-config" and resolved["root"] == "/home/u/dots"
    entity = json.loads(run(store, "entity", "dream", "--json").stdout)
    assert entity["path"] == "entities/dream.md" and entity["truncated"] is False
    section = json.loads(run(store, "section", "observations", "--json").stdout)
    assert section["provisional"] is True and section["text"].startswith("> Provisional:")
    found = json.loads(run(store, "search", "flakes colmena", "--json", "--max-results", "2").stdout)
    assert found["max_results"] == 2 and len(found["results"]) == 2
    assert found["results"][0]["lines"][0] == {"line": 3, "text": "## Colmena"}


def test_store_option_beats_the_environment(store: Path, make_store) -> None:
    """--store wins over DREAM_MEMORY_STORE, which wins over the workspace."""
    other = make_store({"entities/only-here.md": "# only here\n"})
    assert run(store, "entity", "only-here").returncode == 1
    assert run(store, "entity", "only-here", "--store", str(other)).returncode == 0
    done = subprocess.run(
        [DREAM, "entity", "only-here", "--workspace", str(other)],
        env={k: v for k, v in read_env(store).items() if k not in ("DREAM_MEMORY_STORE", "DREAM_WORKSPACE")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_truncated_entity_says_how_to_read_on(make_store) -> None:
    """A long entity ends with a [truncated] line naming the --offset-line that continues it."""
    root = make_store({"entities/long.md": "".join(f"line {i}\n" for i in range(1, 400))})
    first = run(root, "entity", "long").stdout.splitlines()
    assert len(first) == 200
    assert first[-1] == "[truncated] showing lines 1-199; read on with --offset-line 200"
    assert run(root, "entity", "long", "--offset-line", "200").stdout.splitlines()[0] == "line 200"


def test_cli_read_path_imports_neither_mcp_nor_litellm(store: Path) -> None:
    """resolve, entity, section and search stay light: they never import mcp or litellm."""
    code = (
        "import sys\n"
        "from dream_memory.entrypoints.cli import cli\n"
        "for args in (['resolve', '~/dots'], ['entity', 'nix-config'], ['section', 'soul'], "
        "['search', 'flakes', '--json']):\n"
        "    try:\n"
        "        cli.main(args, prog_name='dream', standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'litellm'))\n"
        "print('LOADED', bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=read_env(store), capture_output=True, text=True, timeout=60, check=False
    )
    assert "LOADED []" in done.stdout, done.stdout + done.stderr


def test_commands_leave_the_store_untouched(store: Path) -> None:
    """Running every read command, successes and failures, changes nothing in the store."""
    before = snapshot(store)
    for args in (
        ["resolve", "/home/u/dots"],
        ["entity", "nix-config", "--json"],
        ["entity", "secret"],
        ["section", "observations"],
        ["search", "flakes", "--history"],
        ["search", ""],
    ):
        run(store, *args, DREAM_MEMORY_EXCLUDE="secret")
    assert snapshot(store) == before
