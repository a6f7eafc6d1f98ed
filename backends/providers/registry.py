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
errors name the variable, not its value. A key is checked before anything is sent
(:mod:`backends.providers.checks`): whitespace around it is taken off (said once on stderr), and
a line break or a control character inside it is refused. So is a base URL (``--base-url``, the
config's, ``OPENAI_BASE_URL``) that is not an http:// or https:// address with a host.

Reading and checking the config file is :mod:`backends.providers.config`; this module resolves a
spec against it, once, into a :class:`Target` (provider, kind and API, model, base URL, where the key
comes from, local or hosted, price reference) that every other part reads, and builds the backend from
that Target. The spec string itself is split only by :func:`backends.spec.split_spec`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...telemetry.cost import PriceRef
from ...telemetry.errors import ErrorKind
from ...telemetry.log.quote import cut, quoted
from ...telemetry.log.secrets import remember
from ...telemetry.log.urls import redact_url
from ..base import Backend
from ..transport.http import DEFAULT_TIMEOUT_S
from .checks import url_problem, value_problem
from .config import (
    BUILTIN,
    KINDS,
    ProviderConfig,
    ProviderError,
    check_config,
    config_dir,
    config_path,
    configured_price,
    configured_providers,
    load_config,
    local_config,
    parse_spec,
)

if TYPE_CHECKING:
    from ..local.engine import LocalLlamaBackend
    from .hosted import HostedBackend

# Everything `-m PROVIDER:MODEL` needs, from one module: the config file's names come with this one's.
__all__ = [
    "API_BY_KIND",
    "BUILTIN",
    "DEFAULT_MODELS",
    "KEY_ENV",
    "KINDS",
    "ProviderConfig",
    "ProviderError",
    "ResolvedSpec",
    "Target",
    "check_base_url",
    "check_config",
    "config_dir",
    "config_path",
    "configured_providers",
    "create_backend",
    "default_spec",
    "is_local_spec",
    "list_models",
    "load_config",
    "names_local_engine",
    "parse_spec",
    "price_ref",
    "resolve",
    "target_api",
]

DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-haiku-4-5",
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
KEY_REQUIRED = frozenset({"openai", "openai-responses", "anthropic"})  # compat servers often need none
# Where each SDK (and the lean reader) takes its address from when none is given.
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "openai-responses": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
DEFAULT_HOSTS = {"openai": "api.openai.com", "openai-responses": "api.openai.com", "anthropic": "api.anthropic.com"}
# The wire API each kind of provider speaks (Backend.api), known before any backend exists.
API_BY_KIND = {
    "openai": "chat.completions",
    "compat": "chat.completions",
    "openai-responses": "responses",
    "anthropic": "messages",
    "local": "llama.cpp",
}
# The same, for people (the greeting, the header).
API_NAMES = {
    "openai": "OpenAI Chat Completions",
    "openai-responses": "OpenAI Responses API",
    "anthropic": "Anthropic Messages",
    "compat": "an OpenAI-compatible server",
}
# The price table's provider for each kind that names one; a compat server is priced only when the
# table knows its address (a loopback or self-hosted one is not a hosted provider, whatever its model's name).
PRICE_PROVIDER = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}

KeyFrom = Literal["env", "config", "none"]


@dataclass(frozen=True, repr=False)
class Target:
    """What ``-m`` names, resolved: immutable, and safe to print (no key; the address redacted)."""

    provider: str  # the name the user typed (built-in or configured)
    kind: str  # openai | openai-responses | anthropic | compat | local
    model: str | None  # None: the provider's default (the local engine's own, or none known)
    base_url: str | None = None  # --base-url, else the configured one, else $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL
    key_env: str | None = None  # the NAME of the variable the key is read from, never the key
    headers: Mapping[str, str] = field(default_factory=dict)  # configured; their values may be secrets
    timeout: float | None = None  # configured read timeout, seconds
    configured: bool = False  # a named provider from config.toml
    price: PriceRef | None = None  # where a hosted turn's cost comes from; the local engine prices its own

    @property
    def api(self) -> str:
        """The wire API (``Backend.api``): chat.completions, responses, messages or llama.cpp."""
        return API_BY_KIND[self.kind]

    @property
    def local(self) -> bool:
        """The in-process llama.cpp engine (not a configured provider that happens to be named local)."""
        return self.kind == "local"

    @property
    def key_from(self) -> KeyFrom:
        """Where the key comes from: a built-in provider's variable, a configured provider's, or none."""
        if not self.key_env:
            return "none"
        return "config" if self.configured else "env"

    @property
    def key_required(self) -> bool:
        """A hosted API that refuses every request without a key (a compat server often needs none)."""
        return self.kind in KEY_REQUIRED

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider

    def __repr__(self) -> str:
        # the headers are left out (a configured one may carry a token) and the address is redacted
        return (
            f"Target(provider={self.provider!r}, kind={self.kind!r}, model={self.model!r}, "
            f"base_url={redact_url(self.base_url)!r}, key_from={self.key_from!r}, key_env={self.key_env!r})"
        )

    __str__ = __repr__


