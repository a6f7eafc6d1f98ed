"""Saved probes: one file per provider, model and masked base URL, under the data directory.

``ttft probe`` saves its fit here; the chat and ``ask`` look it up for every turn
(:func:`saved_probe`, cached by the file's modification time, so a turn pays a
``stat`` and no parse). A file that is unreadable, not JSON, of another schema, or
for another target counts as no probe: a broken file never breaks a turn.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from .. import json_guard
from ..log.turns import data_dir
from ..log.urls import redact_url
from .result import ProbeFit, fit_from_dict
from .saved import SavedProbe

SCHEMA = "ttft.probe/1"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_cache: dict[Path, tuple[int, SavedProbe | None]] = {}


def probes_dir() -> Path:
    return data_dir() / "probes"


def probe_path(provider: str, model: str, base_url: str | None) -> Path:
    """The file for this target: a readable slug and a hash of the exact (masked) key."""
    return probes_dir() / _file_name(provider, model, base_url)


@functools.lru_cache(maxsize=64)
def _file_name(provider: str, model: str, base_url: str | None) -> str:
    # cached: every bench request looks its target's probe up, and the name never changes
    key = json.dumps([provider, model, redact_url(base_url)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    slug = _SLUG.sub("_", f"{provider}-{model}")[:60]
    return f"{slug}-{digest}.json"


def save_probe(provider: str, model: str, base_url: str | None, fit: ProbeFit, *, when: datetime | None = None) -> Path:
    """Write the fit (without its points) atomically; returns the path. Raises OSError when it cannot."""
    path = probe_path(provider, model, base_url)
    data = {
        "schema": SCHEMA,
        "provider": provider,
        "model": model,
        "base_url": redact_url(base_url),  # never a credential on disk
        "date": (when or datetime.now(UTC)).isoformat(timespec="seconds"),
        "fit": fit.to_dict(points=False),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _cache.pop(path, None)
    return path


def _read(path: Path, provider: str, model: str, base_url: str | None) -> SavedProbe | None:
    try:
        raw = json_guard.loads(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        return None
    # The hash in the name could collide or the file be copied in: the key inside must match too.
    if (raw.get("provider"), raw.get("model"), raw.get("base_url")) != (provider, model, redact_url(base_url)):
        return None
    date = raw.get("date")
    try:
        fit = fit_from_dict(raw.get("fit"))
    except ValueError:
        return None
    return SavedProbe(provider, model, redact_url(base_url), date if isinstance(date, str) else "", fit)


def saved_probe(provider: str, model: str, base_url: str | None) -> SavedProbe | None:
    """The probe saved for this target, or None."""
    try:
        path = probe_path(provider, model, base_url)
        mtime = path.stat().st_mtime_ns
    except (OSError, ValueError):
        return None
    hit = _cache.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    probe = _read(path, provider, model, base_url)
    _cache[path] = (mtime, probe)
    return probe
