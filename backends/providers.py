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
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from backends.base import Backend
from backends.http import DEFAULT_TIMEOUT_S

KINDS = ("openai", "openai-responses", "anthropic", "compat")
BUILTIN = (*KINDS, "local")
DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-haiku-4-5",
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


class ProviderError(Exception):
    """A model spec, config or key problem, with a message fit to print as is."""

    def __init__(self, message: str, *, kind: str = "provider_error", hint: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.hint = hint

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    default_model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None


def config_dir() -> Path:
    env = os.environ.get("TTFT_CONFIG_DIR")
    return Path(env) if env else Path(platformdirs.user_config_dir("ttft"))


def config_path() -> Path:
    return config_dir() / "config.toml"


# The config's schema: key -> what a value must be, said in the words of the error message.
# Checked by hand rather than with pydantic: importing and building pydantic models costs
# ~140 ms, on every `ttft ask` with a config file, whose own delay is 0.2-0.4 s in all.
TOP_KEYS = ("default", "providers")
PROVIDER_KEYS = ("kind", "base_url", "api_key_env", "default_model", "headers", "timeout")

_cache: tuple[tuple[str, int, int], dict[str, Any], dict[str, ProviderConfig]] | None = None


def _config_error(path: Path, key: str, what: str, hint: str | None = None) -> ProviderError:
    where = f"{path}: {key}: " if key else f"{path}: "
    return ProviderError(
        where + what,
        kind="config_error",
        hint=hint or "Fix the config file (see README: Named providers), or move it away to use the defaults.",
    )


def _shown(value: Any) -> str:
    """A wrong value as the message quotes it: short, with its TOML type when that is the problem."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown(path: Path, prefix: str, keys: dict[str, Any], known: tuple[str, ...]) -> None:
    """A typo (``timout``) would otherwise be ignored and the setting silently not applied."""
    import difflib  # only on a bad config

    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            guess = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            raise _config_error(path, prefix + key, f"unknown key{guess}")


def _text(path: Path, key: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _config_error(path, key, f"expected {what}, got {_shown(value)}")
    return value


def _provider(path: Path, name: str, raw: Any) -> ProviderConfig:
    at = f"providers.{name}"
    if not isinstance(raw, dict):
        raise _config_error(path, at, f"expected a table ([{at}]), got {_shown(raw)}")
    _unknown(path, at + ".", raw, PROVIDER_KEYS)
    kind = raw.get("kind", "compat")
    if kind not in KINDS:
        raise _config_error(path, f"{at}.kind", f"expected one of {', '.join(KINDS)}, got {_shown(kind)}")
    opt: dict[str, str | None] = {}
    for key, what in (
        ("base_url", "a URL string (http:// or https://)"),
        ("api_key_env", "the name of an environment variable (a string)"),
        ("default_model", "a model name (a string)"),
    ):
        value = raw.get(key)
        opt[key] = None if value is None else _text(path, f"{at}.{key}", value, what)
    base_url = opt["base_url"]
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise _config_error(
            path, f"{at}.base_url", f"expected a URL starting with http:// or https://, got {_shown(base_url)}"
        )
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        raise _config_error(
            path, f"{at}.headers", f"expected a table of header names to strings, got {_shown(headers)}"
        )
    for hname, hvalue in headers.items():
        if not isinstance(hvalue, str):
            raise _config_error(path, f"{at}.headers.{hname}", f"expected a string, got {_shown(hvalue)}")
    timeout = raw.get("timeout")
    # bool is an int in Python, and nan/inf pass `> 0`: none of them is a number of seconds
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < float("inf")
    ):
        raise _config_error(path, f"{at}.timeout", f"expected a number of seconds above 0, got {_shown(timeout)}")
    return ProviderConfig(
        name=name,
        kind=kind,
        base_url=base_url,
        api_key_env=opt["api_key_env"],
        default_model=opt["default_model"],
        headers=dict(headers),
        timeout=float(timeout) if timeout is not None else None,
    )


def _validated() -> tuple[dict[str, Any], dict[str, ProviderConfig]]:
    """The config file read and checked once (again only when the file changes): a bad one is a
    ProviderError (kind ``config_error``) naming the file, the key and what was expected."""
    global _cache
    path = config_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}, {}
    except OSError as exc:
        raise _config_error(path, "", f"could not be read ({exc.strerror or exc})") from None
    stamp = (str(path), st.st_mtime_ns, st.st_size)
    if _cache is not None and _cache[0] == stamp:
        return _cache[1], _cache[2]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _config_error(path, "", f"could not be read ({exc.strerror or exc})") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _config_error(
            path, "", f"is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", "Save it as UTF-8."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise _config_error(
            path, "", f"is not valid TOML ({exc})", "Fix the TOML syntax, or move the file away to use the defaults."
        ) from None
    _unknown(path, "", raw, TOP_KEYS)
    tables = raw.get("providers", {})
    if not isinstance(tables, dict):
        raise _config_error(
            path, "providers", f"expected a table of providers ([providers.NAME]), got {_shown(tables)}"
        )
    providers = {name: _provider(path, name, value) for name, value in tables.items()}
    if "default" in raw:
        default = _text(path, "default", raw["default"], 'a model spec string, e.g. "openai:gpt-4o-mini"')
        try:
            name, _ = parse_spec(default)
        except ProviderError as exc:
            raise _config_error(path, "default", f"{exc} {exc.hint or ''}".strip()) from None
        if name not in BUILTIN and name not in providers:
            known = ", ".join([*BUILTIN, *providers])
            raise _config_error(path, "default", f"unknown provider {name!r}; expected one of {known}")
    _cache = (stamp, raw, providers)
    return raw, providers


def load_config() -> dict[str, Any]:
    """The config file's contents, validated (see :func:`_validated`); ``{}`` without a file."""
    return _validated()[0]


def check_config() -> None:
    """Raise the config file's first problem now, before a command starts (ProviderError)."""
    _validated()


def configured_providers() -> dict[str, ProviderConfig]:
    return dict(_validated()[1])


@dataclass(frozen=True)
class ResolvedSpec:
    provider: str  # the name the user typed (built-in or configured)
    kind: str  # openai | openai-responses | anthropic | compat | local
    model: str | None
    base_url: str | None
    api_key_env: str | None
    headers: dict[str, str]
    timeout: float | None


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"PROVIDER:MODEL"`` -> (provider, model); the model may itself contain colons."""
    spec = spec.strip()
    if not spec:
        raise ProviderError(
            "The model spec is empty.", kind="bad_spec", hint="Use -m PROVIDER:MODEL, e.g. -m openai:gpt-4o-mini."
        )
    provider, sep, model = spec.partition(":")
    if not provider:
        raise ProviderError(
            f"The model spec {spec!r} has no provider before the colon.",
            kind="bad_spec",
            hint="Use -m PROVIDER:MODEL, e.g. -m openai:gpt-4o-mini.",
        )
    if sep and not model.strip():  # "openai:" would silently mean the provider's default model
        raise ProviderError(
            f"The model spec {spec!r} has no model after the colon.",
            kind="bad_spec",
            hint=f"Use -m {provider}:MODEL, or -m {provider} for its default model.",
        )
    return provider, (model or None) if sep else None


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

    ``lean``: Chat Completions (openai, compat) without the OpenAI SDK (backends.openai_lean):
    the same record, without the SDK's 0.5-1.2 s import.
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
    if r.kind in ("openai", "compat") and lean:
        from backends.openai_lean import LeanChatBackend

        return LeanChatBackend(r.model, compat=r.kind == "compat", **common)
    if r.kind in ("openai", "compat"):
        from backends.openai_chat import OpenAIChatBackend

        return OpenAIChatBackend(r.model, compat=r.kind == "compat", **common)
    if r.kind == "openai-responses":
        from backends.openai_responses import OpenAIResponsesBackend

        return OpenAIResponsesBackend(r.model, **common)
    from backends.anthropic_messages import AnthropicMessagesBackend

    return AnthropicMessagesBackend(r.model, **common)


def _create_local(rest: str | None, **opts: Any) -> Backend:
    if importlib.util.find_spec("backends.local") is None:
        raise ProviderError("Local models are not available in this build of ttft.", kind="local_unavailable")
    module = importlib.import_module("backends.local")
    available = getattr(module, "llama_cpp_available", None)
    if available is not None and not available():
        raise ProviderError(
            "Local models need llama-cpp-python, which is not installed.",
            kind="local_unavailable",
            hint="pip install 'ttft[local]' (or pick a hosted model: -m openai:MODEL with OPENAI_API_KEY set).",
        )
    backend: Backend = module.create(rest, **opts)
    return backend


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
        from backends.local_model import installed_models

        return [m.name for m in installed_models()]
    from backends.errors import header_secrets, provider_message, scrub, sdk_errors
    from telemetry.urls import redact_url, split_query, url_secrets

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
