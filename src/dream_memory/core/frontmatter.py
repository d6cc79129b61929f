"""Skill frontmatter (``skills/<name>/SKILL.md``), read and written with a YAML parser.

nanobot reads a skill's frontmatter with ``yaml.safe_load`` (agent/skills.py): a skill is
always-on, its text in every prompt, when the frontmatter's ``always`` is true, or its
``metadata`` (a mapping, or a JSON string) holds ``{"nanobot": {"always": true}}``, or, with no
``nanobot`` key there, ``{"openclaw": {"always": true}}``. Flow maps, quoted keys and quoted values
are all YAML; a regex over lines sees none of them. Truth is Python's, as nanobot tests it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

# An opening "---" line, the YAML body, a closing "---" line (CRLF too), at the very start.
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
# For the guard only: any spelling of an "always" key set to something true-looking inside the
# frontmatter block, YAML valid or not (a model must not slip one past by breaking the YAML).
_ALWAYS_ANYWHERE = re.compile(r"""["']?\balways\b["']?\s*:\s*["']?(?:true|yes|on|1|y)\b""", re.IGNORECASE)


def frontmatter_block(text: str | None) -> str | None:
    """The YAML text between the ``---`` lines, or None when the file has no frontmatter."""
    if not text:
        return None
    match = _FRONTMATTER.match(text)
    return match.group(1) if match else None


def parse_frontmatter(text: str | None) -> dict[str, Any] | None:
    """The frontmatter as a mapping with string keys; None when there is none, it is not valid
    YAML, or it is not a mapping (nanobot then reads no metadata at all)."""
    block = frontmatter_block(text)
    if block is None:
        return None
    try:
        parsed = yaml.safe_load(block)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    if not isinstance(parsed, dict):
        return None
    return {str(key): value for key, value in parsed.items()}


def agent_metadata(frontmatter: dict[str, Any]) -> dict[str, Any]:
    """``metadata.nanobot`` (else ``metadata.openclaw``), the mapping nanobot reads its skill
    settings from; ``metadata`` may be a mapping or a JSON string."""
    raw = frontmatter.get("metadata")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    payload = raw.get("nanobot", raw.get("openclaw", {}))
    return payload if isinstance(payload, dict) else {}


def is_always_on(text: str | None) -> bool:
    """True when nanobot would put this skill in every prompt (see the module docstring)."""
    meta = parse_frontmatter(text)
    if meta is None:
        return False
    return bool(agent_metadata(meta).get("always") or meta.get("always"))


def may_be_always_on(text: str | None) -> bool:
    """``is_always_on``, or an always key with a true-looking value anywhere in the frontmatter
    block even when it is not valid YAML: what the guard holds for review."""
    if is_always_on(text):
        return True
    block = frontmatter_block(text)
    return block is not None and _ALWAYS_ANYWHERE.search(block) is not None


def skill_description(text: str | None) -> str | None:
    """The skill's ``description`` as nanobot reads it (a string), or None."""
    meta = parse_frontmatter(text)
    description = meta.get("description") if meta else None
    return description if isinstance(description, str) and description.strip() else None


def render_frontmatter(fields: dict[str, Any]) -> str:
    """``---`` + ``fields`` as YAML + ``---`` + newline. Values are quoted where YAML needs it
    (a description holding ": " or " #" stays one string for nanobot's parser); keys keep their
    order; non-ASCII text is written as it is."""
    body = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10_000)
    return f"---\n{body}---\n"


def yaml_scalar(value: str) -> str:
    """``value`` for a ``key: value`` line of a YAML file: as written when YAML reads it back as
    that same string, else double-quoted (JSON's quoting is YAML's), so ``1.0`` or ``true`` stays
    a string and ``#`` or a line break cannot end the value or start another key."""
    try:
        if yaml.safe_load(f"v: {value}") == {"v": value}:
            return value
    except yaml.YAMLError:
        pass
    return json.dumps(value)
