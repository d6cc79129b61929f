"""Property tests for hostile input (issue 14): generated git trees, held records, index rows and
symlink layouts with hostile names, against every door that writes, deletes or serves.

The property, for every generated case: no file outside the workspace (and nothing inside
``.git/`` but what git itself keeps: objects, refs, logs, the index) is created, changed or
deleted; no ``.git`` folder appears anywhere in the workspace under any spelling; no read door
prints a canary kept outside the store, in ``.git/config``, in raw history or in an excluded
entity; and every command ends with exit 0, 1 or 2, never a traceback.

Doors: `dream restore` (both directions, with --force), `dream run --branch`, `dream log`,
`--apply-held` (with --force) and `--discard-held`; `dream entity/section/search/resolve/context`
and the MCP tools dream_entity, dream_section, dream_search, dream_resolve.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import posixpath
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client

from dream_memory.core import layout
from dream_memory.core.paths import branch_name_problem, is_dotgit, path_problem
from dream_memory.core.state import DreamState, HeldBatch
from dream_memory.entrypoints.mcp_server import build_server
from dream_memory.testing.hostile import Outcome, cli, raw_commit

CASES = settings(
    max_examples=int(os.environ.get("DREAM_HOSTILE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
CANARY = "CANARY-7f3d9a-NEVER-SERVED"
PAYLOAD = b"#!/bin/sh\necho pwned\n"
# What git itself keeps under .git/ and may change when a command commits.
GIT_OWN = ("objects", "refs", "logs", "index", "HEAD", "ORIG_HEAD", "COMMIT_EDITMSG", "packed-refs")


# --- the world each case runs in --------------------------------------------------------------------


@functools.cache
def _template() -> Path:
    """A workspace made by `dream init` (with a Dream commit), reused by every case as a copy."""
    base = Path(tempfile.mkdtemp(prefix="dream-hostile-template-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)  # outside pytest's tmp, so ours to remove
    ws = base / "ws"
    env = _env(base)
    assert cli("init", "--workspace", str(ws), env=env).code == 0
    assert cli("append", "the user likes tea", "--workspace", str(ws), env=env).code == 0
    assert cli("run", "--model", "offline", "--workspace", str(ws), env=env).code == 0
    (ws / ".git" / "config").write_text((ws / ".git" / "config").read_text() + f"# token {CANARY}\n")
    return base


def _env(base: Path) -> dict[str, str]:
    (base / "home").mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(base / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "DREAM_WORKSPACE": "",
        "DREAM_CONFIG": "",
        "DREAM_MEMORY_STORE": "",
        "DREAM_MEMORY_EXCLUDE": "",
        "XDG_CACHE_HOME": str(base / "home" / ".cache"),
    }


class World:
    """tmp/outside (sentinel files, a folder symlinks may point at) beside tmp/ws (the workspace)."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="dream-hostile-"))
        shutil.copytree(_template() / "ws", self.base / "ws", symlinks=True)
        self.ws = self.base / "ws"
        self.outside = self.base / "outside"
        (self.outside / "dir" / "x").mkdir(parents=True)
        (self.outside / "secret.md").write_text(f"# secret\n{CANARY}\n")
        (self.outside / "dir" / "x" / "SKILL.md").write_text(f"---\nalways: true\n---\n{CANARY}\n")
        (self.outside / "dir" / "victim.md").write_text("victim\n")
        self.env = _env(self.base)

    def run(self, *args: str) -> Outcome:
        outcome = cli(*args, "--workspace", str(self.ws), env=self.env)
        assert outcome.crash is None, f"dream {' '.join(args)} crashed:\n{outcome.crash}"
        assert outcome.code in (0, 1, 2), (args, outcome)
        return outcome

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def _entries(root: Path) -> Iterator[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            yield path.relative_to(root).as_posix(), path


def _state(path: Path) -> tuple[object, ...]:
    st_ = path.lstat()
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_dir():
        return ("dir",)
    return ("file", st_.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())


def protected(world: World) -> dict[str, tuple[object, ...]]:
    """Everything no command may touch: every entry outside the workspace, and .git/ but for
    what git keeps there itself."""
    found: dict[str, tuple[object, ...]] = {}
    for rel, path in _entries(world.base):
        top = rel.split("/")[0]
        if top == "home":
            continue  # the fake HOME: caches
        if top == "ws":
            parts = rel.split("/")
            if len(parts) < 2 or parts[1] != ".git" or (len(parts) > 2 and parts[2] in GIT_OWN):
                continue
            if parts[-1].endswith(".lock"):
                continue
        found[rel] = _state(path)
    return found


def dotgit_folders(world: World) -> set[str]:
    """Workspace entries (outside the real .git) that a case-folding filesystem takes for .git."""
    return {
        rel
        for rel, _ in _entries(world.ws)
        if not rel.startswith(".git/") and rel != ".git" and any(is_dotgit(p) for p in rel.split("/"))
    }


def check_untouched(world: World, before: dict[str, tuple[object, ...]], dotgit: set[str]) -> None:
    after = protected(world)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"touched outside the workspace or inside .git: {changed}"
    assert dotgit_folders(world) == dotgit, "a .git folder appeared in the workspace"


# --- hostile names -----------------------------------------------------------------------------------

NAMES = st.sampled_from(
    [
        b"..",
        b".",
        b".git",
        b".GIT",
        b".Git",
        b".git.",
        b".git ",
        b"git~1",
        b".g\xe2\x80\x8cit",  # .g<ZWNJ>it: HFS+ drops the ZWNJ
        b"../../outside/dir/victim.md",
        b"a/../..",
        b"@ABS@",
        b"x\x1b]52;c;AAAA\x07",
        b"\xff\xfe",
        b"hooks",
        b"post-checkout",
        b"config",
    ]
)
SAFE = st.sampled_from([b"skills", b"entities", b"sections", b"memory", b"x", b"SKILL.md", b"a.md", b"MEMORY.md"])
RAW_PATHS = st.lists(st.one_of(NAMES, SAFE), min_size=1, max_size=5).map(tuple)

SYMLINKS = st.sets(
    st.sampled_from(
        [
            ("skills", "@OUT@/dir"),
            ("entities", "@OUT@/dir"),
            ("sections", "@OUT@/dir"),
            ("SOUL.md", "@OUT@/secret.md"),
            ("USER.md", "@OUT@/secret.md"),
            ("memory/MEMORY.md", "@OUT@/secret.md"),
            ("skills/ext", "@OUT@/dir"),
            ("entities/leak.md", "@OUT@/secret.md"),
            ("entities/cfg.md", "../.git/config"),
            ("sections/up.md", "../../outside/secret.md"),
            ("memory/history.jsonl", "@OUT@/secret.md"),
        ]
    ),
    max_size=4,
)


def lay_symlinks(world: World, links: set[tuple[str, str]]) -> None:
    for rel, target in sorted(links):
        path = world.ws / rel
        if path.is_symlink() or not path.parent.is_dir() or path.parent.is_symlink():
            continue
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        path.symlink_to(target.replace("@OUT@", str(world.outside)))


def _absolute(world: World, names: tuple[bytes, ...]) -> tuple[bytes, ...]:
    return tuple(n.replace(b"@ABS@", os.fsencode(world.outside / "dir" / "victim.md")) for n in names)


# --- the properties --------------------------------------------------------------------------------------


@CASES
@given(st.lists(RAW_PATHS, min_size=1, max_size=3), SYMLINKS)
def test_crafted_trees_never_reach_outside_the_workspace(paths: list[tuple[bytes, ...]], links: set) -> None:
    """Commits whose trees hold generated hostile paths, in a workspace with generated symlinks
    out: restore (both ways, --force), run --branch and log touch nothing protected."""
    world = World()
    try:
        files = {_absolute(world, p): PAYLOAD for p in paths}
        try:
            added = raw_commit(world.ws, files, message="dream: add")
            removed = raw_commit(world.ws, dict.fromkeys(files), parent=added, message="dream: drop")
        except (ValueError, KeyError):
            return  # a tree dulwich itself cannot write (conflicting names): nothing to test
        raw_commit(world.ws, {}, parent=removed, move="refs/heads/main")
        raw_commit(world.ws, {}, parent=added, move="refs/heads/evil")
        lay_symlinks(world, links)
        before, dotgit = protected(world), dotgit_folders(world)
        world.run("restore", removed)
        world.run("restore", added, "--force")
        world.run("log", added)
        world.run("run", "--model", "offline", "--branch", "evil")
        check_untouched(world, before, dotgit)
    finally:
        world.close()


HELD_IDS = st.sampled_from(["1-2", "../../skills", "1-2/../..", "..", ".", "a/b", "-x", "1-2\x00"])
HELD_PATHS = st.one_of(
    st.sampled_from(
        [
            "@ABS@",
            "../outside/dir/victim.md",
            "skills/../../outside/dir/victim.md",
            ".git/hooks/post-checkout",
            ".GIT/config",
            "skills/.git/config",
            "memory/history.jsonl",
            "memory/MEMORY.md",
            "skills/x/SKILL.md",
            "entities/a.md",
            "",
            "\x00",
            "skills/x\x1b[2J/SKILL.md",
        ]
    ),
    RAW_PATHS.map(lambda names: b"/".join(names).decode("utf-8", "replace")),
)
HELD_RECORDS = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {"path": HELD_PATHS},
            optional={
                "before": st.none() | st.just("# Memory\n"),
                "after": st.none() | st.just(PAYLOAD.decode()),
            },
        ),
        max_size=3,
    ).map(lambda files: json.dumps({"id": "x", "reason": "r", "files": files}).encode()),
    st.sampled_from([b"{not json", b"\xff", b"[]", b'{"files": 3}', b""]),
)


