"""What a person types reaches the disk without its secrets, and a cut history line loses no prompt:
the real chat (pilot), its real backend processes against the loopback fake server (issue 28, D4, D5).

A ``/compare`` URL's password and query value, typed key by key (the draft is saved as it is typed),
a base URL with credentials given in the settings screen, and an API key pasted into the prompt box:
after the chat quits, no file under the data or config folder holds any of them, in any quoted form."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from ttft.tui.chat.app import ChatApp
from ttft.tui.compare.screen import CompareScreen
from ttft.tui.screens.settings import SettingsScreen

from tests.fakes import FakeServer, Schedule
from tests.support.tui_support import said, wait_until

SIZE = (140, 44)
PASSWORD, QUERY_KEY, SETTINGS_PW, PASTED_KEY = "PASSW0RD-91", "K3YVALUE-72", "S3TTINGS-PW-5", "sk-pasted-4417"


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    monkeypatch.setenv("TTFT_TYPED_KEY", PASTED_KEY)
    return data, conf


def forms(value: str) -> set[str]:
    return {value, urllib.parse.quote(value, safe=""), json.dumps(value)[1:-1]}


def files_holding(roots: tuple[Path, ...], value: str) -> list[str]:
    found = []
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file() and any(form.encode() in f.read_bytes() for form in forms(value)):
                found.append(str(f))
    return found


def draft_text(data: Path) -> str:
    """The one draft's text; "" while none is there yet (the folder is made a moment before the file)."""
    found = list((data / "drafts").glob("*.json"))
    assert len(found) <= 1, found
    return json.loads(found[0].read_text())["text"] if found else ""


async def test_secrets_typed_in_the_chat_reach_no_file(dirs: tuple[Path, Path]) -> None:
    data, conf = dirs
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as srv:
        hostport = srv.openai_base_url.split("//")[1].split("/")[0]
        # the key the chat sends, from a configured provider: the backend's process knows it first
        (conf / "config.toml").write_text(
            f'[providers.keyed]\nkind = "compat"\nbase_url = "{srv.openai_base_url}"\napi_key_env = "TTFT_TYPED_KEY"\n'
        )
        app = ChatApp("keyed:fake-model")
        async with app.run_test(size=SIZE) as pilot:
            box = app.chat.prompt
            await wait_until(pilot, lambda: app.chat.session.backend is not None, 60)  # warmed up: its key known
            half = f"/compare compat:other@http://alice:{PASSWORD[:5]}"
            await pilot.press(*half)
            # saved a second after the last key (DRAFT_SAVE_S), as it is typed
            await wait_until(pilot, lambda: "/compare" in draft_text(data), 10)
            assert PASSWORD[:5] not in draft_text(data)  # a password half typed is no port: masked already
            await pilot.press(*f"{PASSWORD[5:]}@{hostport}/v1?api-key={QUERY_KEY}")
            assert box.value == f"/compare compat:other@http://alice:{PASSWORD}@{hostport}/v1?api-key={QUERY_KEY}"
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), 60)
            compare = app.screen
            assert isinstance(compare, CompareScreen)
            compare.query_one("#prompt").value = "race"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(compare.results) == 1 and not compare.in_flight, 60)
            raced = [r for r in srv.generation_requests() if r.body["messages"][-1]["content"] == "race"]
            assert len(raced) == 2 and any(r.headers.get("authorization", "").startswith("Basic ") for r in raced)
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.chat, 10)
            # the settings screen: a base URL with credentials for the next turn
            await pilot.press("f2")
            await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
            app.screen.query_one("#base_url").value = f"http://carol:{SETTINGS_PW}@{hostport}/v1"  # type: ignore[attr-defined]
            app.screen.action_apply()  # type: ignore[attr-defined]
            await wait_until(pilot, lambda: app.screen is app.chat, 10)
            box.value = f"why is my key {PASTED_KEY} refused?"
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 60)
            assert app.chat.session.records[0].base_url == f"http://***@{hostport}/v1"
            await pilot.press(*"left here: see https://bob:DRAFTPW-3@example.com/x?token=T0KEN-8")
    history = (data / "prompt_history.jsonl").read_text()
    assert "/compare compat:other@http://***@" in history and "api-key=***" in history  # kept, masked
    assert "why is my key *** refused?" in history
    assert draft_text(data) == "left here: see https://***@example.com/x?token=***"
    for secret in (PASSWORD, QUERY_KEY, "alice", SETTINGS_PW, "carol", PASTED_KEY, "DRAFTPW-3", "T0KEN-8"):
        assert not files_holding((data / "drafts", data / "prompt_history.jsonl", conf), secret), secret
    # The session logs: the base URLs masked. A prompt that was sent is logged as sent (see docs/security.md).
    logs = "".join(f.read_text() for f in (data / "sessions").glob("*.jsonl"))
    for secret in (PASSWORD, QUERY_KEY, "alice", SETTINGS_PW, "carol"):
        assert not any(form in logs for form in forms(secret)), secret


