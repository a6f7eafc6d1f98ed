"""Issue 39, item 6: masking happens where text leaves, not where it is made.

An unforeseen error (injected in the real child process: ``tests.support.security_util.failing_turns``)
whose words hold every kind of secret, through every command: ``ask``, ``ask --json`` (with its spans
pushed to a loopback OTLP receiver), ``compare --headless``, ``bench``, ``export`` and the chat (pilot).
Then a loopback server whose 400 error body echoes them all. The kinds: the API key (from
``OPENAI_API_KEY``), a token from a secret-named environment variable, a URL's user, password and query
value, an ``Authorization: Bearer`` value, an ``x-api-key`` value, and a configured ``[mcp.NAME]``
header's value. After each: none of them in stderr, stdout, ``--json``, the spans, the screen or any
file under the data and config folders (the config itself aside), in any form a message quotes them
in; and the rest of the message is still there.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pytest

from tests.fakes import FakeServer, Schedule
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.support.security_util import env_fixture, failing_turns, log_lines, run_ttft  # noqa: F401

API_KEY = "sk-egress-APIKEY-5521x"
ENV_TOKEN = "tok-egress-ENVTOKEN-7730"
URL_USER, URL_PASS, QUERY = "mallory7", "URLPASS-3391", "QUERYVAL-4410"
BEARER = "BEARERTOK-8812abc"
X_API_KEY = "XAPIKEY-6604zz"
MCP_HEADER = "MCPHDR-2291-gw"
SECRETS = (API_KEY, ENV_TOKEN, URL_USER, URL_PASS, QUERY, BEARER, X_API_KEY, MCP_HEADER)
KEPT = "KEEP-THESE-WORDS"
SAID = (
    f"upstream refused key {API_KEY} and token {ENV_TOKEN} at "
    f"https://{URL_USER}:{URL_PASS}@gw.example.test:8443/v1?api-key={QUERY}&region=eu "
    f"with Authorization: Bearer {BEARER} and x-api-key: {X_API_KEY} (gateway header {MCP_HEADER}); {KEPT}"
)
MASKED_HEAD = "upstream refused key *** and token *** at https://***@gw.example.test:8443/v1?api-key=***&region=***"


def forms(value: str) -> set[str]:
    """The value and the ways a file or a message may quote it."""
    return {value, urllib.parse.quote(value, safe=""), json.dumps(value)[1:-1], repr(value)[1:-1]}


def leaks(text: str) -> list[str]:
    """The secrets ``text`` holds, in any of their forms."""
    return [s for s in SECRETS if any(f in text for f in forms(s))]


def written(env: dict[str, str]) -> dict[str, str]:
    """Every file under the data folder and the config folder (but the config itself), as text."""
    out: dict[str, str] = {}
    conf = Path(env["TTFT_CONFIG_DIR"])
    for root in (Path(env["TTFT_DATA_DIR"]), conf):
        for f in root.rglob("*"):
            if f.is_file() and f != conf / "config.toml":
                out[str(f)] = f.read_bytes().decode("utf-8", "replace")
    return out


def assert_no_secret(env: dict[str, str], *outputs: str) -> None:
    for i, text in enumerate(outputs):
        assert not leaks(text), (i, leaks(text), text[:2000])
    for path, text in written(env).items():
        assert not leaks(text), (path, leaks(text))


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)) as s:
        yield s


@pytest.fixture
def world(env: dict[str, str], srv: FakeServer, tmp_path: Path) -> dict[str, str]:
    """The environment every case runs in: the key and a service token in the environment, an MCP
    server's header in the config (never started: a configured secret is masked all the same)."""
    conf = Path(env["TTFT_CONFIG_DIR"])
    (conf / "config.toml").write_text(
        f'[mcp.gw]\nurl = "http://127.0.0.1:9/mcp"\nheaders = {{ "X-Gw-Auth" = "{MCP_HEADER}" }}\n', encoding="utf-8"
    )
    return {**env, "OPENAI_API_KEY": API_KEY, "TTFT_EGRESS_SERVICE_TOKEN": ENV_TOKEN}


def base_url(srv: FakeServer) -> str:
    """The fake server's address with a user, a password and a query value in it, as a gateway's may be."""
    return srv.openai_base_url.replace("http://", f"http://{URL_USER}:{URL_PASS}@") + f"?api-key={QUERY}"


