"""Which model a command uses, and with which endpoint and key: ``resolve_model``.

The choice follows ``settings.precedence`` (``--model`` > ``DREAM_MODEL`` > ``dream.modelOverride``
> ``agents.defaults.modelPreset`` > ``agents.defaults.model``); the key is looked up at once, so a
missing variable is a ConfigError naming it before any lock is taken. A nanobot config.json's
presets and providers are read the way nanobot reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dream_memory.errors import ConfigError
from dream_memory.settings import defaults as D

if TYPE_CHECKING:
    from dream_memory.settings.schema import Config, ModelPreset

OFFLINE_MODEL = D.OFFLINE_MODEL

# Where litellm looks for a provider's key when no preset names one. Used only to fail early with
# the variable's name instead of a provider error after the lock is taken.
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "xai": "XAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
}


@dataclass(frozen=True)
class ResolvedModel:
    """The model a command will use, with the secret already looked up (never printed)."""

    name: str  # "offline", or a litellm model id
    source: str  # which setting chose it, for messages: "--model", "DREAM_MODEL", ...
    preset: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = D.MODEL_TEMPERATURE
    max_tokens: int = D.MODEL_MAX_TOKENS
    timeout: float = D.MODEL_TIMEOUT_S
    context_window: int | None = None
    max_retries: int = D.MODEL_MAX_RETRIES
    retry_base_seconds: float = D.MODEL_RETRY_BASE_S
    edit_protocol: str = D.MODEL_EDIT_PROTOCOL  # how phase 2 edits: tools | text | auto | facts

    @property
    def is_offline(self) -> bool:
        return self.name == OFFLINE_MODEL

    @classmethod
    def of_preset(
        cls, name: str, preset: ModelPreset, source: str, api_base: str | None, api_key: str | None
    ) -> ResolvedModel:
        return cls(
            name=preset.model,
            source=source,
            preset=name,
            api_base=api_base,
            api_key=api_key,
            temperature=preset.temperature,
            max_tokens=preset.max_tokens,
            timeout=preset.timeout,
            context_window=preset.context_window,
            max_retries=preset.max_retries,
            retry_base_seconds=preset.retry_base_seconds,
            edit_protocol=preset.edit_protocol,
        )


def resolve_model(config: Config, cli_model: str | None, env: Mapping[str, str]) -> ResolvedModel | None:
    """Apply the model precedence; None when nothing is configured.

    Raises ConfigError for a modelOverride that is not a preset, and for a missing API key
    variable (naming the variable), so that happens before any lock is taken.
    """
    choice = _choose(config, cli_model, env)
    if choice is None:
        return None
    name, source = choice
    if name == OFFLINE_MODEL:
        return ResolvedModel(name=OFFLINE_MODEL, source=source)
    nanobot = _nanobot_model(config, name, source, env)
    if nanobot is not None:
        return nanobot
    preset = config.model_presets.get(name)
    model_id = preset.model if preset is not None else name
    if model_id == OFFLINE_MODEL:
        return ResolvedModel(name=OFFLINE_MODEL, source=source, preset=name if preset else None)
    api_base, api_key = _credentials(name, preset, model_id, env)
    if preset is not None:
        return ResolvedModel.of_preset(name, preset, source, api_base, api_key)
    return ResolvedModel(name=model_id, source=source, api_base=api_base, api_key=api_key)


def check_api_base(value: str, setting: str) -> None:
    """ConfigError (exit 2) naming ``setting`` unless ``value`` is an http(s) URL with a host:
    anything else can never be reached, so it is refused before any request instead of being
    retried as a connection failure. The value is shown without a user:password part."""
    problem = _api_base_problem(value)
    if problem is not None:
        raise ConfigError(
            f"{setting}={_shown_url(value)!r} is not a usable API base: {problem}",
            hint=f"set {setting} to the endpoint's URL, e.g. http://127.0.0.1:8080/v1 or https://api.example.com/v1",
        )


def _api_base_problem(value: str) -> str | None:
    if value != value.strip() or any(ch.isspace() or not ch.isprintable() for ch in value):
        return "it holds spaces or control characters"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in 0..65535)
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return "it does not start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    return None


def _shown_url(value: str) -> str:
    """``value`` without the user:password part a URL may carry (a secret is never echoed)."""
    head, sep, rest = value.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{head}://***@{rest.split('@', 1)[1]}"
    return value


def _choose(config: Config, cli_model: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The model's name and the setting that chose it, by precedence."""
    defaults = config.agents.defaults
    override = defaults.dream.model_override
    if cli_model:
        return cli_model, "--model"
    if env.get("DREAM_MODEL"):
        return env["DREAM_MODEL"], "DREAM_MODEL"
    if override:
        nanobot_default = override == "default" and _is_nanobot_config(config)
        if override not in (OFFLINE_MODEL, *config.model_presets) and not nanobot_default:
            raise ConfigError(
                f"agents.defaults.dream.modelOverride names no preset in modelPresets "
                f"(known presets: {', '.join(sorted(config.model_presets)) or 'none'})",
                hint="modelOverride accepts preset names only; define the model under modelPresets",
            )
        return override, "agents.defaults.dream.modelOverride"
    if defaults.model_preset:
        return defaults.model_preset, "agents.defaults.modelPreset"
    if defaults.model:
        return defaults.model, "agents.defaults.model"
    return None