@CASES
@given(HELD_IDS, HELD_RECORDS, SYMLINKS, st.booleans())
# Found by CI: a file item without "before" passed the record check and crashed with KeyError.
@example("1-2", b'{"files": [{"path": "USER.md", "after": "x"}]}', set(), False)
def test_held_records_never_reach_outside_the_workspace(held_id: str, record: bytes, links: set, force: bool) -> None:
    """Generated held ids and records (hostile paths, broken JSON) in a workspace with
    generated symlinks out: --apply-held (with and without --force) and --discard-held touch
    nothing protected."""
    world = World()
    try:
        record = record.replace(b"@ABS@", os.fsencode(world.outside / "dir" / "victim.md"))
        state = DreamState().add_held(HeldBatch(held_id, 1, 2, "r", "t", ()))
        folder = tuple(held_id.encode("utf-8", "replace").split(b"/"))
        files = {(b"memory", b".dream_state.json"): state.to_json().encode()}
        if all(part not in (b"", b".", b"..") for part in folder) and b"\x00" not in held_id.encode():
            files[(b"memory", b".dream_held", *folder, b"held.json")] = record
        raw_commit(world.ws, files, message="dream: held", move="refs/heads/main")
        for rel in ("memory/.dream_state.json", f"memory/.dream_held/{held_id}/held.json"):
            data = files.get(tuple(p.encode() for p in rel.split("/")))
            target = world.ws / rel
            if data is not None and "\x00" not in rel and ".." not in rel:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        lay_symlinks(world, links)
        before, dotgit = protected(world), dotgit_folders(world)
        world.run("restore", f"--apply-held={held_id}", *(["--force"] if force else []))
        world.run("restore", f"--discard-held={held_id}")
        check_untouched(world, before, dotgit)
    finally:
        world.close()


