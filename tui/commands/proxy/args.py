"""``ttft proxy``'s flags, declared and read once into :class:`ProxyArgs` (its plan a
:class:`backends.proxy.plan.ProxyPlan`, a :class:`backends.proxy.watch.WatchPlan` for ``--watch``, or
the sentence that says why there is none)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ....backends.proxy.otlp import DEFAULT_OTLP_PORT
from ....backends.proxy.server import DEFAULT_PORT
from ..flags import model_spec
from ..help import examples

if TYPE_CHECKING:
    from ....backends.proxy.plan import ProxyPlan
    from ....backends.proxy.watch import WatchPlan

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ProxyArgs:
    """``ttft proxy``'s flags: the plan (or why the flags make none), and how the command shows the run."""

    plan: ProxyPlan | WatchPlan | str  # a str: why the flags make none (exit 2)
    quiet: bool
    headless: bool
    print_env: bool
    remote: bool  # bound beyond loopback (--listen): said as a warning


def port(value: str) -> int:
    """``--port P``: 0 (any free port, said on start) to 65535."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, not {value[:40]!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"a port is from 0 to 65535, not {n}")
    return n


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port",
        type=port,
        default=None,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free one); with --watch, the proxy to watch",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--upstream",
        metavar="URL",
        help="send every call to this server (vLLM, llama-server, a gateway) instead of each provider's own API",
    )
    where.add_argument(
        "-m",
        "--model",
        type=model_spec,
        metavar="PROVIDER[:MODEL]",
        help="send every call to the server this spec names (as ttft ask -m resolves it, config file included)",
    )
    p.add_argument(
        "--listen",
        metavar="ADDR",
        default=LOOPBACK,
        help=f"the address to bind (default {LOOPBACK}); any other lets other machines' calls in, and is warned about",
    )
    p.add_argument(
        "--otlp",
        type=port,
        nargs="?",
        const=DEFAULT_OTLP_PORT,
        metavar="PORT",
        help=(
            "also receive the app's own OpenTelemetry (OTLP/HTTP) on 127.0.0.1:PORT (default "
            f"{DEFAULT_OTLP_PORT}; 0: any free one): its tool spans split the app's steps into tool and app time"
        ),
    )
    p.add_argument(
        "--keep-content",
        action="store_true",
        help="keep prompts and answers in the log and --json (masked as the chat's logs are)",
    )
    p.add_argument("--headless", action="store_true", help="one line per call on stdout, no live view")
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="write the run's calls and sessions to FILE as one ttft.proxy/1 object when it ends",
    )
    p.add_argument(
        "--print-env", action="store_true", help="print the export lines for --port/--listen and exit (for eval)"
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="watch the calls of a proxy running elsewhere (e.g. `ttft proxy -- CMD` in another terminal)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary or notes on stderr (errors are still said)")
    p.add_argument(
        "program",
        nargs="*",
        metavar="-- CMD ARGS",
        help="a program to run with the base URLs set; its exit status is ttft's",
    )


def build(sub: argparse._SubParsersAction, doc: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "proxy",
        help="time the LLM calls of the agents and apps you already use, through a loopback proxy",
        description=doc,
        epilog=examples(
            f"ttft proxy                                   # on 127.0.0.1:{DEFAULT_PORT}; set the lines it prints",
            "ttft proxy -- claude -p 'fix the failing test'  # run one program through it; summary on stderr",
            "ttft proxy --json run.json -- codex exec 'add a test'",
            "ttft proxy --upstream http://127.0.0.1:8000  # every call to one server (vLLM, llama-server)",
            "ttft proxy --otlp -- python my_agent.py       # its execute_tool spans split its steps",
            'eval "$(ttft proxy --print-env)"              # in the shell whose apps should go through it',
            "ttft proxy --watch                           # in a second terminal: the calls of the running proxy",
        ),
    )
    add_flags(p)
    return p


def read(args: argparse.Namespace) -> ProxyArgs:
    """The flags as a plan; the sentence that says why not, for a spec or an address that does not do."""
    from ....backends.proxy.routing import bind_is_loopback

    listen = args.listen.strip()
    remote = not bind_is_loopback(listen)
    shown = ProxyArgs("", args.quiet, args.headless, args.print_env, remote)
    command = tuple(args.program)
    if args.watch:
        return _watch(args, shown)
    listen_port = DEFAULT_PORT if args.port is None else args.port
    if args.print_env and command:
        return _refused(shown, "--print-env prints the lines and exits: leave out the program")
    if args.print_env and listen_port == 0:
        return _refused(shown, "--print-env needs the port the proxy will have: give --port P (not 0)")
    if args.print_env and args.otlp == 0:
        return _refused(shown, "--print-env needs the port the receiver will have: give --otlp PORT (not 0)")
    if args.otlp is not None:
        from ....backends.proxy.otlp_read import missing

        if (why := missing()) is not None:
            return _refused(shown, why)
    if not listen:
        return _refused(shown, "--listen needs an address, e.g. 127.0.0.1")
    try:
        upstream = _upstream(args)
    except ValueError as exc:
        return _refused(shown, str(exc))
    from ....backends.proxy.plan import ProxyPlan
    from ....backends.proxy.server import ProxyConfig

    config = ProxyConfig(
        host=listen,
        port=listen_port,
        upstream=upstream,
        keep_content=args.keep_content,
        allow_remote_peers=remote,
        otlp_port=args.otlp,
    )
    plan = ProxyPlan(config, command=command, json_out=args.json)
    return ProxyArgs(plan, args.quiet, args.headless, args.print_env, remote)


def _watch(args: argparse.Namespace, shown: ProxyArgs) -> ProxyArgs:
    """``--watch``: a plan to follow a running proxy; the flags that would start one are refused."""
    from ....backends.proxy.watch import WatchPlan

    starting = [
        ("-- CMD", bool(args.program)),
        ("--upstream", args.upstream is not None),
        ("-m", args.model is not None),
        ("--listen", args.listen.strip() != LOOPBACK),
        ("--keep-content", args.keep_content),
        ("--json", args.json is not None),
        ("--print-env", args.print_env),
        ("--otlp", args.otlp is not None),
    ]
    given = [flag for flag, on in starting if on]
    if given:
        return _refused(shown, f"--watch follows a proxy started elsewhere, so it takes no {', '.join(given)}")
    if args.port == 0:
        return _refused(shown, "--watch --port P takes the port the proxy to watch listens on, not 0")
    return ProxyArgs(WatchPlan(port=args.port), shown.quiet, shown.headless, False, False)


def _refused(shown: ProxyArgs, why: str) -> ProxyArgs:
    return ProxyArgs(why, shown.quiet, shown.headless, shown.print_env, shown.remote)


def _upstream(args: argparse.Namespace) -> str | None:
    """``--upstream`` checked, or ``-m`` resolved, as a server's root (``backends.proxy.plan``); ValueError
    with the sentence to print when neither does."""
    from ....backends.providers.checks import url_problem
    from ....backends.providers.registry import ProviderError
    from ....backends.proxy.plan import UpstreamError, upstream_for, upstream_root
    from ....telemetry.log.urls import redact_url

    if args.upstream is not None:
        if (problem := url_problem(args.upstream)) is not None:
            raise ValueError(f"--upstream {(redact_url(args.upstream) or '')[:200]} {problem}")
        return upstream_root(args.upstream)
    if args.model is None:
        return None
    try:
        return upstream_for(args.model)
    except ProviderError as err:
        raise ValueError(f"{err.message}{' ' + err.hint if err.hint else ''}") from None
    except UpstreamError as err:
        raise ValueError(str(err)) from None
