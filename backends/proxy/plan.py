"""A proxy run's plan: where it listens and forwards, what program it runs, what it leaves; settled once.

The CLI builds one from its flags (``tui.commands.proxy.args``); a script builds one by hand::

    from .plan import ProxyPlan
    from .server import ProxyConfig

    plan = ProxyPlan(ProxyConfig(port=0, upstream="http://127.0.0.1:8080"), command=("my-agent", "-p", "hi"))
    # asyncio.run(backends.proxy.run.ProxyRunner(plan).run()).calls: one ProxiedCall per call

An upstream is a server's root: the clients send the API's own path (``/v1/chat/completions``,
``/v1/messages``), which the proxy joins to the upstream's path. So ``upstream_root`` takes a trailing
``/v1`` off an address given as an API base (``-m compat:x`` configured at ``http://host:8080/v1``, or
``--upstream`` given that way), and a gateway's prefix stays (``https://gw/openai/v1`` -> ``https://gw/openai``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...telemetry.errors import TtftError
from .server import ProxyConfig


class UpstreamError(TtftError):
    """``-m SPEC`` names no server the proxy can forward to (the in-process engine has no address)."""


@dataclass(frozen=True, slots=True)
class ProxyPlan:
    """What a proxy run does. ``command``: the program to run with the base URLs set (empty: run until
    stopped); ``json_out``: where the run's ``ttft.proxy/1`` object goes when it ends; ``sessions_dir``:
    the session log's folder (None: the data directory's, as every command's); ``state_dir``: where the
    run's state file goes while it runs, for ``--watch`` (None: the data directory's ``proxies/``)."""

    config: ProxyConfig
    command: tuple[str, ...] = ()
    json_out: Path | None = None
    sessions_dir: Path | None = None
    state_dir: Path | None = None

    @property
    def runs_program(self) -> bool:
        return bool(self.command)


def upstream_root(url: str) -> str:
    """The server's root for an address given as an API base (see the module doc)."""
    stripped = url.rstrip("/")
    return stripped[: -len("/v1")] if stripped.endswith("/v1") else stripped


def upstream_for(spec: str) -> str:
    """``-m SPEC`` resolved as every command resolves it (config file, ``--base-url``'s variables
    included) to the root of the server it names. ProviderError for a spec that does not resolve;
    UpstreamError for the in-process engine."""
    from ..providers.registry import DEFAULT_HOSTS, resolve

    target = resolve(spec)
    if target.local:
        raise UpstreamError(
            f"-m {spec} is ttft's in-process engine, which has no address to forward to; "
            "start a server (llama-server, vLLM) and give --upstream URL or a configured provider"
        )
    if target.base_url:
        return upstream_root(target.base_url)
    host = DEFAULT_HOSTS.get(target.kind)
    if host is None:
        raise UpstreamError(f"-m {spec} names no address; give --upstream URL or set the provider's base_url")
    return f"https://{host}"
