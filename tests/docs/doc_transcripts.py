"""Console transcripts in the docs, run as tests (the convention is docs/doc-transcripts.md).

Sybil finds the blocks (fenced ``console`` blocks, hidden ``<!-- invisible-code-block: console``
set-up, ``<!-- skip: next "reason" -->``) and keeps one namespace per page; this module adds what
Sybil leaves to its users: running a ``$ `` command in a shell whose variables and folder carry over
from command to command across the page, and comparing what it printed with the lines the page
shows, volatile parts (SHAs, timestamps, ``...``) matched loosely.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sybil import Document, Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from dream_memory.testing import clean_env

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
FROZEN_CLOCK = Path(__file__).parent / "frozen_clock"  # its sitecustomize pins SystemClock.now
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
COMMAND_TIMEOUT = 120
# The page's fresh folder, as the page shows it: in commands it stands for the real folder, and
# the real folder is printed as it.
SHOWN_ROOT = "/tmp/demo"
# The model server a page shows; a page that starts the scripted server in a hidden block with
# `--port-file llm.port` gets this address rewritten to the server's real one.
SHOWN_SERVER = "127.0.0.1:8080"

PROMPT = "$ "
EXIT = re.compile(r"\[exit \d+\]")
ELLIPSIS = "..."
# A commit SHA or a prefix of one: 7 to 40 hex digits holding a digit and a letter, or exactly 7
# or 10 digits or letters a-f (git's and dream's short SHAs can be all digits, and about one in
# 800 short SHAs is all letters, "aadbcba"); other plain numbers and words like "deadbeef" or
# "added" stay exact.
SHA = re.compile(r"\b(?:(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}|[0-9]{7}|[0-9]{10}|[a-f]{7}|[a-f]{10})\b")
# `dream blame`'s 8-digit SHA column, before the commit's time: all digits once in 43 (a CI run
# failed on "22640933"), while other 8-digit numbers stay exact.
BLAME_SHA = re.compile(r"^[0-9]{8}(?= <time> )")
COMMAND_SHA = re.compile(r"\b(?:(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{4,40}|[a-f]{7}|[a-f]{10})\b")
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
TIMESTAMP = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")


@dataclass(frozen=True)
class Step:
    """One ``$ `` command of a transcript, and the lines the page says it prints."""

    command: str
    expected: tuple[str, ...]
    line: int  # the command's line inside the block, from 0
    blank_after: bool = False  # a blank line before the next command (kept when recording)


def parse_steps(source: str) -> list[Step]:
    """The commands of a block and their output lines. A command ending in a backslash goes on
    on the next line; lines before the first prompt are an error (a block that is not a transcript)."""
    lines = source.splitlines()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith(PROMPT):
            raise ValueError(f"line {i + 1} of the block is output before any `$ ` command: {lines[i]!r}")
        start = i
        command = lines[i][len(PROMPT) :]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        heredoc = HEREDOC.search(command)
        if heredoc:  # the lines up to the delimiter are the command's input, not output
            while i + 1 < len(lines):
                i += 1
                command = command + "\n" + lines[i]
                if lines[i] == heredoc.group(1):
                    break
        i += 1
        output: list[str] = []
        while i < len(lines) and not lines[i].startswith(PROMPT):
            output.append(lines[i])
            i += 1
        blank = bool(output) and not output[-1].strip()
        while output and not output[-1].strip():
            output.pop()
        steps.append(Step(command, tuple(output), start, blank))
    return steps


def normalise(line: str) -> str:
    line = TIMESTAMP.sub("<time>", line.rstrip())
    return SHA.sub("<sha>", BLAME_SHA.sub("<sha>", line))


def _line_matches(expected: str, actual: str) -> bool:
    if ELLIPSIS not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split(ELLIPSIS))
    return re.fullmatch(pattern, actual) is not None


def align(expected: list[str], actual: list[str]) -> list[tuple[int, int]] | None:
    """The pairs (expected line, actual line) that match one to one, or None when the output
    does not match: line by line after normalising both sides; a line that is only ``...`` stands
    for any number of lines (none included), ``...`` inside a line for any text within it."""
    exp = [normalise(line) for line in expected]
    act = [normalise(line) for line in actual]
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key not in memo:
            if i == len(exp):
                result = j == len(act)
            elif exp[i].strip() == ELLIPSIS:
                result = any(match(i + 1, k) for k in range(j, len(act) + 1))
            else:
                result = j < len(act) and _line_matches(exp[i], act[j]) and match(i + 1, j + 1)
            memo[key] = result
        return memo[key]

    if not match(0, 0):
        return None
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < len(exp):
        if exp[i].strip() == ELLIPSIS:
            j = next(k for k in range(j, len(act) + 1) if match(i + 1, k))
        else:
            pairs.append((i, j))
            j += 1
        i += 1
    return pairs


def output_matches(expected: list[str], actual: list[str]) -> bool:
    return align(expected, actual) is not None


class ShaMap:
    """The SHAs a page shows, mapped to the ones its run printed in the same places: a later
    command naming a shown SHA (or a prefix of one) gets the real one, so a page can say
    ``dream restore 13f2a2b5`` although every run makes new commits."""

    def __init__(self) -> None:
        self.shown_to_real: dict[str, str] = {}

    def learn(self, expected: list[str], actual: list[str], pairs: list[tuple[int, int]]) -> None:
        for i, j in pairs:
            shown, real = SHA.findall(expected[i]), SHA.findall(actual[j])
            if len(shown) == len(real):
                for a, b in zip(shown, real, strict=True):
                    known = next((k for k in self.shown_to_real if k.startswith(a) or a.startswith(k)), None)
                    if known is None or len(a) > len(known):
                        self.shown_to_real.pop(known or "", None)
                        self.shown_to_real[a] = b

    def rewrite(self, command: str) -> str:
        def real(match: re.Match[str]) -> str:
            token = match.group(0)
            for shown, actual in self.shown_to_real.items():
                if shown.startswith(token) or token.startswith(shown):
                    return actual[: len(token)] if len(actual) >= len(token) else actual
            return token

        return COMMAND_SHA.sub(real, command)


class Shell:
    """A page's shell: a fresh folder, a clean machine (an empty HOME, no DREAM_* variables, the
    venv's ``bin`` first on PATH, Dream's clock pinned to one moment so token figures do not move
    with the date), and the variables and folder each command leaves behind."""

    def __init__(self, root: Path, extra_env: dict[str, str] | None = None) -> None:
        self.root = root
        self.state = root.parent / f".{root.name}-shell"
        self.state.mkdir(parents=True)
        (self.state / "cwd").write_text(str(root), encoding="utf-8")
        (self.state / "env.sh").write_text("", encoding="utf-8")
        # As after the README's first command: `.venv` is there (the venv running the tests).
        if (Path(sys.prefix) / "bin" / "activate").is_file():
            (root / ".venv").symlink_to(sys.prefix)
        self.shas = ShaMap()
        self.env = clean_env(
            root,
            PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            PYTHONUNBUFFERED="1",  # stdout and stderr interleave as they would on a terminal
            COLUMNS="100",
            TZ="UTC",
            PYTHONPATH=str(FROZEN_CLOCK),  # every dream process stamps the same moment
            **(extra_env or {}),
        )

    def stop(self) -> None:
        """Stop what the page left running in the background (each wrote its pid to NAME.pid)."""
        for pid_file in self.root.glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text(encoding="utf-8").strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError, PermissionError):
                pass

    def _server(self) -> str | None:
        port = self.root / "llm.port"
        return f"127.0.0.1:{port.read_text(encoding='utf-8').strip()}" if port.is_file() else None

    def run(self, command: str) -> tuple[int, list[str]]:
        server = self._server()
        if server:
            command = command.replace(SHOWN_SERVER, server)
        state = shlex.quote(str(self.state))
        script = (
            f'cd "$(cat {state}/cwd)"\n'
            f". {state}/env.sh\n"
            f"{command}\n"
            "__rc=$?\n"
            f"export -p > {state}/env.sh\n"
            f"pwd > {state}/cwd\n"
            "exit $__rc\n"
        )
        done = subprocess.run(
            ["bash", "-c", script.replace(SHOWN_ROOT, str(self.root))],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            timeout=COMMAND_TIMEOUT,
        )
        text = done.stdout.decode("utf-8", "replace").replace(str(self.root), SHOWN_ROOT)
        if server:
            text = text.replace(server, SHOWN_SERVER)
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        return done.returncode, lines


def evaluate_console(example: Example) -> str | None:
    """Run each command of the block in the page's shell; a difference is the failure's text.
    When recording, the block's new text goes into the namespace instead."""
    shell: Shell = example.namespace["shell"]
    recorded: list[str] = []
    for step in parse_steps(example.parsed):
        code, actual = shell.run(shell.shas.rewrite(step.command))
        expected = list(step.expected)
        if expected and EXIT.fullmatch(expected[-1].strip()):
            # "[exit N]" as the last output line: the page states the exit status too
            actual = [*actual, f"[exit {code}]"]
        pairs = align(expected, actual)
        same = pairs is not None
        if pairs is not None:
            shell.shas.learn(expected, actual, pairs)
        else:  # lines that differ elsewhere still tell which SHA became which
            like = [
                (k, k)
                for k in range(min(len(expected), len(actual)))
                if _line_matches(normalise(expected[k]), normalise(actual[k]))
            ]
            shell.shas.learn(expected, actual, like)
        shown = step.expected if same else actual
        recorded += [PROMPT + step.command, *shown, *([""] if step.blank_after else [])]
        if "recorded" in example.namespace:
            continue
        if not same:
            line = example.line + 1 + step.line
            return (
                f"`$ {step.command}` (line {line}) printed something else.\n"
                + "--- the page shows\n"
                + "\n".join(expected)
                + "\n--- it printed\n"
                + "\n".join(actual)
            )
    if "recorded" in example.namespace:
        example.namespace["recorded"][example.region.start] = recorded
    return None


