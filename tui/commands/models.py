"""``ttft models -m PROVIDER [--base-url URL]``: the models a server offers at ``/v1/models``."""

from __future__ import annotations

import argparse
import json
import sys

from backends.providers import ProviderError, default_spec, list_models


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the models a provider or server offers (/v1/models)")
    p.add_argument("-m", "--model", metavar="PROVIDER[:MODEL]", help="provider to ask (default: the default model's)")
    p.add_argument("--base-url", help="the server's address, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = args.model or default_spec()
    try:
        ids = list_models(spec, args.base_url)
    except ProviderError as err:
        print(f"error: {err.message}" + (f" {err.hint}" if err.hint else ""), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(ids))
    else:
        for i in ids:
            print(i)
        if not ids:
            print("the server listed no models", file=sys.stderr)
    return 0
