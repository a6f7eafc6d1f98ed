"""``--cluster local:N``: a throwaway Ray cluster of N nodes on this machine, started for one run, then stopped.

Each node is a ``ray start`` of its own on 127.0.0.1 (the head, then the others joining it), each in a
session of its own: a Ctrl-C at the terminal then reaches the bench, which still has to collect what
the drivers hold, and not the nodes. Stopping ends every process of those sessions and nothing else
(never ``ray stop``, which ends every Ray on the machine, another user's included). The nodes' files go
to a temporary folder, removed after. A node that dies is declared dead within about 3 s (a GCS health
check each second, three missed) rather than Ray's default of about 15 s, since on one machine a dead
node is one whose processes are gone. A small reaper process, in a session of its own too, ends the
nodes if the bench dies without stopping them (``kill -9``), so no throwaway cluster outlives its run.

Ray binds every interface, and with ``--node-ip-address 127.0.0.1`` still connects through the
machine's other address: on a machine with a network, this cluster's traffic is not loopback-only.
Tests and benchmarks run it inside a network namespace that holds only loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from ....telemetry.errors import ErrorKind, TtftError

START_TIMEOUT_S = 180.0  # seconds per node: `ray start` takes 5-30 s on 2 busy cores
STOP_GRACE_S = 5.0
OBJECT_STORE_BYTES = 100_000_000  # per node: records are small; Ray's default takes 30% of the memory
# A dead node's actors fail within ~3 s: one health check a second, three missed.
SYSTEM_CONFIG = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


class LocalClusterError(TtftError, RuntimeError):
    """A node of the throwaway cluster did not start; says which and what ``ray start`` said."""

    kind = ErrorKind.CLUSTER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ray(*args: str) -> list[str]:
    """The ``ray`` command line of this interpreter's Ray (not whichever ``ray`` is first on PATH)."""
    return [sys.executable, "-m", "ray.scripts.scripts", *args]


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


class LocalCluster:
    """N Ray nodes on 127.0.0.1 with ``cpus`` CPUs each; ``start()`` blocks until all have joined."""

    def __init__(self, nodes: int, cpus: int = 1, timeout_s: float = START_TIMEOUT_S) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.nodes = nodes
        self.cpus = max(1, cpus)
        self.timeout_s = timeout_s
        self.port = 0
        self.sessions: list[int] = []  # one per node, the head's first: every process a node runs is in it
        self._temp: Path | None = None
        self._cancelled = threading.Event()
        self._reaper: subprocess.Popen[bytes] | None = None

    def cancel(self) -> None:
        """Stop a :meth:`start` under way (from another thread): the node starting is ended, none follows."""
        self._cancelled.set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def _config() -> list[str]:
        return ["--system-config", json.dumps(SYSTEM_CONFIG)]

    def _node_args(self) -> list[str]:
        assert self._temp is not None
        return [
            "--num-cpus",
            str(self.cpus),
            "--node-ip-address",
            "127.0.0.1",
            "--temp-dir",
            str(self._temp),
            "--object-store-memory",
            str(OBJECT_STORE_BYTES),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--disable-usage-stats",
        ]

    def _start_node(self, args: list[str], what: str) -> None:
        proc = subprocess.Popen(
            _ray("start", *args, *self._node_args()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own session: what it starts is found (and ended) by its id
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )
        self.sessions.append(proc.pid)
        assert self._temp is not None
        (self._temp / "sessions").write_text(" ".join(map(str, self.sessions)))  # for the reaper
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                out, err = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if self._cancelled.is_set() or time.monotonic() > deadline:
                    proc.kill()
                    proc.communicate()
                    if self._cancelled.is_set():
                        raise LocalClusterError(f"stopped while the local cluster's {what} was starting") from None
                    raise LocalClusterError(
                        f"the local cluster's {what} did not start within {self.timeout_s:g} s"
                    ) from None
        if proc.returncode != 0:
            said = _tail(err or out) or f"exit status {proc.returncode}"
            raise LocalClusterError(f"the local cluster's {what} did not start: ray start said: {said}")

    def start(self) -> LocalCluster:
        self._temp = Path(tempfile.mkdtemp(prefix="ttft-ray-", dir="/tmp"))  # short: Ray's socket paths sit in it
        self.port = free_port()
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", __name__, "--reap", str(os.getpid()), str(self._temp)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal does not end it before the bench is done
        )
        try:
            self._start_node(
                ["--head", "--port", str(self.port), "--include-dashboard", "false", *self._config()],
                "head node",
            )
            others = range(1, self.nodes)
            with ThreadPoolExecutor(max(1, len(others))) as pool:  # the other nodes join at once
                for f in [pool.submit(self._start_node, ["--address", self.address], f"node {i + 1}") for i in others]:
                    f.result()
        except BaseException:
            self.stop()
            raise
        return self

    def processes(self, node: int) -> list[psutil.Process]:
        """Every process that node ``node`` (0: the head) runs now: its raylet, its workers, its agents."""
        return _in_session(self.sessions[node]) if node < len(self.sessions) else []

    def stop(self) -> None:
        """End every process of the nodes' sessions (SIGTERM, then SIGKILL after a grace) and remove the files."""
        procs = [p for sid in self.sessions for p in _in_session(sid)]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=STOP_GRACE_S)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=STOP_GRACE_S)
        self.sessions = []
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None
        if self._reaper is not None:
            self._reaper.terminate()
            self._reaper.wait(timeout=STOP_GRACE_S)
            self._reaper = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _in_session(sid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(p.pid) == sid:
                found.append(p)
    return found


def _end_sessions(sessions: list[int]) -> None:
    procs = [p for sid in sessions for p in _in_session(sid)]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=STOP_GRACE_S)


def reap(parent: int, temp: Path) -> None:
    """Wait for the bench ``parent`` to end; if it left its cluster running (its folder still there), end the
    nodes' sessions and remove the folder."""
    while psutil.pid_exists(parent) and temp.exists():
        time.sleep(1)
    if not temp.exists():
        return  # stopped as it should be
    with contextlib.suppress(OSError, ValueError):
        _end_sessions([int(x) for x in (temp / "sessions").read_text().split()])
    shutil.rmtree(temp, ignore_errors=True)


def main() -> None:
    """``python -m backends.load.cluster.local N``: start N nodes, print the address, stop them at end of input
    (how a test holds one cluster for several runs inside its network namespace)."""
    if sys.argv[1:2] == ["--reap"]:
        reap(int(sys.argv[2]), Path(sys.argv[3]))
        return
    with LocalCluster(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as cluster:
        print(json.dumps({"address": cluster.address, "sessions": cluster.sessions}), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()


if __name__ == "__main__":
    main()
