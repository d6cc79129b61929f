"""The read-side use cases (app.read.ReadStore) on real store folders."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from read_helpers import snapshot

from dream_memory.app.read import PROVISIONAL_NOTICE, ReadStore, search_store
from dream_memory.errors import InputError, NotFound, Refused, UnknownRevision, UsageError

HOME = "/home/u"


def reader(root: Path, *excluded: str, at: str | None = None) -> ReadStore:
    return ReadStore(root, excludes=frozenset(excluded), at=at, home=HOME)


def git(root: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@localhost",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@localhost",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(root: Path, message: str = "memory: init") -> str:
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


# --- entity / section ---------------------------------------------------------------------------


def test_entity_reads_the_file_named_in_the_index(store: Path) -> None:
    """dream entity NAME shows the file of NAME's index row, whatever case NAME is typed in."""
    page = reader(store).entity("NIX-config")
    assert page.path == "entities/nix-config.md"
    assert page.name == "nix-config"
    assert page.text.startswith("# nix-config\n")
    assert not page.truncated and not page.provisional


def test_entity_without_an_index_row_is_found_in_entities(make_store: Callable[..., Path]) -> None:
    """An entity file Dream wrote before its index row exists can still be read."""
    root = make_store({"entities/loose.md": "# loose\n"})
    assert reader(root).entity("loose").path == "entities/loose.md"


def test_unknown_entity_names_the_known_ones(store: Path) -> None:
    """An unknown entity is NotFound (exit 1), and the message lists entities that exist."""
    with pytest.raises(NotFound) as err:
        reader(store, "secret").entity("nope")
    assert "nix-config" in str(err.value)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("soul", "SOUL.md"),
        ("USER", "USER.md"),
        ("memory", "memory/MEMORY.md"),
        ("observations", "observations.md"),
        ("deploys", "sections/deploys.md"),
        ("deploys.md", "sections/deploys.md"),
    ],
)
def test_section_names(store: Path, name: str, path: str) -> None:
    """soul, user, memory and observations reach the durable files; other names sections/NAME.md."""
    assert reader(store).section(name).path == path


def test_observations_are_framed_as_provisional(store: Path) -> None:
    """Text from observations.md always starts with a '> Provisional:' line, a later page too."""
    page = reader(store).section("observations")
    assert page.text.splitlines()[0] == PROVISIONAL_NOTICE
    assert page.text.startswith("> Provisional:")
    assert page.provisional
    (store / "observations.md").write_text("- 2026-04-01 one\n- 2026-04-02 two\n", encoding="utf-8")
    later = reader(store).section("observations", offset_line=2)
    assert later.text == f"{PROVISIONAL_NOTICE}\n- 2026-04-02 two\n"


def test_unknown_section(store: Path) -> None:
    """An unknown section is NotFound (exit 1) and lists the sections there are."""
    with pytest.raises(NotFound) as err:
        reader(store).section("nope")
    assert "deploys" in str(err.value)


def test_long_entity_is_bounded_and_continues(make_store: Callable[..., Path]) -> None:
    """A long entity is cut with a [truncated] line, and --offset-line reads on from there."""
    body = "".join(f"- fact {i}\n" for i in range(1, 501))
    root = make_store({"entities/long.md": body})
    first = reader(root).entity("long")
    assert first.truncated and first.next_offset_line == 200
    assert first.text.splitlines()[-1].startswith("[truncated]")
    assert "--offset-line 200" in first.text
    second = reader(root).entity("long", offset_line=200)
    assert second.text.splitlines()[0] == "- fact 200"


def test_huge_single_line_file(make_store: Callable[..., Path]) -> None:
    """A file that is one enormous line is served cut to 16 KiB, never whole."""
    root = make_store({"entities/blob.md": "x" * 5_000_000 + "\nnext\n"})
    page = reader(root).entity("blob")
    assert len(page.text.encode()) <= 16 * 1024
    assert page.line_cut and page.next_offset_line == 2
    assert reader(root).entity("blob", offset_line=2).text == "next\n"


def test_crlf_and_invalid_bytes_later_in_a_file(make_store: Callable[..., Path]) -> None:
    """CRLF endings are kept as they are; a stray bad byte far in becomes U+FFFD."""
    root = make_store({"entities/w.md": b"a\r\nb\r\n" + b"c" * 9000 + b"\xff\n"})
    text = reader(root).entity("w").text
    assert text.startswith("a\r\nb\r\n")
    assert text.rstrip("\n").endswith("\ufffd")


# --- refusals: traversal, symlinks, binary ------------------------------------------------------


