"""CLI conventions through the real entry point: shared turn flags, stdin with a prompt, ``-q``,
``--json`` on every command, one exit-code table, shell completion, ``--help`` sections, and
vLLM's bench flag names, against the loopback fake server."""

from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ttft.telemetry.bench.slo import SLO
from ttft.telemetry.bench.workload.lengths import Lengths
from ttft.telemetry.record import SCHEMA
from ttft.tui.cli import COMMANDS, build_parser, main
from ttft.tui.commands.args import settings_from_args
from ttft.tui.commands.exits import MEANING, Exit, for_turns
from ttft.tui.commands.prompt import STDIN_LIMIT_BYTES

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT

TURN_COMMANDS = ("ask", "chat", "compare", "bench", "probe")
DECIDED_BY_THE_COMMAND = {"probe": {"--max-output-tokens"}}  # its plan sets each turn's output length
TURN_FLAGS = (
    "--system",
    "--max-output-tokens",
    "--temperature",
    "--reasoning-effort",
    "--reasoning-summary",
    "--thinking-budget",
    "--thinking-display",
    "--no-stream",
    "--timeout",
    "--max-retries",
    "--deadline",
)
ANSWER = Schedule(visible_tokens=4).visible_text()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    monkeypatch.chdir(tmp_path)
    return {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as s:
        yield s


def _ttft(env: dict[str, str], *args: str, **kw) -> subprocess.CompletedProcess:
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)  # never the test runner's own stdin
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        **kw,
    )


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _action(p: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in p._actions if flag in a.option_strings)


def _chat_bodies(srv: FakeServer, since: int) -> list[dict]:
    return [r.body for r in srv.requests[since:] if r.path.endswith("/chat/completions")]


# --- one set of turn flags ----------------------------------------------------------------------
def test_every_turn_command_has_the_same_turn_flags() -> None:
    ask = _subparser("ask")
    for command in TURN_COMMANDS:
        p = _subparser(command)
        for flag in TURN_FLAGS:
            if flag in DECIDED_BY_THE_COMMAND.get(command, ()):
                assert not any(flag in a.option_strings for a in p._actions), (command, flag)
                continue
            mine, theirs = _action(p, flag), _action(ask, flag)
            assert mine.option_strings == theirs.option_strings, (command, flag)
            assert (mine.dest, mine.choices, mine.type, mine.metavar) == (
                theirs.dest,
                theirs.choices,
                theirs.type,
                theirs.metavar,
            ), (command, flag)
            if mine.default == theirs.default:  # a command's own default is the one thing its help may add
                assert mine.help == theirs.help, (command, flag)
    assert _action(ask, "--max-tokens").dest == "max_output_tokens" and _action(ask, "--effort").dest == (
        "reasoning_effort"
    )


@pytest.mark.parametrize("command", TURN_COMMANDS)
def test_turn_flags_parse_to_the_same_settings_everywhere(command: str) -> None:
    head = {"compare": ["compare", "-m", "a:b"], "bench": ["bench", "-m", "a:b"]}.get(command, [command])
    flags = ["--effort", "low", "--thinking-budget", "adaptive", "--deadline", "2.5"]
    flags += [] if command == "probe" else ["--max-tokens", "9"]
    args = build_parser(command).parse_args([*head, *flags, "--max-retries", "1", "--timeout", "7"])
    s = settings_from_args(args)
    assert (s.reasoning_effort, s.thinking_budget, s.extra) == ("low", None, {"thinking": "adaptive"})
    assert s.max_output_tokens == (None if command == "probe" else 9)
    assert (s.deadline_s, s.max_retries, args.timeout) == (2.5, 1, 7.0)
    numbered = build_parser(command).parse_args([*head, "--thinking-budget", "2048"])
    assert settings_from_args(numbered).thinking_budget == 2048


@pytest.mark.parametrize("command", TURN_COMMANDS)
@pytest.mark.parametrize("bad", [["--reasoning-effort", "turbo"], ["--thinking-budget", "0"], ["--timeout", "0"]])
def test_a_bad_turn_flag_is_refused_by_every_command(command: str, bad: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "-m", "compat:x", *bad])
    assert stop.value.code == Exit.USAGE and "Traceback" not in capsys.readouterr().err


