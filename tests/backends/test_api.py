"""The Python API (backends.api) against loopback servers speaking the real wire: a turn as ``ttft ask``
runs it (settings on the wire, the record's figures, the session log on and off), a probe as ``ttft
probe`` runs it, and the turns as a typed DataFrame."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ttft.backends import api
from ttft.backends.load import shared as api_share
from ttft.telemetry.diagnosis import diagnose_turn
from ttft.telemetry.export import formats, table
from ttft.telemetry.record import TurnRecord

from tests.fakes.prefill_server import PrefillServer
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer
from tests.support.turns import reads_back


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("ANTHROPIC_API_KEY", "TTFT_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return data


@pytest.fixture(scope="module")
def srv():
    with FakeServer(Schedule(first_token_ms=30, token_ms=2, visible_tokens=6)) as s:
        yield s


def _logged(data: Path) -> list[dict]:
    files = sorted((data / "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_resolve_is_the_registrys_target_and_a_bad_spec_is_ttfts_error(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url, timeout=7.5)
    assert (t.provider, t.api, t.model, t.base_url, t.timeout) == (
        "compat",
        "chat.completions",
        "fake-model",
        srv.openai_base_url,
        7.5,
    )
    assert not t.local and t.key_from == "none"
    with pytest.raises(api.ProviderError) as bad:
        api.resolve("nosuch:model")
    assert isinstance(bad.value, api.TtftError) and "Unknown provider" in bad.value.message
    with pytest.raises(api.ProviderError):
        api.run_turn("nosuch:model", "hi")
    with pytest.raises(TypeError, match="temprature"):
        api.run_turn("compat:fake-model", "hi", temprature=0.1)  # a misspelt setting is said, not dropped


def test_run_turn_sends_the_settings_and_logs_the_turn_like_ask(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url)
    srv.reset()
    rec = api.run_turn(t, "why?", system="be brief", temperature=0.25, max_output_tokens=40, session="nb-1")
    assert isinstance(rec, TurnRecord) and rec.status == "ok"
    body = srv.generation_requests()[-1].body
    assert body["temperature"] == 0.25 and body["max_completion_tokens"] == 40
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][-1] == {"role": "user", "content": "why?"}
    assert rec.settings.temperature == 0.25 and rec.settings.max_output_tokens == 40
    m = rec.metrics
    assert m.ttft_ms is not None and 30 <= m.ttft_ms < 5000  # the server holds the first token 30 ms
    assert m.e2e_ms is not None and m.e2e_ms >= m.ttft_ms
    assert rec.tokens.output == 6 and rec.answer
    logged = _logged(env)
    assert [(r["session_id"], r["turn_index"], r["prompt"]) for r in logged] == [("nb-1", 0, "why?")]
    again = api.run_turn(t, "and?", session="nb-1")  # the same session: the next index, as ask --session
    assert again.turn_index == 1 and len(_logged(env)) == 2


def test_log_false_writes_nothing(srv: FakeServer, env: Path) -> None:
    rec = api.run_turn(api.resolve("compat:fake-model", srv.openai_base_url), "hi", log=False)
    assert rec.status == "ok"
    assert not (env / "sessions").exists() or not list((env / "sessions").glob("*.jsonl"))


def test_the_async_twin_and_the_sync_call_inside_a_running_loop(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url)
    texts: list[str] = []

    async def main() -> tuple[TurnRecord, TurnRecord]:
        a = await api.arun_turn(t, "one", log=False, on_event=lambda e: texts.append(getattr(e, "text", "")))
        b = api.run_turn(t, "two", log=False, reasoning_effort="low")  # a notebook's cell runs in a loop
        return a, b

    a, b = asyncio.run(main())
    assert a.status == b.status == "ok" and "".join(texts) == a.answer
    assert b.settings.reasoning_effort == "low"
    assert srv.generation_requests()[-1].body["reasoning_effort"] == "low"


def test_a_failed_turn_is_a_record_not_an_exception(env: Path) -> None:
    with FakeServer(Schedule(fail_status=500, fail_message="boom")) as bad:
        rec = api.run_turn(api.resolve("compat:fake-model", bad.openai_base_url), "hi", max_retries=0)
    assert rec.status == "error" and rec.error is not None and "boom" in rec.error.message
    assert [r["status"] for r in _logged(env)] == ["error"]


def test_turns_frame_is_typed_as_the_exports(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url.replace("http://", "http://user:pw-Zq81-api@"))
    recs = [api.run_turn(t, "hi", log=False, temperature=0.5), api.run_turn(t, "hi", log=False)]
    frame = api.turns_frame([recs[0], recs[1].to_dict()])
    assert list(frame.columns) == list(table.HEADER) and len(frame) == 2
    assert {c: str(d) for c, d in frame.dtypes.items()} == formats.pandas_dtypes(table.COLUMNS)
    assert frame["settings.temperature"].iloc[0] == 0.5 and frame["settings.temperature"].isna().iloc[1]
    assert frame["metrics.ttft_ms"].notna().all() and "pw-Zq81-api" not in "".join(frame["base_url"])


def test_run_probe_fits_a_fast_fake_and_saves_what_the_cli_writes(env: Path, tmp_path: Path) -> None:
    with PrefillServer(base_ms=5, prefill_ms_per_token=0.01, token_ms=0.5) as fake:
        plan = api.ProbePlan(target=api.resolve("compat:prefill-fake", fake.base_url), quick=True, budget=12000)
        seen: list[str] = []
        result = api.run_probe(plan, on_plan=lambda who, schedule: seen.append(who))
    assert seen == ["compat:prefill-fake"] and result.fitted
    assert result.fit.base_ttft_ms is not None and result.fit.prefill_ms_per_1k_input_tokens is not None
    assert len(result.points) == len(result.records) - 1  # every turn but the warm-up is a point
    assert result.schedule.tokens <= 12000
    assert not (env / "probes").exists()  # the fit is saved only when asked
    out = tmp_path / "out"
    written = result.save(out)
    assert json.loads((out / "probe.json").read_text()) == result.fit.to_dict()
    assert result.to_dict()["schema"] == "ttft.probe/1"
    turns = [p for p in written if p.suffix == ".jsonl"]
    assert len(turns) == 1 and len(turns[0].read_text().splitlines()) == len(result.records)
    assert result.save_fit().exists()


def test_run_probe_refuses_a_budget_too_small_before_sending(env: Path) -> None:
    from ttft.backends.probe.plan import BudgetError

    with PrefillServer() as fake:
        plan = api.ProbePlan(target=api.resolve("compat:prefill-fake", fake.base_url), budget=100)
        with pytest.raises(BudgetError) as err:
            api.run_probe(plan)
        assert fake.requests == []
    assert isinstance(err.value, api.TtftError)


def test_a_bench_plan_from_a_target_takes_its_spec_and_address_and_one_kind_of_level(tmp_path: Path) -> None:
    target = api.resolve("compat:m", base_url="http://127.0.0.1:9/v1")
    plan = api.bench_plan(target, levels=[api.Users(1), api.Users(4)], requests=3, out=tmp_path / "o")
    assert (plan.spec, plan.base_url, plan.out) == ("compat:m", "http://127.0.0.1:9/v1", tmp_path / "o")
    assert plan.levels == (api.Users(1), api.Users(4)) and plan.load.requests == 3
    with pytest.raises(ValueError, match="one kind"):
        api.bench_plan(target, levels=[api.Users(1), api.Rate(2.0)])


def test_run_compare_runs_two_panes_on_the_real_wire_as_ttft_compare_does(env: Path, srv, tmp_path: Path) -> None:
    plan = api.compare_plan(
        [f"compat:a@{srv.openai_base_url}", api.resolve("compat:b", srv.openai_base_url)], "hi", repeat=2
    )
    assert (plan.panes[1].spec, plan.panes[1].base_url, plan.mode) == ("compat:b", srv.openai_base_url, "parallel")
    seen: list[tuple[int, int]] = []
    result = api.run_compare(plan, on_turn=lambda pane, trial, record: seen.append((pane, trial)))
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert result.names == {"A": "compat:a", "B": "compat:b"}
    assert all(r.status == "ok" and r.metrics.ttft_ms is not None for recs in result.records for r in recs)
    assert [row["ok"] for row in result.to_dict()["panes"]] == [2, 2]
    assert len(_logged(env)) == 4  # every turn in the session log, as the CLI's
    assert len(result.save(tmp_path / "cmp")) == 3


def test_a_compare_plan_refuses_what_ttft_compare_refuses() -> None:
    with pytest.raises(ValueError, match="1 to 4"):
        api.compare_plan([f"compat:m{i}" for i in range(5)], "hi")
    with pytest.raises(ValueError, match="repeat"):
        api.compare_plan(["compat:a"], "hi", repeat=0)
    with pytest.raises(TypeError, match="unknown turn settings"):
        api.compare_plan(["compat:a"], "hi", temprature=0.1)


# --- turns run together: one shared client, and the loop's lag told apart from the server's ---------
def test_concurrent_turns_share_one_client_and_its_pool(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url)
    srv.reset()

    async def main() -> tuple[list[TurnRecord], api_share.LoopShare]:
        first = await asyncio.gather(*(api.arun_turn(t, f"a{i}", log=False) for i in range(5)))
        second = await asyncio.gather(*(api.arun_turn(t, f"b{i}", log=False) for i in range(5)))
        share = await api_share.loop_share()
        assert len(share.backends) == 1  # one client for the target, made once on this loop
        return [*first, *second], share

    recs, share = asyncio.run(main())
    assert all(r.status == "ok" for r in recs)
    peers = {r.peer for r in srv.generation_requests()}
    assert len(srv.generation_requests()) == 10
    assert None not in peers and len(peers) <= 5  # the second five reused the first five's connections
    assert share.backends == {}  # closed as asyncio.run's loop shut down
    for r in recs:
        reads_back(r.to_dict())
        assert r.metrics.loop_lag_ms is not None and r.metrics.loop_lag_ms >= 0


def test_turns_from_many_threads_share_the_sync_api_loop(srv: FakeServer, env: Path) -> None:
    t = api.resolve("compat:fake-model", srv.openai_base_url)
    srv.reset()
    with ThreadPoolExecutor(4) as pool:
        recs = list(pool.map(lambda i: api.run_turn(t, f"thread {i}", log=False), range(8)))
    assert all(r.status == "ok" for r in recs)
    assert len({r.peer for r in srv.generation_requests()}) <= 4  # one pool, never one client per call


def test_a_turn_waiting_on_a_blocked_loop_says_the_wait_was_ttfts_own(env: Path) -> None:
    with FakeServer(Schedule(first_token_ms=100, token_ms=2, visible_tokens=4)) as slow:
        t = api.resolve("compat:fake-model", slow.openai_base_url)

        async def block() -> None:
            await asyncio.sleep(0.02)  # the request is out, its first token not yet in
            time.sleep(0.4)  # a notebook cell's CPU work on the turn's loop

        async def main() -> TurnRecord:
            rec, _ = await asyncio.gather(api.arun_turn(t, "blocked", log=False), block())
            return rec

        rec = asyncio.run(main())
    m = rec.metrics
    assert rec.status == "ok" and m.ttft_ms is not None and m.wait_ms is not None
    assert m.loop_lag_ms is not None and m.loop_lag_ms >= 200  # ~380 ms of the blocked 400 fell in the wait
    assert m.wait_ms.client_lag >= 200 and m.wait_ms.first_token + m.wait_ms.server < m.ttft_ms - 200
    assert sum(m.wait_ms.to_dict().values()) == pytest.approx(m.ttft_ms, abs=1)
    said = diagnose_turn(rec)
    assert "ttft's own event loop" in said and "not the server" in said
    reads_back(rec.to_dict())


def test_the_log_reads_back_through_the_api_as_records_and_frames(srv: FakeServer, env: Path) -> None:
    from ttft.telemetry.export import log_data

    assert (api.read_log, api.log_frame, api.SkippedLinesWarning) == (
        log_data.read_log,
        log_data.log_frame,
        log_data.SkippedLinesWarning,
    )
    t = api.resolve("compat:fake-model", srv.openai_base_url)
    turns = [api.run_turn(t, q, session="nb-log") for q in ("one", "two")]
    back = list(api.read_log("nb-log"))
    assert [(r.turn_index, r.prompt) for r in back] == [(0, "one"), (1, "two")]
    assert [r.metrics.ttft_ms for r in back] == [r.metrics.ttft_ms for r in turns]
    assert api.read_log().path == api.read_log("nb-log").path  # the newest session
    frame = api.log_frame(engine="polars")
    assert frame["prompt"].to_list() == ["one", "two"] and frame["metrics.ttft_ms"].null_count() == 0
    with pytest.raises(api.LogReadError):
        api.read_log("no-such-session")


# --- values checked before anything is sent, in the CLI's words; results that pickle -----------------
@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"temperature": "hot"}, "temperature expected a number, got 'hot'"),
        ({"temperature": -1}, "temperature must be 0 or more"),
        ({"temperature": float("nan")}, "temperature expected a finite number"),
        ({"max_output_tokens": 0}, "max_output_tokens must be at least 1, got 0"),
        ({"max_output_tokens": True}, "max_output_tokens expected a whole number"),
        ({"max_output_tokens": 2.5}, "max_output_tokens expected a whole number"),
        ({"max_retries": -1}, "max_retries must be 0 or more"),
        ({"reasoning_effort": "turbo"}, "reasoning_effort expected one of none, minimal"),
        ({"deadline_s": 0}, "deadline_s must be a number of seconds above 0"),
        ({"stream": "yes"}, "stream expected True or False"),
    ],
)
def test_a_turns_settings_are_refused_in_the_clis_words_before_anything_is_sent(
    srv: FakeServer, env: Path, settings: dict, said: str
) -> None:
    before = len(srv.generation_requests())
    with pytest.raises(api.BadValue, match=said.replace("(", r"\(")) as caught:
        api.run_turn(api.resolve("compat:m", srv.openai_base_url), "hi", **settings)
    assert isinstance(caught.value, api.TtftError) and isinstance(caught.value, ValueError)
    assert len(srv.generation_requests()) == before and not (env / "sessions").exists()


def test_the_cli_refuses_the_same_values_with_the_same_words(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    from ttft.tui.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "--temperature", "hot", "hi"])
    assert ended.value.code == 2
    assert "--temperature: expected a number, got 'hot'" in capsys.readouterr().err
    with pytest.raises(api.BadValue, match="temperature expected a number, got 'hot'"):
        api.turn_settings(temperature="hot")


def test_adaptive_thinking_is_asked_as_the_flag_asks_it() -> None:
    s = api.turn_settings(thinking_budget="adaptive", max_output_tokens=64)
    assert (s.thinking_budget, s.extra, s.max_output_tokens) == (None, {"thinking": "adaptive"}, 64)


def test_turn_arguments_of_the_wrong_kind_say_what_they_take(srv: FakeServer, env: Path) -> None:
    with pytest.raises(TypeError, match="target is a Target"):
        api.run_turn(None, "hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt is text"):
        api.run_turn("compat:m", 42)  # type: ignore[arg-type]
    with pytest.raises(api.BadValue, match="timeout_s expected a number, got 'x'"):
        api.run_turn(api.resolve("compat:m", srv.openai_base_url), "hi", timeout_s="x")
    with pytest.raises(api.BadValue, match="is not a session id"):
        api.run_turn(api.resolve("compat:m", srv.openai_base_url), "hi", session="../elsewhere")
    assert not (env / "sessions").exists()


def test_resolve_reads_a_panes_url_as_the_address_not_the_model(srv: FakeServer) -> None:
    target = api.resolve(f"compat:x@{srv.openai_base_url}")
    assert (target.model, target.base_url) == ("x", srv.openai_base_url)


@pytest.mark.parametrize(
    ("levels", "settings", "said"),
    [
        ([], {}, "give at least one level"),
        ([api.Users(0)], {}, "levels must be > 0"),
        ([api.Users(-1)], {}, "levels must be > 0"),
        ([api.Rate(float("inf"))], {}, "finite"),
        ([api.Users(1)], {"requests": 0}, "requests must be at least 1, got 0"),
        ([api.Users(1)], {"warmup": -1}, "warmup must be 0 or more"),
    ],
)
def test_a_bench_plan_is_held_to_the_flags_rules(levels: list, settings: dict, said: str) -> None:
    with pytest.raises(api.BadValue, match=said):
        api.bench_plan("compat:m", levels=levels, base_url="http://127.0.0.1:9/v1", **settings)


def test_results_pickle_for_a_process_pool_or_a_cache(srv: FakeServer, env: Path) -> None:
    import pickle

    plan = api.compare_plan([f"compat:a@{srv.openai_base_url}", f"compat:b@{srv.openai_base_url}"], "hi")
    result = api.run_compare(plan)
    again = pickle.loads(pickle.dumps(result))
    assert again.to_dict() == result.to_dict() and again.records[0][0].answer == result.records[0][0].answer
    rec = api.run_turn(api.resolve("compat:m", srv.openai_base_url), "hi")
    assert pickle.loads(pickle.dumps(rec)) == rec
    bench = api.bench_plan("compat:m", levels=[api.Users(2)], base_url=srv.openai_base_url, requests=2)
    assert pickle.loads(pickle.dumps(bench)) == bench


# --- a client held for many turns, and a conversation on it ----------------------------------------
def test_a_conversation_sends_every_turn_and_reuses_the_clients_connection(srv: FakeServer, env: Path) -> None:
    srv.reset()
    client = api.Client("compat:m", base_url=srv.openai_base_url, key="sk-given-KEY1234", temperature=0.3)
    chat = client.conversation(system="Be brief.")
    first = chat.prompt("What is TTFT?")
    second = chat.prompt("And TPOT?", max_output_tokens=16)
    assert first.status == second.status == "ok"
    bodies = [r.body for r in srv.generation_requests()]
    roles = [[m["role"] for m in b["messages"]] for b in bodies]
    assert roles == [["system", "user"], ["system", "user", "assistant", "user"]]
    assert bodies[1]["messages"][2]["content"] == first.answer and bodies[1]["messages"][3]["content"] == "And TPOT?"
    assert bodies[1]["temperature"] == 0.3 and 16 in (
        bodies[1].get("max_tokens"),
        bodies[1].get("max_completion_tokens"),
    )
    # the key given, not the environment's, and the second turn on the first one's connection
    assert all(r.headers.get("authorization") == "Bearer sk-given-KEY1234" for r in srv.generation_requests())
    assert second.http is not None and second.http.connection == "reused"
    assert len({r.peer for r in srv.generation_requests()}) == 1
    # one session for the client's turns, and no key in it
    logged = _logged(env)
    assert [r["session_id"] for r in logged] == [client.session] * 2
    assert "sk-given-KEY1234" not in (env / "sessions" / f"{client.session}.jsonl").read_text()
    assert "KEY1234" not in repr(client)
    client.close()


def test_a_conversation_leaves_out_a_turn_that_gave_no_answer(env: Path) -> None:
    chat = api.Client("compat:m", base_url="http://127.0.0.1:9/v1", log=False, max_retries=0).conversation()
    failed = chat.prompt("hi")
    assert failed.status == "error" and chat.messages == [] and chat.records == [failed]


def test_a_client_checks_everything_before_its_first_turn(env: Path) -> None:
    with pytest.raises(api.BadValue, match="temperature must be 0 or more"):
        api.Client("compat:m", base_url="http://127.0.0.1:9/v1", temperature=-1)
    with pytest.raises(api.ProviderError, match="line break"):
        api.Client("compat:m", base_url="http://127.0.0.1:9/v1", key="sk-abc\nxyz")
    with pytest.raises(TypeError, match="target is a Target"):
        api.Client(42)  # type: ignore[arg-type]
    with pytest.raises(api.ProviderError):
        api.Client("nosuch:model")


async def test_the_async_client_and_conversation(srv: FakeServer, env: Path) -> None:
    async with api.Client("compat:m", base_url=srv.openai_base_url, log=False) as client:
        chat = client.conversation()
        one = await chat.aprompt("one")
        two = await chat.aprompt("two")
        alone = await client.aprompt("alone")
    assert [r.status for r in (one, two, alone)] == ["ok"] * 3
    assert len(chat.messages) == 4 and two.http is not None and two.http.connection == "reused"
