"""The named providers' config file (``config.toml``): where it lives, reading it once per change (and
only when it is a regular file of at most 1 MiB), checking every key with a message that names the
file, the key and what was expected (the local engine's ``[local]`` table and the MCP servers'
``[mcp.NAME]`` tables too); and the ``PROVIDER:MODEL`` syntax and built-in provider names that it,
like ``-m``, may refer to. A value a message quotes is cut to 200 characters (telemetry.log.quote)."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ...telemetry import json_guard
from ...telemetry.cost import Price
from ...telemetry.errors import ErrorKind, TtftError
from ...telemetry.log.quote import cut, quoted
from ...telemetry.log.urls import redact_url
from ..spec import split_spec
from .checks import url_problem, value_problem

KINDS = ("openai", "openai-responses", "anthropic", "compat")
BUILTIN = (*KINDS, "local")


class ProviderError(TtftError):
    """A model spec, config, key or address problem, with a message fit to print as is."""

    kind: ErrorKind = ErrorKind.PROVIDER_ERROR

    def __init__(self, message: str, *, kind: ErrorKind = ErrorKind.PROVIDER_ERROR, hint: str | None = None) -> None:
        super().__init__(message, kind=kind, hint=hint)


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    default_model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server to start: a command (stdio) or a ``url`` (streamable HTTP), never both.

    ``name`` is the configured ``[mcp.NAME]`` (or one made from a ``--mcp`` spec); ``tools`` is the
    allow list (None: every tool the server offers). ``env`` and ``headers`` may hold secrets: nothing
    ttft writes or shows quotes their values."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LocalConfig:
    """``[local]``: where the local engine runs (None: its default), and the bench's own llama-server."""

    gpu_layers: int | None = None  # -1: every layer
    threads: int | None = None
    flash_attn: str | None = None  # auto | on | off
    server_bin: str | None = None


def config_dir() -> Path:
    env = os.environ.get("TTFT_CONFIG_DIR")
    return Path(env) if env else Path(platformdirs.user_config_dir("ttft"))


def config_path() -> Path:
    return config_dir() / "config.toml"


# The config's schema: key -> what a value must be, said in the words of the error message.
# Checked by hand rather than with pydantic: importing and building pydantic models costs
# ~140 ms, on every `ttft ask` with a config file, whose own delay is 0.2-0.4 s in all.
TOP_KEYS = ("default", "providers", "prices", "local", "mcp")
PROVIDER_KEYS = ("kind", "base_url", "api_key_env", "default_model", "headers", "timeout")
# [prices."PROVIDER:MODEL"] (or [prices.PROVIDER], every model of it): USD per million tokens.
PRICE_KEYS = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "cache_write_input_per_mtok")
LOCAL_KEYS = ("gpu_layers", "threads", "flash_attn", "server_bin")
FLASH_ATTN = ("auto", "on", "off")
MCP_KEYS = ("command", "args", "env", "url", "headers", "tools")
# A server's name prefixes its tools' names on a clash and names its stderr log: letters, digits, _ and -.
MCP_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# An HTTP header's name is a token (RFC 9110 5.1, 5.6.2): no space, no colon, nothing else outside these.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
HEADER_NAME_RULE = "a header's name takes letters, digits and !#$%&'*+-.^_`|~ only (no space, no colon)"
MCP_HINT = "Fix the config file (see docs/agents.md: MCP servers), or move it away to use the defaults."
# A config file is a few hundred bytes: a larger one is not one (a link to /dev/zero was read until
# the kernel killed ttft at 13 GB).
MAX_BYTES = 1 << 20

_Validated = tuple[dict[str, Any], dict[str, ProviderConfig], dict[str, Price], LocalConfig, dict[str, McpServerConfig]]
_cache: tuple[tuple[str, int, int], _Validated] | None = None


def _config_error(path: Path, key: str, what: str, hint: str | None = None) -> ProviderError:
    where = f"{path}: {cut(key)}: " if key else f"{path}: "  # a key path holds the file's own names
    return ProviderError(
        where + what,
        kind=ErrorKind.CONFIG_ERROR,
        hint=hint or "Fix the config file (see README: Named providers), or move it away to use the defaults.",
    )


def _shown(value: Any) -> str:
    """A wrong value as the message quotes it (cut to telemetry.log.quote's limit)."""
    return quoted(value)


