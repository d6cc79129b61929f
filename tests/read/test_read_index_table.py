"""index.md parsing and the path resolver (core.index_table), as tables of cases."""

from __future__ import annotations

import pytest

from dream_memory.core.index_table import (
    clean_root,
    filtered_index_text,
    parse_index,
    resolve,
    safe_relative,
    split_cells,
    split_repos,
    strip_parenthetical,
)

HOME = "/home/u"


def table(*rows: str, header: str = "| Entity | File | Repos |") -> str:
    return "\n".join([header, "|---|---|---|", *rows]) + "\n"


def resolved(text: str, path: str, excluded: frozenset[str] = frozenset()) -> str | None:
    found = resolve(parse_index(text, home=HOME).rows, path, excluded=excluded)
    return None if found is None else found.entity


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("/home/u/nix-config (was nixos-system)", ["/home/u/nix-config (was nixos-system)"]),
        ("/a (renamed, twice), /b", ["/a (renamed, twice)", "/b"]),
        ("/a,/b , /c", ["/a", "/b", "/c"]),
        ("", []),
        (" , ", []),
        ("/a (x (nested, deep)), /b", ["/a (x (nested, deep))", "/b"]),
    ],
)
def test_repos_split_on_commas_outside_parentheses(cell: str, expected: list[str]) -> None:
    """A comma inside a parenthetical note never splits a repo path in two."""
    assert split_repos(cell) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/home/u/nix-config (was nixos-system)", "/home/u/nix-config"),
        ("/a/b/ (old)", "/a/b"),
        ("/a/b (x (nested))", "/a/b"),
        ("/a/b (one) (two)", "/a/b"),
        ("~/dots", "/home/u/dots"),
        ("~", "/home/u"),
        ("`/a/b/`", "/a/b"),
        ("/a//b/./c/", "/a/b/c"),
        ("relative/path", None),
        ("(only a note)", None),
        ("C:\\Users\\u", None),
    ],
)
def test_repo_roots_are_normalised(raw: str, expected: str | None) -> None:
    """Roots lose their trailing note and slash, expand ~, and relative ones are ignored."""
    assert clean_root(raw, HOME) == expected


def test_tilde_without_a_home_is_ignored() -> None:
    """Without a home folder a ~ root cannot match anything, so it is dropped rather than guessed."""
    assert clean_root("~/dots", None) is None


def test_parenthetical_only_stripped_at_the_end() -> None:
    """A parenthesis in the middle of a path stays part of the path."""
    assert strip_parenthetical("/a/(b)/c") == "/a/(b)/c"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("| a | b | c |", ["a", "b", "c"]),
        ("a | b | c", ["a", "b", "c"]),
        ("| a \\| x | b |", ["a | x", "b"]),
        ("| a |  | c |", ["a", "", "c"]),
    ],
)
def test_cells(line: str, expected: list[str]) -> None:
    """Outer pipes are optional, escaped pipes are literal, blank cells stay blank."""
    assert split_cells(line) == expected


RESOLVER_CASES = [
    # (description, rows, path, expected entity)
    (
        "parenthetical stripped",
        ["| nix | e/nix.md | /home/u/nix-config (was nixos-system) |"],
        "/home/u/nix-config/x",
        "nix",
    ),
    ("component boundary", ["| nix | e/nix.md | /a/nix |"], "/a/nix-old/x", None),
    ("exact root", ["| nix | e/nix.md | /a/nix |"], "/a/nix", "nix"),
    (
        "longest root wins",
        ["| broad | e/b.md | /a |", "| nix | e/nix.md | /a/nix |", "| old | e/o.md | /a/nix-old |"],
        "/a/nix-old/y",
        "old",
    ),
    ("trailing slash on the root", ["| nix | e/nix.md | /a/nix/ |"], "/a/nix/z", "nix"),
    ("trailing slash on the path", ["| nix | e/nix.md | /a/nix |"], "/a/nix/", "nix"),
    ("tie: earlier row wins", ["| one | e/1.md | /a/b |", "| two | e/2.md | /a/b |"], "/a/b/c", "one"),
    ("second repo of a row", ["| nix | e/nix.md | /x, /a/nix |"], "/a/nix/q", "nix"),
    ("comma inside the note", ["| nix | e/nix.md | /a/nix (was b, c), /d |"], "/d/e", "nix"),
    ("tilde expanded", ["| dots | e/d.md | ~/dots |"], "/home/u/dots/vim", "dots"),
    ("dotdot in the path folds", ["| nix | e/nix.md | /a/nix |"], "/a/other/../nix/f", "nix"),
    ("root slash matches all", ["| all | e/a.md | / |", "| nix | e/nix.md | /a/nix |"], "/z", "all"),
    ("nothing matches", ["| nix | e/nix.md | /a/nix |"], "/b", None),
]


@pytest.mark.parametrize(("what", "rows", "path", "expected"), RESOLVER_CASES, ids=[c[0] for c in RESOLVER_CASES])
def test_resolver_table(what: str, rows: list[str], path: str, expected: str | None) -> None:
    """resolve PATH names the entity whose root holds PATH on whole components, longest first."""
    assert resolved(table(*rows), path) == expected


