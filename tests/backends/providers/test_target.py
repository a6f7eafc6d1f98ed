"""``-m PROVIDER:MODEL``, the config file and ``--base-url`` resolve once into an immutable Target.

The spec string is split once per command (counted through the one parser), the Target says where the
key comes from without ever holding it, and a printed Target shows no header value or URL credential.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import ttft.backends.spec
from ttft.backends.providers import config, registry
from ttft.backends.providers.registry import ProviderError, Target, create_backend, resolve, target_api
from ttft.telemetry.errors import ErrorKind

SECRET = "sk-Zz9SECRETpart"


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GROQ_API_KEY"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def splits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every spec the one parser splits, in order (config.parse_spec calls it by its own import)."""
    seen: list[str] = []
    real = ttft.backends.spec.split_spec

    def counted(spec: str) -> tuple[str, str | None]:
        seen.append(spec)
        return real(spec)

    monkeypatch.setattr(config, "split_spec", counted)
    yield seen


def _groq(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[providers.groq]\nkind = "compat"\nbase_url = "https://user:pw@api.groq.com/openai/v1"\n'
        f'api_key_env = "GROQ_API_KEY"\ndefault_model = "llama"\nheaders = {{ "X-Token" = "{SECRET}" }}\n'
    )


def test_creating_a_backend_splits_its_spec_once(splits: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the Target: three times (parse_spec, and resolve twice)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = create_backend("openai:gpt-x", lean=True)
    assert (backend.provider, backend.model, backend.api) == ("openai", "gpt-x", "chat.completions")
    assert splits == ["openai:gpt-x"]
    splits.clear()
    create_backend("compat:qwen3:8b", base_url="http://127.0.0.1:9/v1", lean=True, server_gauges=True)
    assert splits == ["compat:qwen3:8b"]


def test_a_resolved_target_is_read_without_splitting_again(splits: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    t = resolve("anthropic:claude-x")
    assert splits == ["anthropic:claude-x"]
    assert target_api(t) == ("messages", "claude-x")
    assert create_backend(t, lean=True).model == "claude-x"
    assert splits == ["anthropic:claude-x"]  # nothing split it again


def test_the_target_names_api_model_address_key_source_and_price(tmp_path: Path) -> None:
    t = resolve("openai")
    assert (t.provider, t.kind, t.api, t.model, t.base_url, t.local) == (
        "openai",
        "openai",
        "chat.completions",
        "gpt-4o-mini",
        None,
        False,
    )
    assert (t.key_env, t.key_from, t.key_required) == ("OPENAI_API_KEY", "env", True)
    assert t.price is not None and t.price.provider_id == "openai" and t.price.model == "gpt-4o-mini"
    compat = resolve("compat:qwen3:8b", base_url="http://127.0.0.1:8080/v1")
    assert (compat.model, compat.api, compat.key_from, compat.key_required, compat.price) == (
        "qwen3:8b",
        "chat.completions",
        "none",
        False,
        None,  # a loopback server is not a hosted provider
    )
    _groq(tmp_path)
    groq = resolve("groq")
    assert (groq.kind, groq.model, groq.configured, groq.key_env, groq.key_from) == (
        "compat",
        "llama",
        True,
        "GROQ_API_KEY",
        "config",
    )
    assert groq.spec == "groq:llama"


def test_the_local_engine_is_local_and_takes_no_address() -> None:
    t = resolve("local:/models/x.gguf", base_url="not a url")  # the engine never reads --base-url
    assert (t.local, t.kind, t.api, t.model, t.base_url, t.key_from, t.price) == (
        True,
        "local",
        "llama.cpp",
        "/models/x.gguf",
        None,
        "none",
        None,
    )
    assert target_api("local") == ("llama.cpp", "local")


def test_a_configured_provider_named_local_is_not_the_engine(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[providers.local]\nkind = "compat"\nbase_url = "http://127.0.0.1:9/v1"\n')
    t = resolve("local:m")
    assert (t.local, t.kind, t.base_url) == (False, "compat", "http://127.0.0.1:9/v1")
    assert not registry.is_local_spec("local:m")


def test_a_target_is_immutable_and_prints_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _groq(tmp_path)
    monkeypatch.setenv("GROQ_API_KEY", SECRET)
    t = resolve("groq")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.model = "other"  # type: ignore[misc]
    shown = repr(t) + str(t)
    assert SECRET not in shown and "pw" not in shown and "X-Token" not in shown
    assert "GROQ_API_KEY" in shown and "api.groq.com" in shown


@pytest.mark.parametrize(
    ("spec", "base_url", "kind"),
    [
        ("nope:m", None, ErrorKind.BAD_SPEC),
        ("openai:", None, ErrorKind.BAD_SPEC),
        (":m", None, ErrorKind.BAD_SPEC),
        ("compat:m", "ftp://x", ErrorKind.BAD_URL),
    ],
)
def test_a_spec_that_does_not_resolve_says_why(spec: str, base_url: str | None, kind: ErrorKind) -> None:
    with pytest.raises(ProviderError) as info:
        resolve(spec, base_url=base_url)
    assert info.value.kind == kind


def test_the_old_name_still_means_the_target() -> None:
    assert registry.ResolvedSpec is Target


def test_the_sdk_s_base_url_variable_is_the_target_s_address(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` send the turns elsewhere: the Target says where (issue 39,
    item 9), so the greeting and the record do; ``--base-url`` and a configured address still win."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://u:PW@127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8/anthropic")
    assert resolve("openai:gpt-x").base_url == "http://u:PW@127.0.0.1:9/v1"
    assert resolve("openai-responses:gpt-x").base_url == "http://u:PW@127.0.0.1:9/v1"
    assert resolve("anthropic:claude-x").base_url == "http://127.0.0.1:8/anthropic"
    assert "PW" not in repr(resolve("openai:gpt-x"))
    assert resolve("openai:gpt-x", base_url="http://127.0.0.1:7/v1").base_url == "http://127.0.0.1:7/v1"
    assert resolve("compat:m").base_url is None  # the SDK reads no variable for compat: neither does the Target
    _groq(tmp_path)
    assert resolve("groq:m").base_url == "https://user:pw@api.groq.com/openai/v1"
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = create_backend("openai:gpt-x", lean=True)
    assert backend.base_url == "http://***@127.0.0.1:9/v1"  # what the record keeps