def _known(providers: dict[str, ProviderConfig]) -> str:
    """The provider names a spec may use, for a message: the configured ones are the file's own words."""
    return ", ".join([*BUILTIN, *(cut(name, 60) for name in providers)])


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
        raise _config_error(path, at, f"expected a table ([{cut(at, 80)}]), got {_shown(raw)}")
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
    problem = url_problem(base_url) if base_url is not None else None
    if problem is not None:
        shown = _shown(redact_url(base_url))  # never its credentials
        raise _config_error(
            path, f"{at}.base_url", f"expected an http:// or https:// URL with a host, got {shown}, which {problem}"
        )
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        raise _config_error(
            path, f"{at}.headers", f"expected a table of header names to strings, got {_shown(headers)}"
        )
    for hname, hvalue in headers.items():
        if HEADER_NAME.fullmatch(hname) is None:  # else every request fails with the HTTP client's own error
            raise _config_error(path, f"{at}.headers.{quoted(hname, 80)}", HEADER_NAME_RULE)
        if not isinstance(hvalue, str):
            raise _config_error(path, f"{at}.headers.{hname}", f"expected a string, got {_shown(hvalue)}")
        problem = value_problem(hvalue.strip())
        if problem is not None:  # a header's value may be a secret: never quoted
            raise _config_error(path, f"{at}.headers.{hname}", f"the value {problem}")
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


def _price_number(path: Path, key: str, value: Any) -> float:
    # bool is an int in Python, and nan/inf are floats: none of them is a price
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise _config_error(path, key, f"expected a price in USD per million tokens (0 or more), got {_shown(value)}")
    return float(value)


def _prices(path: Path, raw: Any, providers: dict[str, ProviderConfig]) -> dict[str, Price]:
    """``[prices."PROVIDER:MODEL"]`` tables: a self-hosted model's (or a negotiated) prices, which
    win over the price table's (telemetry.cost)."""
    if not isinstance(raw, dict):
        raise _config_error(
            path, "prices", f'expected a table of prices ([prices."PROVIDER:MODEL"]), got {_shown(raw)}'
        )
    out: dict[str, Price] = {}
    for key, entry in raw.items():
        at = f"prices.{key}" if key.isidentifier() else f'prices."{key}"'
        try:
            name, model = parse_spec(key)
        except ProviderError as exc:
            raise _config_error(path, at, f"{exc} {exc.hint or ''}".strip()) from None
        if name not in BUILTIN and name not in providers:
            raise _config_error(path, at, f"unknown provider {quoted(name)}; expected one of {_known(providers)}")
        if not isinstance(entry, dict):
            raise _config_error(path, at, f"expected a table of prices ([{cut(at, 80)}]), got {_shown(entry)}")
        _unknown(path, at + ".", entry, PRICE_KEYS)
        for needed in PRICE_KEYS[:2]:
            if needed not in entry:
                raise _config_error(path, f"{at}.{needed}", "missing: give the price in USD per million tokens")
        spec = f"{name}:{model}" if model else name
        cached = entry.get("cached_input_per_mtok")
        written = entry.get("cache_write_input_per_mtok")
        out[spec] = Price(
            key=spec,
            input_per_mtok=_price_number(path, f"{at}.input_per_mtok", entry["input_per_mtok"]),
            output_per_mtok=_price_number(path, f"{at}.output_per_mtok", entry["output_per_mtok"]),
            cached_input_per_mtok=None
            if cached is None
            else _price_number(path, f"{at}.cached_input_per_mtok", cached),
            cache_write_input_per_mtok=None
            if written is None
            else _price_number(path, f"{at}.cache_write_input_per_mtok", written),
        )
    return out


def _local(path: Path, raw: Any) -> LocalConfig:
    """``[local]``: each key checked as the command-line flag it stands for would be."""
    if not isinstance(raw, dict):
        raise _config_error(path, "local", f"expected a table ([local]), got {_shown(raw)}")
    _unknown(path, "local.", raw, LOCAL_KEYS)
    counts: dict[str, int | None] = {}
    for key, least, what in (
        ("gpu_layers", -1, "a number of layers to put on the GPU: 0 (none) up to -1 (every layer)"),
        ("threads", 1, "a number of CPU threads, at least 1"),
    ):
        value = raw.get(key)
        # bool is an int in Python: neither true nor false is a count
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise _config_error(path, f"local.{key}", f"expected {what}, got {_shown(value)}")
        counts[key] = value
    fa = raw.get("flash_attn")
    if fa is not None and fa not in FLASH_ATTN:
        raise _config_error(path, "local.flash_attn", f'expected "auto", "on" or "off", got {_shown(fa)}')
    server_bin = raw.get("server_bin")
    if server_bin is not None:
        server_bin = _text(path, "local.server_bin", server_bin, "the path of a llama-server binary (a string)")
    return LocalConfig(counts["gpu_layers"], counts["threads"], fa, server_bin)