@pytest.mark.parametrize("cell", ["../outside.md", "/etc/passwd", "entities/../../outside.md", "~/x.md"])
def test_file_cells_leaving_the_store_are_refused(make_store: Callable[..., Path], cell: str) -> None:
    """An index row whose File points outside the store is refused (exit 1), not followed."""
    root = make_store({"index.md": f"| Entity | File | Repos |\n|-|-|-|\n| evil | {cell} | /evil |\n"})
    (root.parent / "outside.md").write_text("outside secret\n")
    with pytest.raises(Refused, match="outside the store"):
        reader(root).entity("evil")
    with pytest.raises(Refused):
        reader(root).resolve("/evil/x")


@pytest.mark.parametrize("name", ["../index", "../../outside", "/etc/passwd", "a/../../x", "..", "~/x"])
def test_section_names_leaving_sections_are_refused(store: Path, name: str) -> None:
    """A section name cannot climb out of sections/."""
    with pytest.raises(Refused):
        reader(store).section(name)


def test_symlinks_pointing_out_are_refused(make_store: Callable[..., Path], tmp_path: Path) -> None:
    """A symlink inside the store that leads outside is never read, by any surface."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.md").write_text("# leak\nTOPSECRET flakes\n")
    root = make_store()
    (root / "entities" / "leak.md").symlink_to(outside / "leak.md")
    (root / "sections" / "leak.md").symlink_to(outside / "leak.md")
    (root / "sections" / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Refused, match="outside the store"):
        reader(root).entity("leak")
    with pytest.raises(Refused, match="outside the store"):
        reader(root).section("leak")
    with pytest.raises(Refused):
        reader(root).section("linkdir/leak")
    result = reader(root).search("topsecret")
    assert result.results == ()


def test_symlinks_inside_the_store_are_followed(make_store: Callable[..., Path]) -> None:
    """A symlink to another file of the same store reads like the file itself."""
    root = make_store()
    (root / "sections" / "alias.md").symlink_to(root / "sections" / "deploys.md")
    assert reader(root).section("alias").text.startswith("# Deploys")
    assert any(h.path == "sections/alias.md" for h in reader(root).search("colmena").results)


def test_binary_files_are_refused(make_store: Callable[..., Path]) -> None:
    """A binary file is refused (exit 1) by entity and section, and skipped by search."""
    root = make_store({"entities/bin.md": b"\x89PNG\r\n\x1a\n\0\0flakes", "sections/latin.md": b"caf\xe9 flakes\n"})
    with pytest.raises(Refused, match="not a UTF-8 text file"):
        reader(root).entity("bin")
    with pytest.raises(Refused, match="not a UTF-8 text file"):
        reader(root).section("latin")
    result = reader(root).search("flakes", max_results=50)
    for refused in ("entities/bin.md", "sections/latin.md"):  # a NUL; bytes that are not UTF-8
        assert refused not in [h.path for h in result.results]
        assert f"{refused}: binary" in result.skipped


def test_fifo_in_the_store_does_not_hang(make_store: Callable[..., Path]) -> None:
    """A named pipe where a file should be is refused as one instead of blocking the reader."""
    root = make_store()
    os.mkfifo(root / "sections" / "pipe.md")
    with pytest.raises(Refused, match=r"sections/pipe\.md is a named pipe"):
        reader(root).section("pipe")
    reader(root).search("flakes")


def test_missing_store_is_bad_usage(tmp_path: Path) -> None:
    """A store folder that does not exist is bad usage (exit 2) with a hint."""
    with pytest.raises(InputError, match="does not exist"):
        reader(tmp_path / "nope")


# --- resolve -------------------------------------------------------------------------------------


def test_resolve_reports_root_and_file(store: Path) -> None:
    """resolve names the entity, its file and the matching root."""
    found = reader(store).resolve("/home/u/system/nix-config/hosts/laptop.nix")
    assert (found.entity, found.file, found.root) == (
        "nix-config",
        "entities/nix-config.md",
        "/home/u/system/nix-config",
    )
    assert json.loads(json.dumps(found.to_json()))["entity"] == "nix-config"


def test_resolve_expands_tilde_and_relative_paths(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~ and relative paths are made absolute before matching."""
    assert reader(store).resolve("~/dots/vimrc").entity == "nix-config"
    monkeypatch.chdir(store)
    with pytest.raises(NotFound):
        reader(store).resolve(".")


def test_resolve_follows_symlinked_checkouts(store: Path, tmp_path: Path) -> None:
    """A path reached through a symlink resolves by its real location when the link matches nothing."""
    real = tmp_path / "real-nix"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    root = store
    index = (root / "index.md").read_text() + f"| real | entities/dream.md | {real} |\n"
    (root / "index.md").write_text(index)
    assert reader(root).resolve(str(link / "sub")).entity == "real"


def test_resolve_without_index(make_store: Callable[..., Path]) -> None:
    """A store without index.md resolves nothing (exit 1) and says why."""
    with pytest.raises(NotFound, match=r"index\.md"):
        reader(make_store({"entities/a.md": "a\n"}, base=False)).resolve("/x")


