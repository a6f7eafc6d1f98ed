"""A network namespace holding only loopback, made by a test for itself, and a watch on its sockets.

Ray binds every interface and, even told ``--node-ip-address 127.0.0.1``, connects through the
machine's other address. Inside a namespace of its own (``unshare -n``, then ``ip link set lo up``)
the only interface is loopback, so nothing there can reach another address. A holder process keeps
the namespace alive; commands enter it with ``nsenter --net=/proc/PID/ns/net``. Where no namespace
can be made (not root, no ``unshare``), :func:`why_not` says why and the test skips: nothing falls
back to the machine's own interfaces.

The socket watch runs inside the namespace (``python -m tests.support.netns watch``): psutil reads a
process's sockets from ``/proc/net`` of the namespace it reads from, so a watch outside would see none.
It samples every inet socket there until its input closes, then prints what it saw as JSON.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.support.paths import ROOT

TOOLS = ("unshare", "nsenter", "ip")


def why_not() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"no {', '.join(missing)} on this machine"
    try:
        done = subprocess.run(
            ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n failed: {exc}"
    if done.returncode != 0:
        return f"unshare -n failed (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}"
    return None


def run_beside_a_far_peer(code: str) -> Any:
    """Runs Python ``code`` from the tree's root in a loopback-only namespace whose ``lo`` also holds
    10.77.0.1, an address that is not loopback (a far peer's, or one to bind beyond loopback); its last
    line of output, read as JSON. Skips the test where no namespace can be made."""
    import pytest

    why = why_not()
    if why:
        pytest.skip(why)
    with LoopbackNamespace() as ns:
        ns.run(["ip", "addr", "add", "10.77.0.1/32", "dev", "lo"], check=True)
        done = ns.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _quiet_ip(ip: str) -> bool:
    """Loopback, or unspecified (a socket listening on every interface, of which the namespace has one: lo)."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
    real = mapped or addr
    return real.is_loopback or real.is_unspecified


class LoopbackNamespace:
    """A namespace with only ``lo`` (up) in it, for as long as the object lives."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen[str] | None = None

    def start(self) -> LoopbackNamespace:
        self._holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && echo ready && exec cat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != "ready":
            raise RuntimeError("the network namespace did not come up")
        return self

    @property
    def pid(self) -> int:
        assert self._holder is not None
        return self._holder.pid

    def argv(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv]

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        kw.setdefault("cwd", ROOT)  # this checkout's code, in every process started there
        kw.setdefault("text", True)
        return subprocess.Popen(self.argv(argv), **kw)

    def run(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        kw.setdefault("cwd", ROOT)
        kw.setdefault("text", True)
        kw.setdefault("capture_output", True)
        return subprocess.run(self.argv(argv), **kw)

    def interfaces(self) -> list[str]:
        out = self.run(["ip", "-o", "link"], check=True).stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]

    def inode(self) -> int:
        return os.stat(f"/proc/{self.pid}/ns/net").st_ino

    def processes(self) -> list[psutil.Process]:
        """Every process in the namespace but its holder."""
        found = []
        ino = self.inode()
        for p in psutil.process_iter():
            with contextlib.suppress(OSError, psutil.Error):
                if p.pid != self.pid and os.stat(f"/proc/{p.pid}/ns/net").st_ino == ino:
                    found.append(p)
        return found

    def stop(self) -> None:
        """End every process left in the namespace, then the namespace."""
        if self._holder is None:
            return
        procs = self.processes()
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=5)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if self._holder.stdin is not None:
            self._holder.stdin.close()
        self._holder.wait(timeout=10)
        self._holder = None

    def __enter__(self) -> LoopbackNamespace:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Watch:
    """What a socket watch saw: samples taken, sockets and processes seen, and any socket off loopback."""

    samples: int = 0
    sockets: int = 0  # distinct (pid, local, remote) seen
    processes: list[str] = field(default_factory=list)
    off_loopback: list[str] = field(default_factory=list)
    remotes: int = 0  # distinct connected sockets (with a remote end)


class SocketWatch:
    """A watch started inside ``ns``; :meth:`stop` returns what it saw."""

    def __init__(self, ns: LoopbackNamespace) -> None:
        self._proc = ns.popen(
            [sys.executable, "-m", "tests.support.netns", "watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "watching":
            raise RuntimeError("the socket watch did not start")

    def stop(self) -> Watch:
        out, _ = self._proc.communicate(input="", timeout=60)
        return Watch(**json.loads(out))


def watch() -> None:
    """Sample every inet socket of this namespace every 50 ms until stdin closes; print the summary as JSON."""
    seen: set[tuple[int, str, str]] = set()
    names: set[str] = set()
    bad: set[str] = set()
    samples = 0
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("watching", flush=True)
    while not stop.is_set():
        samples += 1
        for c in psutil.net_connections("inet"):
            local = f"{c.laddr.ip}:{c.laddr.port}" if c.laddr else ""
            remote = f"{c.raddr.ip}:{c.raddr.port}" if c.raddr else ""
            key = (c.pid or 0, local, remote)
            if key in seen:
                continue
            seen.add(key)
            with contextlib.suppress(psutil.Error, TypeError):
                names.add(psutil.Process(c.pid).name())
            for addr in (c.laddr, c.raddr):
                if addr and not _quiet_ip(addr.ip):
                    bad.add(f"{local} -> {remote or '-'} ({c.status}, pid {c.pid})")
        time.sleep(0.05)
    summary = Watch(
        samples=samples,
        sockets=len(seen),
        processes=sorted(names),
        off_loopback=sorted(bad),
        remotes=sum(1 for _, _, r in seen if r),
    )
    print(json.dumps(summary.__dict__))


if __name__ == "__main__":
    if sys.argv[1:] == ["watch"]:
        watch()
    else:
        raise SystemExit(f"usage: python -m {Path(__file__).stem} watch")