SYBIL = Sybil(parsers=[CodeBlockParser("console", evaluate_console), SkipParser()], patterns=["*.md"])


def run_page(page: Path, root: Path, extra_env: dict[str, str] | None = None) -> int:
    """Every transcript of ``page`` in order, in one fresh shell rooted at ``root``; raises on the
    first one that prints something else. Returns how many blocks ran."""
    document: Document = SYBIL.parse(page)
    shell = document.namespace["shell"] = Shell(root, extra_env)
    ran = 0
    try:
        for example in document:
            try:
                example.evaluate()
                ran += 1
            except unittest.SkipTest:
                continue
    finally:
        shell.stop()
    return ran


def record_page(page: Path, root: Path) -> int:
    """Run the page and write each block's actual output in place of the lines that do not match
    (lines that match, ``...`` and SHAs included, are kept). Returns how many blocks changed.
    Read the diff before committing it: recording makes a page true, not right."""
    document: Document = SYBIL.parse(page)
    shell = document.namespace["shell"] = Shell(root)
    document.namespace["recorded"] = recorded = {}
    try:
        for example in document:
            try:
                example.evaluate()
            except unittest.SkipTest:
                continue
    finally:
        shell.stop()
    text = document.text
    changed = 0
    for start in sorted(recorded, reverse=True):
        region = dict(document.regions)[start]
        block = text[region.start : region.end]
        head, _, rest = block.partition("\n")
        prefix = re.match(r"[ \t]*", head).group(0)  # type: ignore[union-attr]
        body = "\n".join(prefix + line if line else "" for line in recorded[start])
        if head.lstrip().startswith("<!--"):  # a hidden block: the region ends before its "-->"
            new = f"{head}\n{body}\n"
        else:
            closing = rest.rstrip("\n").rsplit("\n", 1)[-1]
            new = f"{head}\n{body}\n{closing}"
        if new != block:
            changed += 1
            text = text[: region.start] + new + text[region.end :]
    page.write_text(text, encoding="utf-8")
    return changed


