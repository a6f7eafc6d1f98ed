"""Where ``--cluster`` points, and whether anything answers there, asked before Ray is.

The address is Ray's: ``auto`` (``RAY_ADDRESS`` when set, else the cluster last started on this
machine), ``HOST:PORT`` of a head's GCS, or ``ray://HOST:PORT`` for Ray Client; or ``local:N``, a
throwaway cluster of N nodes started on this machine for the run (:mod:`backends.load.cluster.local`).
Ray's own connect retries a dead address for minutes, so a bounded TCP connect goes first: an
unreachable cluster is then one sentence within seconds. No Ray import here, so the command line can
check the flag without it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ....telemetry.log.quote import quoted

LOCAL_PREFIX = "local:"
MAX_LOCAL_NODES = 16  # a throwaway cluster shares this machine's cores: more nodes only measure the sharing
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClusterAddress:
    """``--cluster``'s value, read."""

    text: str  # as given
    local_nodes: int | None = None  # local:N

    @property
    def local(self) -> bool:
        return self.local_nodes is not None

    def resolve(self, env: Mapping[str, str] | None = None) -> str:
        """The address for ``ray.init``: ``auto`` becomes ``RAY_ADDRESS`` when that is set."""
        env = os.environ if env is None else env
        if self.text == "auto" and env.get("RAY_ADDRESS"):
            return env["RAY_ADDRESS"]
        return self.text


def parse(text: str) -> ClusterAddress:
    """``--cluster``'s value as an address; ``ValueError`` with the sentence to print when it is none."""
    text = text.strip()
    if text.startswith(LOCAL_PREFIX):
        n = text.removeprefix(LOCAL_PREFIX)
        if not n.isdigit() or not 1 <= int(n) <= MAX_LOCAL_NODES:
            raise ValueError(f"local:N takes a number of nodes from 1 to {MAX_LOCAL_NODES}, got {quoted(text)}")
        return ClusterAddress(text, int(n))
    if text == "auto":
        return ClusterAddress(text)
    if endpoint(text) is None:
        raise ValueError(f"expected auto, HOST:PORT, ray://HOST:PORT or local:N, got {quoted(text)}")
    return ClusterAddress(text)


def endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; None for anything else (``auto``)."""
    split = urlsplit(address if "://" in address else f"gcs://{address}")
    if split.scheme not in ("gcs", "ray") or not split.hostname:
        return None
    try:
        port = split.port
    except ValueError:
        return None
    if port is None:
        return None
    return split.hostname, port


def unreachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing accepts a connection at ``address`` (refused, timed out, no such host), or None when
    something does (or the address names no endpoint to try, as ``auto``)."""
    where = endpoint(address)
    if where is None:
        return None
    try:
        with socket.create_connection(where, timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine's loopback (``localhost``, 127.0.0.0/8, ::1, ::ffff:127.x)."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def loopback_elsewhere(base_url: str | None, hosts: Iterable[str], here: str) -> str | None:
    """A sentence when the server is on a loopback address and drivers run on other machines (``hosts``:
    their host names; ``here``: this machine's): each reaches its own loopback, not this machine's server.
    Asked once the drivers are placed, so ``--cluster auto`` (whose nodes are known only then) is checked too."""
    host = urlsplit(base_url).hostname if base_url else None
    if not is_loopback(host):
        return None
    others = sorted({h for h in hosts if h != here})
    if not others:
        return None
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return (
        f"the server is at {host}, but drivers run on {shown}: each reaches its own loopback there, not this "
        "machine's (give --base-url an address every node reaches)"
    )
