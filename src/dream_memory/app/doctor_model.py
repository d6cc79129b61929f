"""What the doctor says about a model without ever showing a secret: where its key comes from
(the variable or file, never the value) and its endpoint (no user:password, no query)."""

from __future__ import annotations

from urllib.parse import urlsplit

from dream_memory.settings import PROVIDER_KEY_ENV, ResolvedModel, Settings


def key_source(resolved: ResolvedModel, settings: Settings) -> str:
    """Where the model's key comes from, never its value (the same precedence as the settings)."""
    env = settings.env
    if resolved.is_offline:
        return "none needed (the built-in offline engine)"
    if env.get("DREAM_API_KEY"):
        return "DREAM_API_KEY"
    preset = settings.config.model_presets.get(resolved.preset) if resolved.preset else None
    if preset is not None and preset.api_key_env:
        return preset.api_key_env
    if resolved.api_key is None:
        if resolved.api_base:
            return "none (an endpoint without a key)"
        return "none: litellm reads the provider's own variables"
    provider = resolved.name.split("/", 1)[0] if "/" in resolved.name else "openai"
    var = PROVIDER_KEY_ENV.get(provider)
    if var and env.get(var):
        return var
    return f"the config file {settings.config_path} (its providers section)"


def safe_endpoint(url: str | None) -> str | None:
    """An endpoint as shown: scheme, host, port and path, never credentials or a query."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else "(an endpoint that is not a URL)"