def _credentials(
    name: str, preset: ModelPreset | None, model_id: str, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(api_base, api_key): ``DREAM_API_BASE`` / ``DREAM_API_KEY`` first, then the preset's, then
    the provider's own key variable; a variable that must be set and is not is a ConfigError."""
    api_base = env.get("DREAM_API_BASE") or (preset.api_base if preset else None)
    if api_base:
        check_api_base(api_base, "DREAM_API_BASE" if env.get("DREAM_API_BASE") else f"modelPresets.{name}.apiBase")
    api_key = env.get("DREAM_API_KEY") or None
    if api_key is None and preset is not None and preset.api_key_env:
        api_key = env.get(preset.api_key_env) or None
        if api_key is None:
            raise ConfigError(
                f"model preset {name!r} reads its API key from {preset.api_key_env}, which is not set",
                hint=f"export {preset.api_key_env}=... (or DREAM_API_KEY), or choose --model offline",
            )
        return api_base, api_key
    if api_key is None and api_base is None:
        provider = model_id.split("/", 1)[0] if "/" in model_id else "openai"
        var = PROVIDER_KEY_ENV.get(provider)
        if var is not None:
            api_key = env.get(var) or None
            if api_key is None:
                raise ConfigError(
                    f"model {model_id} needs an API key in {var} (or DREAM_API_KEY), which is not set",
                    hint=f"export {var}=..., set DREAM_API_BASE for a local server, or use --model offline",
                )
    return api_base, api_key


# nanobot's provider names (its config.json's `providers` keys, compared without case, "_" or
# "-") and the litellm provider each one is. "custom" and any other entry with an apiBase is an
# OpenAI-compatible endpoint.
NANOBOT_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "openrouter": "openrouter",
    "deepseek": "deepseek",
    "groq": "groq",
    "gemini": "gemini",
    "mistral": "mistral",
    "ollama": "ollama",
    "vllm": "hosted_vllm",
    "lmstudio": "lm_studio",
    "dashscope": "dashscope",
    "moonshot": "moonshot",
    "huggingface": "huggingface",
    "nvidia": "nvidia_nim",
    "custom": "openai",
}
# Sign-in (OAuth) or cloud-credential providers: nothing in config.json a batch job can use.
NANOBOT_UNSUPPORTED = ("openaicodex", "githubcopilot", "xaigrok", "azureopenai", "bedrock")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _is_nanobot_config(config: Config) -> bool:
    defaults = config.agents.defaults
    return bool(
        config.providers
        or defaults.provider
        or defaults.model_preset
        or any(p.provider for p in config.model_presets.values())
    )


