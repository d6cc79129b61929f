"""Fake secrets of many shapes, for proving that none reaches durable storage.

Every value is random at import time but shaped like the real thing, so detectors fire and no
real credential is ever written down. ``CANARIES`` holds 30 (kind, text) pairs: the text is a
sentence an agent might plausibly have seen, containing the canary value.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

_rng = random.Random()
_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"


def _r(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Canary:
    kind: str
    value: str  # the secret itself: must never appear in anything the product writes
    text: str  # a sentence holding it


def _pem(label: str) -> str:
    body = "\n".join(_r(_ALNUM + "+/", 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def make_canaries() -> list[Canary]:
    aws_id = "AKIA" + _r(_UPPER, 16)
    aws_secret = _r(_ALNUM + "/+", 40)
    items = [
        ("aws_access_key", aws_id, f"The deploy user has access key {aws_id} in the CI settings."),
        ("aws_secret_key", aws_secret, f"aws_secret_access_key = {aws_secret}"),
        ("github_token", (v := "ghp_" + _r(_ALNUM, 36)), f"Use the token {v} to push the release."),
        ("github_token", (v := "github_pat_" + _r(_ALNUM, 22) + "_" + _r(_ALNUM, 59)), f"New fine-grained PAT: {v}"),
        ("github_token", (v := "gho_" + _r(_ALNUM, 36)), f"OAuth token for the bot is {v}."),
        (
            "slack_token",
            (v := f"xoxb-{_r(string.digits, 12)}-{_r(string.digits, 13)}-{_r(_ALNUM, 24)}"),
            f"Slack bot token {v}",
        ),
        (
            "slack_token",
            (v := f"xoxp-{_r(string.digits, 12)}-{_r(string.digits, 12)}-{_r(string.digits, 13)}-{_r(_HEX, 32)}"),
            f"my slack user token: {v}",
        ),
        (
            "slack_webhook",
            (v := f"https://hooks.slack.com/services/T{_r(_UPPER, 8)}/B{_r(_UPPER, 10)}/{_r(_ALNUM, 24)}"),
            f"Post alerts to {v}",
        ),
        ("private_key", (v := _pem("RSA PRIVATE KEY")), f"Here is the server key:\n{v}\nkeep it safe."),
        ("private_key", (v := _pem("OPENSSH PRIVATE KEY")), f"deploy key\n{v}"),
        ("private_key", (v := _pem("EC PRIVATE KEY")), f"{v}"),
        (
            "jwt",
            (v := "eyJ" + _r(_ALNUM, 30) + ".eyJ" + _r(_ALNUM, 60) + "." + _r(_ALNUM + "_-", 43)),
            f"Session cookie was {v}",
        ),
        ("url_password", (v := "S3cr" + _r(_ALNUM, 12)), f"Connect with postgres://ledger:{v}@db.internal:5432/ledger"),
        ("url_password", (v := "Rd" + _r(_ALNUM, 14)), f"REDIS_URL=redis://default:{v}@cache.internal:6379/0"),
        ("url_password", (v := "pa55" + _r(_ALNUM, 10)), f"the admin console is https://admin:{v}@console.internal/"),
        (
            "telegram_bot_token",
            (v := _r(string.digits, 10) + ":AA" + _r(_ALNUM + "_-", 33)),
            f"Telegram bot token is {v}",
        ),
        ("api_key", (v := "sk-" + _r(_ALNUM, 48)), f"OPENAI_API_KEY={v}"),
        ("anthropic_key", (v := "sk-ant-api03-" + _r(_ALNUM + "_-", 93) + "AA"), f"anthropic key {v}"),
        ("google_api_key", (v := "AIza" + _r(_ALNUM + "_-", 35)), f"Maps key: {v}"),
        ("stripe_key", (v := "sk_live_" + _r(_ALNUM, 24)), f"Stripe live secret {v}"),
        ("secret_keyword", (v := "hunter2-" + _r(_ALNUM, 10)), f'password = "{v}"'),
        ("secret_keyword", (v := _r(_HEX, 32)), f'api_key: "{v}"'),
        (
            "discord_bot_token",
            (v := "M" + _r(_ALNUM, 23) + "." + _r(_ALNUM, 6) + "." + _r(_ALNUM + "_-", 27)),
            f"discord token {v}",
        ),
        ("npm_token", (v := "npm_" + _r(_ALNUM, 36)), f"//registry token: {v}"),
        ("pypi_token", (v := "pypi-AgEIcHlwaS5vcmc" + _r(_ALNUM + "_-", 70)), f"PyPI upload token {v}"),
        ("sendgrid_key", (v := "SG." + _r(_ALNUM + "_-", 22) + "." + _r(_ALNUM + "_-", 43)), f"SENDGRID_API_KEY={v}"),
        ("twilio_key", (v := "SK" + _r(_HEX, 32)), f"Twilio API key SID {v}"),
        ("gitlab_token", (v := "glpat-" + _r(_ALNUM + "_-", 20)), f"gitlab token {v}"),
        ("mailchimp_key", (v := _r(_HEX, 32) + "-us12"), f"Mailchimp key {v}"),
        ("secret_keyword", (v := "Zm9v" + _r(_ALNUM, 20) + "=="), f'client_secret: "{v}"'),
    ]
    return [Canary(kind, value, text) for kind, value, text in items]


CANARIES = make_canaries()
