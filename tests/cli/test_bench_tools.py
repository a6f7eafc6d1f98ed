"""``ttft bench --tool-latency MS`` and ``--mcp SPEC``: every request of a level one agent turn, against the
loopback model that plays a tool call and then an answer (the real command line, the real HTTP stack; with
``--mcp`` the official SDK's server over stdio), and the combinations that cannot work refused up front."""

from __future__ import annotations

import csv
import json
import shlex
import sys
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.agent_server import AgentServer, Call, Step

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
MCP = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"


def counted(starts: Path) -> str:
    """The fake MCP server behind a shell that writes a line to ``starts`` each time it is started."""
    line = f"echo started >> {shlex.quote(str(starts))}; exec {MCP}"
    return f"sh -c {shlex.quote(line)}"


REQUESTS = 4
# The schedule: 40 ms to the tool call, the tool, 30 ms to the answer.
TO_CALL_MS, TO_ANSWER_MS, LATENCY_MS = 40.0, 30.0, 50.0


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)


def script(tool: str, arguments: dict[str, str]) -> list[Step]:
    return [
        Step(calls=(Call(tool, arguments),), first_ms=TO_CALL_MS),
        Step(text="The answer is 42.", first_ms=TO_ANSWER_MS),
    ]


def bench(srv: AgentServer, out: Path, *extra: str) -> int:
    try:
        return main(
            [
                "bench", "-m", "compat:agent-fake", "--base-url", srv.base_url, "--requests", str(REQUESTS),
                "--warmup", "1", "--input-tokens", "16", "--max-output-tokens", "16", "--out", str(out), *extra,
            ]
        )  # fmt: skip
    except SystemExit as exc:
        return int(exc.code or 0)


def measured(out: Path) -> list[dict]:
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    return [t for t in turns if not t["extra"]["bench"]["warmup"]]