def _nanobot_model(config: Config, name: str, source: str, env: Mapping[str, str]) -> ResolvedModel | None:
    """The model a nanobot config.json names (None when the config is not nanobot's, or the name
    is one of our own presets with its own key settings).

    As nanobot reads it: a preset (or, named "default" or a model id, the implicit preset of
    ``agents.defaults``: model, provider, maxTokens, contextWindowTokens, temperature) whose
    ``provider`` ("auto": the model's prefix, else the one provider with a key) names an entry
    of ``providers`` holding ``apiKey`` (``${VAR}`` taken from the environment) and ``apiBase``.
    """
    if not _is_nanobot_config(config):
        return None
    defaults = config.agents.defaults
    preset = config.model_presets.get(name)
    if preset is not None and (preset.api_key_env or preset.api_base):
        return None  # a dream-memory preset: resolved the usual way
    if preset is not None:
        model, provider, where = preset.model, preset.provider, f"modelPresets.{name}"
        max_tokens, temperature = preset.max_tokens, preset.temperature
        window = preset.context_window_tokens or preset.context_window
    else:
        if name == "default" and not defaults.model:
            raise ConfigError("the nanobot config names the default preset, but agents.defaults.model is not set")
        model = defaults.model if name == "default" and defaults.model else name
        provider = defaults.provider
        max_tokens = defaults.max_tokens or D.MODEL_MAX_TOKENS
        window = defaults.context_window_tokens
        temperature = defaults.temperature if defaults.temperature is not None else D.MODEL_TEMPERATURE
        where = "agents.defaults"
    entry_name = _nanobot_provider(config, model, provider, where)
    entry = config.providers.get(entry_name) if entry_name else None
    key_name = _norm(entry_name or "")
    field_prefix = f"providers.{entry_name}"
    api_key = env.get("DREAM_API_KEY") or _expand(entry.api_key if entry else None, f"{field_prefix}.apiKey", env)
    api_base = env.get("DREAM_API_BASE") or _expand(entry.api_base if entry else None, f"{field_prefix}.apiBase", env)
    if api_base:
        check_api_base(api_base, "DREAM_API_BASE" if env.get("DREAM_API_BASE") else f"{field_prefix}.apiBase")
    prefix = NANOBOT_PROVIDERS.get(key_name)
    if prefix is None:
        if not api_base:
            raise ConfigError(
                f"{where} uses provider {entry_name!r}, which dream-memory does not know and which has no apiBase",
                hint="set providers.<name>.apiBase to its OpenAI-compatible endpoint, or define a dream-memory "
                "preset (modelPresets with apiBase and apiKeyEnv; see docs/nanobot.md)",
            )
        prefix = "openai"
    model_id = model if model.startswith(prefix + "/") else f"{prefix}/{model}"
    if api_key is None and prefix not in ("ollama", "hosted_vllm", "lm_studio") and not api_base:
        raise ConfigError(
            f"{where} uses provider {entry_name!r}, but providers.{entry_name}.apiKey is empty",
            hint="set it in the nanobot config (or export DREAM_API_KEY), or choose --model offline",
        )
    return ResolvedModel(
        name=model_id,
        source=source,
        preset=name if preset is not None else None,
        api_base=api_base,
        api_key=api_key,
        temperature=temperature,
        max_tokens=max_tokens,
        context_window=window,
    )


def _nanobot_provider(config: Config, model: str, provider: str | None, where: str) -> str:
    """The ``providers`` entry a nanobot model uses (its name as written in the config)."""
    entries = {_norm(k): k for k, v in config.providers.items() if v is not None}
    if provider and provider != "auto":
        wanted = _norm(provider)
    else:
        head = _norm(model.split("/", 1)[0]) if "/" in model else ""
        if head in entries:
            wanted = head
        else:
            usable = [k for k, v in config.providers.items() if v is not None and (v.api_key or v.api_base)]
            if len(usable) != 1:
                raise ConfigError(
                    f"{where}: cannot tell which provider serves {model!r} (provider is auto and "
                    f"{len(usable)} providers have a key)",
                    hint=f"set {where}.provider to one of: {', '.join(sorted(entries)) or 'none configured'}",
                )
            return usable[0]
    if wanted in NANOBOT_UNSUPPORTED:
        raise ConfigError(
            f"{where} uses provider {provider!r}, which signs in interactively or uses cloud credentials: "
            "dream-memory cannot use it from a nanobot config",
            hint="define a dream-memory preset for a provider with an API key (docs/nanobot.md)",
        )
    if wanted not in entries:
        raise ConfigError(
            f"{where} uses provider {provider or wanted!r}, which has no entry under providers",
            hint=f"add providers.{provider or wanted} with its apiKey (and apiBase), or choose --model offline",
        )
    return entries[wanted]


def _expand(value: str | None, field_name: str, env: Mapping[str, str]) -> str | None:
    """A config value with nanobot's ``${VAR}`` references taken from the environment."""
    if not value:
        return None
    missing = [m for m in _ENV_REF.findall(value) if m not in env]
    if missing:
        raise ConfigError(
            f"{field_name} refers to ${{{missing[0]}}}, which is not set", hint=f"export {missing[0]}=..."
        )
    return _ENV_REF.sub(lambda m: env[m.group(1)], value) or None