def test_compare_and_bench_send_the_turn_flags(srv: FakeServer, env: dict[str, str], tmp_path: Path, capsys) -> None:
    flags = ["--system", "be brief", "--max-tokens", "7", "--temperature", "0.25", "--effort", "low"]
    since = len(srv.requests)
    m = f"compat:fake-model@{srv.openai_base_url}"
    assert main(["compare", "--headless", "-q", "-m", m, "-m", m, *flags, "hi"]) == Exit.OK
    bench = ["bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--concurrency", "1"]
    assert main([*bench, "--requests", "2", "--warmup", "0", "--out", str(tmp_path / "b"), "-q", *flags]) == Exit.OK
    bodies = _chat_bodies(srv, since)
    assert len(bodies) == 4
    for body in bodies:
        assert body["messages"][0] == {"role": "system", "content": "be brief"}
        assert body["temperature"] == 0.25 and body["reasoning_effort"] == "low"
        assert 7 in (body.get("max_tokens"), body.get("max_completion_tokens"))


# --- stdin with a prompt --------------------------------------------------------------------------
def test_stdin_comes_before_the_prompt(srv: FakeServer, env: dict[str, str]) -> None:
    ask = ["ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url]
    since = len(srv.requests)
    p = _ttft(env, *ask, "summarize", input="CONTEXT line\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ANSWER.strip()
    p = _ttft(env, *ask, input="just stdin\n")
    assert p.returncode == 0, p.stderr
    contents = [b["messages"][-1]["content"] for b in _chat_bodies(srv, since)]
    assert contents == ["CONTEXT line\n\nsummarize", "just stdin"]


def test_compare_headless_reads_stdin_too(srv: FakeServer, env: dict[str, str]) -> None:
    m = f"compat:fake-model@{srv.openai_base_url}"
    since = len(srv.requests)
    p = _ttft(env, "compare", "--headless", "-q", "-m", m, "-m", m, "summarize", input="CONTEXT")
    assert p.returncode == 0, p.stderr
    assert [b["messages"][-1]["content"] for b in _chat_bodies(srv, since)] == ["CONTEXT\n\nsummarize"] * 2


def test_a_terminal_on_stdin_is_not_read(srv: FakeServer, env: dict[str, str]) -> None:
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"typed ahead\n")  # would block or leak into the prompt if the tty were read
        since = len(srv.requests)
        p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi", stdin=follower)
    finally:
        os.close(leader)
        os.close(follower)
    assert p.returncode == 0, p.stderr
    assert [b["messages"][-1]["content"] for b in _chat_bodies(srv, since)] == ["hi"]


def test_stdin_past_the_limit_is_refused_before_anything_is_sent(srv: FakeServer, env: dict[str, str]) -> None:
    since = len(srv.requests)
    big = "x" * (STDIN_LIMIT_BYTES + 1)
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "summarize", input=big)
    assert p.returncode == Exit.USAGE and "more than 4 MiB" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr) < 300 and _chat_bodies(srv, since) == []
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url)  # /dev/null: no prompt
    assert p.returncode == Exit.USAGE and "give a question" in p.stderr


