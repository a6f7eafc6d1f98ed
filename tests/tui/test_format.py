"""The helpers that shape names and numbers for people: turn labels and shortened model names."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from ttft.telemetry.record import TurnRecord
from ttft.tui.format import ELLIPSIS, short_model, short_spec, short_spec_str, turn_label
from ttft.tui.report.charts import Chart, Series
from ttft.tui.report.figures import timeline_chart
from ttft.tui.widgets.history import MODEL_W
from ttft.tui.widgets.telemetry_pane import record_text


def test_turns_are_numbered_from_one_for_people() -> None:
    assert turn_label(0) == "#1" and turn_label(9) == "#10"
    assert turn_label(0, "turn ") == "turn 1" and turn_label(4, "") == "5"
    for missing in (None, "3", -1, True):  # not a turn index: never a made-up number
        assert turn_label(missing) == "#?"


@pytest.mark.parametrize(
    ("name", "width", "short"),
    [
        ("gpt-4o-mini", 16, "gpt-4o-mini"),  # fits: untouched
        ("gemma-3-270m-q4_k_m", 16, "gemma-3-270m-q4…"),  # the family and size stay, not the tail
        ("SmolLM2-135M-Instruct-Q8_0", 16, "SmolLM2-135M…"),
        ("claude-sonnet-4-5-20250929", 16, "claude-sonnet-4…"),
        ("gpt-4o-mini-2024-07-18", 16, "gpt-4o-mini…"),
        ("meta-llama/Llama-3.3-70B-Instruct", 16, "Llama-3.3-70B…"),  # the vendor prefix goes first
        ("meta-llama/Llama-3.3-70B", 16, "Llama-3.3-70B"),  # ... and may be all it takes
        ("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", 24, "qwen2.5-0.5b-instruct…"),
        ("llama3:8b-instruct-q4_0", 12, "llama3:8b…"),
        ("averylongmodelnamewithoutseparators", 16, "averylongm…ators"),  # one part: start and end
        ("abcdef", 1, ELLIPSIS),
        ("abcdef", 0, ""),
    ],
)
def test_short_model_keeps_what_says_which_model(name: str, width: int, short: str) -> None:
    got = short_model(name, width)
    assert got == short
    assert len(got) <= width


def test_short_model_never_exceeds_the_width() -> None:
    names = ["SmolLM2-135M-Instruct-Q8_0", "a-b", "x" * 50, "a-" * 30, "org/" + "m-" * 20, "Qwen2.5-0.5B-Instruct"]
    for name in names:
        for width in range(0, 40):
            assert len(short_model(name, width)) <= width, (name, width)


def test_a_label_with_spaces_keeps_its_slash_parts() -> None:
    # a report's group name: the comparison id and pane must not be dropped as if they were a vendor
    assert short_model("cmp-1 pane 0: compat:meta-llama/Llama-3.3-70B", 24).startswith("cmp-1 pane 0:")


def test_short_spec_gives_the_model_the_room() -> None:
    assert short_spec("openai", "gpt-4o-mini", 40) == "openai:gpt-4o-mini"
    assert short_spec("local", "SmolLM2-135M-Instruct-Q8_0", 24) == "local:SmolLM2-135M…"
    assert short_spec("openai-responses", "gpt-5-mini", 20) == "openai…:gpt-5-mini"  # the provider gives way
    assert short_spec("anthropic", "claude-haiku-4-5", 12) == "claude…"  # no room for a provider at all
    assert short_spec("local", None, 10) == "local"
    assert short_spec_str("compat:llama3:8b-instruct-q4_0", 18) == "compat:llama3:8b…"  # colons in the model
    assert short_spec_str("model hidden", 40) == "model hidden"


def test_history_pane_and_charts_number_turns_from_one_and_shorten_alike() -> None:
    rec = {"status": "ok", "turn_index": 0, "provider": "local", "model": "gemma-3-270m-q4_k_m"}
    assert (
        "turn 1 · local · gemma-3-270m-q4_k_m"
        in record_text(TurnRecord.from_dict({**rec, "metrics": {}, "tokens": {}})).plain
    )
    bar = timeline_chart([TurnRecord.from_dict({**rec, "metrics": {"phases_ms": {"waiting": 10.0}}})]).bars[0]
    assert bar.name.startswith("#1 local:gemma-3-270m")
    long = {**rec, "model": "SmolLM2-135M-Instruct-Q8_0-extra-long-suffix"}
    assert short_model(long["model"], MODEL_W) == "SmolLM2-135M…"


def test_report_timeline_picks_turns_as_numbered(tmp_path: Path) -> None:
    from ttft.tui.commands.report.command import _chosen

    records = [TurnRecord.from_dict({"turn_index": i, "status": "ok"}) for i in range(4)]
    assert [r.turn_index for r in _chosen(records, "1,3")] == [0, 2]


async def test_compare_panes_shorten_their_model_names_and_keep_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttft.tui.compare.app import CompareApp, PaneView

    from tests.support.compare_fakes import ScheduledBackend

    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    long = ScheduledBackend("Meta-Llama-3.3-70B-Instruct-Turbo-Q4_K_M" + "-and-a-long-tail" * 4 + "-suffix")
    brackets = ScheduledBackend("[usage]-7b")
    app = CompareApp([long, brackets], session_id="s1", comparison_id="cmp-1")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        a = app.query_one("#pane-A", PaneView)
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "fake:Meta-Llama-3.3-70B-Instruct" in screen and "…" in screen  # cut where it reads
        assert "suffix" not in screen  # the title stops at the border
        assert "fake:[usage]-7b" in screen  # escaped, not eaten as markup
        title = Text.from_markup(a.border_title or "").plain
        assert title.startswith("A fake:Meta-Llama-3.3-70B") and title.endswith("…")
        assert len(title) <= a.size.width - 4  # inside its own border's corners


def test_history_gives_the_model_the_room_the_figures_leave() -> None:
    from ttft.tui.widgets.history import CELL_PAD, COLUMNS, MAX_HEIGHT, SCROLLBAR_W, _cells, model_width

    rec = {
        "turn_index": 11,
        "model": "SmolLM2-135M-Instruct-Q8_0",
        "status": "cancelled",
        "metrics": {"ttft_ms": 1234.0, "ttfvt_ms": 1500.0, "tpot_ms": 22.25, "e2e_ms": 65_000.0},
        "tokens": {"output": 1024, "source": "estimated"},
    }
    rows = [_cells(TurnRecord.from_dict(rec))]
    for width in (62, 80, 120):
        w = model_width(rows, width)
        others = sum(max(len(COLUMNS[i]), len(str(rows[0][i]))) + CELL_PAD for i in range(len(COLUMNS)) if i != 1)
        assert w == 8 or others + w + CELL_PAD <= width  # the last column stays on screen
    assert model_width(rows, 200) == len("SmolLM2-135M-Instruct-Q8_0")  # room to spare: the whole name
    assert model_width(rows, 0) == 16 and model_width([], 62) >= 8
    many = rows * MAX_HEIGHT  # the table scrolls: its scrollbar takes a column too
    assert model_width(rows, 70) == 13 and model_width(many, 70) == 13 - SCROLLBAR_W


def test_a_chart_of_one_point_ticks_its_value_not_noise() -> None:
    text = Chart("xy", "one level", "x", "y", [Series("s", [188.4637], [161.2182])]).terminal(60, 14)
    assert "161.2┤" in text and "188.5" in text
    assert "161.2182" not in text and "188.4637" not in text  # the spread plotext invents for one value
