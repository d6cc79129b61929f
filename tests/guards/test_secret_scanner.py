"""The secret guard on its own: every canary kind is caught, ordinary memory text is left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dream_memory.adapters.secret_rules import SHAPES
from dream_memory.adapters.secrets import SecretScanner
from dream_memory.testing.canaries import CANARIES, KINDS, Canary, make_canaries


@pytest.mark.parametrize("canary", CANARIES, ids=[f"{i}-{c.kind}" for i, c in enumerate(CANARIES)])
def test_each_canary_is_redacted(canary: Canary) -> None:
    """A secret of each promised kind is replaced by its own [REDACTED:kind] marker; nothing of
    the value is left (not even the tail of a longer token)."""
    clean, counts = SecretScanner().redact(f"- Note from the session: {canary.text}\n")
    assert canary.value not in clean
    assert f"[REDACTED:{canary.kind}]" in clean, clean
    assert counts.get(canary.kind, 0) >= 1
    for line in canary.value.splitlines():
        if len(line) >= 12:
            assert line[-10:] not in clean, "the tail of the secret stayed behind"


def test_every_kind_is_caught_whatever_the_random_values() -> None:
    """The canaries are random: 40 fresh sets of them (3,500+ values) are all caught, so a kind
    is not caught only by luck of one draw (entropy thresholds, English-looking passwords)."""
    scanner = SecretScanner()
    missed: list[str] = []
    for _ in range(40):
        for canary in make_canaries():
            clean, _ = scanner.redact(canary.text)
            if canary.value in clean or f"[REDACTED:{canary.kind}]" not in clean:
                missed.append(canary.kind)
    assert missed == []


@pytest.mark.parametrize(
    "text",
    [
        "MISTRAL_API_KEY=0xw0tpBCRdcHUl6iSGC8b3G4BEM3FO0z",
        "X-API-Key: 0xG2V0QlgVQlvjBEPQXX9A7u5eXRovfNWCHqLKXC",
        "PRIVATE_KEY=0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
    ],
)
def test_a_key_that_starts_with_0x_is_still_a_key(text: str) -> None:
    """Random keys start with "0x" about once in 2,000 draws, and were taken for hex numbers and
    kept (CI drew one: MISTRAL_API_KEY=0xw0tp...); an Ethereum private key always does."""
    assert SecretScanner().redact(text)[0].endswith("[REDACTED:secret_assignment]")


@pytest.mark.parametrize("text", ["the register key = 0x1F", "api_key: 0xdeadbeef", "token = 0xFFFFFFFFFFFFFFFF"])
def test_a_number_written_in_hex_is_not_a_key(text: str) -> None:
    """Up to 64 bits in hex is a number, whatever the name before it."""
    assert SecretScanner().redact(text)[0] == text


def test_the_canary_set_covers_the_kinds_the_guard_promises() -> None:
    """The kinds the issue named (Twilio auth tokens, password assignments and passwords in prose,
    Discord webhooks, PyPI and Hugging Face tokens, Bearer and Basic headers, Vault, DigitalOcean,
    Shopify) are among the 50+ kinds with a canary."""
    named = {
        "secret_assignment",  # TWILIO_AUTH_TOKEN=..., "auth token <hex>", MISTRAL_API_KEY=...
        "password",
        "discord_webhook",
        "pypi_token",
        "huggingface_token",
        "authorization_header",
        "bearer_token",
        "basic_auth",
        "vault_token",
        "digitalocean_token",
        "shopify_token",
    }
    assert named <= set(KINDS)
    assert len(KINDS) >= 50
    twilio = [c for c in CANARIES if "Twilio" in c.text or "TWILIO" in c.text]
    assert len(twilio) >= 3


def test_all_canaries_in_one_text() -> None:
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


ORDINARY = [
    "- Decided to use PostgreSQL 16; commit 3f2a9c1b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a fixed the migration.",
    '- Last Dream commit: {"commit": "3f2a9c1b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a"}',
    "- The repository lives at /home/maya/src/ledger-api and deploys from main.",
    "- Request id 123e4567-e89b-12d3-a456-426614174000 was retried.",
    "- User prefers dark mode and concise answers.",
    "- Set OPENAI_API_KEY from the environment (password is stored in the vault, never in files).",
    "- The password field must be at least 12 characters long.",
    "- Use ${DATABASE_PASSWORD} in the compose file.",
    '- The password is stored in 1Password under "prod db".',
    "- Password reset emails are sent by Postmark.",
    "- The admin password is required for the upgrade.",
    "- Her password was rotated last week.",
    "- The wifi password is on the fridge.",
    "- password: see the team vault",
    "- Password for the NAS: see the team vault",
    "- The password for the guest wifi: changed every month",
    "- Ski pass for the weekend: Verbier",
    "- Boarding pass for the Lisbon flight: LH1173",
    "- Pass to Bob: Thanks.",
    "- Password for prod: LastPass",
    "- The token limit is 4096 per request.",
    "- Max tokens: 4096",
    "- Tokenizer: cl100k_base",
    "- API version: 2024-06-01",
    "- Key decision: use SQLite for the cache.",
    "- The key is to keep answers short.",
    "- primary_key: user_id",
    "- cache key: user:42:profile",
    "- ssh key: ~/.ssh/id_ed25519",
    "- The public key is ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq7 maya@laptop",
    "- Stripe publishable key: pk_live_51HxYzAbCdEfGh12345678",
    "- Use Bearer authentication for the internal API.",
    "- Basic auth is disabled on the staging server.",
    "- Authorization header must be sent on every call.",
    "- Auth: OAuth2 via Google",
    "- Secret Santa is on Friday.",
    "- Secrets live in AWS Secrets Manager under prod/db.",
    "- The API key rotation runs monthly on the 1st.",
    "- Model: gpt-4o-mini-2024-07-18",
    "- Version 1.2.3-beta4 shipped on 2026-04-03.",
    "- Access token lifetime is 3600 seconds.",
    "- credentials: stored in the keychain",
    "- We pass the test suite in 42 seconds.",
    "- **Pass score**: >= 0.5 (at least 3 sources found)",
    "- Pass `DREAM_API_KEY` (or the variable the preset names) to the job.",
    "- api_key: OPENAI_API_KEY",
    "- Monkey patching: avoid.",
    "- The session cookie is named sid and expires after 30 minutes.",
    "- Cookie: consent=yes; theme=dark",
    "- pwd shows /home/maya/src",
    "- Run mysql -u root -h db.internal ledger to inspect.",
    "- curl -u admin:$ADMIN_PASS https://api.internal/health",
    "- Authorization: Bearer <token>",
    "- password = <your password here>",
    "- The secret is consistency.",
    "- token: required",
    "- Tokens are hashed with bcrypt cost 12.",
    "- Link: https://example.com/reset?token=expired",
    "- See https://example.com/docs?page=2&sort=desc",
    "- The secret key for signing lives in the KMS key alias/prod-signing.",
    "- The 'password' column is nullable.",
    "- passwords are never logged",
    "- The token bucket refills 10 tokens per second.",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_memory_text_is_not_redacted(text: str) -> None:
    """Paths, commit SHAs, UUIDs, versions, environment variable names and plain English about
    passwords, keys and tokens are not secrets: the line is kept exactly."""
    clean, counts = SecretScanner().redact(text)
    assert clean == text and counts == {}


def test_real_agent_workspaces_are_not_redacted(fixtures_root: Path) -> None:
    """The real agent workspaces (memory, skills, sessions of a dozen public agents, with their
    secrets left out when they were collected) pass through the guard with no line changed."""
    scanner = SecretScanner()
    changed: list[str] = []
    lines = 0
    for path in sorted(fixtures_root.rglob("*")):
        if path.suffix not in (".md", ".jsonl", ".json") or not path.is_file() or path.name == "MANIFEST.md":
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            lines += 1
            if scanner.redact(line)[0] != line:
                changed.append(f"{path.relative_to(fixtures_root)}: {scanner.redact(line)[0][:120]}")
    assert lines > 1000
    assert changed == []


def test_allowlist_keeps_a_known_false_positive() -> None:
    """A configured allowlist regex keeps a value the detectors would otherwise redact."""
    text = "The test fixture key is AKIAFAKEFAKEFAKEFAKE."
    assert "[REDACTED" in SecretScanner().redact(text)[0]
    assert SecretScanner(allowlist=[r"^AKIAFAKE"]).redact(text) == (text, {})


def test_assigned_tokens_that_draw_no_digit_or_a_low_hex_entropy_are_caught() -> None:
    """Two random draws the canary soak once found passing: a 32-digit hex token whose letters
    repeat (2.85 bits per character, under the floor meant for 62 symbols) and a 40-character
    token that drew no digit at all. Both are redacted; a CamelCase name or a repeated hex word
    assigned to a key name is not."""
    scanner = SecretScanner()
    for text in (
        "TWILIO_AUTH_TOKEN=87a70a527578aa79829099f9aa09759f",
        "CLOUDFLARE_API_TOKEN=Zc_YLqLBYIOfKEFxUGbTUirNxHfYxdhqX_QedWyO",
    ):
        clean, counts = scanner.redact(text)
        assert counts == {"secret_assignment": 1}, text
        assert clean.endswith("=[REDACTED:secret_assignment]")
    for text in ("token = AuthenticationServiceProvider", "api_key: deadbeefdeadbeef"):
        assert scanner.redact(text) == (text, {})


def test_a_scanner_used_again_redacts_and_counts_the_same() -> None:
    """A Dream run scans the same memory lines batch after batch with one scanner: the second
    and third scans of a text redact and count exactly what a fresh scanner does (a line's
    verdict is remembered, its findings still counted every time)."""
    text = "\n".join(f"- line {i}: {c.text}" for i, c in enumerate(make_canaries())) + "\n"
    fresh = SecretScanner().redact(text)
    assert fresh[1], "the canaries were found"
    scanner = SecretScanner()
    assert [scanner.redact(text) for _ in range(3)] == [fresh] * 3
    allowing = SecretScanner(allowlist=[r"^AKIA"])
    assert allowing.redact(text) == allowing.redact(text) != fresh


def _whole_text(scanner: SecretScanner, text: str) -> tuple[str, dict[str, int]]:
    """Layers 1 and 2 as one run of each rule over the whole text: what line by line must equal."""
    counts: dict[str, int] = {}
    for rule in SHAPES:
        text = scanner._apply(rule, text, counts)
    return text, counts


def test_line_by_line_rules_redact_what_the_whole_text_would(fixtures_root: Path) -> None:
    """Most rules run line by line (remembered per line): over secrets at a line's start and end,
    split by CR, CRLF or U+2028, after a keyword on the line before, inside key blocks, and over
    the real workspaces' files whole, the result and its counts, in order, are those of each rule
    run over the whole text."""
    seps = ["\n", "\r\n", "\r", "\u2028", " ", "\n\n"]
    values = [c.text for c in make_canaries()] + [c.value for c in make_canaries()]
    texts = [
        sep.join(values[i : i + 5]) + tail
        for i in range(0, len(values), 3)
        for sep in seps
        for tail in ("", "\n", "\r\n")
    ]
    texts += [t for v in values for t in (f"password:\n{v}\n", f"api key is\n{v}", f"public\nkey = {v}\n", f"- n\n{v}")]
    texts += [f"{word}\n{c.value}\n" for c in make_canaries() for word in ("token", "password is", "Bearer")]
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(fixtures_root.rglob("*.md"))]
    scanner = SecretScanner()
    for text in texts:
        expected = _whole_text(SecretScanner(), text)
        for _ in range(2):  # the second time from what each line left in memory
            counts: dict[str, int] = {}
            got = scanner._shapes(text, counts)
            assert (got, list(counts.items())) == (expected[0], list(expected[1].items())), text[:200]


def test_the_keyword_detector_skipped_on_lines_without_quotes_finds_nothing_there(fixtures_root: Path) -> None:
    """Layer 3 leaves detect-secrets' keyword detector out on a line with no quote character:
    the installed version's patterns all require one, and over canaries, ordinary memory, the
    real workspaces' lines and keyword assignments (quoted, then with the quotes taken out) it
    finds something only where a quote is."""
    from detect_secrets.plugins.keyword import KeywordDetector

    from dream_memory.adapters.secrets import _needs_quote

    assert _needs_quote("KeywordDetector") and not _needs_quote("AWSKeyDetector")
    lines = [c.text for c in make_canaries()] + ORDINARY
    for path in sorted(fixtures_root.rglob("*.md")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    assigned = [
        f"{name} {op} {q}Zx9{i}kQ7vB2{q}"
        for i, name in enumerate(("password", "api_key", "SECRET", "db_pass"))
        for op in ("=", ":", "=>")
        for q in ("'", '"', "`")
    ]
    lines += assigned + [line.translate({ord(q): None for q in "'\"`"}) for line in assigned + lines]
    detector, found_quoted = KeywordDetector(), 0
    for line in lines:
        found = detector.analyze_line(filename="memory.md", line=line, line_number=0)
        if not any(q in line for q in "'\"`"):
            assert not found, line
        found_quoted += bool(found)
    assert found_quoted >= len(assigned) // 2, "the detector still finds quoted keyword values"


_FRESH_SCAN = """
import sys
if sys.argv[1] == "requests-first":
    import requests