def test_ties_are_reported_and_stable() -> None:
    """Equal roots resolve to the first row every time, and the others are named as ties."""
    text = table("| one | e/1.md | /a/b |", "| two | e/2.md | /a/b |", "| three | e/3.md | /a/b |")
    results = {resolve(parse_index(text).rows, "/a/b/c") for _ in range(5)}
    assert len(results) == 1
    found = results.pop()
    assert found is not None
    assert (found.entity, found.ties) == ("one", ("two", "three"))


def test_excluded_entities_are_invisible_to_the_resolver() -> None:
    """An excluded entity is never returned; the next best root answers instead."""
    text = table("| broad | e/b.md | /a |", "| secret | e/s.md | /a/secret |")
    assert resolved(text, "/a/secret/x", frozenset({"secret"})) == "broad"
    assert resolved(table("| secret | e/s.md | /a/secret |"), "/a/secret", frozenset({"secret"})) is None


def test_header_order_and_extra_columns() -> None:
    """Columns are found by header name in any order; unknown columns are ignored."""
    text = "| Notes | repos | FILE | entity |\n|:--|--|--:|:-:|\n| hi | /a/nix | e/nix.md | nix |\n"
    rows = parse_index(text).rows
    assert [(r.entity, r.file, r.repos) for r in rows] == [("nix", "e/nix.md", ("/a/nix",))]


def test_windows_line_endings() -> None:
    """A table saved with CRLF line endings parses the same."""
    text = table("| nix | e/nix.md | /a/nix |").replace("\n", "\r\n")
    assert resolved(text, "/a/nix/x") == "nix"
    assert parse_index(text).rows[0].raw.endswith("|")


def test_escaped_pipes_in_cells() -> None:
    """A literal pipe written as \\| stays inside its cell."""
    rows = parse_index(table("| a\\|b | e/ab.md | /a/b |")).rows
    assert rows[0].entity == "a|b"
    assert rows[0].file == "e/ab.md"


def test_blank_cells_and_problems() -> None:
    """Blank File and Repos cells are allowed; a blank Entity is reported, not guessed."""
    parsed = parse_index(table("| nix |  |  |", "|  | e/x.md | /x |", "| rel | e/r.md | relative/x |"))
    assert [r.entity for r in parsed.rows] == ["nix", "rel"]
    assert parsed.rows[0].file == ""
    assert parsed.rows[1].repos == ()
    assert any("line 4" in p and "Entity" in p for p in parsed.problems)
    assert any("relative/x" in p for p in parsed.problems)


def test_markup_in_cells() -> None:
    """Backticks, bold and markdown links around cells are looked through."""
    rows = parse_index(table("| **nix** | [nix](entities/nix.md) | `/a/nix` |")).rows
    assert (rows[0].entity, rows[0].file, rows[0].repos) == ("nix", "entities/nix.md", ("/a/nix",))


def test_other_tables_and_code_fences_are_ignored() -> None:
    """Only tables with an Entity header count; a table inside a code fence is an example."""
    text = (
        "| Name of thing | Value |\n|---|---|\n| x | y |\n\n"
        "```\n| Entity | File | Repos |\n|---|---|---|\n| fake | f.md | /f |\n```\n\n" + table("| real | r.md | /r |")
    )
    assert [r.entity for r in parse_index(text).rows] == ["real"]


def test_find_is_case_insensitive() -> None:
    """Entity names are looked up regardless of case."""
    parsed = parse_index(table("| Nix-Config | e/n.md | /n |"))
    row = parsed.find("nix-config")
    assert row is not None and row.entity == "Nix-Config"


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("entities/a.md", "entities/a.md"),
        ("./entities//a.md", "entities/a.md"),
        ("../a.md", None),
        ("entities/../../a.md", None),
        ("/etc/passwd", None),
        ("~/x.md", None),
        ("C:/x.md", None),
        ("entities\\..\\a.md", None),
        ("", None),
    ],
)
def test_file_cells_must_stay_in_the_store(cell: str, expected: str | None) -> None:
    """A File cell that could point outside the store is rejected before any file is opened."""
    assert safe_relative(cell) == expected


def test_filtered_index_drops_excluded_rows() -> None:
    """The index as served to agents has no row for an excluded entity."""
    text = table("| nix | e/nix.md | /a |", "| Secret | e/s.md | /s |")
    shown = filtered_index_text(text, parse_index(text), frozenset({"secret"}))
    assert "nix" in shown
    assert "e/s.md" not in shown


def test_parsing_only_one_entity_finds_the_same_row() -> None:
    """Looking one entity up in a large index gives the row a full parse gives."""
    rows = [f"| e{i} | entities/e{i}.md | /r/e{i} |" for i in range(300)]
    text = table(*rows)
    full = parse_index(text).find("E150")
    quick = parse_index(text, only="e150").find("e150")
    assert full is not None and quick == full
    assert parse_index(text, only="nope").rows == ()