async def test_a_cut_history_line_keeps_the_next_prompt_for_the_next_chat(dirs: tuple[Path, Path]) -> None:
    data, _ = dirs
    data.mkdir()
    history = data / "prompt_history.jsonl"
    history.write_bytes(json.dumps({"text": "older"}).encode() + b'\n{"at": "2026-01-01", "text": "cut sho')
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)) as srv:
        app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
        async with app.run_test(size=SIZE) as pilot:
            assert app.chat.prompts.entries == ["older"] and app.chat.prompts.skipped == 1
            app.chat.prompt.value = "after the cut"
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 60)
        again = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
        async with again.run_test(size=SIZE) as pilot:
            await pilot.press("up")
            assert again.chat.prompt.value == "after the cut"
            await pilot.press("up")
            assert again.chat.prompt.value == "older"


async def test_a_masked_draft_comes_back_saying_what_to_type_again(dirs: tuple[Path, Path]) -> None:
    from tests.support.tui_support import TimedBackend, factory_for

    def factory():  # type: ignore[no-untyped-def]
        return factory_for(TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3))

    app = ChatApp("fake:timed", factory=factory())
    async with app.run_test(size=SIZE) as pilot:
        app.chat.prompt.value = "first"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        app.chat.prompt.value = f"/compare compat:m@http://alice:{PASSWORD}@h/v1"
        log = app.chat.session.log.path
    again = ChatApp("fake:timed", factory=factory(), resume=log)
    async with again.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: again.chat.prompt.value == "/compare compat:m@http://***@h/v1")
        assert said(again, "type them again")


def test_a_compare_url_recalled_masked_goes_without_its_masked_parts() -> None:
    from types import SimpleNamespace

    from ttft.tui.chat.compare import compare_specs

    chat = SimpleNamespace(spec="compat:a", base_url="http://127.0.0.1:9/v1")
    specs = compare_specs(chat, "compat:m@http://***@h/v1?api-key=***&api-version=2024")  # type: ignore[arg-type]
    assert specs[1] == ("compat:m", "http://h/v1?api-version=2024")  # never "***" sent as a credential


async def test_a_draft_written_aside_never_overwrites_a_newer_one(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from ttft.telemetry.log import drafts

    from tests.support.tui_support import TimedBackend, factory_for

    real_save = drafts.save

    def slow_for_the_old_one(session_id: str, draft: drafts.Draft) -> None:
        if draft.text == "old":
            time.sleep(0.5)  # a large paste's masking, on the thread
        real_save(session_id, draft)

    monkeypatch.setattr(drafts, "save", slow_for_the_old_one)
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3)))
    async with app.run_test(size=SIZE) as pilot:
        app.chat.prompt.value = "old"
        app.chat.drafts.save_aside()  # what the timer does a second after the last key
        await pilot.pause(0.1)
        app.chat.prompt.value = "new"
        app.chat.drafts.save()  # closing: written before it returns, after the one in progress
        sid = app.chat.session.log.session_id
        assert drafts.load(sid) == drafts.Draft("new")
        await app.workers.wait_for_complete()  # the older one's thread has ended: it wrote nothing after
        assert drafts.load(sid) == drafts.Draft("new")
