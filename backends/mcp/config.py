"""What ``--mcp SPEC`` names: a configured server (``[mcp.NAME]``), a command line for a stdio server
(split as a shell would, never run by one), or the ``http(s)://`` URL of a streamable-HTTP server.

The ``[mcp.NAME]`` tables themselves are checked with the rest of ``config.toml``
(:mod:`backends.providers.config`); this module turns the command line's specs into the same
:class:`McpServerConfig`, each with a name unique among them (it names the server's tools on a clash
and its stderr log).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import PurePath

from ...telemetry.errors import ErrorKind, TtftError
from ...telemetry.log.quote import cut, quoted
from ...telemetry.log.secrets import remember
from ...telemetry.log.urls import redact_url
from ..providers.checks import url_problem
from ..providers.config import McpServerConfig
from .config_secrets import server_secrets

__all__ = ["McpServerConfig", "McpSpecError", "parse_spec", "resolve_specs", "shown"]

# Programs that run a script or a package: the server's name is the thing they run, not "python".
# A server that is not ready after START seconds is reported and left out; a call with no answer after
# CALL seconds is an error result (--mcp-start-timeout / --mcp-call-timeout; every front end's default).
DEFAULT_START_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 60.0

RUNNERS = frozenset({"python", "python3", "node", "npx", "uvx", "uv", "bun", "bunx", "deno", "pipx", "docker"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class McpSpecError(TtftError):
    """A ``--mcp`` spec that names no server: said with the spec's words, never a URL's credentials."""

    kind: ErrorKind = ErrorKind.BAD_SPEC

    def __init__(self, message: str) -> None:
        hint = "Give --mcp a [mcp.NAME] from config.toml, a command line (quoted), or an http(s):// URL."
        super().__init__(message, kind=ErrorKind.BAD_SPEC, hint=hint)


def _name_from(words: list[str]) -> str:
    """A short name for a stdio server: its program, or for a runner (``python x.py``) what it runs."""
    program = PurePath(words[0]).name
    picked = program
    if re.sub(r"[\d.]+$", "", program) in RUNNERS:
        picked = next((w for w in words[1:] if not w.startswith("-") and w not in ("run", "-m")), program)
        picked = picked.rsplit("/", 1)[-1]
        picked = re.sub(r"\.(py|js|mjs|ts)$", "", picked)
        picked = picked.split("@", 1)[0] or picked  # a pinned package: pkg@1.2
    return _UNSAFE.sub("_", picked).strip("_")[:40] or "server"


def parse_spec(spec: str) -> McpServerConfig:
    """A command line or URL spec as a server to start (its name made from it, not yet unique)."""
    text = spec.strip()
    if not text:
        raise McpSpecError("--mcp got an empty spec.")
    if "\0" in text:
        raise McpSpecError("--mcp got a spec that holds a NUL character.")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        problem = url_problem(text)
        if problem is not None:
            shown = cut(redact_url(text) or "")
            raise McpSpecError(f"--mcp {shown}: expected an http:// or https:// URL, which it {problem}.")
        from urllib.parse import urlsplit

        host = urlsplit(text).hostname or "server"
        return McpServerConfig(name=_UNSAFE.sub("_", host).strip("_")[:40] or "server", url=text)
    try:
        words = shlex.split(text)  # a shell's words, and no shell: no globbing, no $VAR, no pipes
    except ValueError as exc:  # an unclosed quote
        raise McpSpecError(f"--mcp {quoted(text)} does not split into words ({exc}).") from None
    return McpServerConfig(name=_name_from(words), command=words[0], args=tuple(words[1:]))


def resolve_specs(
    specs: Iterable[str], configured: Mapping[str, McpServerConfig] | None = None
) -> list[McpServerConfig]:
    """Each ``--mcp`` spec as a server: a ``[mcp.NAME]`` when it is one (``configured``, default the
    config file's), else a command line or a URL; names made unique (``-2``, ``-3``) in that order."""
    if configured is None:
        from ..providers.config import configured_mcp_servers

        configured = configured_mcp_servers()
    out: list[McpServerConfig] = []
    taken: set[str] = set()
    named: set[str] = set()
    for spec in specs:
        key = spec.strip()
        if key in configured:
            if key in named:
                raise McpSpecError(f"--mcp {cut(key)} is given twice.")
            named.add(key)
            server = configured[key]
        else:
            server = parse_spec(spec)
        if server.name in taken:
            n = 2
            while f"{server.name}-{n}" in taken:
                n += 1
            server = replace(server, name=f"{server.name}-{n}")
        taken.add(server.name)
        remember(*server_secrets(server))  # used by this process: masked wherever text leaves it
        out.append(server)
    return out


def shown(server: McpServerConfig) -> str:
    """The server as a screen or a log may show it: its command line, or its URL with credentials masked.
    ``env`` and ``headers`` are never part of it."""
    if server.url is not None:
        return redact_url(server.url) or ""
    return shlex.join([server.command or "", *server.args])