def test_ask_says_the_unforeseen_error_with_its_secrets_masked_and_its_words_kept(
    world: dict[str, str], srv: FakeServer, tmp_path: Path
) -> None:
    env = failing_turns(world, tmp_path / "site", SAID)
    p = run_ttft(env, "ask", "-m", "openai:fake-model", "--base-url", base_url(srv), "hi")
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode != 0, err
    assert MASKED_HEAD in err and KEPT in err and "Authorization: Bearer ***" in err and "x-api-key: ***" in err
    assert "gateway header ***" in err
    (rec,) = log_lines(world)
    assert (
        rec["error"]["type"] == "RuntimeError"
        and MASKED_HEAD in rec["error"]["message"]
        and KEPT in rec["error"]["message"]
    )
    crashes = list(Path(world["TTFT_DATA_DIR"], "crashes").glob("crash-*.txt"))
    assert crashes and KEPT in crashes[0].read_text()
    assert_no_secret(world, out, err)


def test_ask_json_and_its_spans_hold_no_secret(world: dict[str, str], srv: FakeServer, tmp_path: Path) -> None:
    rx = OtlpReceiver().start()
    try:
        env = failing_turns(world, tmp_path / "site", SAID)
        env = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{rx.url}/v1/traces"}
        p = run_ttft(env, "ask", "-m", "openai:fake-model", "--base-url", base_url(srv), "--json", "hi")
    finally:
        rx.stop()
    out, err = p.stdout.decode(), p.stderr.decode()
    record = json.loads(out)
    assert (
        record["status"] == "error" and MASKED_HEAD in record["error"]["message"] and KEPT in record["error"]["message"]
    )
    spans = rx.spans()
    assert spans, err
    statuses = " ".join(s.status.message for s in spans)
    assert KEPT in statuses and "upstream refused key ***" in statuses
    assert_no_secret(world, out, err, "\n".join(str(s) for s in spans))


def test_compare_headless_holds_no_secret(world: dict[str, str], srv: FakeServer, tmp_path: Path) -> None:
    env = failing_turns(world, tmp_path / "site", SAID)
    url = base_url(srv)
    outputs = []
    for extra in ((), ("--json",)):
        p = run_ttft(env, "compare", "-m", "compat:a", "-m", "compat:b", "--base-url", url, "--headless", *extra, "hi")
        outputs += [p.stdout.decode(), p.stderr.decode()]
    assert KEPT in outputs[0] + outputs[1], outputs[:2]  # the table says each pane's error
    assert all(r["status"] == "error" and KEPT in r["error"]["message"] for r in log_lines(world))
    assert_no_secret(world, *outputs)


def test_bench_holds_no_secret(world: dict[str, str], srv: FakeServer, tmp_path: Path) -> None:
    env = failing_turns(world, tmp_path / "site", SAID)
    out_dir = Path(world["TTFT_DATA_DIR"]) / "bench-run"  # under the data folder: every file is checked
    p = run_ttft(
        env, "bench", "-m", "compat:fake-model", "--base-url", base_url(srv), "--concurrency", "1",
        "--requests", "2", "--warmup", "1", "--max-output-tokens", "4", "--out", str(out_dir),
    )  # fmt: skip
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode != 0 and KEPT in err, err
    turns = (out_dir / "turns.jsonl").read_text()
    assert KEPT in turns and MASKED_HEAD in turns
    assert_no_secret(world, out, err)


