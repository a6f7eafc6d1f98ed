"""The environment of a ttft child process in a test: its own data and config folders, and none of this
machine's API keys, base URLs or default model (nor the variables named by ``drop_prefixes``)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import ROOT


def child_env(root: Path, *, drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """``root/data`` and ``root/conf`` (made here) as ttft's folders; the tree importable as it is."""
    data, conf = root / "data", root / "conf"
    conf.mkdir(parents=True)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_BASE_URL")) and not k.startswith(drop_prefixes) and k != "TTFT_MODEL"
    }
    return {**base, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}
