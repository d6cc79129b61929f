"""Fake secrets of many shapes, for proving that none reaches durable storage.

Every value is random at import time but shaped like the real thing, so detectors fire and no
real credential is ever written down. ``CANARIES`` holds one or more (kind, value, text) triples
for every kind of secret the guard promises to catch: ``kind`` is the ``[REDACTED:<kind>]``
marker the guard puts in its place, ``text`` a sentence an agent might plausibly have seen,
holding the value. ``KINDS`` lists the kinds.

The kinds were drawn up from gitleaks' and detect-secrets' rule sets and from what users paste
into chats: provider tokens with a known prefix, private keys, webhook URLs, passwords in URLs,
assignments (``TWILIO_AUTH_TOKEN=...``, ``password = ...``), passwords in prose ("my sudo
password is ..."), HTTP authorization headers, cookies, netrc and command-line passwords.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_rng = random.Random()
_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_URLSAFE = _ALNUM + "_-"


def _r(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _mixed(n: int) -> str:
    """Random alphanumerics with at least one digit and one letter (a password or key body)."""
    while True:
        value = _r(_ALNUM, n)
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


@dataclass(frozen=True)
class Canary:
    kind: str  # the [REDACTED:<kind>] marker the guard puts in its place
    value: str  # the secret itself: must never appear in anything the product writes
    text: str  # a sentence holding it


def _pem(label: str) -> str:
    body = "\n".join(_r(_ALNUM + "+/", 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _putty() -> str:
    lines = "\n".join(_r(_ALNUM + "+/", 64) for _ in range(2))
    return f"Private-Lines: 2\n{lines}\nPrivate-MAC: {_r(_HEX, 64)}"


def _basic(user: str) -> str:
    return base64.b64encode(f"{user}:{_mixed(14)}".encode()).decode()


def make_canaries() -> list[Canary]:
    aws_id = "AKIA" + _r(_UPPER, 16)
    aws_secret = _r(_ALNUM + "/+", 40)
    items = [
        # --- cloud and provider tokens with a known shape ---
        ("aws_access_key", aws_id, f"The deploy user has access key {aws_id} in the CI settings."),
        ("aws_secret_key", aws_secret, f"aws_secret_access_key = {aws_secret}"),
        ("github_token", (v := "ghp_" + _r(_ALNUM, 36)), f"Use the token {v} to push the release."),
        ("github_token", (v := "github_pat_" + _r(_ALNUM, 22) + "_" + _r(_ALNUM, 59)), f"New fine-grained PAT: {v}"),
        ("github_token", (v := "gho_" + _r(_ALNUM, 36)), f"OAuth token for the bot is {v}."),
        ("gitlab_token", (v := "glpat-" + _r(_URLSAFE, 20)), f"gitlab token {v}"),
        ("gitlab_token", (v := "glrt-" + _r(_URLSAFE, 20)), f"Register the runner with {v} on the new host."),
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
        (
            "discord_webhook",
            (v := f"https://discord.com/api/webhooks/{_r(string.digits, 18)}/{_r(_URLSAFE, 68)}"),
            f"The release bot posts to {v} after each deploy.",
        ),
        (
            "discord_bot_token",
            (v := "M" + _r(_ALNUM, 23) + "." + _r(_ALNUM, 6) + "." + _r(_URLSAFE, 27)),
            f"discord token {v}",
        ),
        (
            "telegram_bot_token",
            (v := _r(string.digits, 10) + ":AA" + _r(_URLSAFE, 33)),
            f"Telegram bot token is {v}",
        ),
        ("api_key", (v := "sk-" + _r(_ALNUM, 48)), f"OPENAI_API_KEY={v}"),
        ("openai_key", (v := "sk-proj-" + _r(_URLSAFE, 40) + "T3BlbkFJ" + _r(_URLSAFE, 40)), f"project key {v}"),
        ("anthropic_key", (v := "sk-ant-api03-" + _r(_URLSAFE, 93) + "AA"), f"anthropic key {v}"),
        ("api_key", (v := "sk-or-v1-" + _r(_HEX, 64)), f"OpenRouter key for the agent: {v}"),
        ("google_api_key", (v := "AIza" + _r(_URLSAFE, 35)), f"Maps key: {v}"),
        ("google_oauth_secret", (v := "GOCSPX-" + _r(_URLSAFE, 28)), f"The Google OAuth client secret is {v}"),
        ("stripe_key", (v := "sk_live_" + _r(_ALNUM, 24)), f"Stripe live secret {v}"),
        ("stripe_key", (v := "whsec_" + _r(_ALNUM, 32)), f"Stripe webhook signing secret {v}"),
        ("npm_token", (v := "npm_" + _r(_ALNUM, 36)), f"//registry token: {v}"),
        ("pypi_token", (v := "pypi-AgEIcHlwaS5vcmc" + _r(_URLSAFE, 70)), f"PyPI upload token {v}"),
        ("pypi_token", (v := "pypi-AgEIcHlwaS5vcmcCJ" + _r(_URLSAFE, 40)), f"the PyPI token is {v}"),
        ("huggingface_token", (v := "hf_" + _r(string.ascii_letters, 34)), f"Hugging Face token {v} for gated models"),
        ("sendgrid_api_key", (v := "SG." + _r(_URLSAFE, 22) + "." + _r(_URLSAFE, 43)), f"SENDGRID_API_KEY={v}"),
        ("twilio_key", (v := "SK" + _r(_HEX, 32)), f"Twilio API key SID {v}"),
        ("secret_assignment", (v := _r(_HEX, 32)), f"TWILIO_AUTH_TOKEN={v}"),
        ("secret_assignment", (v := _r(_HEX, 32)), f"Twilio account AC{_r(_HEX, 32)} with auth token {v}"),
        ("mailchimp_access_key", (v := _r(_HEX, 32) + "-us12"), f"Mailchimp key {v}"),
        ("mailgun_key", (v := "key-" + _r(_HEX, 32)), f"mailgun api {v}"),
        ("vault_token", (v := "hvs." + _r(_URLSAFE, 90)), f"VAULT_TOKEN={v}"),
        ("vault_token", (v := "s." + _mixed(24)), f"the old vault root token {v} still works"),
        ("digitalocean_token", (v := "dop_v1_" + _r(_HEX, 64)), f"DigitalOcean PAT {v}"),
        ("shopify_token", (v := "shpat_" + _r(_HEX, 32)), f"Shopify admin API access token: {v}"),
        ("shopify_token", (v := "shpss_" + _r(_HEX, 32)), f"shared secret of the Shopify app {v}"),
        ("databricks_token", (v := "dapi" + _r(_HEX, 32)), f"Databricks token {v}"),
        ("doppler_token", (v := "dp.pt." + _r(_ALNUM, 43)), f"Doppler service token {v}"),
        ("linear_key", (v := "lin_api_" + _r(_ALNUM, 40)), f"Linear API key {v}"),
        ("notion_token", (v := "ntn_" + _r(_ALNUM, 46)), f"Notion integration secret {v}"),
        ("atlassian_token", (v := "ATATT3" + _r(_URLSAFE, 186)), f"Jira API token {v}"),
        ("azure_ad_secret", (v := _r(_ALNUM, 3) + "8Q~" + _r(_ALNUM + "_~.-", 34)), f"Entra app client secret {v}"),
        (
            "azure_storage_key",
            (v := _r(_ALNUM + "+/", 86) + "=="),
            f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v};EndpointSuffix=core.windows.net",
        ),
        ("square_token", (v := "EAAA" + _r(_URLSAFE, 60)), f"Square access token {v}"),
        ("groq_key", (v := "gsk_" + _r(_ALNUM, 52)), f"GROQ key {v}"),
        ("replicate_token", (v := "r8_" + _r(_ALNUM, 37)), f"Replicate token {v}"),
        ("perplexity_key", (v := "pplx-" + _r(_ALNUM, 48)), f"Perplexity key {v}"),
        ("xai_key", (v := "xai-" + _r(_ALNUM, 80)), f"xAI key {v}"),
        ("grafana_token", (v := "glsa_" + _r(_ALNUM, 32) + "_" + _r(_HEX, 8)), f"Grafana service account token {v}"),
        ("newrelic_key", (v := "NRAK-" + _r(_UPPER, 27)), f"New Relic user key {v}"),
        ("postman_key", (v := f"PMAK-{_r(_HEX, 24)}-{_r(_HEX, 34)}"), f"Postman API key {v}"),
        ("supabase_token", (v := "sbp_" + _r(_HEX, 40)), f"Supabase access token {v}"),
        ("terraform_token", (v := _r(_ALNUM, 14) + ".atlasv1." + _r(_URLSAFE, 67)), f"TFC token {v}"),
        ("age_secret_key", (v := "AGE-SECRET-KEY-1" + _r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)), f"age key {v}"),
        ("docker_hub_token", (v := "dckr_pat_" + _r(_URLSAFE, 27)), f"Docker Hub PAT {v}"),
        ("secret_assignment", (v := _r(_URLSAFE, 40)), f"CLOUDFLARE_API_TOKEN={v}"),
        ("secret_assignment", (v := _mixed(32)), f"MISTRAL_API_KEY={v}"),
        ("secret_assignment", (v := _r(_HEX, 32)), f"my OpenWeather API key is {v}"),
        ("secret_assignment", (v := _mixed(40)), f"X-API-Key: {v}"),
        ("secret_assignment", (v := _r(_HEX, 32)), f'api_key: "{v}"'),
        ("secret_assignment", (v := "Zm9v" + _r(_ALNUM, 20) + "=="), f'client_secret: "{v}"'),
        (
            "secret_assignment",
            (v := _basic("bob")),
            f'~/.docker/config.json: {{"auths": {{"ghcr.io": {{"auth": "{v}"}}}}}}',
        ),
        (
            "jwt",
            (v := "eyJ" + _r(_ALNUM, 30) + ".eyJ" + _r(_ALNUM, 60) + "." + _r(_URLSAFE, 43)),
            f"Session cookie was {v}",
        ),
        # --- private keys ---
        ("private_key", (v := _pem("RSA PRIVATE KEY")), f"Here is the server key:\n{v}\nkeep it safe."),
        ("private_key", (v := _pem("OPENSSH PRIVATE KEY")), f"deploy key\n{v}"),
        ("private_key", (v := _pem("EC PRIVATE KEY")), f"{v}"),
        ("private_key", (v := _pem("PGP PRIVATE KEY BLOCK")), f"my signing key:\n{v}"),
        ("private_key", (v := _putty()), f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n{v}"),
        # --- passwords ---
        ("url_password", (v := "S3cr" + _r(_ALNUM, 12)), f"Connect with postgres://ledger:{v}@db.internal:5432/ledger"),
        ("url_password", (v := "Rd" + _r(_ALNUM, 14)), f"REDIS_URL=redis://default:{v}@cache.internal:6379/0"),
        ("url_password", (v := "pa55" + _r(_ALNUM, 10)), f"the admin console is https://admin:{v}@console.internal/"),
        ("password", (v := "hunter2-" + _r(_ALNUM, 10)), f'password = "{v}"'),
        ("password", (v := "Tr0ub4dor" + _mixed(6)), f"password = {v}"),
        ("password", (v := _mixed(14)), f"DB_PASSWORD={v}"),
        ("password", (v := _mixed(10)), f"my sudo password is {v}"),
        ("password", (v := _r(string.ascii_lowercase, 11) + "x"), f"the wifi password is {v}"),
        ("password", (v := "c0rrect-" + _r(string.ascii_lowercase, 8)), f"The password for the office NAS is {v}."),
        ("password", (v := _mixed(12)), f"Password for the staging db: {v}"),
        ("password", (v := _r(string.digits, 6)), f"Passcode for the office door: {v}"),
        ("password", (v := _mixed(16)), f"passphrase: {v}"),
        ("password", (v := _mixed(12)), f"Run mysql --password={v} -u root to get in."),
        ("netrc_password", (v := _mixed(14)), f"machine api.example.com login bob password {v}"),
        ("cli_password", (v := _mixed(12)), f"sshpass -p {v} ssh pi@raspberrypi.local"),
        ("curl_password", (v := _mixed(12)), f"curl -u admin:{v} https://jenkins.internal/api/json"),
        # --- headers, cookies, URLs ---
        ("authorization_header", (v := _r(_URLSAFE + ".", 40)), f"Authorization: Bearer {v}"),
        ("authorization_header", (v := _basic("admin")), f"Authorization: Basic {v}"),
        ("bearer_token", (v := _mixed(40)), f"curl the API with the header Bearer {v} and JSON."),
        ("basic_auth", (v := _basic("deploy")), f"The webhook sends Basic {v} on each call."),
        ("cookie", (v := _mixed(32)), f"Cookie: sessionid={v}; theme=dark"),
        ("url_secret_parameter", (v := _mixed(32)), f"https://api.example.com/v1/data?api_key={v}&page=2"),
        (
            "url_secret_parameter",
            (v := _r(_ALNUM, 40) + "%3D"),
            f"SAS URL https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig={v}",
        ),
    ]
    return [Canary(kind, value, text) for kind, value, text in items]


CANARIES = make_canaries()
KINDS = tuple(sorted({c.kind for c in CANARIES}))

# Kinds that are secrets only by what surrounds them ("password = ...", "auth token <hex>",
# "Authorization: Bearer ..."): their bare values look like any other word or identifier.
CONTEXT_KINDS = frozenset(
    {
        "aws_secret_key",
        "secret_assignment",
        "password",
        "netrc_password",
        "cli_password",
        "curl_password",
        "url_password",
        "authorization_header",
        "bearer_token",
        "basic_auth",
        "cookie",
        "url_secret_parameter",
        "azure_storage_key",
    }
)
