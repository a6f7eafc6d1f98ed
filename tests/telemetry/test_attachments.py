"""What attachments cost a turn: each API's published image rule (telemetry.tokens), the share of the turn's
input and the part of a reported prefill they account for (telemetry.server.prompt_share)."""

from __future__ import annotations

import pytest
from ttft.backends.attachments import fmt_size
from ttft.telemetry.record import AttachmentInfo
from ttft.telemetry.server.prompt_share import attachment_cost
from ttft.telemetry.server.timings import server_timings
from ttft.telemetry.tokens import image_tokens, tokens_for_chars


@pytest.mark.parametrize(
    ("api", "size", "tokens"),
    [
        # OpenAI's vision guide: 1024 x 1024 is 4 tiles (765); 2048 x 4096 fits 1024 x 2048, then 768 x 1536: 6 (1105)
        ("chat.completions", (1024, 1024), 765),
        ("responses", (2048, 4096), 1105),
        ("chat.completions", (100, 80), 255),  # small: one tile, never scaled up
        # Anthropic's vision guide: 1092 x 1092 is not scaled, about 1590 tokens; 200 x 200 about 54
        ("messages", (1092, 1092), 1590),
        ("messages", (200, 200), 54),
        ("messages", (4000, 3000), 1640),  # scaled to 1568 on the long edge, then to the ~1.2 MP cap
    ],
)
def test_each_apis_published_image_rule(api: str, size: tuple[int, int], tokens: int) -> None:
    assert image_tokens(api, *size) == tokens


def test_no_rule_no_estimate() -> None:
    assert image_tokens("llama.cpp", 100, 100) is None and image_tokens("messages", 0, 10) is None
    assert tokens_for_chars(4000) == 1000 and tokens_for_chars(0) == 0


def test_the_share_of_the_input_and_of_a_reported_prefill() -> None:
    files = (AttachmentInfo("pic.png", 50_000, "image/png", 765), AttachmentInfo("a.txt", 900, "text/plain", 235))
    llama = {"llama-server": {"prompt_n": 2000, "prompt_ms": 400.0, "predicted_n": 10, "predicted_ms": 100.0}}
    cost = attachment_cost(files, 2500, server_timings(llama))
    assert cost is not None and (cost.count, cost.tokens, cost.input_tokens) == (2, 1000, 2500)
    assert cost.share == pytest.approx(0.4)
    assert cost.prefill_ms == pytest.approx(200.0) and cost.prefill_source == "llama-server"  # 1000 of 2000 prefilled
    hosted = attachment_cost(files, 2500)
    assert hosted is not None and hosted.prefill_ms is None  # no server figure, no time claimed


def test_an_estimate_never_exceeds_what_the_server_counted() -> None:
    cost = attachment_cost((AttachmentInfo("big.png", 9, "image/png", 1590),), 12)
    assert cost is not None and cost.tokens == 12 and cost.share == 1.0
    unknown = attachment_cost((AttachmentInfo("p.png", 9, "image/png", None),), 12)
    assert unknown is not None and unknown.tokens is None and unknown.share is None
    assert attachment_cost((), 12) is None


def test_sizes_read_as_vendors_state_limits() -> None:
    assert [fmt_size(n) for n in (149, 3_100, 1_234_567, 20_000_000)] == ["149 bytes", "3 KB", "1.2 MB", "20.0 MB"]