# --- -q and --json ------------------------------------------------------------------------------
def test_quiet_silences_the_summary_but_never_the_error(srv: FakeServer, env: dict[str, str]) -> None:
    ask = ["ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url]
    loud, quiet = _ttft(env, *ask, "hi"), _ttft(env, *ask, "-q", "hi")
    assert "TTFT" in loud.stderr and quiet.stderr == "" and quiet.stdout == loud.stdout
    failed = _ttft(env, "ask", "-q", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "hi")
    assert failed.returncode == Exit.FAILED and failed.stderr.startswith("error: ") and "TTFT" not in failed.stderr
    m = f"compat:fake-model@{srv.openai_base_url}"
    compare = _ttft(env, "compare", "--headless", "-q", "-m", m, "-m", m, "hi")
    assert compare.returncode == 0 and compare.stderr == "" and "comparison" in compare.stdout


def test_every_command_that_prints_results_has_json(srv: FakeServer, env: dict[str, str], tmp_path: Path) -> None:
    base = ["--base-url", srv.openai_base_url]
    m = f"compat:fake-model@{srv.openai_base_url}"
    bench_out = tmp_path / "bench"
    runs = {
        "ask": ["ask", "-m", "compat:fake-model", *base, "--session", "s1", "hi"],
        "compare": ["compare", "--headless", "-m", m, "-m", m, "hi"],
        "models": ["models", "-m", "compat", *base],
        "bench": ["bench", "-m", "compat:fake-model", *base, "--concurrency", "1", "--requests", "2", "--warmup", "0",
                  "--out", str(bench_out)],
        "sessions": ["sessions"],
        "report": ["report", str(bench_out)],
        "export": ["export", "s1", "-o", str(tmp_path / "s1.csv"), "-f", "csv"],
    }  # fmt: skip
    docs = {}
    for command, args in runs.items():
        p = _ttft(env, *args, "--json")
        assert p.returncode == 0, (command, p.stderr)
        docs[command] = json.loads(p.stdout)  # stdout is one JSON document and nothing else
        assert docs[command]["schema"] == {"ask": SCHEMA}.get(command, f"ttft.{command}/1"), command
    assert docs["ask"]["answer"] == ANSWER and docs["ask"]["session_id"] == "s1"
    assert [p["name"] for p in docs["compare"]["panes"]] == ["compat:fake-model"] * 2
    assert [m["name"] for m in docs["models"]["models"]] == ["fake-model", "fake-reasoner"]
    assert docs["bench"]["out"] == str(bench_out) and docs["bench"]["levels"][0]["completed"] == 2
    ids = [s["session_id"] for s in docs["sessions"]["sessions"]]
    assert "s1" in ids and next(s for s in docs["sessions"]["sessions"] if s["session_id"] == "s1")["turns"] == 1
    assert docs["report"]["benches"][0]["levels"][0]["completed"] == 2
    assert docs["export"]["turns"] == 1 and docs["export"]["out"] == str(tmp_path / "s1.csv")
    assert (tmp_path / "s1.csv").exists()


# --- exit codes -----------------------------------------------------------------------------------
def test_compare_with_a_failed_pane_is_partial_and_all_failed_is_failed(srv: FakeServer, env: dict[str, str]) -> None:
    good, dead = f"compat:fake-model@{srv.openai_base_url}", "compat:m@http://127.0.0.1:9/v1"
    assert main(["compare", "--headless", "-q", "--max-retries", "0", "-m", good, "-m", dead, "hi"]) == Exit.PARTIAL
    assert main(["compare", "--headless", "-q", "--max-retries", "0", "-m", dead, "-m", dead, "hi"]) == Exit.FAILED


def test_the_same_failure_is_the_same_code_on_every_command(env: dict[str, str], tmp_path: Path, capsys) -> None:
    # an incomplete model spec (compat without --base-url) is a usage error wherever it is given
    for args in (
        ["ask", "-m", "compat:x", "hi"],
        ["compare", "--headless", "-m", "compat:x", "-m", "compat:x", "hi"],
        ["bench", "-m", "compat:x", "--out", str(tmp_path / "b"), "-q"],
        ["models", "-m", "compat"],
    ):
        assert main(args) == Exit.USAGE, args
        assert "--base-url" in capsys.readouterr().err, args
    # an output that cannot be written: 3, for an export, a report, a bench folder
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    main(["ask", "-m", "compat:x", "--session", "s2", "hi"])  # a logged (failed) turn to export
    assert main(["export", "s2", "-o", str(blocked / "x.jsonl")]) == Exit.NOT_SAVED
    assert main(["report", "s2", "--html", str(blocked / "r.html"), "-q"]) == Exit.NOT_SAVED
    assert main(["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--out", str(blocked)]) == (
        Exit.NOT_SAVED
    )


def test_exit_codes_come_from_one_table_shown_in_help() -> None:
    assert for_turns([("ok", None), ("ok", None)]) == Exit.OK
    assert for_turns([("ok", None), ("error", "server_error")]) == Exit.PARTIAL
    assert for_turns([("error", "bad_spec")]) == Exit.USAGE
    assert for_turns([("error", "missing_key"), ("cancelled", None)]) == Exit.FAILED
    assert set(MEANING) == set(Exit)
    for command in COMMANDS:
        text = _subparser(command).format_help()
        for code, meaning in MEANING.items():
            assert f"  {int(code):>3}  {meaning}\n" in text, (command, code)


# --- --help -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [*COMMANDS, None])
def test_help_has_examples_environment_and_the_config_path(command: str | None, env: dict[str, str]) -> None:
    p = _ttft(env, *([command] if command else []), "--help")
    assert p.returncode == 0 and "Traceback" not in p.stderr
    out = p.stdout
    assert "examples:\n  ttft" in out and "environment:" in out and "TTFT_DATA_DIR" in out
    assert f"config file: {Path(env['TTFT_CONFIG_DIR']) / 'config.toml'}" in out
    assert "exit codes:" in out and "  143  " in out


# --- completion -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_command(shell: str, capsys) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert len(script) > 1000
    for command in COMMANDS:
        assert command in script, (shell, command)
    assert "--reasoning-effort" in script and "xhigh" in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_loads_and_completes(env: dict[str, str], tmp_path: Path) -> None:
    script = _ttft(env, "completion", "bash").stdout
    (tmp_path / "run-1.jsonl").write_text("")
    cases = {
        "ttft as": "ask",
        "ttft completion ": "bash zsh fish",
        "ttft compare --effort ": "none minimal low medium high xhigh max",
        "ttft bench --num-pr": "--num-prompts",
        "ttft report run-": "run-1.jsonl",  # a path argument completes file names
        "ttft export --out run-": "run-1.jsonl",
    }
    for line, expected in cases.items():
        words = line.split(" ")
        probe = (
            f"set -e\n{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
            '_shtab_ttft\necho "${COMPREPLY[@]}"'
        )
        p = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert p.stdout.split() == expected.split(), (line, p.stdout)


# --- vLLM's bench flag names -------------------------------------------------------------------------
def test_vllm_bench_flag_names_map_onto_the_bench_options() -> None:
    parse = build_parser("bench").parse_args
    args = parse(["bench", "-m", "a:b", "--num-prompts", "5", "--request-rate", "2", "--random-input-len", "16",
                  "--goodput", "ttft:500", "tpot:50"])  # fmt: skip
    assert (args.requests, args.rate, args.input_tokens) == (5, (2.0,), Lengths.fixed(16))
    assert SLO.parse(args.slo) == SLO(ttft_ms=500.0, tpot_ms=50.0)
    assert parse(["bench", "-m", "a:b", "--max-concurrency", "1,4"]).concurrency == (1.0, 4.0)
    assert SLO.parse(parse(["bench", "-m", "a:b", "--goodput", "e2el:1000"]).slo) == SLO(e2e_ms=1000.0)
    with pytest.raises(SystemExit):
        parse(["bench", "-m", "a:b", "--goodput", "speed:9"])


def test_a_bench_with_vllm_names_runs(srv: FakeServer, env: dict[str, str], tmp_path: Path, capsys) -> None:
    args = ["bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--max-concurrency", "2",
            "--num-prompts", "3", "--warmup", "0", "--goodput", "ttft:60000", "--out", str(tmp_path / "v"),
            "--json", "-q"]  # fmt: skip
    assert main(args) == Exit.OK
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert err == "" and doc["requests_per_level"] == 3 and doc["slo"]["ttft_ms"] == 60000.0
    assert doc["levels"][0]["level"] == 2 and doc["details"][0]["goodput"] is not None


def test_timeout_reaches_compare_and_bench(env: dict[str, str], tmp_path: Path, capsys) -> None:
    """--timeout is a turn flag: on compare and bench too, a stream that stalls ends at the given idle timeout."""
    with FakeServer(Schedule(first_token_ms=5, visible_tokens=6, stall_after=1, stall_s=30)) as stalled:
        m = f"compat:fake-model@{stalled.openai_base_url}"
        compare = ["compare", "--headless", "--json", "-q", "--max-retries", "0", "--timeout", "0.5", "-m", m, "-m", m]
        assert main([*compare, "hi"]) == Exit.FAILED
        doc = json.loads(capsys.readouterr().out)
        assert [p["failed"] for p in doc["panes"]] == [1, 1]
        bench = ["bench", "-m", "compat:fake-model", "--base-url", stalled.openai_base_url, "--concurrency", "1"]
        rc = main([*bench, "--requests", "1", "--warmup", "0", "--timeout", "0.5", "--out", str(tmp_path / "b"), "-q"])
        assert rc == Exit.FAILED
    turns = [json.loads(line) for line in (tmp_path / "b" / "turns.jsonl").read_text().splitlines()]
    assert [t["status"] for t in turns] == ["error"] and turns[0]["metrics"]["total_ms"] < 10_000, turns[0]["error"]
    assert turns[0]["error"]["type"] == "timeout", turns[0]["error"]


def test_an_unknown_option_is_refused_with_the_commands_own_usage(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["ask", "--speculative", "hi"])  # a chat-only flag
    err = capsys.readouterr().err
    assert e.value.code == Exit.USAGE and "usage: ttft ask" in err and "unrecognized arguments: --speculative" in err


def _closed_pipe_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "ttft.tui.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["models", "-m", "local"], ["sessions"], ["export", "-f", "csv", "-o", "-"]])
def test_a_closed_stdout_stops_quietly_with_exit_141(args: list[str], tmp_path: Path) -> None:
    # `ttft sessions | head -1`: the reader goes away, the command stops with no traceback
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    if args[0] in ("sessions", "export"):  # something to list or export
        (tmp_path / "sessions").mkdir()
        (tmp_path / "sessions" / "20260101-090000-a1b2.jsonl").write_text("")
    done = _closed_pipe_run(args, env)
    assert "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == Exit.PIPE_CLOSED == 141