def _strings(path: Path, key: str, value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _config_error(path, key, f"expected {what}, got {_shown(value)}", MCP_HINT)
    return tuple(value)


def _secret_table(path: Path, key: str, raw: Any, what: str) -> dict[str, str]:
    """``env`` or ``headers``: names to strings. A value may be a secret, so no message quotes one."""
    if not isinstance(raw, dict):
        # the type only: the table written as a string may itself be the secret
        raise _config_error(path, key, f"expected a table of {what} to strings, got a {_toml_type(raw)}", MCP_HINT)
    for name, value in raw.items():
        if key.endswith(".headers") and HEADER_NAME.fullmatch(name) is None:
            # else it passes here and fails only when the server starts (the name is no secret)
            raise _config_error(path, f"{key}.{quoted(name, 80)}", HEADER_NAME_RULE, MCP_HINT)
        if not isinstance(value, str):
            raise _config_error(path, f"{key}.{name}", f"expected a string, got a {_toml_type(value)}", MCP_HINT)
        # a header goes on the wire as it is; an environment variable only cannot hold a NUL
        problem = value_problem(value.strip()) if key.endswith(".headers") else None
        if "\0" in value:
            problem = "holds a NUL character"
        if problem is not None:
            raise _config_error(path, f"{key}.{name}", f"the value {problem}", MCP_HINT)
    return dict(raw)


def _toml_type(value: Any) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "table"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def _mcp_server(path: Path, name: str, raw: Any) -> McpServerConfig:
    """``[mcp.NAME]``: a stdio server (``command``, ``args``, ``env``) or a streamable-HTTP one (``url``,
    ``headers``), with an allow list of its tools (``tools``)."""
    at = f"mcp.{name}" if name.isidentifier() else f'mcp."{name}"'
    if MCP_NAME.fullmatch(name) is None:
        raise _config_error(path, at, "a server's name takes letters, digits, _ and - only (at most 64)", MCP_HINT)
    if not isinstance(raw, dict):
        raise _config_error(path, at, f"expected a table ([{cut(at, 80)}]), got {_shown(raw)}", MCP_HINT)
    for key in raw:  # the checker's own words, with this table's hint
        if key not in MCP_KEYS:
            import difflib

            close = difflib.get_close_matches(key, MCP_KEYS, n=1)
            guess = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(MCP_KEYS)}"
            raise _config_error(path, f"{at}.{key}", f"unknown key{guess}", MCP_HINT)
    command, url = raw.get("command"), raw.get("url")
    if (command is None) == (url is None):
        raise _config_error(path, at, "give either command (a stdio server) or url (streamable HTTP)", MCP_HINT)
    if command is not None:
        command = _text(path, f"{at}.command", command, "the program to run (a string)")
        if "\0" in command:
            raise _config_error(path, f"{at}.command", "holds a NUL character", MCP_HINT)
        for key in ("url", "headers"):
            if key in raw:
                raise _config_error(path, f"{at}.{key}", "goes with url (streamable HTTP), not command", MCP_HINT)
    else:
        url = _text(path, f"{at}.url", url, "an http:// or https:// URL (a string)")
        if (problem := url_problem(url)) is not None:
            shown = _shown(redact_url(url))  # never its credentials
            what = f"expected an http:// or https:// URL, got {shown}, which {problem}"
            raise _config_error(path, f"{at}.url", what, MCP_HINT)
        for key in ("args", "env"):
            if key in raw:
                raise _config_error(path, f"{at}.{key}", "goes with command (a stdio server), not url", MCP_HINT)
    args = _strings(path, f"{at}.args", raw.get("args", []), "an array of strings")
    if any("\0" in a for a in args):
        raise _config_error(path, f"{at}.args", "an argument holds a NUL character", MCP_HINT)
    tools = raw.get("tools")
    return McpServerConfig(
        name=name,
        command=command,
        args=args,
        env=_secret_table(path, f"{at}.env", raw.get("env", {}), "environment variable names"),
        url=url,
        headers=_secret_table(path, f"{at}.headers", raw.get("headers", {}), "header names"),
        tools=None if tools is None else _strings(path, f"{at}.tools", tools, "an array of tool names"),
    )


def _mcp(path: Path, raw: Any) -> dict[str, McpServerConfig]:
    if not isinstance(raw, dict):
        raise _config_error(path, "mcp", f"expected a table of MCP servers ([mcp.NAME]), got {_shown(raw)}", MCP_HINT)
    return {name: _mcp_server(path, name, value) for name, value in raw.items()}


