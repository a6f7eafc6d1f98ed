"""The documentation: the MkDocs site builds with ``--strict``, the README stays a short front door
whose two marked commands CI reads, and what the pages tell a reader to type is true of the code.

``--strict`` makes mkdocs fail on every warning: a nav entry or link to a page that does not exist,
an anchor no heading makes. The README is read by people on GitHub and by ``.ci/run``, which runs
the command under ``<!-- test-command -->`` verbatim, so the README's checks are its own.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from textual.binding import Binding
from ttft.tui.chat.commands import BINDINGS
from ttft.tui.cli import _subparsers, build_parser
from ttft.tui.screens.help import KEYS
from ttft.tui.widgets.prompt_box import PromptBox

from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 300
MARKED = {
    "chat-command": "python3 -m venv .venv && .venv/bin/pip install -e '.[local]' && .venv/bin/ttft -m local",
    "test-command": (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[local,server,dev]' && .venv/bin/python -m pytest -q"
    ),
}
# [text](target) and ![alt](target); a target has no spaces (a title after one is left out).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```(\w*)\s*$")


def test_the_docs_build_with_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mkdocs", "build", "--strict"),
            *("--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"


@pytest.mark.parametrize("marker", sorted(MARKED))
def test_each_marked_command_is_in_the_readme_once_under_its_marker(marker: str) -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count(f"<!-- {marker} -->") == 1, marker
    assert text.count(MARKED[marker]) == 1, f"the {marker} must appear exactly once"
    after = text.split(f"<!-- {marker} -->", 1)[1].lstrip("\n").splitlines()
    assert after[:3] == ["```sh", MARKED[marker], "```"], after[:3]


def test_ci_reads_exactly_the_test_command() -> None:
    """The extraction ``.ci/run`` runs, on this README: the one line under the marker, nothing more."""
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    awk = re.search(r"awk '([^']+)' README\.md", script)
    assert awk, "the test command's extraction moved out of .ci/run"
    done = subprocess.run(["awk", awk.group(1), str(README)], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == MARKED["test-command"]


def _relative_links(text: str) -> list[str]:
    targets = [m.group(1) for m in LINK.finditer(_without_code(text))]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _without_code(text: str) -> str:
    """The text outside fenced blocks and inline code, where a link is a link."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def test_every_relative_link_in_the_readme_points_at_a_file() -> None:
    links = _relative_links(README.read_text(encoding="utf-8"))
    assert "docs/chat.svg" in links and any(t.startswith("docs/") and t.endswith(".md") for t in links)
    missing = [t for t in links if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_link_check_sees_a_missing_file() -> None:
    found = _relative_links("[a](docs/nope.md) ![b](docs/chat.svg) [c](https://x.org/a.md) [d](#top) `[e](f.md)`")
    assert found == ["docs/nope.md", "docs/chat.svg"]


def _shell_lines(path: Path) -> list[str]:
    """The lines of a page's ``sh``/``bash`` blocks, backslash continuations joined."""
    lines, block, pending = [], None, ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(raw.strip())
        if fence:
            block = None if block is not None else fence.group(1)
            continue
        if block not in ("sh", "bash"):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    return lines


def ttft_invocations(line: str) -> list[list[str]]:
    """Each ``ttft ...`` command in one shell line, as its arguments: pipes, ``&&`` and ``;`` split
    it, and comments, redirections and leading ``VAR=value`` assignments are left out."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:  # an unclosed quote: not a command line
        return []
    commands: list[list[str]] = [[]]
    redirect = False
    for tok in tokens:
        if tok and set(tok) <= set("|&;()"):
            commands.append([])
        elif tok in (">", ">>", "<"):
            redirect = True
        elif redirect:
            redirect = False  # the redirection's target
        else:
            commands[-1].append(tok)
    found = []
    for args in commands:
        while args and re.match(r"^[A-Z_][A-Z0-9_]*=", args[0]):
            args = args[1:]
        if args and Path(args[0]).name == "ttft":
            found.append(args[1:])
    return found


def test_the_example_splitter_finds_each_ttft_command() -> None:
    assert ttft_invocations('OPENAI_API_KEY=x ttft ask -m openai:m "hi there" > t.json  # a note') == [
        ["ask", "-m", "openai:m", "hi there"]
    ]
    assert ttft_invocations("git diff | ttft ask -q 'review' | head") == [["ask", "-q", "review"]]
    assert ttft_invocations("python -m venv .venv && .venv/bin/ttft -m local") == [["-m", "local"]]
    assert ttft_invocations("pip install x") == []


DOC_PAGES = sorted([README, *DOCS.rglob("*.md")])


def refused(lines: list[str]) -> list[str]:
    """The ``ttft`` commands in these shell lines that the command line refuses, each with its reason."""
    out = []
    for line in lines:
        for args in ttft_invocations(line):
            if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "--version")):
                args = ["chat", *args]  # bare `ttft` is the chat, as tui.cli.main reads it
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    build_parser().parse_args(args)
            except SystemExit as exc:
                if exc.code:
                    out.append(f"{line.strip()}\n    {err.getvalue().strip().splitlines()[-1]}")
    return out


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config that names the provider the examples use (groq), and no data of the user's."""
    (tmp_path / "config.toml").write_text(
        '[providers.groq]\nkind = "compat"\nbase_url = "https://api.groq.com/openai/v1"\n'
        'api_key_env = "GROQ_API_KEY"\ndefault_model = "llama-3.3-70b-versatile"\n'
    )
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.mark.parametrize("page", DOC_PAGES, ids=[str(p.relative_to(ROOT)) for p in DOC_PAGES])
def test_every_ttft_example_parses(page: Path, config_dir: Path) -> None:
    """Each ``ttft`` command a page shows is one the command line takes: its command, flags, choices
    and values."""
    assert refused(_shell_lines(page)) == []


def test_the_example_check_refuses_what_the_code_does_not_take(config_dir: Path) -> None:
    said = refused(["ttft ask --no-such-flag hi", "ttft ask -m openai:x hi", "ttft bench --effort wild -m local"])
    assert len(said) == 2 and "--no-such-flag" in said[0] and "wild" in said[1], said
    assert refused(["ttft -m local", "ttft models -m groq"]) == []


def _documented_chat_keys() -> set[str]:
    """The keys in the first column of docs/chat.md's key table, one by one (``ctrl+r / ctrl+n``)."""
    text = (DOCS / "chat.md").read_text(encoding="utf-8").split("## Keys", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for row in re.findall(r"^\| ([^|]+) \|", text, flags=re.M):
        keys |= {k for k in re.split(r"\s*(?:/|,| or )\s*", row.strip()) if re.fullmatch(KEY, k)}
    return keys


KEY = r"ctrl\+[a-z]|F\d{1,2}|Enter|Esc"


def test_every_key_the_chat_page_lists_is_bound_and_in_the_help() -> None:
    bound = {k.strip() for b in [*BINDINGS, *PromptBox.BINDINGS] if isinstance(b, Binding) for k in b.key.split(",")}
    bound |= {"ctrl+p", "ctrl+q"}  # Textual's palette and quit (the prompt box binds Enter, ctrl+j, ctrl+e)
    documented = _documented_chat_keys()
    assert {"Enter", "Esc", "ctrl+r", "F2", "ctrl+l", "F9", "ctrl+q"} <= documented, documented
    assert sorted(k for k in documented if k.lower().replace("esc", "escape") not in bound) == []
    in_help = {part.strip() for k, _ in KEYS for part in re.split(r"[/,]", k)}
    assert sorted(documented - in_help) == [], "F1's help lists every key the page does"


# Flags of other programs the pages show: mkdocs, ruff, pip, curl, llama-server, AIPerf.
OTHER_TOOLS_FLAGS = {"--strict", "--check", "--force-reinstall", "--no-cache-dir", "--data-binary", "--no-repack"}
OTHER_TOOLS_FLAGS |= {"--concurrency-ramp-duration"}
OTHER_TOOLS_FLAGS |= {"--metrics", "--enable-metrics"}  # llama-server's and SGLang's Prometheus switches
OTHER_TOOLS_FLAGS |= {"--cache-prompt", "--cache-ram"}  # llama-server's prompt cache
OTHER_TOOLS_FLAGS |= {"--head", "--address", "--node-ip-address", "--distributed-executor-backend"}  # ray, vllm
# vLLM's per-request metrics and llama-server's drafting (docs/measurement.md)
OTHER_TOOLS_FLAGS |= {
    "--enable-per-request-metrics",
    "--enable-per-request-output-token-metrics",
    "--per-request-spec-decode-metrics",
    "--spec-type",
}
OTHER_TOOLS_FLAGS |= {"--hypothesis-profile", "--hypothesis-seed"}  # Hypothesis's pytest plugin
OTHER_TOOLS_FLAGS |= {"--jinja", "--enable-auto-tool-choice", "--tool-call-parser"}  # tools on llama-server, vLLM
OTHER_TOOLS_FLAGS |= {"--allowed"}  # Claude Code's --allowedTools, as the pattern reads it (up to its capital)


def _ttft_flags() -> set[str]:
    parser = build_parser()
    flags = {o for a in parser._actions for o in a.option_strings}
    for sub in _subparsers(parser).values():
        flags |= {o for a in sub._actions for o in a.option_strings}
    return flags


def _script_flags() -> set[str]:
    """The flags of the scripts under tests/ that the pages tell a reader to run (and their --no- forms)."""
    found: set[str] = set()
    for path in [*(ROOT / "tests" / "benchmarks").glob("*.py"), *(ROOT / "tests" / "fakes").glob("*.py")]:
        found |= set(re.findall(r"""["'](--[a-z][a-z0-9-]*)["']""", path.read_text(encoding="utf-8")))
    return found | {"--no-" + f[2:] for f in found}


def test_every_flag_the_pages_name_exists() -> None:
    known = _ttft_flags() | _script_flags() | OTHER_TOOLS_FLAGS
    named = {
        (str(page.relative_to(ROOT)), flag)
        for page in DOC_PAGES
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", page.read_text(encoding="utf-8"))
    }
    assert sorted((page, flag) for page, flag in named if flag not in known) == []
    assert "--find-capacity" in known and "--no-such-flag" not in known


PATH_NAMED = re.compile(r"\b(?:tests|telemetry|backends|tui|docs)/[\w./-]+\.(?:py|md|svg|jsonl|tcss)\b")
DOTTED_NAMED = re.compile(r"`(?:ttft\.)?((?:telemetry|backends|tui)(?:\.\w+)+)`")


def test_every_file_and_name_the_pages_cite_exists() -> None:
    """A path such as ``backends/transport/protocol.py`` is a file here, and a dotted name such as
    ``telemetry.server.kvcache.kv_cache_size`` imports: the pages follow the code when it moves."""
    pages = [*DOC_PAGES, ROOT / "CHANGELOG.md"]
    paths = {p for page in pages for p in PATH_NAMED.findall(page.read_text(encoding="utf-8"))}
    assert "backends/transport/protocol.py" in paths
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []
    missing = []
    named = {n for page in pages for n in DOTTED_NAMED.findall(page.read_text(encoding="utf-8"))}
    for name in sorted(n for n in named if not n.endswith(".py")):  # `telemetry.py`: a user's own file
        parts = ["ttft", *name.split(".")]  # the pages name a module by its folder; it installs under ttft
        for cut in range(len(parts), 1, -1):  # the longest prefix that is a module, then its attributes
            try:
                obj: object = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr, None)
            if obj is None:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert missing == []


def _long_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option string a command takes (each alias too), but argparse's own --help and hidden flags."""
    return {
        o
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        for o in a.option_strings
        if o.startswith("--") and o != "--help"
    }


def _undocumented(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    missing = []
    for name, sub in sorted(parsers.items()):
        page = DOCS / "commands" / f"{name}.md"
        text = page.read_text(encoding="utf-8") if page.is_file() else ""
        missing += [
            f"{page.relative_to(ROOT)}: {flag}"
            for flag in sorted(_long_flags(sub))
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)
        ]
    return missing


def test_every_flag_of_every_command_is_on_its_page() -> None:
    """The other direction of ``test_every_flag_the_pages_name_exists``: each long option of each command
    (aliases too, as ``--num-prompts``) is named on ``docs/commands/<command>.md``."""
    parsers = _subparsers(build_parser())
    assert {"chat", "ask", "bench", "report", "probe"} <= set(parsers)
    assert _undocumented(parsers) == []


def test_the_page_check_sees_a_missing_flag() -> None:
    p = argparse.ArgumentParser(prog="ask")
    p.add_argument("--no-such-flag-anywhere")
    p.add_argument("--json")  # ask.md names it
    p.add_argument("--hidden-flag", help=argparse.SUPPRESS)  # hidden: not asked for
    assert _undocumented({"ask": p}) == ["docs/commands/ask.md: --no-such-flag-anywhere"]
    # the page names --max-output-tokens and --max-retries: neither names --max
    assert _undocumented({"ask": _parser_with("--max")}) == ["docs/commands/ask.md: --max"]


def _parser_with(flag: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument(flag)
    return p
