"""What the greeting and the header say a spec talks to: provider, model, where, which key variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.tui.target import describe_target, key_text, where_text


def test_targets_say_where_and_which_key_never_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    t = describe_target("openai:gpt-x")
    assert (t.provider, t.model, t.kind, t.key_env, t.key_set, t.key_missing, t.problem) == (
        "openai",
        "gpt-x",
        "openai",
        "OPENAI_API_KEY",
        True,
        False,
        None,
    )
    assert "api.openai.com" in where_text(t) and key_text(t) == "key from $OPENAI_API_KEY"
    assert "sk-secret" not in repr(t) + where_text(t) + str(key_text(t))
    monkeypatch.delenv("OPENAI_API_KEY")
    t = describe_target("openai:gpt-x")
    assert t.key_missing and "$OPENAI_API_KEY is not set" in str(key_text(t))
    compat = describe_target("compat:qwen3")
    assert compat.problem and "--base-url" in compat.problem
    compat = describe_target("compat:qwen3", "http://127.0.0.1:8080/v1")
    assert compat.problem is None and "http://127.0.0.1:8080/v1" in where_text(compat)
    assert not compat.key_missing and key_text(compat) == "no key sent"  # never OPENAI_API_KEY
    local = describe_target("local:/models/Some-Model-Q4_K_M.gguf")
    assert (local.provider, local.model, local.kind) == ("local", "Some-Model-Q4_K_M", "local")
    assert "no API key" in where_text(local) and key_text(local) is None
    unknown = describe_target("nope:m")
    assert unknown.kind == "" and "nope" in (unknown.problem or "")


def test_a_configured_provider_says_its_kind_url_and_key_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    (tmp_path / "config.toml").write_text(
        '[providers.groq]\nkind = "compat"\nbase_url = "https://api.groq.com/openai/v1"\n'
        'api_key_env = "GROQ_API_KEY"\ndefault_model = "llama-3.3-70b-versatile"\n'
    )
    t = describe_target("groq")
    assert (t.provider, t.model, t.configured) == ("groq", "llama-3.3-70b-versatile", True)
    where = where_text(t)
    assert "groq" in where and "config.toml" in where and "https://api.groq.com/openai/v1" in where
    assert "$GROQ_API_KEY (not set" in str(key_text(t))
    assert t.problem is None and not t.key_missing  # a compat server may need no key: not a reason to warn