CELLS = st.sampled_from(
    [
        "@OUT@/secret.md",
        "../outside/secret.md",
        "entities/../../outside/secret.md",
        ".git/config",
        ".GIT/config",
        "./.git//config",
        "memory/history.jsonl",
        "memory/.dream_state.json",
        "entities/leak.md",
        "entities/cfg.md",
        "sections/up.md",
        "entities/payroll.md",
        "./entities//payroll.md",
        "entities/alias.md",
        "entities/hard.md",
        "SOUL.md",
        "",
        "entities/a\x1b[2J.md",
    ]
)
ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", "payroll", "alias", "hard", "c"]), CELLS), max_size=6)


def _read_doors(world: World, rows: list[tuple[str, str]]) -> list[str]:
    """Everything every read door prints for this store (CLI text and JSON, MCP tool results)."""
    outputs: list[str] = []
    env = {**world.env, "DREAM_MEMORY_EXCLUDE": "payroll"}
    store = ["--store", str(world.ws)]
    names = sorted({name for name, _ in rows} | {"leak", "cfg", "alias", "hard", "payroll"})
    commands: list[tuple[str, ...]] = [("entity", n, *store) for n in names]
    commands += [("section", s, *store) for s in ("soul", "user", "memory", "up", "observations", "../outside/x")]
    commands += [("search", q, *store, "--json") for q in ("canary", "secret", "salary")]
    commands += [("search", "canary", *store, "--history")]
    commands += [("resolve", f"/home/u/src/{n}/x", *store) for n in names]
    commands += [("context", "--workspace", str(world.ws)), ("context", "--json", "--workspace", str(world.ws))]
    for args in commands:
        outcome = cli(*args, env=env)
        assert outcome.crash is None, f"dream {' '.join(args)} crashed:\n{outcome.crash}"
        assert outcome.code in (0, 1, 2), (args, outcome)
        outputs.append(outcome.out + outcome.err)

    async def mcp() -> None:
        async with Client(build_server(world.ws, excludes=["payroll"], home="/home/u")) as client:
            calls = [("dream_entity", {"name": n}) for n in names]
            calls += [("dream_section", {"name": s}) for s in ("soul", "user", "memory", "up")]
            calls += [("dream_search", {"query": "canary"}), ("dream_search", {"query": "salary"})]
            calls += [("dream_resolve", {"path": f"/home/u/src/{n}/x"}) for n in names]
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                outputs.append("".join(getattr(b, "text", "") for b in result.content))

    anyio.run(mcp)
    return outputs