def is_local_provider(provider: str) -> bool:
    """``local`` means the in-process engine unless config.toml names a provider ``local``."""
    return provider == "local" and provider not in configured_providers()


def resolve(spec: str, *, base_url: str | None = None) -> Target:
    """``-m spec`` (and ``--base-url``) against the built-in and configured providers; ProviderError for
    a spec that does not parse, a config file that does not read, an unknown provider or a base URL that
    is no http(s) address. The local engine takes no address: ``--base-url`` is not read for it."""
    provider, model = parse_spec(spec)
    if is_local_provider(provider):  # reads the config file: a broken one is this call's ProviderError
        return Target("local", "local", model)
    providers = configured_providers()
    if base_url is not None:
        check_base_url(base_url, "--base-url")
    if provider in providers:
        c = providers[provider]  # its base_url was checked with the config file
        t = Target(
            provider,
            c.kind,
            model or c.default_model,
            base_url or c.base_url,
            c.api_key_env,
            c.headers,
            c.timeout,
            configured=True,
        )
    elif provider not in BUILTIN:
        known = ", ".join([*BUILTIN, *(cut(name, 60) for name in providers)])
        raise ProviderError(
            f"Unknown provider {quoted(provider)} in -m {cut(spec)}.",
            kind=ErrorKind.BAD_SPEC,
            hint=f"Use one of: {known}; or add [providers.{cut(provider, 60)}] to {config_path()}.",
        )
    else:
        t = Target(provider, provider, model or DEFAULT_MODELS.get(provider), base_url, KEY_ENV.get(provider))
    env = BASE_URL_ENV.get(t.kind)
    if t.base_url is None and env and os.environ.get(env):
        # The SDK would read it itself; the target carries it so that the greeting shows it and the record
        # keeps it (redacted) as base_url, instead of naming the API's own host it does not go to.
        check_base_url(os.environ[env], env)
        t = dataclasses.replace(t, base_url=os.environ[env])
    return dataclasses.replace(t, price=_price(t))


def check_base_url(url: str, source: str) -> None:
    """ProviderError (``bad_url``, exit 2) unless ``url`` is an http:// or https:// address with a host;
    ``source`` is where it came from (``--base-url``, a variable), as the message names it."""
    problem = url_problem(url)
    if problem is not None:
        raise ProviderError(
            f"{source} {cut(redact_url(url) or '')} {problem}.",
            kind=ErrorKind.BAD_URL,
            hint="Give the server's address, e.g. --base-url http://127.0.0.1:8080/v1 or https://api.example.com/v1.",
        )


def _price(t: Target) -> PriceRef | None:
    """Where a hosted target's turns get their cost (telemetry.cost): the config's own prices for it, else
    the price table under the provider its address or its kind names; None when nothing would."""
    if not t.model:
        return None
    own = configured_price(t.provider, t.model)
    if own is not None:
        return PriceRef(t.model, config=own)
    url = redact_url(t.base_url)  # only matched against the table's patterns; never kept with a secret in it
    provider_id = PRICE_PROVIDER.get(t.kind)
    if provider_id is None and (url is None or _on_this_network(url)):
        return None  # no hosted provider answers there: not even the table's import is paid
    return PriceRef(t.model, provider_id=provider_id, api_url=url)


