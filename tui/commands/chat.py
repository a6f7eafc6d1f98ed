"""``ttft chat`` (and bare ``ttft``): the chat with a live telemetry pane."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from telemetry.log import resolve, tail_records
from telemetry.settings import PROMPT_LOOKUP, TurnSettings
from telemetry.urls import without_masked
from tui.commands.args import model_spec, positive_int, temperature
from tui.commands.ask import deadline_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a model and watch where the latency goes (the default command)")
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
    p.add_argument(
        "--reasoning-effort",
        "--effort",
        dest="effort",
        choices=["none", "minimal", "low", "medium", "high", "xhigh", "max"],
        help="reasoning effort",
    )
    p.add_argument("--thinking-budget", type=positive_int, help="thinking budget in tokens")
    p.add_argument("--thinking-display", choices=["summarized", "omitted"], help="how thinking is returned")
    p.add_argument(
        "--max-output-tokens", "--max-tokens", dest="max_tokens", type=positive_int, help="max output tokens"
    )
    p.add_argument("--temperature", type=temperature)
    p.add_argument("--no-stream", action="store_true", help="ask for the whole answer at once")
    p.add_argument("--speculative", action="store_true", help="speculative decoding (local models)")
    p.add_argument("--system", help="a system prompt")
    p.add_argument(
        "--deadline",
        type=deadline_arg,
        metavar="S",
        help="end a turn as an error after S seconds in all (partial answer kept)",
    )
    p.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> TurnSettings:
    return TurnSettings(
        stream=not args.no_stream,
        max_output_tokens=args.max_tokens,
        temperature=args.temperature,
        reasoning_effort=args.effort,
        thinking_budget=args.thinking_budget,
        thinking_display=args.thinking_display,
        speculative=dict(PROMPT_LOOKUP) if args.speculative else None,
        deadline_s=getattr(args, "deadline", None),
    )


def spec_from_record(rec: dict) -> str | None:
    """The model a logged turn used, as a spec."""
    provider, model = rec.get("provider"), rec.get("model")
    if not provider:
        return None
    if provider == "local":  # a local record names its model, not the GGUF path: reopen the default
        return "local"
    return f"{provider}:{model}" if model else provider


def run(args: argparse.Namespace) -> int:
    from tui.app import ChatApp

    resume: Path | None = None
    spec = args.model
    base_url = args.base_url
    settings = settings_from_args(args)
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
            base_url = base_url or without_masked(records[-1].get("base_url"))  # logged with "***" in it
    app = ChatApp(spec, settings=settings, base_url=base_url, resume=resume)
    app.session.system_prompt = args.system
    app.run()
    return app.return_code or 0  # 143 / 129 after SIGTERM / SIGHUP