# --- search --------------------------------------------------------------------------------------


def test_search_sources_and_previews(store: Path) -> None:
    """search finds entities, sections, durable files and observations, with numbered lines."""
    result = reader(store).search("colmena flakes", max_results=50)
    paths = [h.path for h in result.results]
    assert paths[0] == "sections/deploys.md"  # both terms, and Colmena is a heading
    assert set(paths) >= {"entities/nix-config.md", "entities/dream.md", "observations.md"}
    assert all(len(h.lines) <= 3 for h in result.results)
    first = result.results[0]
    assert [(line.line_no, line.text) for line in first.lines] == [(3, "## Colmena"), (4, "- flakes pinned weekly")]


def test_search_observation_hits_are_provisional(store: Path) -> None:
    """An observations.md hit starts its block with '> Provisional:', in text and in JSON."""
    result = reader(store).search("deploy-rs")
    (hit,) = result.results
    assert hit.path == "observations.md"
    assert hit.to_text().startswith("> Provisional:")
    assert next(iter(hit.to_json().values())).startswith("> Provisional:")
    assert result.to_text().startswith("> Provisional:")


def test_search_history_only_when_asked(make_store: Callable[..., Path]) -> None:
    """history.jsonl is searched only with --history, its entries shown readably."""
    line = json.dumps({"cursor": 7, "timestamp": "2026-04-01 10:00", "content": "switched to Zellij"})
    root = make_store({"memory/history.jsonl": line + "\nnot json\n"})
    assert reader(root).search("zellij").results == ()
    (hit,) = reader(root).search("zellij", history=True).results
    assert hit.path == "memory/history.jsonl"
    assert hit.lines[0].line_no == 1
    assert "cursor 7" in hit.lines[0].text and "Zellij" in hit.lines[0].text


def test_a_history_line_that_is_not_utf8_leaves_the_rest_of_history_searchable(
    make_store: Callable[..., Path],
) -> None:
    """A line another tool wrote to history.jsonl in Latin-1 (the history log keeps such lines)
    does not make --history skip the whole file as binary: the other entries are still found.
    (History was skipped whole: search took any bytes that are not UTF-8 for a binary file.)"""
    good = json.dumps({"cursor": 7, "timestamp": "2026-04-01 10:00", "content": "switched to Zellij"})
    root = make_store({"memory/history.jsonl": b'{"note": "caf\xe9"}\n' + good.encode() + b"\n"})
    result = reader(root).search("zellij", history=True)
    assert [hit.path for hit in result.results] == ["memory/history.jsonl"]
    assert not [s for s in result.skipped if s.startswith("memory/history.jsonl")]


def test_search_store_library_function(store: Path) -> None:
    """Other features (Dream, dream context) search a store without the CLI."""
    result = search_store(store, "flakes", 2, excludes=["nix-config"])
    assert len(result.results) == 2
    assert "entities/nix-config.md" not in [h.path for h in result.results]
    assert result.matched == 3  # nix-old, secret, sections/deploys


def test_search_more_than_limit_says_so(store: Path) -> None:
    """When more sources match than are shown, the text says how many were left out."""
    result = reader(store).search("flakes", max_results=1)
    assert len(result.results) == 1
    assert "more source" in result.to_text()


def test_search_large_store_skips_nothing(make_store: Callable[..., Path]) -> None:
    """Hundreds of files are all searched; ranking still picks the best first."""
    extra = {f"entities/e{i:03}.md": f"# e{i}\nfiller {i}\n" for i in range(300)}
    extra["entities/e150.md"] = "# e150\nneedle needle\n"
    result = reader(make_store(extra)).search("needle")
    assert [h.path for h in result.results] == ["entities/e150.md"]


# --- excludes: every surface ---------------------------------------------------------------------


def test_exclude_matrix(store: Path) -> None:
    """DREAM_MEMORY_EXCLUDE hides an entity everywhere: entity is refused, search skips it before
    the limit, resolve never returns it, the index leaves its row out, and its file cannot be
    reached as a section either."""
    plain, hidden = reader(store), reader(store, "SECRET")
    # entity
    assert plain.entity("secret").text.startswith("# secret")
    with pytest.raises(Refused, match="DREAM_MEMORY_EXCLUDE"):
        hidden.entity("secret")
    with pytest.raises(Refused):
        hidden.entity("Secret")
    # search: the best hit is the excluded one; the limit of 1 must still return a visible source
    assert plain.search("vault", max_results=1).results[0].path == "entities/secret.md"
    assert hidden.search("vault", max_results=1).results == ()
    top = hidden.search("flakes", max_results=1).results
    assert len(top) == 1 and top[0].path != "entities/secret.md"
    assert all(h.path != "entities/secret.md" for h in hidden.search("flakes", max_results=50).results)
    assert hidden.search("flakes", max_results=50).matched == plain.search("flakes", max_results=50).matched - 1
    # resolve
    assert plain.resolve("/home/u/secret/x").entity == "secret"
    with pytest.raises(NotFound):
        hidden.resolve("/home/u/secret/x")
    # the index as served
    assert "secret" in plain.index_page().text
    assert "secret" not in hidden.index_page().text
    assert "secret" not in hidden.entity_names()


