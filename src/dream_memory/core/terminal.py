"""Text that is safe to print on a terminal, and JSON that is safe to print too.

Memory text comes from a model and from files anyone may have written: an escape sequence in it
would be acted on by the terminal that shows it (OSC 52 writes the clipboard, CSI sequences clear
the screen or move the cursor, a bidi override makes a line read as something else). Every human
rendering passes its text through ``for_terminal``: controls are shown as visible escapes
(``\\x1b``), never sent. Tabs and newlines stay, and so does a carriage return that ends a line
(CRLF): the terminal acts on it as on the newline alone, and a file saved by a Windows editor
would otherwise show a literal ``\\x0d`` at the end of every line. A carriage return anywhere else
returns to the start of the line, where the text after it would print over what came before.

JSON output stays exact: ``json_for_terminal`` only writes the few characters JSON leaves raw
(C1 controls, bidi controls, line and paragraph separators) as ``\\uXXXX`` escapes, which any JSON
reader turns back into the same string.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 but tab, newline and a carriage return before a newline, DEL, C1, the bidi
# embedding/override/isolate controls, lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]|\r(?!\n)")
# What json.dumps(ensure_ascii=False) leaves raw that a terminal may act on.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal could act on shown as an escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def one_line(name: str) -> str:
    """A file or entity name for a line of output: a newline in it (file names may hold one) is
    shown as ``\\n``, so no name can start a line that looks like another result."""
    return name.replace("\n", "\\n")


def json_for_terminal(value: Any, *, indent: int | None = 2) -> str:
    """``json.dumps`` of ``value`` (UTF-8 kept readable) with nothing a terminal acts on, and
    always valid UTF-8: every report, ``--json`` and ``--report FILE`` is rendered here. A lone
    surrogate (undecodable bytes of an argument or a file) becomes its ``\\udcXX`` escape, which
    any JSON reader turns back into the same string."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