def blocks_with_prompts(text: str) -> list[tuple[int, str, bool]]:
    """(line, language, skipped) of every fenced block holding a ``$ `` line: what the convention
    says must be a console block that runs, or carry a skip with its reason."""
    found: list[tuple[int, str, bool]] = []
    lines = text.splitlines()
    i = 0
    fence = re.compile(r"^(\s*)(`{3,}|~{3,})(\S*)")
    while i < len(lines):
        m = fence.match(lines[i])
        if not m:
            i += 1
            continue
        indent, marks, language = m.groups()
        start = i
        i += 1
        body: list[str] = []
        closing = re.compile(rf"\s*{re.escape(marks[0])}{{{len(marks)},}}\s*")
        while i < len(lines) and not closing.fullmatch(lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if any(line.startswith(PROMPT) for line in body):
            previous = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            found.append((start + 1, language, previous.startswith("<!-- skip: next")))
    return found


def describe(example: Any) -> str:
    return f"{Path(example.path).name}:{example.line}"


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="Run the console transcripts of doc pages.")
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--record", action="store_true", help="write what the commands print into the pages")
    args = parser.parse_args()
    for page in args.pages:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "demo"
            root.mkdir()
            if args.record:
                print(f"{page}: {record_page(page.resolve(), root)} block(s) rewritten")
            else:
                print(f"{page}: {run_page(page.resolve(), root)} block(s) ran")
