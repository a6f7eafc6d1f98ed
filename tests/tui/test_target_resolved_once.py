"""The greeting's description of ``-m`` reads the resolved Target: the spec is split once, and the
provider tables it shows (API names, default hosts, which kinds need a key) are the providers' own."""

from __future__ import annotations

from pathlib import Path

import pytest
import ttft.backends.spec
from ttft.backends.providers import config, registry
from ttft.tui import target as tui_target
from ttft.tui.format import short_spec_str
from ttft.tui.target import describe_target


def test_describing_a_spec_splits_it_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Before the Target: twice (parse_spec, then resolve)."""
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    seen: list[str] = []
    real = ttft.backends.spec.split_spec

    def counted(spec: str) -> tuple[str, str | None]:
        seen.append(spec)
        return real(spec)

    monkeypatch.setattr(config, "split_spec", counted)
    t = describe_target("compat:qwen3:8b", "http://127.0.0.1:8080/v1")
    assert (t.provider, t.model, t.kind, t.problem) == ("compat", "qwen3:8b", "compat", None)
    assert seen == ["compat:qwen3:8b"]


def test_the_tables_are_the_providers_own() -> None:
    assert tui_target.API_NAMES is registry.API_NAMES
    assert tui_target.DEFAULT_HOSTS is registry.DEFAULT_HOSTS
    assert tui_target.KEY_REQUIRED is registry.KEY_REQUIRED


@pytest.mark.parametrize(
    ("spec", "shown"),
    [("compat:qwen3:8b", "compat:qwen3:8b"), ("openai:", "openai:"), (":m", "m"), ("local", "local")],
)
def test_a_short_name_splits_as_the_parser_does(spec: str, shown: str) -> None:
    assert short_spec_str(spec, 40) == shown
