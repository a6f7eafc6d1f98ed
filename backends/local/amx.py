"""Which llama.cpp weight buffers are safe on this CPU: the AMX crash and its workaround.

llama.cpp places quantized weights in "extra" CPU buffer types when it can: the AMX
tiles on Sapphire Rapids and later Xeons, and repacked AVX2/NEON layouts elsewhere. The
AMX matmul crashes on the first decode (upstream ggml-org/llama.cpp#20824), so on a CPU
that reports AMX the extra buffer types are turned off, for the in-process engine
(``llama_model_params.use_extra_bufts``) and for llama-server (``--no-repack``) alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

EXTRA_BUFTS_ENV = "TTFT_LLAMA_EXTRA_BUFTS"  # on | off | auto: overrides the decision
_ENV_VALUES = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


def cpu_has_amx(cpuinfo: str | None = None) -> bool:
    """Whether the CPU reports AMX (Sapphire Rapids and later Xeons): ``amx_int8`` in /proc/cpuinfo's flags."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return False  # not Linux: llama.cpp's AMX path is Linux-only in practice
    return any("amx_int8" in line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags"))


@dataclass(frozen=True, slots=True)
class ExtraBufts:
    """Whether llama.cpp may place weights in its extra CPU buffer types (AMX, repacked layouts), and why."""

    use: bool
    reason: str


def extra_bufts_choice(setting: bool | None, system_info: str | None, cpuinfo: str | None = None) -> ExtraBufts:
    """Decide ``use_extra_bufts`` for a load.

    llama.cpp's AMX matmul crashes on the first decode of a quantized model on AMX CPUs
    (upstream ggml-org/llama.cpp#20824): with extra buffer types off, the weights stay in
    the plain CPU buffer and the AVX-512 kernels run instead. Elsewhere they stay on (they
    also hold the repacked AVX2/NEON layouts, which make decode faster). The setting (or
    ``TTFT_LLAMA_EXTRA_BUFTS=on|off``) overrides the decision either way.

    ``system_info`` is llama.cpp's ``llama_print_system_info()``: AMX kernels exist only in a
    build compiled with them (``AMX_INT8 = 1``). None (a llama-server binary, whose build is
    not asked) assumes they are there, as in a native build.
    """
    if setting is not None:
        return ExtraBufts(setting, f"{'on' if setting else 'off'}: set by the extra_bufts setting")
    env = os.environ.get(EXTRA_BUFTS_ENV, "").strip().lower()
    if env in _ENV_VALUES:
        use = _ENV_VALUES[env]
        return ExtraBufts(use, f"{'on' if use else 'off'}: set by {EXTRA_BUFTS_ENV}={env}")
    amx_built = system_info is None or bool(re.search(r"\bAMX_INT8\s*=\s*1\b", system_info))
    if amx_built and cpu_has_amx(cpuinfo):
        return ExtraBufts(False, "off: this CPU has AMX, whose llama.cpp kernels crash on decode (llama.cpp#20824)")
    return ExtraBufts(True, "on: llama.cpp's default (no AMX kernels on this CPU/build)")
