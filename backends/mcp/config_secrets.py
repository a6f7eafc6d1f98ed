"""The secrets ``config.toml`` holds or names, registered for masking (``telemetry.log.secrets``).

Each backend and MCP server registers what it sends when it is made (``telemetry.log.secrets.remember``);
a command's messages may also quote a part of the config it never used (a check, a crash, a listing),
so every configured provider's headers, base URL credentials and key (the value of its
``api_key_env``), and every ``[mcp.NAME]`` server's headers, secret env values and URL credentials are
registered at the start of each command that reads the config (``tui.cli``) and of each backend process
(``backends.ask.isolated``). It lives beside the MCP config since it reads both tables, and ``backends.providers``
does not import ``backends.mcp``.
"""

from __future__ import annotations

import contextlib
import os

from ...telemetry.log.secrets import header_secrets, remember, secret_name, secret_value
from ...telemetry.log.urls import url_secrets
from ..providers.config import McpServerConfig, configured_mcp_servers, configured_providers


def server_secrets(server: McpServerConfig) -> tuple[str, ...]:
    """What of an MCP server's config is never shown: each header's value (and a ``Bearer``'s token), each
    env value that is a secret (its variable named like one, or a long token-like value: ``GH=ghp_...``),
    and its URL's (or an env URL's) user and query values."""
    env: list[str] = []
    for name, value in server.env.items():
        if "://" in value:
            env += url_secrets(value)
        elif secret_value(value) and (secret_name(name) or _token_like(value)):
            env.append(value)
    return (*header_secrets(server.headers), *env, *url_secrets(server.url))


def _token_like(value: str) -> bool:
    """A value that reads as a credential, not a path, a switch or a word: 16 characters or more in one piece."""
    return len(value) >= 16 and not any(c.isspace() for c in value) and not value.startswith(("/", "~", "."))


def config_secrets() -> tuple[str, ...]:
    """Every secret value the (checked) config file holds or names."""
    found: list[str] = []
    for p in configured_providers().values():
        key = os.environ.get(p.api_key_env) if p.api_key_env else None
        found += [*header_secrets(p.headers), *url_secrets(p.base_url), *((key, key.strip()) if key else ())]
    for server in configured_mcp_servers().values():
        found += server_secrets(server)
    return tuple(dict.fromkeys(v for v in found if v))


def remember_config_secrets() -> None:
    """:func:`config_secrets` added to the values this process masks, in whatever it says or writes, used
    or not. Best effort: a config that does not read is said by the commands that need it, and stops
    none that does not."""
    with contextlib.suppress(Exception):
        remember(*config_secrets())
