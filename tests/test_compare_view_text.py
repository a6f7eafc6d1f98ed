"""What a compare pane's status line shows of a finished turn: the server's own words neutralised."""

from __future__ import annotations

from tui.compare_view import pane_done_text


def test_a_failed_panes_error_type_from_the_server_is_shown_not_run() -> None:
    rec = {"status": "error", "error": {"type": "overloaded\x1b]0;pwned\x07\x9b2J", "status_code": 529}}
    plain = pane_done_text(rec).plain
    assert "HTTP 529 overloaded" in plain
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in plain)


def test_a_failed_pane_without_a_type_says_error() -> None:
    assert pane_done_text({"status": "error", "error": {"type": None}}).plain.endswith("error")
