"""Secrets are masked by their known values, in every form an error message quotes them in."""

from __future__ import annotations

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.log.secrets import MASK, Secrets, header_secrets, masked, remember


def test_a_short_unusual_key_that_no_pattern_knows_is_masked_where_it_stands() -> None:
    s = Secrets(["k3y"])
    assert s.mask("Incorrect API key provided: k3y.") == f"Incorrect API key provided: {MASK}."
    assert s.mask('{"key":"k3y"}') == '{"key":"***"}'
    # as a word only: the letters of other words are left alone
    assert s.mask("k3yboard k3y-ring xk3y") == "k3yboard k3y-ring xk3y"


def test_a_short_value_never_eats_a_piece_of_an_address_or_a_number() -> None:
    # a header or query value of "1" is sent, so it is known; the server's address in a message is not it
    s = Secrets(["1", "v2"])
    text = "The connection to http://127.0.0.1:8080/v1 closed after 1.5 s"
    assert s.mask(text) == text
    assert s.mask("version v2, flag 1.") == f"version {MASK}, flag {MASK}."


def test_a_long_value_is_masked_anywhere() -> None:
    s = Secrets(["Zq9-unusual-token"])
    assert s.mask("tokenZq9-unusual-token!") == f"token{MASK}!"


def test_the_forms_a_library_quotes_a_value_in_are_masked() -> None:
    key = "k3y\r\n"
    s = Secrets([key, f"Bearer {key}"])
    # httpx-style: the header's bytes repr
    assert "k3y" not in s.mask("Illegal header value b'Bearer k3y\\r\\n'")
    assert "k3y" not in s.mask("value 'k3y\\r\\n' refused")  # a str repr
    assert "k3y" not in s.mask('{"auth": "Bearer k3y\\r\\n"}')  # JSON-escaped
    long = "sk-live/+=SECRET 99"
    assert "SECRET" not in Secrets([long]).mask("url ?key=sk-live%2F%2B%3DSECRET%2099 and sk-live%2F%2B%3DSECRET+99")


def test_the_longest_value_goes_first_so_nothing_is_half_masked() -> None:
    s = Secrets(["tok-123456789", "Bearer tok-123456789"])
    assert s.mask("got Bearer tok-123456789") == f"got {MASK}"


def test_header_secrets_are_each_value_and_the_token_of_a_bearer() -> None:
    got = header_secrets({"Authorization": "Bearer HDR-1", "X-Title": "ttft", "Empty": ""})
    assert got == ("Bearer HDR-1", "HDR-1")  # a short value of a header not named like a credential is a word
    assert header_secrets({"X-Gateway": "gw-0123456789"}) == ("gw-0123456789",)  # a long one may be a secret


def test_remembered_values_mask_a_failed_events_message_and_leave_a_clean_one_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ttft.telemetry.log import secrets

    # this process's own set, as the test begins: what earlier tests remembered (a URL's password
    # "secret", say) would mask the clean message below
    monkeypatch.setattr(secrets, "KNOWN", Secrets())
    remember("Qx7-remembered-for-this-test")
    e = ev.Failed(1, "auth", "key Qx7-remembered-for-this-test refused", 401, "Check KEY.")
    out = masked(e)
    assert out.message == f"key {MASK} refused" and out.hint == "Check KEY." and out.status_code == 401
    clean = ev.Failed(1, "auth", "nothing secret here", 401)
    assert masked(clean) is clean
    assert "Qx7-remembered-for-this-test" in secrets.KNOWN


def test_nothing_known_masks_nothing() -> None:
    assert Secrets().mask("any text") == "any text"
    assert Secrets([None, ""]).mask("any text") == "any text"


def test_typed_text_keeps_its_words_and_loses_each_urls_credentials_and_query_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ttft.telemetry.log import secrets
    from ttft.telemetry.log.secrets import mask

    # What this process knows is process-wide: an earlier test's URL credentials ("user") would be masked too.
    monkeypatch.setattr(secrets, "KNOWN", Secrets())

    text = (
        "compare compat:m@http://user:PASSWORD@host/v1?api-key=K&api-version=2024-06-01, then "
        "(see https://docs.example.com/guide#setup). Also redis://:hunter2@cache:6379/0 and "
        "<https://x.test/a?sig=S1G> and http://127.0.0.1:8080/v1."
    )
    assert mask(text) == (
        "compare compat:m@http://***@host/v1?api-key=***&api-version=***, then "
        "(see https://docs.example.com/guide#setup). Also redis://***@cache:6379/0 and "
        "<https://x.test/a?sig=***> and http://127.0.0.1:8080/v1."
    )
    assert mask(mask(text)) == mask(text)  # masking what is masked changes nothing
    assert mask("no address here: 10:30 user:pass") == "no address here: 10:30 user:pass"


def test_typed_text_loses_a_key_this_process_sends() -> None:
    from ttft.telemetry.log.secrets import mask

    remember("sk-typed-into-a-prompt-0042")
    assert mask("why does sk-typed-into-a-prompt-0042 fail?") == f"why does {MASK} fail?"