def test_a_stub_tool_makes_each_request_an_agent_turn_and_each_level_says_what_the_turns_took(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with AgentServer(script("lookup", {"query": "the answer"})) as srv:
        rc = bench(srv, out, "--concurrency", "1,2", "--tool-latency", str(int(LATENCY_MS)))
        bodies = list(srv.requests)
    printed, err = capsys.readouterr()
    assert rc == Exit.OK, err

    turns = measured(out)
    assert len(turns) == 2 * REQUESTS
    for t in turns:
        assert t["status"] == "ok" and t["agent"]["stopped"] == "answer"
        assert [s["kind"] for s in t["steps"]] == ["model", "tool", "model"]
        assert t["agent"]["step_count"] == 3
        tool = t["steps"][1]
        assert (tool["name"], tool["server"], tool["status"]) == ("lookup", "stub", "ok")
        assert LATENCY_MS - 1 <= tool["duration_ms"] < LATENCY_MS + 2000  # the stub's sleep (a sanity bound)
        assert t["metrics"]["ttft_ms"] == t["steps"][0]["ttft_ms"]  # TTFT stays the first model step's
    # 1 warm-up turn + 8 measured, each two model requests; the stub's result went back to the model
    assert len(bodies) == 2 * (1 + 2 * REQUESTS)
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["lookup"]
    assert any("stub result: 42" in json.dumps(b["messages"][-1]) for b in bodies)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["tools"] == {"kind": "stub", "latency_ms": LATENCY_MS, "tools": ["lookup"], "max_steps": 10}
    schedule = TO_CALL_MS + LATENCY_MS + TO_ANSWER_MS
    for lv in summary["levels"]:
        a = lv["agent"]
        assert a["turns"] == a["answered"] == REQUESTS
        assert a["steps_per_turn"] == {"p50": 3.0, "mean": 3.0}
        assert schedule <= a["time_to_answer_ms"]["p50"] <= a["time_to_answer_ms"]["p99"] < schedule + 5000
        assert a["time_to_answer_ms"]["p50"] == pytest.approx(lv["median_e2el_ms"])  # E2E runs to the answer
        assert LATENCY_MS - 1 <= a["time_in_tools_ms"]["p50"] < LATENCY_MS + 2000
        assert TO_CALL_MS + TO_ANSWER_MS <= a["time_in_model_ms"]["p50"] < schedule + 5000
        assert a["ttft_overhead_ms"]["p50"] >= 0
        assert (a["tool_calls"], a["tool_errors"], a["stopped"]) == (REQUESTS, 0, {"answer": REQUESTS})
        assert lv["median_ttft_ms"] < TO_CALL_MS + 2000  # the first step's TTFT, not the answer's
    assert summary["details"][0]["agent"] == summary["levels"][0]["agent"]

    rows = list(csv.DictReader((out / "levels.csv").open()))
    assert [float(r["agent_steps_per_turn_p50"]) for r in rows] == [3.0, 3.0]
    assert [float(r["time_to_answer_p50_ms"]) for r in rows] == [
        lv["agent"]["time_to_answer_ms"]["p50"] for lv in summary["levels"]
    ]
    assert [(r["tool_calls"], r["tool_errors"]) for r in rows] == [(str(REQUESTS), "0")] * 2
    assert printed.count("agent: 3 steps per turn p50 (mean 3.0), time to answer p50 ") == 2
    assert f"{REQUESTS} tool calls, 0 errors" in printed

    capsys.readouterr()
    assert main(["report", str(out)]) == 0  # the report shows the same line under each level
    assert capsys.readouterr().out.count("agent: 3 steps per turn p50") == 2


def test_a_real_mcp_server_answers_every_streams_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, starts = tmp_path / "mcp", tmp_path / "starts"
    with AgentServer(script("echo", {"text": "from the tool"})) as srv:
        rc = bench(srv, out, "--concurrency", "2,2", "--mcp", counted(starts), "--max-steps", "3")
        bodies = list(srv.requests)
    printed, err = capsys.readouterr()
    assert rc == Exit.OK, err
    assert starts.read_text().count("started") == 1  # once for the run: the warm-up and both levels share it
    turns = measured(out)
    assert len(turns) == 2 * REQUESTS
    for t in turns:
        assert [s["kind"] for s in t["steps"]] == ["model", "tool", "model"]
        tool = t["steps"][1]
        assert (tool["name"], tool["status"], tool["result_bytes"]) == ("echo", "ok", len("from the tool"))
        assert tool["server"] and t["agent"]["max_steps"] == 3
    assert any("from the tool" in json.dumps(b["messages"][-1]) for b in bodies)  # the server's answer went back
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tools"]["kind"] == "mcp" and summary["tools"]["max_steps"] == 3
    assert str(SERVER) in summary["tools"]["servers"][0]
    for lv in summary["levels"]:
        a = lv["agent"]
        assert (a["tool_calls"], a["tool_errors"], a["steps_per_turn"]["p50"]) == (REQUESTS, 0, 3.0)
    assert printed.count("agent: 3 steps per turn p50") == 2


def test_with_two_worker_processes_each_starts_the_servers_once_and_keeps_them_for_every_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, starts = tmp_path / "w2", tmp_path / "starts"
    with AgentServer(script("echo", {"text": "from the tool"})) as srv:
        rc = bench(srv, out, "--concurrency", "2,2", "--workers", "2", "--mcp", counted(starts))
    assert rc == Exit.OK, capsys.readouterr().err
    assert starts.read_text().count("started") == 2  # one per process, before the warm-up, kept for both levels
    turns = measured(out)
    assert len(turns) == 2 * REQUESTS and {t["extra"]["bench"]["worker"] for t in turns} == {0, 1}
    assert all(t["steps"][1]["status"] == "ok" for t in turns)  # the second level's calls too, on the same servers
    for lv in json.loads((out / "summary.json").read_text())["levels"]:
        assert (lv["agent"]["tool_calls"], lv["agent"]["tool_errors"]) == (REQUESTS, 0)


def test_in_a_conversation_the_loop_runs_for_each_user_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "turns"
    with AgentServer(script("lookup", {"query": "q"})) as srv:
        rc = bench(srv, out, "--concurrency", "2", "--turns", "2", "--tool-latency", "5")
        bodies = list(srv.requests)
    assert rc == Exit.OK, capsys.readouterr().err
    turns = measured(out)
    assert sorted(t["extra"]["bench"]["turn"] for t in turns) == [1, 1, 2, 2]
    assert all(t["agent"]["step_count"] == 3 and t["agent"]["stopped"] == "answer" for t in turns)
    # a second turn's first request holds the first turn's final answer, not its tool exchange
    later = [b for b in bodies if sum(m["role"] == "user" for m in b["messages"]) == 2 and len(b["messages"]) == 3]
    assert len(later) == 2
    assert all(b["messages"][1]["role"] == "assistant" for b in later)
    assert all(b["messages"][1]["content"].strip() == "The answer is 42." for b in later)


def test_a_tool_that_fails_is_counted_and_the_turn_still_answers(tmp_path: Path, capsys) -> None:
    out = tmp_path / "fail"
    with AgentServer(script("nope", {})) as srv:  # a tool the stub does not have: an error result
        rc = bench(srv, out, "--concurrency", "1", "--tool-latency", "0")
    assert rc == Exit.OK, capsys.readouterr().err
    a = json.loads((out / "summary.json").read_text())["levels"][0]["agent"]
    assert (a["tool_calls"], a["tool_errors"], a["answered"]) == (REQUESTS, REQUESTS, REQUESTS)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--tool-latency", "50", "--mcp", MCP], "pick one"),
        (["--max-steps", "3"], "--max-steps counts the steps of a tool-using turn"),
        (["--tool-latency", "-5"], "expected milliseconds from 0 up"),
        (["--tool-latency", "nan"], "expected milliseconds from 0 up"),
        (["--tool-latency", "soon"], "expected milliseconds"),
        (["--tool-latency", "50", "--cluster", "local:2"], "--cluster's drivers run elsewhere"),
        (["--mcp", "   "], "--mcp got an empty spec"),
    ],
)
def test_what_cannot_work_is_refused_in_one_line_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    with AgentServer(script("lookup", {})) as srv:
        rc = bench(srv, tmp_path / "no", *flags)
        sent = len(srv.requests)
    err = capsys.readouterr().err
    assert rc == Exit.USAGE and sent == 0
    assert said in err and "Traceback" not in err


def test_the_local_engine_is_refused_for_it_has_no_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "-m", "local", "--tool-latency", "50", "--out", str(tmp_path / "no")])
    err = capsys.readouterr().err
    assert rc == Exit.USAGE and "the local engine has no tool support" in err
