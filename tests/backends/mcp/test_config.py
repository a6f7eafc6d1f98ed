"""``[mcp.NAME]`` in config.toml, checked as strictly as the providers (unknown keys, wrong types, never
a secret in the message), and ``--mcp SPEC``: a configured name, a command line split as a shell would
(and never run by one), or an http(s):// URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.backends.mcp.config import McpSpecError, parse_spec, resolve_specs, shown
from ttft.backends.providers.config import McpServerConfig, ProviderError, check_config, configured_mcp_servers
from ttft.telemetry.errors import ErrorKind


@pytest.fixture(autouse=True)
def _config_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))


def _refused(tmp_path: Path, text: str) -> str:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ProviderError) as exc:
        check_config()
    assert exc.value.kind is ErrorKind.CONFIG_ERROR
    return f"{exc.value} {exc.value.hint}"


def test_good_servers_are_read_typed(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[mcp.files]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]\n'
        'env = { TOKEN = "t0k" }\ntools = ["read_file"]\n'
        '[mcp.web]\nurl = "https://mcp.example.com/mcp"\nheaders = { Authorization = "Bearer H-SECRET" }\n'
    )
    check_config()
    servers = configured_mcp_servers()
    assert servers["files"] == McpServerConfig(
        name="files",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        env={"TOKEN": "t0k"},
        tools=("read_file",),
    )
    assert servers["web"].url == "https://mcp.example.com/mcp" and servers["web"].tools is None
    assert "H-SECRET" not in shown(servers["web"]) and "t0k" not in shown(servers["files"])


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[mcp.x]\ncommand = "a"\ntool = ["b"]\n', "mcp.x.tool", "did you mean 'tools'"),
        ('[mcp.x]\ncommand = "a"\nargs = "b c"\n', "mcp.x.args", "expected an array of strings"),
        ("[mcp.x]\ncommand = 3\n", "mcp.x.command", "expected the program to run"),
        ('[mcp.x]\nargs = ["a"]\n', "mcp.x", "give either command"),
        ('[mcp.x]\ncommand = "a"\nurl = "http://h/mcp"\n', "mcp.x", "give either command"),
        ('[mcp.x]\nurl = "ftp://h/mcp"\n', "mcp.x.url", "http:// or https://"),
        ('[mcp.x]\nurl = "http://h/mcp"\nargs = ["a"]\n', "mcp.x.args", "goes with command"),
        ('[mcp.x]\ncommand = "a"\ntools = "all"\n', "mcp.x.tools", "an array of tool names"),
        ('[mcp."a b"]\ncommand = "a"\n', 'mcp."a b"', "letters, digits, _ and -"),
        ('mcp = "x"\n', "mcp", "expected a table of MCP servers"),
        ('[mcpp.x]\ncommand = "a"\n', "mcpp", "did you mean 'mcp'"),
    ],
)
def test_a_bad_server_table_names_the_key_and_what_was_expected(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    said = _refused(tmp_path, text)
    assert f": {key}: " in said and words in said


def test_secrets_are_never_in_the_message(tmp_path: Path) -> None:
    said = _refused(tmp_path, '[mcp.x]\nurl = "http://h/mcp"\nheaders = { Auth = 42 }\n')
    assert "mcp.x.headers.Auth: expected a string, got a number" in said and "42" not in said
    said = _refused(tmp_path, '[mcp.x]\nurl = "http://h/mcp"\nheaders = { Auth = "H-SECRET\\r\\nX: 1" }\n')
    assert "mcp.x.headers.Auth" in said and "line break" in said and "H-SECRET" not in said
    said = _refused(tmp_path, '[mcp.x]\nurl = "http://h/mcp"\nheaders = "Bearer H-SECRET"\n')
    assert "mcp.x.headers" in said and "got a string" in said and "H-SECRET" not in said
    said = _refused(tmp_path, '[mcp.x]\ncommand = "a"\nenv = { K = "E-SECRET\\u0000" }\n')
    assert "mcp.x.env.K" in said and "NUL" in said and "E-SECRET" not in said
    said = _refused(tmp_path, '[mcp.x]\nurl = "ftp://user:PW-SECRET@h/mcp"\n')
    assert "mcp.x.url" in said and "PW-SECRET" not in said


def test_a_command_line_is_split_as_a_shell_would_and_never_run_by_one() -> None:
    s = parse_spec("""python3 'my server.py' --root "$HOME/a b" ; rm -rf / | cat *""")
    assert s.command == "python3"
    # every word as written: no variable expanded, no glob, the ; and | plain arguments for the program
    assert s.args == ("my server.py", "--root", "$HOME/a b", ";", "rm", "-rf", "/", "|", "cat", "*")
    assert s.name == "my_server" and s.url is None
    assert parse_spec("npx -y @modelcontextprotocol/server-filesystem /tmp").name == "server-filesystem"
    assert parse_spec("/usr/local/bin/weather-mcp --city Oslo").name == "weather-mcp"
    with pytest.raises(McpSpecError, match="does not split into words"):
        parse_spec("python 'unclosed")
    with pytest.raises(McpSpecError, match="empty"):
        parse_spec("  ")


def test_a_url_spec_is_streamable_http_with_its_credentials_never_shown() -> None:
    s = parse_spec("https://user:PW-SECRET@mcp.example.com:8443/mcp")
    assert s.url == "https://user:PW-SECRET@mcp.example.com:8443/mcp" and s.command is None
    assert s.name == "mcp_example_com" and "PW-SECRET" not in shown(s)
    with pytest.raises(McpSpecError) as exc:
        parse_spec("ftp://user:PW-SECRET@host/x")
    assert "PW-SECRET" not in str(exc.value) and exc.value.kind is ErrorKind.BAD_SPEC


def test_specs_resolve_to_configured_names_first_and_names_are_made_unique() -> None:
    configured = {"files": McpServerConfig(name="files", command="fs-server", tools=("read",))}
    got = resolve_specs(["files", "python srv.py", "python srv.py", "https://h/mcp"], configured)
    assert [s.name for s in got] == ["files", "srv", "srv-2", "h"]
    assert got[0] is configured["files"] and got[2].args == ("srv.py",)
    with pytest.raises(McpSpecError, match="given twice"):
        resolve_specs(["files", "files"], configured)