def test_exclude_covers_files_mapped_elsewhere(make_store: Callable[..., Path]) -> None:
    """An excluded entity whose File lives under sections/ cannot be read as a section or found."""
    root = make_store(
        {
            "index.md": "| Entity | File | Repos |\n|-|-|-|\n| hush | sections/hush.md | /h |\n",
            "sections/hush.md": "# hush\nquiet words\n",
        }
    )
    with pytest.raises(Refused):
        reader(root, "hush").section("hush")
    assert reader(root, "hush").search("quiet").results == ()
    assert reader(root).search("quiet").results[0].path == "sections/hush.md"


def test_exclude_applies_to_at_reads(store: Path) -> None:
    """Reading an old revision does not bring an excluded entity back."""
    sha = commit_all(store)
    old = reader(store, "secret", at=sha[:8])
    with pytest.raises(Refused):
        old.entity("secret")
    assert all(h.path != "entities/secret.md" for h in old.search("vault").results)
    with pytest.raises(NotFound):
        old.resolve("/home/u/secret")


def test_exclude_at_uses_todays_index_too(make_store: Callable[..., Path]) -> None:
    """A file that today's index maps to an excluded entity stays hidden in an older revision,
    even when the index of that revision did not name it yet."""
    root = make_store({"sections/hush.md": "# hush\nquiet words\n"})
    sha = commit_all(root)
    index = (root / "index.md").read_text() + "| hush | sections/hush.md | /h |\n"
    (root / "index.md").write_text(index)
    with pytest.raises(Refused):
        reader(root, "hush", at=sha).section("hush")
    assert reader(root, "hush", at=sha).search("quiet").results == ()
    assert reader(root, at=sha).section("hush").text.startswith("# hush")


# --- --at ----------------------------------------------------------------------------------------


def test_at_reads_a_past_revision(store: Path) -> None:
    """--at REV shows files as committed then, not as they are now."""
    first = commit_all(store)
    (store / "entities" / "nix-config.md").write_text("# nix-config\n\n- moved to Lix\n")
    (store / "sections" / "new.md").write_text("# new\n")
    commit_all(store, "dream: edit")
    with reader(store, at=first[:7]) as old:
        assert old.revision == first
        assert "flakes" in old.entity("nix-config").text
        assert old.entity("nix-config").revision == first
        with pytest.raises(NotFound):
            old.section("new")
        assert [h.path for h in old.search("lix").results] == []
    assert "Lix" in reader(store, at="HEAD").entity("nix-config").text
    assert "flakes" in reader(store, at="HEAD~1").entity("nix-config").text


def test_at_with_a_bad_revision(store: Path) -> None:
    """An unknown or malformed revision is bad usage (exit 2); a store outside git too."""
    with pytest.raises(UsageError, match="not inside a git repository"):
        reader(store, at="HEAD")
    commit_all(store)
    with pytest.raises(UnknownRevision):
        reader(store, at="zzzz")
    with pytest.raises(UnknownRevision):
        reader(store, at="abcdef12")


def test_a_bad_revision_leaves_no_file_open(store: Path) -> None:
    """A refused --at (an unknown commit) closes the repository it opened: a long-lived caller
    (the Python API, an agent's process) asking again and again runs out of nothing."""
    commit_all(store)
    git(store, "gc", "-q")  # the objects in a pack, which answering the revision opens
    open_files = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(UnknownRevision):
            reader(store, at="beefbeef")
    assert len(os.listdir("/proc/self/fd")) == open_files


# --- read-only -----------------------------------------------------------------------------------


def test_nothing_is_written_to_the_store(store: Path) -> None:
    """No read-side operation creates, changes or touches anything in the store (git included)."""
    (store / "memory" / "history.jsonl").write_text('{"cursor": 1, "timestamp": "t", "content": "flakes"}\n')
    commit_all(store)
    before = snapshot(store)
    for at in (None, "HEAD"):
        with reader(store, "secret", at=at) as r:
            r.entity("nix-config")
            r.section("observations")
            r.section("memory")
            r.resolve("/home/u/dots")
            r.search("flakes colmena", max_results=50, history=True)
            r.index_page()
            r.entity_names()
            r.section_names()
            for bad in (lambda: r.entity("secret"), lambda: r.entity("nope"), lambda: r.section("../x")):
                with pytest.raises((Refused, NotFound)):
                    bad()
    assert snapshot(store) == before
