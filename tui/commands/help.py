"""``--help`` for every command: its examples, then the environment variables, the config file's
path and the exit codes, the same on each (a command gives only its examples)."""

from __future__ import annotations

import argparse
from typing import Any

from .exits import table

ENVIRONMENT = (
    ("OPENAI_API_KEY, ANTHROPIC_API_KEY", "the providers' keys (configured providers name their own)"),
    ("OPENAI_BASE_URL", "the openai provider's address"),
    ("TTFT_MODEL", "the model when -m is not given"),
    ("TTFT_CONFIG_DIR", "where config.toml is read from"),
    ("TTFT_DATA_DIR", "where session logs are written"),
    ("TTFT_CACHE_DIR", "where local models are kept"),
    ("TTFT_IN_PROCESS=1", "keep a backend in the UI's process (for comparison)"),
    ("TTFT_LLAMA_SERVER", "the llama-server binary for bench -m local-server"),
    ("TTFT_LLAMA_EXTRA_BUFTS=on|off", "llama.cpp's repacked CPU kernels (off by default on AMX CPUs)"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "send every turn as OpenTelemetry spans and metrics (pip install 'ttft[otel]')"),
    ("OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT", "one signal only; OTEL_EXPORTER_OTLP_HEADERS for auth"),
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true: put prompt and answer text on the spans"),
)


def examples(*lines: str) -> str:
    """A command's ``epilog``: its example command lines (``#`` lines are comments)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _config_path() -> str:
    try:
        from ...backends.providers.registry import config_path  # late: only --help pays for it
    except ImportError:  # pragma: no cover - a broken install still prints its help
        return "config.toml in the user config directory"
    return str(config_path())


def common_epilog() -> str:
    width = max(len(name) for name, _ in ENVIRONMENT)
    env = "\n".join(f"  {name:<{width}}  {text}" for name, text in ENVIRONMENT)
    return f"environment:\n{env}\n\nconfig file: {_config_path()}\n\nexit codes:\n{table()}"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help keeps the epilog's lines and ends with the common sections."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kw)

    def format_help(self) -> str:
        own = super().format_help().rstrip("\n")
        return f"{own}\n\n{common_epilog()}\n"
