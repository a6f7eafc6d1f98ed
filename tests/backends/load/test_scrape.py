"""The server's /metrics over HTTP: the endpoint beside an API, one read and its reasons, and the bench's
scraper beside a level, against the loopback gauged fake (the batching fake with a vLLM-style /metrics)."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator

import pytest
from ttft.backends.load.driver import LoadConfig
from ttft.backends.load.runner import LoadRunner
from ttft.backends.load.scrape import LevelScraper, scraped
from ttft.backends.providers.registry import create_backend
from ttft.backends.transport.prometheus import MetricsEndpoint, MetricsUnavailable, metrics_url
from ttft.telemetry.server.gauges import level_summary

from tests.fakes.gauged_server import GaugedServer


@pytest.mark.parametrize(
    ("base", "want"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/metrics"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/metrics"),
        ("https://gpu.example/serve/v1?api-key=SECRET", "https://gpu.example/serve/metrics"),
        ("http://user:pw@10.0.0.2:30000", "http://10.0.0.2:30000/metrics"),
    ],
)
def test_metrics_url_is_beside_the_api_without_credentials_or_query(base: str, want: str) -> None:
    assert metrics_url(base) == want


def test_probe_learns_the_server_and_reads_its_gauges() -> None:
    with GaugedServer(slots=2) as srv:
        e = MetricsEndpoint(srv.url + "/metrics")
        first = e.probe()
        assert e.dialect is not None and e.dialect.name == "vllm"
        assert (first.reading.running, first.reading.waiting) == (0.0, 0.0)
        assert e.read().t_ns > first.t_ns


class _Plain(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        if self.status in (301, 302):
            self.send_header("Location", "http://127.0.0.1:9/metrics")  # loopback even if followed
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def plain() -> Iterator[type[_Plain]]:
    class Handler(_Plain):
        pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Handler.url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"  # type: ignore[attr-defined]
    try:
        yield Handler
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (404, b"not here", "answered HTTP 404"),
        (302, b"", "answered HTTP 302"),  # a redirect is said, never followed
        (200, b"<html><body>hello</body></html>", "is not a Prometheus endpoint"),
        (200, b"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n", "none of the gauges"),
        (200, b'vllm:num_requests_running{a="1" 3\n', "is not a Prometheus endpoint"),
    ],
)
def test_an_endpoint_without_gauges_is_a_reason(plain: type[_Plain], status: int, body: bytes, words: str) -> None:
    plain.status, plain.body = status, body
    e = MetricsEndpoint(plain.url)  # type: ignore[attr-defined]
    with pytest.raises(MetricsUnavailable, match=words):
        e.probe()
    assert e.dialect is None


def test_a_closed_port_is_a_reason_with_no_credentials_in_it() -> None:
    from ttft.backends.local.llama_server import free_port

    e = MetricsEndpoint(f"http://user:SECRET@127.0.0.1:{free_port()}/metrics", timeout_s=2)
    with pytest.raises(MetricsUnavailable, match="could not be reached") as info:
        e.probe()
    assert "SECRET" not in str(info.value)


def test_the_scraper_reads_during_the_level_and_frames_it() -> None:
    with GaugedServer(slots=1, token_ms=20, prefill_ms=5) as srv:
        e = MetricsEndpoint(srv.url + "/metrics")
        e.probe()
        scraper = LevelScraper(e, interval_s=0.05)
        scraper.start()
        import urllib.request

        def chat() -> None:
            body = b'{"model":"m","stream":true,"max_tokens":15,"messages":[{"role":"user","content":"hi"}]}'
            req = urllib.request.Request(srv.base_url + "/chat/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req) as r:
                r.read()

        users = [threading.Thread(target=chat) for _ in range(3)]
        for u in users:
            u.start()
        for u in users:
            u.join()
        level = scraper.stop()
        assert scraper.stop() is None  # stopped once
    assert level is not None and level.before is not None and level.after is not None
    assert len(level.during) >= 5  # ~0.9 s of answers every 50 ms (generous: the machine is shared)
    s = level_summary(level)
    assert s["running"]["max"] == 1.0  # one slot
    assert s["waiting"]["max"] >= 1.0  # three users for one slot: the queue was seen
    assert s["waiting"]["max"] <= srv.max_waiting  # never more than the fake really held
    assert s["prefix_cache_hit_rate"] == pytest.approx(0.5, abs=0.2)


async def test_each_level_is_scraped_beside_it_and_the_warm_up_is_not() -> None:
    with GaugedServer(slots=2, token_ms=10, prefill_ms=5, default_tokens=8) as srv:
        e = MetricsEndpoint(srv.url + "/metrics")
        await asyncio.to_thread(e.probe)
        scraper = LevelScraper(e, interval_s=0.02)
        backend = create_backend("compat:gauged-fake", base_url=srv.base_url, lean=True)
        cfg = LoadConfig(levels=(1, 4), requests=8, warmup=1, max_output_tokens=8, input_tokens=16)
        try:
            async with LoadRunner(cfg, backend=backend) as runner:
                reads_before_warmup = len(srv.reads)
                warm = await runner.warmup()
                assert warm is not None and len(srv.reads) == reads_before_warmup
                (_, one), (_, four) = await scraped(scraper, runner.level(0)), await scraped(scraper, runner.level(1))
        finally:
            await backend.aclose()
    assert one is not None and four is not None
    s1, s4 = level_summary(one), level_summary(four)
    # one user never queues (a read can land while its request is being admitted: counted waiting, as a real
    # server counts it until scheduled); four users on two slots keep about two waiting
    assert s1["waiting"]["mean"] < 0.3
    assert s4["running"]["max"] == 2.0 and s4["waiting"]["mean"] > 1.0


async def test_a_level_cut_short_leaves_the_scraper_ready_for_the_next() -> None:
    from ttft.backends.load.outcome import LevelCancelled

    with GaugedServer(slots=1, token_ms=30, prefill_ms=5, default_tokens=20) as srv:
        e = MetricsEndpoint(srv.url + "/metrics")
        await asyncio.to_thread(e.probe)
        scraper = LevelScraper(e, interval_s=0.02)
        backend = create_backend("compat:gauged-fake", base_url=srv.base_url, lean=True)
        cfg = LoadConfig(levels=(2, 1), requests=4, warmup=0, max_output_tokens=20, input_tokens=8)
        try:
            async with LoadRunner(cfg, backend=backend) as runner:
                task = asyncio.create_task(scraped(scraper, runner.level(0)))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(LevelCancelled):
                    await task
                assert scraper.stop() is None  # abandoned: nothing left running
                reads = len(srv.reads)
                await asyncio.sleep(0.1)
                assert len(srv.reads) <= reads + 1  # the abandoned thread stopped (one read may have been in flight)
                cfg2 = LoadConfig(levels=(1,), requests=1, warmup=0, max_output_tokens=4, input_tokens=8)
                runner.cfg = cfg2
                _, again = await scraped(scraper, runner.level(0))
        finally:
            await backend.aclose()
    assert again is not None and again.before is not None and again.after is not None