@CASES
@given(ROWS, SYMLINKS, st.booleans())
def test_read_doors_never_serve_what_lies_outside_or_is_excluded(
    rows: list[tuple[str, str]], links: set, hard_link: bool
) -> None:
    """Generated index rows (cells naming files outside, .git, raw history, links and an excluded
    entity's file in other spellings) with generated symlinks out and a hard link to the
    excluded entity: no CLI read command or MCP tool prints a canary; nothing in the store or
    outside it changes."""
    world = World()
    try:
        ws = world.ws
        (ws / "entities").mkdir(exist_ok=True)
        (ws / "sections").mkdir(exist_ok=True)
        (ws / "entities" / "payroll.md").write_text(f"# payroll\n- salary {CANARY}\n")
        (ws / "entities" / "alias.md").symlink_to("payroll.md")
        if hard_link:
            os.link(ws / "entities" / "payroll.md", ws / "entities" / "hard.md")
        (ws / "memory" / "archive").mkdir(exist_ok=True)
        (ws / "memory" / "archive" / "2026-04.jsonl").write_text(json.dumps({"content": CANARY}) + "\n")
        table = "| Entity | File | Repos |\n|---|---|---|\n" + "".join(
            f"| {n} | {c.replace('@OUT@', str(world.outside))} | /home/u/src/{n} |\n" for n, c in rows
        )
        (ws / "index.md").write_text(table)
        lay_symlinks(world, links)
        before_all = {rel: _state(p) for rel, p in _entries(world.base) if not rel.startswith("home")}
        for text in _read_doors(world, rows):
            assert CANARY not in text, text[:2000]
        after_all = {rel: _state(p) for rel, p in _entries(world.base) if not rel.startswith("home")}
        assert before_all == after_all, "a read door changed a file"
    finally:
        world.close()


# --- the pure rules behind the doors -------------------------------------------------------------------

PATH_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["..", ".", "", ".git", ".GIT", "git~1", ".git.", "~", "C:", "\\", "\x00", "\x1b", "\ud800"]),
        st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("/.~\\:"), max_size=6),
    ),
    min_size=1,
    max_size=6,
).map("/".join)


@settings(max_examples=2000, deadline=None)
@given(PATH_TEXT)
def test_a_path_the_rule_accepts_stays_below_its_root_and_out_of_git(path: str) -> None:
    """Whatever the text, a path core.paths accepts joins onto any root as a path below it,
    names no .git folder in any spelling, and holds no control character."""
    if path_problem(path) is not None:
        return
    joined = posixpath.normpath(posixpath.join("/root/ws", path))
    assert joined.startswith("/root/ws/") and joined != "/root/ws"
    assert not any(is_dotgit(part) for part in path.split("/"))
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) < 0xA0 for c in path)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(["skills", "entities", "sections", "scopes", "USER.md"]), PATH_TEXT)
@example("skills", "../../outside.txt")
def test_a_path_counted_as_memory_stays_below_the_workspace(folder: str, rest: str) -> None:
    """A path the layout counts as a memory file (what `dream why` and `blame` then read from
    disk) joins onto the workspace as a path below it: `skills/**` once matched
    `skills/../../outside.txt`."""
    path = f"{folder}/{rest}"
    if not layout.is_tracked(path):
        return
    joined = posixpath.normpath(posixpath.join("/root/ws", path))
    assert joined.startswith(f"/root/ws/{folder}/"), path
    assert "\x00" not in path


BRANCH_TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ019-_./@{}~^:?*[\\ ")) | st.characters(codec="utf-8"), min_size=1, max_size=8
)


@settings(max_examples=300, deadline=None)
@given(BRANCH_TEXT)
def test_branch_names_follow_git_check_ref_format(name: str) -> None:
    """A branch name dream-memory accepts is one `git check-ref-format --branch` accepts; apart
    from @-expressions (which git expands and Dream refuses), they accept the same names."""
    if "\x00" in name:
        return  # cannot be passed to a process at all
    proc = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True)
    ours = branch_name_problem(name) is None
    if ours:
        assert proc.returncode == 0, f"accepted {name!r}, which git refuses"
    elif "@" not in name:
        assert proc.returncode != 0, f"refused {name!r} ({branch_name_problem(name)}), which git accepts"