def _on_this_network(url: str) -> bool:
    """A loopback or private address (a self-hosted server), or a name without a dot (``localhost``)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local


# The resolved spec's old name (a Target is what ``resolve`` gives).
ResolvedSpec = Target


_TOLD: set[str] = set()  # the variables whose surrounding whitespace was already said


def checked_key(value: str, source: str) -> str:
    """The key to send: ``value`` without surrounding whitespace (said once per ``source`` on stderr);
    ProviderError (``bad_key``) for a line break, a control character or a non-ASCII character inside
    it. ``source`` names where the key came from; no message ever holds the key."""
    key = value.strip()
    remember(value, key)  # whatever happens next, neither form is shown
    problem = value_problem(key)
    if problem is not None:
        hint = "Pass the key alone: no line break, control character or pasted quote inside it."
        if source.isidentifier():  # a variable: how to set it from a file saved with CRLF
            hint = f"Set {source} to the key alone, e.g. export {source}=\"$(tr -d '\\r\\n' < key.txt)\"."
        raise ProviderError(f"The API key in {source} {problem}; nothing was sent.", kind=ErrorKind.BAD_KEY, hint=hint)
    if key and key != value and source not in _TOLD:
        _TOLD.add(source)
        print(f"ttft: {_around(value, key, source)}; it was sent without it.", file=sys.stderr)
    return key


def _around(value: str, key: str, source: str) -> str:
    """What surrounded the key, in words: ``OPENAI_API_KEY ends with a line break``."""
    i = value.index(key)
    said = []
    for where, piece in (("starts", value[:i]), ("ends", value[i + len(key) :])):
        if piece:
            said.append(f"{where} with " + ("a line break" if "\r" in piece or "\n" in piece else "whitespace"))
    return f"{source} {' and '.join(said)}"


def _key(r: Target, api_key: str | None) -> str | None:
    if api_key:
        return checked_key(api_key, "the api_key given") or None
    if r.key_env:
        value = os.environ.get(r.key_env)
        key = checked_key(value, r.key_env) if value else None
        if key:
            return key
        if r.key_required:
            raise ProviderError(
                f"No API key for {r.provider}: the environment variable {r.key_env} is not set.",
                kind=ErrorKind.MISSING_KEY,
                hint=f"export {r.key_env}=... (or pick another provider with -m, e.g. -m local).",
            )
    return None  # compat servers often need none


def price_ref(r: Target) -> PriceRef | None:
    """Where this target's turns get their cost (telemetry.cost), as :func:`resolve` worked it out."""
    return r.price


def target_api(spec: str | Target, base_url: str | None = None) -> tuple[str, str]:
    """(api, model) that ``-m spec`` will talk to, without creating its backend (what a check of the
    turn's attachments needs before a child process starts or a key is read). Raises ProviderError."""
    t = _target(spec, base_url)
    return t.api, t.model or ("local" if t.local else "")


def is_local_spec(spec: str) -> bool:
    """Whether ``-m spec`` means the in-process llama.cpp engine (not a configured provider named local);
    False for a spec that does not parse or names an unknown provider, which is not this test's to report."""
    try:
        provider, _ = parse_spec(spec)
    except ProviderError:
        return False
    return is_local_provider(provider)


def names_local_engine(spec: str) -> bool | None:
    """:func:`is_local_spec`, or None when nobody can tell: the config file that would say whether a provider
    is named ``local`` does not read. A command then refuses nothing on that account (its local flags nor its
    tools): the turn's start reports the config."""
    try:
        return is_local_spec(spec)
    except ProviderError:
        return None


def _target(spec: str | Target, base_url: str | None) -> Target:
    return spec if isinstance(spec, Target) else resolve(spec, base_url=base_url)


def create_backend(
    spec: str | Target,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    max_connections: int | None = None,
    lean: bool = False,
    server_gauges: bool = False,
    **local_opts: Any,
) -> Backend:
    """The backend for ``-m spec`` (or a Target already resolved from it, when ``base_url`` is not read).
    Raises ProviderError with a printable message.

    ``lean``: every hosted API without its SDK (backends.providers.lean: Chat Completions, Responses,
    Messages): the same record, without the SDK's 0.5-2 s import.
    ``server_gauges``: a compat server's turns also record its own queue and KV use as each request
    leaves, read from its ``/metrics`` (backends.providers.gauged; the chat's, never a load test's).
    """
    r = _target(spec, base_url)
    if r.local:
        local = _create_local(r.model, **local_opts)
        own = configured_price("local", local.model)  # priced by the name the engine gives its model
        local.price = PriceRef(local.model, config=own) if own is not None else None
        return local
    backend = _create_hosted(r, api_key, timeout_s, max_connections, lean)
    backend.price = r.price
    if server_gauges and r.kind == "compat" and r.base_url:
        from ..transport.prometheus import MetricsEndpoint, metrics_url
        from .gauged import GaugedBackend

        return GaugedBackend(backend, MetricsEndpoint(metrics_url(r.base_url)))
    return backend


