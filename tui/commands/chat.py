"""``ttft chat`` (and bare ``ttft``): the chat with a live telemetry pane."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

from ...telemetry.errors import TtftError
from ...telemetry.log.sessions import resolve
from ...telemetry.log.turns import tail_records
from ...telemetry.log.urls import redact_url, without_masked
from .args import ChatArgs, chat_args
from .flags import (
    add_local_flags,
    add_mcp_flags,
    add_turn_flags,
    local_flags_problem,
    mcp_servers,
    model_spec,
)
from .help import examples


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="chat with a model and watch where the latency goes (the default command)",
        epilog=examples(
            "ttft                                        # the default model (TTFT_MODEL, config, a key, else local)",
            "ttft chat -m local --speculative",
            "ttft chat -m compat:qwen3 --base-url http://127.0.0.1:8080/v1 --effort low",
            "ttft chat --resume                          # reopen the most recent session",
            "ttft chat --mcp 'npx -y @modelcontextprotocol/server-filesystem .'   # /tools lists its tools",
        ),
    )
    p.add_argument(
        "-m", "--model", type=model_spec, help="provider:model spec (default: configured default, else the local model)"
    )
    p.add_argument("--base-url", help="base URL of an OpenAI- or Anthropic-compatible server")
    p.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SESSION",
        help="reopen a session (default: the most recent) and continue it",
    )
    p.add_argument("--speculative", action="store_true", help="speculative decoding (local models)")
    p.add_argument(
        "--sdk",
        action="store_true",
        help="read with the API's SDK (openai, or anthropic for Messages), not ttft's lean readers (same record)",
    )
    add_turn_flags(p)
    add_local_flags(p)
    add_mcp_flags(p)
    p.set_defaults(func=run, read=chat_args)


def spec_from_record(rec: dict) -> str | None:
    """The model a logged turn used, as a spec."""
    provider, model = rec.get("provider"), rec.get("model")
    if not provider:
        return None
    if provider == "local":  # a local record names its model, not the GGUF path: reopen the default
        return "local"
    return f"{provider}:{model}" if model else provider


def run(args: ChatArgs) -> int:
    from ...backends.providers.registry import names_local_engine
    from ..chat.app import ChatApp
    from ..session import default_backend_factory
    from ..tool_servers import ToolServers

    resume: Path | None = None
    spec = args.model
    base_url = args.base_url
    settings = args.settings
    local = spec is not None and names_local_engine(spec) is not False  # unknown (None): the chat's start says why
    if spec is not None and (problem := local_flags_problem(args.local, local)) is not None:
        print(f"ttft chat: {problem}", file=sys.stderr)
        return 2
    try:
        servers = mcp_servers(args.mcp.specs)
    except TtftError as exc:  # a --mcp spec that names nothing: a usage error, said in a line
        from ..format import visible_controls

        print(visible_controls(f"ttft chat: {exc} {exc.hint or ''}".strip()), file=sys.stderr)
        return 2
    if args.resume is not None:
        try:
            resume = resolve(args.resume or None)
        except FileNotFoundError as exc:
            print(f"ttft chat: {exc}", file=sys.stderr)
            return 1
        try:
            records = tail_records(resume, 1)  # the last turn's model; unreadable lines: the chat says so
        except OSError as exc:
            print(f"ttft chat: could not read {resume}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        if records and spec is None:
            spec = spec_from_record(records[-1])
            logged = records[-1].get("base_url")
            if logged in _from_variables():
                logged = None  # $OPENAI_BASE_URL's own address: read from it again, credentials and all
            base_url = base_url or without_masked(logged)  # logged with "***" in it
    factory = (
        functools.partial(default_backend_factory, timeout_s=args.timeout, lean=not args.sdk)
        if args.timeout or args.sdk
        else None
    )
    tools = ToolServers(servers, start_timeout_s=args.mcp.start_timeout_s, call_timeout_s=args.mcp.call_timeout_s)
    app = ChatApp(spec, settings=settings, base_url=base_url, resume=resume, factory=factory, warm_up=True, tools=tools)
    app.chat.session.system_prompt = args.system
    app.run()
    for line in app.crash_lines:  # said as notifications while it ran; again now that the terminal is back
        print(line, file=sys.stderr)
    return app.return_code or 0  # 143 / 129 after SIGTERM / SIGHUP; 70 after a burst of unexpected errors


def _from_variables() -> set[str]:
    """The addresses the SDKs' variables give, as a record keeps them (masked)."""
    return {redact_url(os.environ[v]) or "" for v in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL") if os.environ.get(v)}
