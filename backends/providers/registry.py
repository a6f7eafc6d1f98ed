"""``-m PROVIDER:MODEL``: built-in providers, named providers from the config file, keys.

Built-in providers: ``openai`` (Chat Completions), ``openai-responses`` (Responses API),
``anthropic`` (Messages), ``compat`` (any OpenAI-compatible server; needs ``--base-url``;
no key needed) and ``local`` / ``local:/path/model.gguf`` (llama.cpp in-process).

Named providers come from ``config.toml`` in the user config directory
(``platformdirs.user_config_dir("ttft")``, or ``$TTFT_CONFIG_DIR``)::

    default = "groq:llama-3.3-70b-versatile"   # optional: what `ttft` uses without -m

    [providers.groq]
    kind = "compat"                 # openai | openai-responses | anthropic | compat
    base_url = "https://api.groq.com/openai/v1"
    api_key_env = "GROQ_API_KEY"    # the NAME of the variable holding the key, never the key
    default_model = "llama-3.3-70b-versatile"
    headers = { "X-Title" = "ttft" }
    timeout = 60                    # read timeout, seconds

Keys come only from the environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` or the
configured variable) or an explicit ``api_key`` argument; they are never printed, and
errors name the variable, not its value.

Reading and checking the config file is :mod:`backends.providers.config`; this module resolves a
spec against it and builds the backend.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from backends.base import Backend
from backends.providers.config import (
    BUILTIN,
    KINDS,
    ProviderConfig,
    ProviderError,
    check_config,
    config_dir,
    config_path,
    configured_providers,
    load_config,
    parse_spec,
)
from backends.transport.http import DEFAULT_TIMEOUT_S

# The config file's names, importable from here as before.
__all__ = [
    "BUILTIN",
    "DEFAULT_MODELS",
    "KEY_ENV",
    "KINDS",
    "ProviderConfig",
    "ProviderError",
    "ResolvedSpec",
    "check_config",
    "config_dir",
    "config_path",
    "configured_providers",
    "create_backend",
    "default_spec",
    "is_local_spec",
    "list_models",
    "load_config",
    "parse_spec",
    "resolve",
]

DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-haiku-4-5",
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class ResolvedSpec:
    provider: str  # the name the user typed (built-in or configured)
    kind: str  # openai | openai-responses | anthropic | compat | local
    model: str | None
    base_url: str | None
    api_key_env: str | None
    headers: dict[str, str]
    timeout: float | None


def resolve(spec: str, *, base_url: str | None = None) -> ResolvedSpec:
    provider, model = parse_spec(spec)
    providers = configured_providers()
    if provider in providers:
        c = providers[provider]
        return ResolvedSpec(
            provider,
            c.kind,
            model or c.default_model,
            base_url or c.base_url,
            c.api_key_env,
            c.headers,
            c.timeout,
        )
    if provider not in BUILTIN:
        known = ", ".join([*BUILTIN, *providers])
        raise ProviderError(
            f"Unknown provider {provider!r} in -m {spec}.",
            kind="bad_spec",
            hint=f"Use one of: {known}; or add [providers.{provider}] to {config_path()}.",
        )
    return ResolvedSpec(
        provider,
        provider,
        model or DEFAULT_MODELS.get(provider),
        base_url,
        KEY_ENV.get(provider),
        {},
        None,
    )


def _key(r: ResolvedSpec, api_key: str | None) -> str | None:
    if api_key:
        return api_key
    if r.api_key_env:
        value = os.environ.get(r.api_key_env)
        if value:
            return value
        if r.kind in ("openai", "openai-responses", "anthropic"):
            raise ProviderError(
                f"No API key for {r.provider}: the environment variable {r.api_key_env} is not set.",
                kind="missing_key",
                hint=f"export {r.api_key_env}=... (or pick another provider with -m, e.g. -m local).",
            )
    return None  # compat servers often need none


def is_local_spec(spec: str) -> bool:
    """Whether ``-m spec`` means the in-process llama.cpp engine (not a configured provider named local)."""
    try:
        provider, _ = parse_spec(spec)
    except ProviderError:
        return False
    return provider == "local" and provider not in configured_providers()


def create_backend(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    max_connections: int | None = None,
    lean: bool = False,
    **local_opts: Any,
) -> Backend:
    """The backend for ``-m spec``. Raises ProviderError with a printable message.

    ``lean``: every hosted API without its SDK (backends.providers.lean: Chat Completions, Responses,
    Messages): the same record, without the SDK's 0.5-2 s import.
    """
    provider, rest = parse_spec(spec)
    if provider == "local" and provider not in configured_providers():
        return _create_local(rest, **local_opts)
    r = resolve(spec, base_url=base_url)
    if not r.model:
        raise ProviderError(
            f"No model given for {r.provider}.",
            kind="bad_spec",
            hint=f"Use -m {r.provider}:MODEL (ttft models -m {r.provider} lists them where the server can).",
        )
    if r.kind == "compat" and not r.base_url:
        raise ProviderError(
            "The compat provider needs the server's address (--base-url).",
            kind="bad_spec",
            hint="Add --base-url, e.g. --base-url http://127.0.0.1:8080/v1 (llama-server, vLLM, Ollama ...).",
        )
    key = _key(r, api_key)
    timeout = timeout_s or r.timeout or DEFAULT_TIMEOUT_S
    common: dict[str, Any] = {
        "provider": r.provider,
        "base_url": r.base_url,
        "api_key": key,
        "key_env": r.api_key_env,
        "headers": r.headers,
        "timeout_s": timeout,
        "max_connections": max_connections,
    }
    if lean:
        return _create_lean(r.kind, r.model, common)
    if r.kind in ("openai", "compat"):
        from backends.providers.openai_chat import OpenAIChatBackend

        return OpenAIChatBackend(r.model, compat=r.kind == "compat", **common)
    if r.kind == "openai-responses":
        from backends.providers.openai_responses import OpenAIResponsesBackend

        return OpenAIResponsesBackend(r.model, **common)
    from backends.providers.anthropic_messages import AnthropicMessagesBackend

    return AnthropicMessagesBackend(r.model, **common)


def _create_lean(kind: str, model: str, common: dict[str, Any]) -> Backend:
    """The lean reader of API ``kind`` (each imported alone: none imports an SDK)."""
    if kind in ("openai", "compat"):
        from backends.providers.lean.chat import LeanChatBackend

        return LeanChatBackend(model, compat=kind == "compat", **common)
    if kind == "openai-responses":
        from backends.providers.lean.responses import LeanResponsesBackend

        return LeanResponsesBackend(model, **common)
    from backends.providers.lean.messages import LeanMessagesBackend

    return LeanMessagesBackend(model, **common)


def _create_local(rest: str | None, **opts: Any) -> Backend:
    if importlib.util.find_spec("backends.local.engine") is None:
        raise ProviderError("Local models are not available in this build of ttft.", kind="local_unavailable")
    from backends.local import engine, llama_adapter

    if not llama_adapter.available():
        raise ProviderError(
            "Local models need llama-cpp-python, which is not installed.",
            kind="local_unavailable",
            hint="pip install 'ttft[local]' (or pick a hosted model: -m openai:MODEL with OPENAI_API_KEY set).",
        )
    return engine.create(rest, **opts)


def default_spec() -> str:
    """What ``ttft`` uses without ``-m``: $TTFT_MODEL, the config's ``default``, a provider with a key, else local."""
    env = os.environ.get("TTFT_MODEL")
    if env:
        return env
    default = load_config().get("default")  # validated: a string naming a known provider, or absent
    if default is not None:
        return str(default)
    if os.environ.get("OPENAI_API_KEY"):
        return f"openai:{DEFAULT_MODELS['openai']}"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return f"anthropic:{DEFAULT_MODELS['anthropic']}"
    return "local"