def _create_hosted(
    r: Target,
    api_key: str | None,
    timeout_s: float | None,
    max_connections: int | None,
    lean: bool,
) -> HostedBackend:
    if not r.model:
        raise ProviderError(
            f"No model given for {r.provider}.",
            kind=ErrorKind.BAD_SPEC,
            hint=f"Use -m {r.provider}:MODEL (ttft models -m {r.provider} lists them where the server can).",
        )
    if r.kind == "compat" and not r.base_url:
        raise ProviderError(
            "The compat provider needs the server's address (--base-url).",
            kind=ErrorKind.BAD_SPEC,
            hint="Add --base-url, e.g. --base-url http://127.0.0.1:8080/v1 (llama-server, vLLM, Ollama ...).",
        )
    key = _key(r, api_key)
    timeout = timeout_s or r.timeout or DEFAULT_TIMEOUT_S
    common: dict[str, Any] = {
        "provider": r.provider,
        "base_url": r.base_url,
        "api_key": key,
        "key_env": r.key_env,
        "headers": r.headers,
        "timeout_s": timeout,
        "max_connections": max_connections,
    }
    if lean:
        return _create_lean(r.kind, r.model, common)
    if r.kind in ("openai", "compat"):
        from .openai_chat import OpenAIChatBackend

        return OpenAIChatBackend(r.model, compat=r.kind == "compat", **common)
    if r.kind == "openai-responses":
        from .openai_responses import OpenAIResponsesBackend

        return OpenAIResponsesBackend(r.model, **common)
    from .anthropic_messages import AnthropicMessagesBackend

    return AnthropicMessagesBackend(r.model, **common)


def _create_lean(kind: str, model: str, common: dict[str, Any]) -> HostedBackend:
    """The lean reader of API ``kind`` (each imported alone: none imports an SDK)."""
    if kind in ("openai", "compat"):
        from .lean.chat import LeanChatBackend

        return LeanChatBackend(model, compat=kind == "compat", **common)
    if kind == "openai-responses":
        from .lean.responses import LeanResponsesBackend

        return LeanResponsesBackend(model, **common)
    from .lean.messages import LeanMessagesBackend

    return LeanMessagesBackend(model, **common)


def _create_local(rest: str | None, **opts: Any) -> LocalLlamaBackend:
    if importlib.util.find_spec("..local.engine", __package__) is None:
        raise ProviderError("Local models are not available in this build of ttft.", kind=ErrorKind.LOCAL_UNAVAILABLE)
    from ..local import engine, llama_adapter

    if not llama_adapter.available():
        raise ProviderError(
            "Local models need llama-cpp-python, which is not installed.",
            kind=ErrorKind.LOCAL_UNAVAILABLE,
            hint="pip install 'ttft[local]' (or pick a hosted model: -m openai:MODEL with OPENAI_API_KEY set).",
        )
    # [local] in config.toml gives the defaults; an option given here (a command's flag) wins
    cfg = local_config()
    defaults = {"n_gpu_layers": cfg.gpu_layers, "n_threads": cfg.threads, "flash_attn": cfg.flash_attn}
    chosen = {**defaults, **{k: v for k, v in opts.items() if v is not None}}
    return engine.create(rest, **{k: v for k, v in chosen.items() if v is not None})


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


def list_models(spec: str | Target, base_url: str | None = None, *, api_key: str | None = None) -> list[str]:
    """Model ids the server offers at ``/v1/models`` (sorted). Raises ProviderError."""
    r = _target(spec, base_url)
    if r.local:
        from ..local.models import installed_models

        return [m.name for m in installed_models()]
    from ...telemetry.log.secrets import Secrets, header_secrets
    from ...telemetry.log.urls import split_query, url_secrets
    from .errors import provider_message, sdk_errors

    if r.kind == "compat" and not r.base_url:
        raise ProviderError(
            "The compat provider needs the server's address (--base-url).",
            kind=ErrorKind.BAD_SPEC,
            hint="Add --base-url, e.g. --base-url http://127.0.0.1:8080/v1.",
        )
    key = _key(r, api_key)
    timeout = r.timeout or 30.0
    url, query = split_query(r.base_url)  # the query as the SDK's default parameters, as for a turn
    where = redact_url(r.base_url) or r.provider
    sent = (key, *header_secrets(dict(r.headers)), *url_secrets(r.base_url))
    remember(*sent)
    secrets = Secrets(sent)
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
            secrets.mask(f"{where} did not list its models (HTTP {code}: {provider_message(exc)})."),
            kind=ErrorKind.HTTP_ERROR,
            hint="Not every server offers /v1/models; check --base-url (it usually ends in /v1).",
        ) from None
    except sdk_errors("APIError") as exc:
        raise ProviderError(
            secrets.mask(f"Could not reach {where} ({provider_message(exc)})."),
            kind=ErrorKind.CONNECT_ERROR,
            hint="Is the server running? Check --base-url.",
        ) from None
    return sorted(ids)
