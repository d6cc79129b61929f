"""The secret guard's own rules: token shapes and the context rules, with the judges of a value.

Layers 1 and 2 of ``adapters.secrets`` (its docstring says what each catches and why): ``SHAPES``
is the ordered rule table, each rule a compiled pattern, the kind its finding is named by and,
for the context rules, a judge that decides whether the captured value looks like a credential
(digits or symbols, enough entropy, not a placeholder, a path or a plain English word). Pure:
strings in, decisions out; the scanner that applies them (and detect-secrets, layer 3) stays in
``adapters.secrets``.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

# A finding is widened over these (a token's characters), so no tail of a longer token stays behind.
TOKEN_TAIL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
MARK = "[REDACTED"  # how every marker starts: what is redacted already is left alone


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _has_alpha(value: str) -> bool:
    return any(c.isalpha() for c in value)


_PLACEHOLDER = re.compile(
    r"""^(?:
        [$%@]                     # $VAR, %VAR%, @VAR@
      | \{\{ | \$\{ | <           # {{ template }}, ${VAR}, <your-key>
      | \[REDACTED
      | [*x•#.]+$                 # masked: ****, xxxx
      | (?:your|my|the|some|an?)[_-]?(?:api[_-]?)?(?:key|token|secret|password)s?$
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def _placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value)) or "${" in value or "{{" in value


# Words that follow "password is" / "password:" in memory that talks *about* a password. A value
# that is one of them (or reads like an English participle, adjective or adverb) is no secret.
_ENGLISH = frozenset(
    """
    a an the this that these those it its is was be been being are were not never no none nothing
    null nil true false yes n/a na tbd todo unknown known unset set reset changed unchanged stored
    saved kept held required needed mandatory optional wrong incorrect correct invalid valid
    expired empty blank missing hidden secret private protected encrypted hashed salted masked
    visible same different strong weak long short fine ok okay good bad new old too also still now
    here there in on at for from with without and or but by via into to of as if so then than
    when where which who whom whose what why how managed rotated shared given provided sent used
    only case sensitive auto automatic manual please ask asked supplied configured defined
    specified handled working broken accepted rejected prompted requested entered typed removed
    deleted updated generated enabled disabled available unavailable forgotten lost random unique
    complex simple default temporary permanent one two three four five six seven eight nine ten
    twelve characters chars letters digits symbols minimum maximum least most more less length
    field prompt policy manager vault keychain keyring file env environment variable variables
    see check use change rotate update enter type same-as ditto redacted stars asterisks
    """.split()
)
_ENGLISH_ENDINGS = ("ed", "ing", "able", "ible", "ly", "tion", "ment", "ness")


def _english_word(value: str) -> bool:
    low = value.lower()
    return low in _ENGLISH or (low.isalpha() and low.endswith(_ENGLISH_ENDINGS))


def strip_tail(value: str) -> str:
    return value.rstrip(".,;:!?)]}>")


# --- value judges -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One candidate: the value a rule captured and what surrounds it."""

    value: str
    start: int
    end: int
    text: str  # the whole text being scanned
    groups: dict[str, str | None]

    @property
    def op(self) -> str:
        return self.groups.get("op") or self.groups.get("colon") or self.groups.get("op2") or ""

    @property
    def quoted(self) -> bool:
        return bool(self.groups.get("q"))


def _password_value(hit: Hit) -> bool:
    """A password assignment or mention: is the value a password, or English about one?"""
    value = hit.value
    if _placeholder(value) or _english_word(value) or "://" in value or ENV_NAME.fullmatch(value):
        return False
    if not hit.op.strip():  # "password Tr0ub4dor&3" (a netrc line, a login note): a value with digits
        before = hit.text[: hit.start].rstrip(" \t\"'`")
        spelled = re.search(r"(?i)(?:pass(?:word|wd|phrase|code)s?|pwd)$", before) is not None
        return spelled and _has_digit(value) and _has_alpha(value) and len(value) >= 6
    if hit.quoted:
        return len(value) >= 3
    if len(value) < 4:
        return False
    if hit.groups.get("colon"):
        # "Password for the staging db: hunter2x": a label. Only the spelled-out word, and only a
        # value with a digit or a symbol: "Ski pass for the weekend: Verbier", "Boarding pass for
        # the flight: LH1173" and "Password for prod: LastPass" are prose.
        spelled = (hit.groups.get("kw") or "").lower().startswith(("password", "passwd", "passphrase", "passcode"))
        symbols = not value.replace("-", "").replace("_", "").isalnum()
        return spelled and (symbols or _has_digit(value))
    symbols = not value.replace("-", "").replace("_", "").isalnum()
    strong = _has_digit(value) or symbols or value[1:] != value[1:].lower()
    if strong:
        return True
    # A plain word is a password only where a clause ends with it ("... password is swordfish.").
    return re.match(r"[ \t]*(?:$|\n|[.,;:!?\"'`)])", hit.text[hit.end :]) is not None


# An environment variable's name (OPENAI_API_KEY): where a secret is, not the secret.
ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}", re.IGNORECASE)
# At most 64 bits: longer is a key's length (an Ethereum private key is 0x and 64 hex digits).
_HEX_NUMBER = re.compile(r"0x[0-9a-fA-F]{1,16}")
_VERSION = re.compile(r"v?\d+(?:[.-]\d+)+(?:[.-]?[a-z]+\d*)?", re.IGNORECASE)


def _token_value(hit: Hit) -> bool:
    """A value assigned to a key/token/secret name: is it credential-shaped?"""
    value = hit.value
    if _placeholder(value) or value.startswith(("/", "~", "./")) or "://" in value or ENV_NAME.fullmatch(value):
        return False
    if _HEX_NUMBER.fullmatch(value):
        return False  # a number written in hex ("key = 0x1F"), not a key that happens to start with 0x
    if _VERSION.fullmatch(value) or not _has_alpha(value):
        return False
    if not _has_digit(value) and not _random_letters(value):
        return False
    keyword = (hit.groups.get("kw") or "").lower()
    if keyword == "key" and _UUID.fullmatch(value):
        return False  # a bare "key: <uuid>" is an id far more often than a credential
    kw_start = hit.text.rfind(hit.groups.get("kw") or "", 0, hit.start)
    if re.search(r"(?:public|pub|publishable)[ _.-]?$", hit.text[max(0, kw_start - 12) : kw_start], re.IGNORECASE):
        return False
    # Hex has 16 symbols: a random 32-digit hex value can measure 2.8 bits per character, which
    # a 62-symbol alphabet would call low. The floor follows the alphabet.
    floor = 0.5 if _HEX_VALUE.fullmatch(value) else 0.0
    if not hit.op.strip() and not hit.quoted:  # "auth token 3f9a...": no "=" or ":", so be stricter
        return len(value) >= 20 and _entropy(value) >= (3.0 if len(value) >= 32 else 3.3) - floor
    return len(value) >= 10 and _entropy(value) >= 3.0 - floor


_HEX_VALUE = re.compile(r"[0-9a-fA-F]+")


def _random_letters(value: str) -> bool:
    """A long run of letters with no digit that still reads as random, not as a word or a
    CamelCase name: random base62 has no digit in about one 40-character draw of 900, while
    identifiers change case only at word starts (``AuthenticationServiceProvider``)."""
    letters = [c for c in value if c.isalpha()]
    if len(letters) < 20 or _entropy(value) < 3.5:
        return False
    changes = sum(a.isupper() != b.isupper() for a, b in pairwise(letters))
    return changes / (len(letters) - 1) >= 0.3


def _basic_credentials(value: str) -> bool:
    """True when ``value`` is base64 of ``user:password`` (HTTP Basic, docker's "auth")."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable() and len(decoded) >= 3


def _auth_header(hit: Hit) -> bool:
    value = hit.value
    if _placeholder(value):
        return False
    return (_has_digit(value) and len(value) >= 8) or _basic_credentials(value) or len(value) >= 20


def _digits_and_letters(hit: Hit) -> bool:
    return not _placeholder(hit.value) and _has_digit(hit.value) and _has_alpha(hit.value)


def _basic(hit: Hit) -> bool:
    return _basic_credentials(hit.value)


def _not_placeholder(hit: Hit) -> bool:
    return not _placeholder(hit.value) and hit.value.lower() not in _ENGLISH


def _high_entropy(threshold: float) -> Callable[[Hit], bool]:
    def judge(hit: Hit) -> bool:
        return _entropy(hit.value) >= threshold and _has_digit(hit.value)

    return judge


def _query_value(hit: Hit) -> bool:
    value = hit.value
    return not _placeholder(value) and (_has_digit(value) or "%" in value or len(value) >= 16)


def _cookie_values(hit: Hit) -> bool:
    """A Cookie header holding at least one credential-shaped value (session ids, CSRF tokens)."""
    for pair in re.finditer(r"[\w.-]+=(?P<v>[^;\s]+)", hit.value):
        value = pair.group("v").strip("\"'")
        if len(value) >= 12 and _has_digit(value) and _has_alpha(value) and not _placeholder(value):
            return True
    return False


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    judge: Callable[[Hit], bool] | None = None  # None: every match is a secret
    extend: bool = True  # widen the redaction over the token characters around the value
    # The judge reads the text around the value (the words before it), which may be on the line
    # before: the rule is run over the whole text, never line by line (adapters.secrets).
    reads_around: bool = False
    # The base64 lines right above a match are the secret's too (a private key's body).
    body_above: bool = False


def _rule(
    kind: str,
    pattern: str,
    judge: Callable[[Hit], bool] | None = None,
    *,
    flags: int = 0,
    extend: bool = True,
    body_above: bool = False,
) -> Rule:
    reads_around = judge in (_password_value, _token_value)
    return Rule(kind, re.compile(pattern, flags), judge, extend, reads_around, body_above)


# A token ends where token characters end; a trailing \b fails on tokens ending in "-".
_END = r"(?![A-Za-z0-9_-])"

# "is", "was: ", "is now", "was changed to": a value stated in prose.
_SAYS = r"[ \t]+(?i:is|was|are|were)(?:[ \t]*:)?(?:[ \t]+(?i:now|still|set[ \t]+to|changed[ \t]+to))?[ \t]+"

SHAPES: tuple[Rule, ...] = (
    # Whole key blocks first: their bodies would otherwise be cut into pieces by later rules.
    _rule(
        "private_key",
        # A key cut off before its END line loses the rest of its line and the base64 lines
        # after it, never the text that follows.
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.{0,40000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"|[^\n]*(?:\n(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]+:[^\n]*)[ \t]*(?=\n|\Z))*)",
        flags=re.DOTALL,
        extend=False,
    ),
    _rule(
        "private_key",
        # A key's tail without its BEGIN line (cut at a history entry's or an edit's end, or
        # its BEGIN line redacted already): the base64 lines above its END line go with it
        # (found walking up from the END line: a pattern reaching up to it would be tried
        # again at every line of a long base64 blob).
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        extend=False,
        body_above=True,
    ),
    _rule(
        "private_key",
        r"(?m)^Private-Lines:[ \t]*\d+[ \t]*\r?\n(?:[A-Za-z0-9+/=]+(?:\r?\n|\Z))*"
        r"(?:Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+)?",
        extend=False,
    ),
    _rule("url_password", r"\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@", _not_placeholder, flags=re.I),
    _rule("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]+"),
    _rule("discord_webhook", r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+"),
    _rule("teams_webhook", r"https://[a-z0-9.-]+\.webhook\.office\.com/webhook(?:b2)?/[A-Za-z0-9@/._-]+", flags=re.I),
    _rule("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}" + _END),
    _rule("slack_token", r"\b(?:xox[abposre]|xapp)-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]{6,}" + _END),
    _rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    _rule("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}\b"),
    _rule(
        "aws_secret_key",
        r"(?i)aws.{0,24}?(?:secret|private).{0,24}?[=:][ \t]*['\"]?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    ),
    _rule("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _END),
    _rule(
        "gitlab_token",
        r"\b(?:gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,})" + _END,
    ),
    _rule("npm_token", r"\bnpm_[A-Za-z0-9]{36}" + _END),
    _rule("pypi_token", r"\bpypi-AgE[IN][A-Za-z0-9_-]{16,}" + _END),
    _rule("huggingface_token", r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}" + _END),
    _rule("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}" + _END),
    _rule("anthropic_key", r"\bsk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_-]{40,}" + _END),
    _rule("api_key", r"\bsk-(?:proj-|ant-|or-v1-)?[A-Za-z0-9_-]{32,}" + _END),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}" + _END),
    _rule("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{24,}" + _END),
    _rule("google_oauth_token", r"\b(?:ya29\.[A-Za-z0-9_-]{30,}|1//0[A-Za-z0-9_-]{40,})" + _END),
    _rule("stripe_key", r"\b(?:[rs]k_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[A-Za-z0-9]{24,})" + _END),
    _rule("vault_token", r"\b(?:hv[sbr]\.[A-Za-z0-9_-]{24,}|s\.[A-Za-z0-9]{24}(?![A-Za-z0-9]))", _high_entropy(3.5)),
    _rule("terraform_token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}" + _END),
    _rule("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}" + _END),
    _rule("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END),
    _rule("databricks_token", r"\bdapi[a-f0-9]{32}(?:-\d)?" + _END),
    _rule("doppler_token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}" + _END),
    _rule("linear_key", r"\blin_(?:api|oauth)_[A-Za-z0-9]{40}" + _END),
    _rule("notion_token", r"\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})" + _END),
    _rule("atlassian_token", r"\bATATT3[A-Za-z0-9_=-]{100,}"),
    _rule("azure_ad_secret", r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    _rule("square_token", r"\b(?:EAAA[A-Za-z0-9_-]{60}|sq0atp-[A-Za-z0-9_-]{22}|sq0csp-[A-Za-z0-9_-]{43})" + _END),
    _rule("facebook_token", r"\bEAA[A-Za-z0-9]{90,}" + _END),
    _rule("groq_key", r"\bgsk_[A-Za-z0-9]{48,}" + _END),
    _rule("replicate_token", r"\br8_[A-Za-z0-9]{37}" + _END),
    _rule("perplexity_key", r"\bpplx-[A-Za-z0-9]{40,}" + _END),
    _rule("xai_key", r"\bxai-[A-Za-z0-9]{70,}" + _END),
    _rule("fireworks_key", r"\bfw_[A-Za-z0-9]{24,}" + _END),
    _rule("grafana_token", r"\b(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})" + _END),
    _rule("newrelic_key", r"\bNR(?:AK|JS|II|AA)-[A-Za-z0-9]{19,32}" + _END),
    _rule("postman_key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _END),
    _rule("supabase_token", r"\bsbp_[a-f0-9]{40}" + _END),
    _rule("age_secret_key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b"),
    _rule("onepassword_token", r"\bops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    _rule("flyio_token", r"\b(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})"),
    _rule("sentry_token", r"\bsntry[su]_[A-Za-z0-9+/=_-]{40,}"),
    _rule("mailgun_key", r"\bkey-[a-f0-9]{32}" + _END),
    _rule("brevo_key", r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _END),
    _rule("docker_hub_token", r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}" + _END),
    _rule("netlify_token", r"\bnfp_[A-Za-z0-9]{36,}" + _END),
    _rule("heroku_key", r"\bHRKU-[A-Za-z0-9_-]{40,}" + _END),
    _rule("pulumi_token", r"\bpul-[a-f0-9]{40}" + _END),
    _rule("airtable_token", r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _END),
    _rule("mapbox_token", r"\bsk\.eyJ[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,}"),
    _rule("dropbox_token", r"\bsl\.[A-Za-z0-9_-]{120,}"),
    _rule("asana_token", r"\b[0-2]/\d{16}:[a-f0-9]{32}" + _END),
    _rule("twilio_key", r"\bSK[0-9a-f]{32}" + _END),
    _rule("sendgrid_api_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _END),
    _rule("mailchimp_access_key", r"\b[0-9a-f]{32}-us\d{1,2}\b"),
    _rule("discord_bot_token", r"\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + _END),
    _rule("azure_storage_key", r"(?i:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
    # --- secrets their context gives away -----------------------------------------------------
    _rule(
        "authorization_header",
        r"(?i:\b(?:proxy-)?authorization)[ \t]*[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*"
        r"(?:(?i:bearer|basic|token|bot|digest|negotiate|api-?key|sso-key|ssws)[ \t]+)?"
        r"(?P<secret>[A-Za-z0-9\-._~+/=%:]{8,})",
        _auth_header,
    ),
    _rule("bearer_token", r"(?<![A-Za-z])(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", _digits_and_letters),
    _rule("basic_auth", r"(?<![A-Za-z])Basic[ \t]+(?P<secret>[A-Za-z0-9+/]{6,}={0,2})", _basic),
    _rule(
        "url_secret_parameter",
        r"[?&;](?i:access_token|refresh_token|id_token|api[_-]?key|apikey|auth|auth_token|client_secret|key|"
        r"password|passwd|pass|pwd|secret|sig|signature|token|x-amz-signature|x-amz-credential|"
        r"x-amz-security-token|x-goog-signature|x-goog-credential)=(?P<secret>[^&\s#\"'<>]{6,})",
        _query_value,
    ),
    _rule("cookie", r"(?i:\b(?:set-)?cookie)[ \t]*:[ \t]*(?P<secret>[^\n]{8,4000})", _cookie_values, extend=False),
    _rule(
        "curl_password",
        r"\bcurl\b[^\n]{0,300}?[ \t](?:-u|--user)(?:=|[ \t]+)[\"']?[^\s:\"']+:(?P<secret>[^\s\"']+)",
        _not_placeholder,
    ),
    _rule("cli_password", r"\bsshpass[ \t]+-p[ \t]*[\"']?(?P<secret>[^\s\"']+)", _not_placeholder),
    _rule(
        "cli_password",
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,200}?[ \t]-p(?P<secret>[^\s\"'-][^\s\"']{2,})",
        _not_placeholder,
    ),
    _rule(
        "netrc_password",
        r"(?i)\bmachine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<secret>\S+)",
        _not_placeholder,
    ),
    _rule(
        "password",
        # password / passwd / passphrase / passcode (also inside a name: DB_PASSWORD, PGPASSWORD),
        # or a bare pwd / pass / pw; then "=", ":", "is" (optionally after "for the NAS": "is",
        # ":" or "="), or a space.
        r"(?P<kw>(?i:pass(?:word|wd|phrase|code)s?|(?<![A-Za-z])(?:pwd|pass|pw)))(?![A-Za-z])"
        r"(?:(?P<clause>[ \t]+(?i:for|of|on|to|at)(?:[ \t]+[^\s=:\"'`]{1,40}){1,4}?)"
        r"(?:(?P<op>" + _SAYS + r")|(?P<colon>[ \t]*[:=][ \t]*))"
        r"|(?P<op2>[ \t]*[\"']?[ \t]*(?:=>|:=|==?|:|->)\s*|" + _SAYS + r"|[ \t]+))"
        r"(?:(?P<q>[\"'`])(?P<quoted>[^\"'`\n]{1,200})(?P=q)|(?P<secret>[^\s\"'`<>()\[\]{}]{1,200}))",
        _password_value,
        extend=False,
    ),
    _rule(
        "secret_assignment",
        # A value assigned to a name that ends in key / token / secret / auth / credentials
        # (OPENAI_API_KEY, apiKey, "client_secret", Twilio auth token ...), or follows it in prose.
        r"(?:(?<![A-Za-z])|(?<=[a-z0-9])(?=[A-Z]))"
        r"(?P<kw>(?i:api[_-]?key|apikey|secret[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|"
        r"access[_-]?token|auth[_-]?token|refresh[_-]?token|api[_-]?token|key|token|secret|auth|credentials?|creds))"
        r"(?![A-Za-z])"
        r"(?P<op>[ \t]*[\"']?[ \t]*(?:=>|:=|==?|:|->)[ \t]*|[ \t]+(?i:is|was|are)(?:[ \t]*:)?[ \t]+|[ \t]+)"
        r"(?P<q>[\"'`]?)(?P<secret>[A-Za-z0-9_\-+/=.~%]{8,400})",
        _token_value,
    ),
)