def _check_file(path: Path, st: os.stat_result) -> None:
    """Refuse what is not a config file: a FIFO (reading it waits for a writer), a device (``/dev/zero``
    never ends), a folder, or a regular file past :data:`MAX_BYTES`. A symbolic link to a regular file
    is read: dotfile managers (stow, home-manager, chezmoi) link config.toml in, and the file it names
    passes the same checks, on the opened file itself."""
    hint = "Put a regular file of at most 1 MiB there, or move it away to use the defaults."
    if not stat.S_ISREG(st.st_mode):
        raise _config_error(path, "", f"is {_file_type(st.st_mode)}, not a regular file, so it was not read.", hint)
    if st.st_size > MAX_BYTES:
        what = f"is {st.st_size:,} bytes, past the 1 MiB a config file may hold, so it was not read."
        raise _config_error(path, "", what, hint)


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "something other than a file"


def _read(path: Path) -> bytes:
    """The file's bytes, read from what was opened (checked again there: the path may have been swapped
    since its stat), never more than MAX_BYTES + 1. ``O_NONBLOCK``: a FIFO put in place meanwhile cannot
    hold the open."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _config_error(path, "", f"could not be read ({exc.strerror or exc})") from None
    try:
        _check_file(path, os.fstat(fd))
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _config_error(path, "", f"could not be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:  # it grew after the check
        raise _config_error(path, "", "grew past 1 MiB while it was read, so it was not read.")
    return b"".join(chunks)


def _validated() -> _Validated:
    """The config file read and checked once (again only when the file changes): a bad one is a
    ProviderError (kind ``config_error``) naming the file, the key and what was expected."""
    global _cache
    path = config_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}, {}, {}, LocalConfig(), {}
    except OSError as exc:
        raise _config_error(path, "", f"could not be read ({exc.strerror or exc})") from None
    _check_file(path, st)  # before opening: opening a device may itself do something
    stamp = (str(path), st.st_mtime_ns, st.st_size)
    if _cache is not None and _cache[0] == stamp:
        return _cache[1]
    data = _read(path)
    if json_guard.depth_bound(data) > json_guard.MAX_DEPTH:  # tomllib recurses per level: a RecursionError
        raise _config_error(
            path,
            "",
            f"nests arrays or inline tables more than {json_guard.MAX_DEPTH} levels deep",
            "Fix the file, or move it away to use the defaults.",
        )
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
            what = f"unknown provider {quoted(name)}; expected one of {_known(providers)}"
            raise _config_error(path, "default", what)
    prices = _prices(path, raw.get("prices", {}), providers)
    local = _local(path, raw.get("local", {}))
    mcp = _mcp(path, raw.get("mcp", {}))
    _cache = (stamp, (raw, providers, prices, local, mcp))
    return raw, providers, prices, local, mcp


def load_config() -> dict[str, Any]:
    """The config file's contents, validated (see :func:`_validated`); ``{}`` without a file."""
    return _validated()[0]


def check_config() -> None:
    """Raise the config file's first problem now, before a command starts (ProviderError)."""
    _validated()


def configured_providers() -> dict[str, ProviderConfig]:
    return dict(_validated()[1])


def local_config() -> LocalConfig:
    """The config file's ``[local]`` table (every key None without one)."""
    return _validated()[3]


def configured_mcp_servers() -> dict[str, McpServerConfig]:
    """The config file's ``[mcp.NAME]`` servers, checked (none without a file)."""
    return dict(_validated()[4])


def configured_price(provider: str, model: str | None) -> Price | None:
    """The config file's prices for ``provider:model``, else for every model of ``provider``; None
    when it sets none (the price table, telemetry.cost, then prices the turn)."""
    prices = _validated()[2]
    return (prices.get(f"{provider}:{model}") if model else None) or prices.get(provider)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """A ``-m`` value, checked: ``"PROVIDER:MODEL"`` -> (provider, model), split by
    :func:`~backends.spec.split_spec` (the model may itself contain colons)."""
    spec = spec.strip()
    if not spec:
        raise ProviderError(
            "The model spec is empty.",
            kind=ErrorKind.BAD_SPEC,
            hint="Use -m PROVIDER:MODEL, e.g. -m openai:gpt-4o-mini.",
        )
    provider, model = split_spec(spec)
    if not provider:
        raise ProviderError(
            f"The model spec {quoted(spec)} has no provider before the colon.",
            kind=ErrorKind.BAD_SPEC,
            hint="Use -m PROVIDER:MODEL, e.g. -m openai:gpt-4o-mini.",
        )
    # a colon with nothing after it ("openai:") would silently mean the provider's default model
    if spec != provider and not (model or "").strip():
        raise ProviderError(
            f"The model spec {quoted(spec)} has no model after the colon.",
            kind=ErrorKind.BAD_SPEC,
            hint=f"Use -m {cut(provider)}:MODEL, or -m {cut(provider)} for its default model.",
        )
    return provider, model
