"""Every relative link in README.md and docs/ leads somewhere: the file exists, and a `#anchor`
names a heading of that page (GitHub's anchor rules). Someone reading the docs in a clone can
follow every one of them; nothing points outside the repository."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked out."""
    return [(n, _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)) for n, line in outside_fences(text)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text without markup, lower-cased, punctuation other than
    '-' and '_' dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found: set[str] = set(_HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for _, line in outside_fences(text):
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links() -> list[str]:
    problems: list[str] = []
    for page in pages():
        rel_page = page.relative_to(REPO).as_posix()
        for number, line in prose_lines(page.read_text(encoding="utf-8")):
            for target in _LINK.findall(line):
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path_part, _, anchor = target.partition("#")
                where = f"{rel_page}:{number}: {target}"
                dest = page if not path_part else (page.parent / path_part).resolve()
                try:
                    rel_dest = dest.relative_to(REPO).as_posix()
                except ValueError:
                    problems.append(f"{where}: leads outside the repository")
                    continue
                if not dest.exists():
                    problems.append(f"{where}: {rel_dest} does not exist")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problems.append(f"{where}: no heading #{anchor} in {rel_dest}")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    """Each relative link in README.md and docs/**/*.md names an existing file or folder of the
    repository, and each #anchor a heading of the linked page."""
    problems = broken_links()
    assert problems == [], "\n".join(problems)


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    """The check is not blind: a missing page, a missing heading and a link out of the repository
    are each reported, while links inside code are not links."""
    assert slug("`dream search QUERY [--max-results N]`") == "dream-search-query---max-results-n"
    assert slug("index.md") == "indexmd" and slug("Dream's own files") == "dreams-own-files"
    text = "[a](nope.md) [b](#missing) `[c](inside-code.md)`\n```\n[d](fenced.md)\n```\n"
    lines = [line for _, line in prose_lines(text)]
    assert [t for line in lines for t in _LINK.findall(line)] == ["nope.md", "#missing"]
    page = REPO / "docs" / "reference" / "README.md"
    assert "changing-the-spec" in anchors(page) and "nothing-here" not in anchors(page)


def test_docs_cite_no_document_outside_the_repository() -> None:
    """README.md and docs/ never send a reader to the contract, the lessons or the shared folder
    the project was first specified in: the spec is docs/reference/, and a lesson is stated where
    it matters."""
    outside = ("CONTRACT", "../shared", "LESSONS", "/work/")
    hits = [
        f"{page.relative_to(REPO).as_posix()}:{number}: {line.strip()[:100]}"
        for page in [*pages(), *sorted((REPO / "docs").rglob("*.json"))]
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if any(word in line for word in outside)
    ]
    assert hits == [], "\n".join(hits)


_CODE_PATH = re.compile(r"`((?:core|adapters|app|entrypoints|settings|testing|scripts|tests)/[\w/.-]+\.py)`")
_PACKAGE_ROOTS = ("core/", "adapters/", "app/", "entrypoints/", "settings/", "testing/")


def test_the_code_the_spec_names_exists() -> None:
    """Every module, script and test docs/reference/ names in backticks (`core/paths.py`,
    `scripts/gen_report_schema.py`) is in the repository: a module that moved into a package of
    the same name counts, a module that is gone does not."""
    missing = []
    for page in sorted((REPO / "docs" / "reference").glob("*.md")):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for name in _CODE_PATH.findall(line):
                path = REPO / "src" / "dream_memory" / name if name.startswith(_PACKAGE_ROOTS) else REPO / name
                if path.is_file() or path.with_suffix("").is_dir():
                    continue
                missing.append(f"{page.relative_to(REPO).as_posix()}:{number}: {name}")
    assert missing == [], "\n".join(missing)
