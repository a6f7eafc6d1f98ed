"""Keys, header values and base URLs are checked before anything is sent; the exception table's own rows.

A key read from a CRLF file is stripped (said once), a line break or control character inside one is
refused naming the variable and never the value, and a base URL that is not http(s) is refused as a
usage error instead of being retried as an unreachable server.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from ttft.backends.providers import registry
from ttft.backends.providers.checks import url_problem, value_problem
from ttft.backends.providers.errors import ErrorContext, describe_exception
from ttft.backends.providers.registry import ProviderError, create_backend, list_models
from ttft.telemetry.errors import ErrorKind
from ttft.telemetry.log.secrets import Secrets

SECRET = "sk-Zz9SECRETpart"


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "MY_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(registry, "_TOLD", set())


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("sk-abc\r\ndef", "line break"),
        ("sk-abc\ndef", "line break"),
        ("sk-abc\u2028def", "line break"),
        ("sk-abc\x07def", "control character (U+0007)"),
        ("sk-abc\x1b[31mdef", "control character (U+001B)"),
        ("sk-\u201cabc\u201d", "U+201C LEFT DOUBLE QUOTATION MARK"),
    ],
)
def test_a_key_with_a_character_http_cannot_carry_is_named_by_its_problem(value: str, words: str) -> None:
    problem = value_problem(value)
    assert problem is not None and words in problem and "abc" not in problem


def test_a_plain_key_has_no_problem() -> None:
    assert value_problem("sk-proj-Ab_c-123.x/y+z=") is None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file:///etc/passwd", "file://"),
        ("ftp://host/v1", "ftp://"),
        ("localhost:8080/v1", "no scheme"),
        ("127.0.0.1:8080", "no scheme"),
        ("http://", "no host"),
        ("http://h:99999/v1", "not a valid URL"),
        ("http://h/v1\n", "line break"),
        ("http://h /v1", "space"),
    ],
)
def test_a_base_url_that_is_no_servers_address_is_named_by_its_problem(url: str, words: str) -> None:
    problem = url_problem(url)
    assert problem is not None and words in problem


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/v1", "https://api.example.com/v1?api-version=1", "http://[::1]/v1"]
)
def test_a_servers_address_has_no_problem(url: str) -> None:
    assert url_problem(url) is None


def test_whitespace_around_a_key_is_taken_off_and_said_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"{SECRET}\r\n")
    b = create_backend("openai:m", base_url="http://127.0.0.1:9/v1")
    assert b.api_key == SECRET  # type: ignore[attr-defined]
    create_backend("openai:m", base_url="http://127.0.0.1:9/v1", lean=True)
    err = capsys.readouterr().err
    assert err.count("OPENAI_API_KEY ends with a line break; it was sent without it.") == 1
    assert SECRET not in err


def test_a_line_break_inside_a_key_is_refused_naming_the_variable_never_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"{SECRET}\r\nsecond-line")
    with pytest.raises(ProviderError) as exc:
        create_backend("openai:m", base_url="http://127.0.0.1:9/v1")
    assert exc.value.kind is ErrorKind.BAD_KEY
    text = f"{exc.value} {exc.value.hint}"
    assert "OPENAI_API_KEY" in text and "line break" in text and "nothing was sent" in text
    assert "Zz9" not in text and "second" not in text
    with pytest.raises(ProviderError) as listing:  # the models listing checks it the same way
        list_models("openai", "http://127.0.0.1:9/v1")
    assert listing.value.kind is ErrorKind.BAD_KEY


def test_a_configured_providers_key_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.toml").write_text(
        '[providers.mine]\nkind = "compat"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "MY_KEY"\n'
    )
    monkeypatch.setenv("MY_KEY", "abc\x1bdef")
    with pytest.raises(ProviderError) as exc:
        create_backend("mine:m")
    assert exc.value.kind is ErrorKind.BAD_KEY and "MY_KEY" in str(exc.value) and "abc" not in str(exc.value)


def test_an_explicit_key_is_checked_too() -> None:
    with pytest.raises(ProviderError) as exc:
        create_backend("openai:m", base_url="http://127.0.0.1:9/v1", api_key="k\ny")
    assert exc.value.kind is ErrorKind.BAD_KEY and "the api_key given" in str(exc.value)


@pytest.mark.parametrize("source", ["--base-url", "OPENAI_BASE_URL"])
def test_a_base_url_that_is_not_http_is_refused_as_a_usage_error(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    url = "file://user:PW-SECRET@host/v1"
    if source == "--base-url":
        call = {"base_url": url}
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        call = {}
    with pytest.raises(ProviderError) as exc:
        create_backend("openai:m", **call)  # type: ignore[arg-type]
    assert exc.value.kind is ErrorKind.BAD_URL
    assert str(exc.value).startswith(f"{source} file://***@host/v1 is not an http:// or https:// address")
    assert "PW-SECRET" not in str(exc.value)


def test_a_config_files_base_url_and_header_values_are_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[providers.p]\nkind = "compat"\nbase_url = "http://"\n')
    with pytest.raises(ProviderError) as exc:
        create_backend("p:m")
    assert exc.value.kind is ErrorKind.CONFIG_ERROR and "providers.p.base_url" in str(exc.value)
    assert "has no host" in str(exc.value)
    cfg.write_text(
        '[providers.p]\nkind = "compat"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'headers = { "X-Key" = "HDR-SECRET\\r\\nX-Evil: 1" }\n'
    )
    with pytest.raises(ProviderError) as exc:
        create_backend("p:m")
    assert exc.value.kind is ErrorKind.CONFIG_ERROR and "providers.p.headers.X-Key" in str(exc.value)
    assert "line break" in str(exc.value) and "HDR-SECRET" not in str(exc.value)
    # a name HTTP cannot carry is the config's error too, as for [mcp.NAME] (it failed every request before)
    cfg.write_text(
        '[providers.p]\nkind = "compat"\nbase_url = "http://127.0.0.1:9/v1"\nheaders = { "X Api Key" = "HDR-SECRET" }\n'
    )
    with pytest.raises(ProviderError) as exc:
        create_backend("p:m")
    assert exc.value.kind is ErrorKind.CONFIG_ERROR and "providers.p.headers.'X Api Key'" in str(exc.value)
    assert "a header's name takes letters" in str(exc.value) and "HDR-SECRET" not in str(exc.value)


def _seen(exc: BaseException, secrets: tuple[str, ...] = ()) -> tuple[str, str, str | None, int | None]:
    ctx = ErrorContext("openai", "http://127.0.0.1:9/v1", key_env="OPENAI_API_KEY", secrets=Secrets(secrets))
    d = describe_exception(exc, ctx, attempts=1)
    return d.kind, d.sentence, d.hint, d.status


def test_an_http_library_message_that_quotes_a_header_is_a_request_not_sent_with_the_value_masked() -> None:
    exc = httpx2.LocalProtocolError("Illegal header value b'Bearer k3y\\r\\n'")
    kind, sentence, hint, status = _seen(exc, ("k3y\r\n", "Bearer k3y\r\n"))
    assert kind == "bad_request" and sentence.startswith("The request could not be sent")
    assert "k3y" not in sentence and hint is not None and "proxy" not in hint and status is None


def test_an_unsupported_scheme_reaching_the_transport_is_a_bad_url_not_a_dropped_connection() -> None:
    kind, _, hint, _ = _seen(httpx2.UnsupportedProtocol("Request URL has an unsupported protocol 'file://'."))
    assert kind == "bad_url" and "http://" in (hint or "") and "proxy" not in (hint or "")


def test_an_exception_nobody_expected_keeps_its_class_name_and_ttfts_own_keep_their_kind() -> None:
    kind, sentence, hint, _ = _seen(RuntimeError("boom"))
    assert kind == "RuntimeError" and sentence == "The turn failed unexpectedly: boom." and "bug" in (hint or "")
    own = ProviderError("No key.", kind=ErrorKind.MISSING_KEY, hint="export OPENAI_API_KEY=...")
    assert _seen(own)[:3] == (ErrorKind.MISSING_KEY, "No key.", "export OPENAI_API_KEY=...")
