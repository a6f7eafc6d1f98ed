"""``--mcp`` on the command line: a spec that names nothing is a usage error in one line (no
traceback, no URL credentials), and ``compare --headless`` starts the servers and says how each start
went on stderr."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from ttft.tui import cli
from ttft.tui.commands import compare as cmd
from ttft.tui.commands.args import compare_args

from tests.backends.mcp.servers import FAKE
from tests.support.compare_fakes import ScheduledBackend


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))


def _compare(argv: list[str]) -> int:
    def factory(spec: str, base_url: str | None) -> ScheduledBackend:
        return ScheduledBackend(spec.partition(":")[2], provider="fake", ttft_s=0.005, gap_s=0.001, tokens=3)

    args = compare_args(cli.build_parser("compare").parse_args(argv))
    return cmd.run(args, factory=factory)


@pytest.mark.parametrize("command", ["chat", "compare"])
def test_a_spec_that_names_nothing_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["-m", "fake:a", "-m", "fake:b"] if command == "compare" else []
    rc = cli.main([command, "--mcp", "ftp://u:PW-SECRET@h/x", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "PW-SECRET" not in err
    assert f"ttft {command}: --mcp ftp://***@h/x: expected an http:// or https:// URL" in err


def test_compare_headless_starts_the_servers_and_says_how_each_went(capsys: pytest.CaptureFixture[str]) -> None:
    spec = shlex.join([sys.executable, str(FAKE)])
    argv = ["compare", "--headless", "-m", "fake:a", "-m", "fake:b", "--mcp", spec, "--mcp", "/no/such-server"]
    rc = _compare([*argv, "--mcp-start-timeout", "60", "hi"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err
    assert "mcp mcp_server: ready · spawn " in err and "· 7 tools" in err
    assert "ttft compare: MCP server such-server could not start" in err