from dream_memory.adapters.secrets import SecretScanner
clean, counts = SecretScanner().redact('x = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA8xZq"')
print(clean)
print("requests loaded by the scan:", "requests" in sys.modules)
import requests
print("real requests after:", callable(getattr(requests, "get", None)) and hasattr(requests, "Session"))
from detect_secrets.plugins import base
print("detect-secrets' requests after:", base.requests.get is requests.get)
"""


@pytest.mark.parametrize("order", ["scan-first", "requests-first"])
def test_detect_secrets_finds_its_kinds_without_loading_requests(order: str) -> None:
    """Layer 3 (a detect-secrets-only kind, a high-entropy base64 string) is caught in a fresh
    process without importing requests, which cost a writing command a quarter of a CPU second;
    an ``import requests`` afterwards (or before) gets the real package, and so does detect-secrets
    itself from then on (its online checks would work, were they ever asked for)."""
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_SCAN, order], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == 'x = "[REDACTED:base64_high_entropy_string]"'
    assert lines[1] == f"requests loaded by the scan: {order == 'requests-first'}"
    assert lines[2] == "real requests after: True"
    assert lines[3] == "detect-secrets' requests after: True"


_HOST = """
import logging, sys, warnings
from dream_memory import Workspace
logging.basicConfig(level=logging.ERROR, stream=sys.stdout, format="logged: %(message)s")
if sys.argv[2] == "captured":
    logging.captureWarnings(True)
ws = Workspace(sys.argv[1])
ws.init()
ws.append("the deploy key is AKIAIOSFODNN7EXAMPLE and the password = 'hunter2hunter2xyzQ9'")
warnings.warn("the host's own warning", UserWarning)
"""


@pytest.mark.parametrize("capture", ["host-default", "captured"])
def test_a_scan_leaves_the_hosts_warnings_where_they_went(tmp_path: Path, capture: str) -> None:
    """A host process whose logging handles errors only (``basicConfig(level=ERROR)``) stores a
    secret through the API, then warns. detect-secrets' logger turns on
    ``logging.captureWarnings`` as it loads; the warning then went to logging and this host's
    handler dropped it. It reaches stderr as Python shows warnings, and a host that had turned
    capture on itself keeps it on (its logging gets the warning: here, below ERROR, dropped)."""
    done = subprocess.run(
        [sys.executable, "-c", _HOST, str(tmp_path / "ws"), capture],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "AKIAIOSFODNN7EXAMPLE" not in (tmp_path / "ws" / "memory" / "history.jsonl").read_text(encoding="utf-8")
    shown = "UserWarning: the host's own warning" in done.stderr
    assert shown == (capture == "host-default"), done.stderr