def test_export_masks_a_line_logged_with_its_secrets(world: dict[str, str], srv: FakeServer, tmp_path: Path) -> None:
    """A log line written before ttft masked at the exits (or by hand): every export format masks it."""
    p = run_ttft(world, "ask", "-m", "openai:fake-model", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    rec |= {
        "status": "error",
        "error": {"type": "RuntimeError", "message": SAID, "status_code": None, "hint": SAID},
        "notices": {"gateway": SAID},
        "diagnosis": SAID,
    }
    sessions = Path(world["TTFT_DATA_DIR"], "sessions")
    raw = sessions / "20260101-000000-egress.jsonl"
    raw.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    outputs = []
    for fmt in ("jsonl", "csv", "otel"):
        target = Path(world["TTFT_DATA_DIR"]) / f"export.{fmt}"
        e = run_ttft(world, "export", "20260101-000000-egress", "-f", fmt, "-o", str(target))
        assert e.returncode == 0, e.stderr
        outputs += [e.stdout.decode(), e.stderr.decode()]
        assert KEPT in target.read_text() and not leaks(target.read_text()), fmt
    e = run_ttft(world, "export", "20260101-000000-egress", "-f", "jsonl", "-o", "-")
    assert KEPT in e.stdout.decode()
    raw.unlink()  # the planted line itself is no output of ttft's
    assert_no_secret(world, *outputs, e.stdout.decode(), e.stderr.decode())


# The bodies a server's 400 may echo the key in: the API's own error object, and a gateway's (NestJS,
# many proxies) whose string "error" is the status's name and whose "message" says what went wrong.
ECHOED = f"key {API_KEY} is not valid; {SAID}"
GATEWAY = json.dumps({"statusCode": 400, "error": "Bad Request", "message": ECHOED})


@pytest.mark.parametrize("body", [None, GATEWAY], ids=["api-shape", "gateway-shape"])
@pytest.mark.parametrize("reader", [(), ("--sdk",)], ids=["lean", "sdk"])
def test_a_server_error_that_echoes_the_secrets_keeps_its_words(
    world: dict[str, str], srv: FakeServer, body: str | None, reader: tuple[str, ...]
) -> None:
    """Finding (b): a gateway's 400 whose message quotes the key is said with the key masked; before, the
    gateway's shape said only "HTTP 400: bad request" (the SDK keeps ``body["error"]`` alone)."""
    srv.schedule = Schedule(fail_status=400, fail_message=ECHOED, fail_body=body)
    p = run_ttft(world, "ask", "-m", "openai:fake-model", "--base-url", base_url(srv), *reader, "--json", "hi")
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode != 0
    assert srv.generation_requests()  # it went out: the server answered it with its error
    message = json.loads(out)["error"]["message"]
    said = f"key *** is not valid; {MASKED_HEAD}"
    assert f"(HTTP 400: {'Bad Request: ' if body else ''}{said}" in message and KEPT in message, message
    assert said in err and KEPT in err
    assert_no_secret(world, out, err)


async def test_the_chat_shows_and_keeps_the_error_without_a_secret(
    world: dict[str, str], srv: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttft.backends.mcp.config_secrets import remember_config_secrets
    from ttft.tui.chat.app import ChatApp
    from ttft.tui.widgets.error_card import ErrorCard

    from tests.support.tui_support import heard, wait_until

    env = failing_turns(world, tmp_path / "site", SAID)
    for k in ("OPENAI_API_KEY", "TTFT_EGRESS_SERVICE_TOKEN", "TTFT_TEST_FAIL_WITH", "PYTHONPATH"):
        monkeypatch.setenv(k, env[k])  # the chat's backend processes start with this environment
    remember_config_secrets()  # as `ttft` does before it opens the chat (tui.cli)
    app = ChatApp("openai:fake-model", base_url=base_url(srv))
    async with app.run_test(size=(140, 44)) as pilot:
        app.chat.prompt.value = "hi"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 60)
        card = str(app.query_one(ErrorCard).content)
        screen = app.export_screenshot().replace("&#160;", " ")
        notices = "\n".join(heard(app))
    assert KEPT in card and "upstream refused key ***" in card
    assert_no_secret(world, card, screen, notices, repr(app.chat.session.records[0]))
    assert os.environ["TTFT_DATA_DIR"] == world["TTFT_DATA_DIR"]


def test_every_line_on_stderr_is_masked_whoever_words_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line no code masks itself (the export's "no session named ...") is masked on its way out: the
    command's stderr is :class:`tui.masked_stderr.MaskedStream`, and it is put back after."""
    import sys

    from ttft.tui.cli import main
    from ttft.tui.masked_stderr import MaskedStream

    monkeypatch.setenv("TTFT_EGRESS_SERVICE_TOKEN", ENV_TOKEN)
    before = sys.stderr
    rc = main(["export", f"missing-{ENV_TOKEN}"])
    err = capsys.readouterr().err
    assert rc != 0 and "named 'missing-***'" in err and not leaks(err), err
    assert sys.stderr is before and not isinstance(sys.stderr, MaskedStream)
