"""The secret guard on its own: every canary kind is caught, ordinary memory text is left alone."""

from __future__ import annotations

import pytest

from dream_memory.adapters.secrets import SecretScanner
from dream_memory.testing.canaries import CANARIES, Canary


@pytest.mark.parametrize("canary", CANARIES, ids=[f"{i}-{c.kind}" for i, c in enumerate(CANARIES)])
def test_each_canary_is_redacted(canary: Canary) -> None:
    """A secret of each promised kind is replaced by a [REDACTED:kind] marker; the value is gone."""
    clean, counts = SecretScanner().redact(f"- Note from the session: {canary.text}\n")
    assert canary.value not in clean
    assert "[REDACTED:" in clean
    assert sum(counts.values()) >= 1


def test_thirty_canaries_in_one_text() -> None:
    """All canaries together in one document: none survives, counts add up per kind."""
    text = "\n".join(c.text for c in CANARIES)
    clean, counts = SecretScanner().redact(text)
    for canary in CANARIES:
        assert canary.value not in clean, canary.kind
    assert sum(counts.values()) >= len(CANARIES)
    assert all(n > 0 for n in counts.values())


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("google_api_key", "AIza" + "h91Yz_xyxNS0Mg2uOB_PvclAvT-NDYiXMT-"),
        ("telegram_bot_token", "123456789:AA" + "x" * 32 + "-"),
        ("gitlab_token", "glpat-" + "a1b2c3d4e5f6g7h8i9j0" + "--"),
        ("api_key", "sk-" + "Q" * 31 + "-_-"),
    ],
)
def test_keys_ending_in_a_dash_are_redacted_whole(kind: str, value: str) -> None:
    """Key alphabets include "-": a key that ends in one (a canary found it, 1 run in ~60) is still
    caught, and nothing of it is left behind."""
    clean, counts = SecretScanner().redact(f"- key: {value}\n")
    assert value not in clean and value[-8:] not in clean
    assert sum(counts.values()) >= 1, kind


@pytest.mark.parametrize(
    "text",
    [
        "- Decided to use PostgreSQL 16; commit 3f2a9c1b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a fixed the migration.",
        "- The repository lives at /home/maya/src/ledger-api and deploys from main.",
        "- Request id 123e4567-e89b-12d3-a456-426614174000 was retried.",
        "- User prefers dark mode and concise answers.",
        "- Set OPENAI_API_KEY from the environment (password is stored in the vault, never in files).",
        "- The password field must be at least 12 characters long.",
        "- Use ${DATABASE_PASSWORD} in the compose file.",
    ],
)
def test_ordinary_memory_text_is_not_redacted(text: str) -> None:
    """Paths, commit SHAs, UUIDs and talk about passwords are not secrets."""
    clean, counts = SecretScanner().redact(text)
    assert clean == text and counts == {}


def test_allowlist_keeps_a_known_false_positive() -> None:
    """A configured allowlist regex keeps a value the detectors would otherwise redact."""
    text = "The test fixture key is AKIAFAKEFAKEFAKEFAKE."
    assert "[REDACTED" in SecretScanner().redact(text)[0]
    assert SecretScanner(allowlist=[r"^AKIAFAKE"]).redact(text) == (text, {})