# --- the one egress masker: every kind of secret, the rest of the message kept (issue 39, item 6) ---------
def test_a_secret_named_environment_variable_is_masked_and_a_switch_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from ttft.telemetry.log.secrets import environment_secrets, mask

    monkeypatch.setenv("TTFT_EGRESS_SERVICE_TOKEN", "tok-env-0042")
    monkeypatch.setenv("TTFT_EGRESS_DB_PASSWORD", "pw-env-0043")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # TOKENIZERS is no TOKEN
    monkeypatch.setenv("TTFT_EGRESS_DISABLE_TOKEN", "1")  # a switch, not a secret
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")
    assert mask("saw tok-env-0042 and pw-env-0043 here") == f"saw {MASK} and {MASK} here"
    assert mask("false is 1 of /tmp/ssh-agent.sock") == "false is 1 of /tmp/ssh-agent.sock"
    found = environment_secrets()
    assert "tok-env-0042" in found and "false" not in found and "1" not in found
    monkeypatch.setenv("TTFT_EGRESS_SERVICE_TOKEN", "tok-env-CHANGED-9")  # read at each call
    assert mask("now tok-env-CHANGED-9") == f"now {MASK}"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("sent Authorization: Bearer abc.def-123 to it", "sent Authorization: Bearer *** to it"),
        ("headers {'authorization': 'Basic dXNlcjpwdw==', 'x': 1}", "headers {'authorization': 'Basic ***', 'x': 1}"),
        ('{"x-api-key": "XK-999", "model": "m"}', '{"x-api-key": "***", "model": "m"}'),
        ("api-key: gw-0001 refused", "api-key: *** refused"),
        ("Proxy-Authorization=Token px-55", "Proxy-Authorization=Token ***"),
        ("got Bearer eyJ0eXAi.x1 from the client", "got Bearer *** from the client"),
        ("Bearer tokens are rotated; Bearer authentication failed", None),  # prose keeps its words
        ("the Authorization header is missing", None),
    ],
)
def test_header_values_and_bearer_tokens_are_masked_and_their_names_kept(text: str, want: str | None) -> None:
    from ttft.telemetry.log.secrets import mask

    assert mask(text) == (text if want is None else want)


def test_one_message_with_every_kind_of_secret_keeps_every_other_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from ttft.telemetry.log import secrets
    from ttft.telemetry.log.secrets import mask

    monkeypatch.setattr(secrets, "KNOWN", Secrets())
    monkeypatch.setenv("TTFT_EGRESS_KEY_API_KEY", "sk-egress-env-0001")
    monkeypatch.setenv("TTFT_EGRESS_CI_TOKEN", "ci-egress-token-0002")
    remember("mcp-header-value-0003")  # as a configured [mcp.NAME] header registers itself
    text = (
        "boom: key sk-egress-env-0001, token ci-egress-token-0002, "
        "url http://alice:pw-0004@gw.test:8080/v1?api-key=qv-0005&x=1, "
        "Authorization: Bearer bt-0006-xyz, x-api-key: xk-0007, header mcp-header-value-0003. Check it."
    )
    out = mask(text)
    for secret in ("sk-egress-env-0001", "ci-egress-token-0002", "pw-0004", "alice", "qv-0005", "bt-0006-xyz",
                   "xk-0007", "mcp-header-value-0003"):  # fmt: skip
        assert secret not in out
    assert out == (
        "boom: key ***, token ***, url http://***@gw.test:8080/v1?api-key=***&x=***, "
        "Authorization: Bearer ***, x-api-key: ***, header ***. Check it."
    )
    assert mask(out) == out


def test_a_failed_events_hint_and_a_records_error_notices_and_diagnosis_are_masked_not_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ttft.telemetry.log.secrets import masked_record

    monkeypatch.setenv("TTFT_EGRESS_HOOK_SECRET", "hook-secret-0008")
    e = masked(ev.Failed(1, "RuntimeError", "ok", None, "see http://u:hook-secret-0008@h/"))
    assert e.message == "ok" and e.hint == "see http://***@h/"
    rec = {
        "prompt": "hook-secret-0008",  # the conversation is kept as it was
        "answer": "hook-secret-0008",
        "error": {"type": "x", "message": "m hook-secret-0008", "status_code": None, "hint": None},
        "notices": {"mcp": ["server said hook-secret-0008"]},
        "diagnosis": "hook-secret-0008 diagnosis",
    }
    out = masked_record(rec)
    assert out["error"]["message"] == "m ***" and out["notices"] == {"mcp": ["server said ***"]}
    assert out["diagnosis"] == "*** diagnosis" and out["prompt"] == out["answer"] == "hook-secret-0008"
    clean: dict[str, object] = {"error": None, "notices": {}, "diagnosis": ""}
    assert masked_record(clean) is clean