def list_models(spec: str, base_url: str | None = None, *, api_key: str | None = None) -> list[str]:
    """Model ids the server offers at ``/v1/models`` (sorted). Raises ProviderError."""
    if is_local_spec(spec):
        from backends.local.models import installed_models

        return [m.name for m in installed_models()]
    from backends.providers.errors import header_secrets, provider_message, scrub, sdk_errors
    from telemetry.log.urls import redact_url, split_query, url_secrets

    r = resolve(spec, base_url=base_url)
    if r.kind == "compat" and not r.base_url:
        raise ProviderError(
            "The compat provider needs the server's address (--base-url).",
            kind="bad_spec",
            hint="Add --base-url, e.g. --base-url http://127.0.0.1:8080/v1.",
        )
    key = _key(r, api_key)
    timeout = r.timeout or 30.0
    url, query = split_query(r.base_url)  # the query as the SDK's default parameters, as for a turn
    where = redact_url(r.base_url) or r.provider
    secrets = (key or "", *header_secrets(r.headers), *url_secrets(r.base_url))
    options: dict[str, Any] = {"base_url": url, "default_query": query or None, "default_headers": r.headers or None}
    try:
        if r.kind == "anthropic":  # each SDK imported only for its own provider: either costs 0.3-0.7 s
            import anthropic

            a = anthropic.Anthropic(api_key=key or "none", timeout=timeout, **options)
            ids = [m.id for m in a.models.list()]
        else:
            import openai

            o = openai.OpenAI(api_key=key or "none", timeout=timeout, **options)
            ids = [m.id for m in o.models.list()]
    except sdk_errors("APIStatusError") as exc:
        code = getattr(exc, "status_code", "?")  # every SDK's APIStatusError has one
        raise ProviderError(
            scrub(f"{where} did not list its models (HTTP {code}: {provider_message(exc)}).", secrets),
            kind="http_error",
            hint="Not every server offers /v1/models; check --base-url (it usually ends in /v1).",
        ) from None
    except sdk_errors("APIError") as exc:
        raise ProviderError(
            scrub(f"Could not reach {where} ({provider_message(exc)}).", secrets),
            kind="connect_error",
            hint="Is the server running? Check --base-url.",
        ) from None
    return sorted(ids)
