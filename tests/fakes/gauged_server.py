"""TEST FIXTURE: the batching fake with the server's own gauges, a Prometheus ``GET /metrics``.

``GaugedServer`` is :class:`tests.fakes.batching_server.BatchingServer` (slots, a FIFO queue past
them, decode slowing with the batch) that also publishes what a serving engine says of itself, in
the names of one of the servers ``telemetry.server.gauges`` maps (``dialect``: ``"vllm"`` by
default, ``"sglang"``, ``"llama-server"``, ``"tgi"``):

- running: requests holding a slot now; waiting: requests that arrived and wait for one;
- KV cache use: ``running * kv_per_slot`` (a share, at most 1; not for llama-server or TGI);
- prefix cache: prompt words counted as queried, ``hit_share`` of them as hits (vLLM and
  llama-server counters, SGLang's own rate).

The truth the tests compare with is kept too: ``max_waiting`` and every ``(running, waiting)`` a
``/metrics`` read answered (``reads``).

``latency=True`` (the default) adds the server's latency histograms, made and written by
``prometheus-client`` as vLLM makes and writes its own (SGLang's and TGI's names under those
dialects): each request that finishes observes its TTFT from arrival, queue (arrival to a slot),
prefill (slot to first token), decode (first to last token), each inter-token gap and its e2e, so
the buckets move as requests finish. ``observed`` keeps every request's exact figures (seconds) in
the order they finished: the truth a histogram's percentiles are held to. For vLLM, ``draft_k``
(default 0: off) adds speculative decoding's counters: each request drafts ``draft_k`` tokens per
step for ``n // 2`` steps, and ``accept_share`` of the drafted tokens are accepted.
``frontend_ms`` is a single-threaded front end: each request holds it that long before the engine
sees it (before its arrival is stamped), so concurrent requests wait for each other there, in
ttft's TTFT and in no histogram of the server's. ``restart_after=N`` starts the histograms and
counters again from zero as the request after the Nth finishes (a restarted server).

``histograms=N`` pads the text with N vLLM-shaped histograms of 30 buckets each, the bulk of a real
vLLM endpoint (for the scraper's cost). ``metrics_status`` other than 200 answers that status
instead (a server without the endpoint: 404).

As a process: ``python -m tests.fakes.gauged_server --port 8124 --slots 4 --histograms 30``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import pairwise

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tests.fakes.batching_server import BatchingServer

# vLLM's own bucket bounds (v1 metrics): TTFT's, the inter-token latency's and the request phases'.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
PHASE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
# each dialect's histogram names by kind (what the fixture writes, spelled from each server's source)
HISTOGRAM_NAMES = {
    "vllm": {
        "ttft": ("vllm:time_to_first_token_seconds", TTFT_BUCKETS),
        "queue": ("vllm:request_queue_time_seconds", PHASE_BUCKETS),
        "prefill": ("vllm:request_prefill_time_seconds", PHASE_BUCKETS),
        "decode": ("vllm:request_decode_time_seconds", PHASE_BUCKETS),
        "itl": ("vllm:inter_token_latency_seconds", ITL_BUCKETS),
        "e2e": ("vllm:e2e_request_latency_seconds", PHASE_BUCKETS),
    },
    "sglang": {
        "ttft": ("sglang:time_to_first_token_seconds", TTFT_BUCKETS),
        "queue": ("sglang:queue_time_seconds", PHASE_BUCKETS),
        "itl": ("sglang:inter_token_latency_seconds", ITL_BUCKETS),
        "e2e": ("sglang:e2e_request_latency_seconds", PHASE_BUCKETS),
    },
    "tgi": {
        "queue": ("tgi_request_queue_duration", PHASE_BUCKETS),
        "itl": ("tgi_request_mean_time_per_token_duration", ITL_BUCKETS),
        "e2e": ("tgi_request_duration", PHASE_BUCKETS),
    },
}


@dataclass(frozen=True)
class Observed:
    """One finished request's figures as the server timed them (seconds)."""

    ttft: float
    queue: float
    prefill: float
    decode: float
    e2e: float
    itl: tuple[float, ...]


BUCKETS = (*(f"{0.001 * 2**i:.4g}" for i in range(29)), "+Inf")


class GaugedServer(BatchingServer):
    thread_name = "gauged-fake"

    def __init__(
        self,
        *,
        dialect: str = "vllm",
        kv_per_slot: float = 0.2,
        hit_share: float = 0.5,
        histograms: int = 0,
        metrics_status: int = 200,
        model_name: str = "gauged-fake",
        latency: bool = True,
        frontend_ms: float = 0.0,
        restart_after: int | None = None,
        draft_k: int = 0,
        accept_share: float = 0.6,
        **batching: object,
    ) -> None:
        super().__init__(**batching)  # type: ignore[arg-type]
        self.dialect = dialect
        self.kv_per_slot = kv_per_slot
        self.hit_share = hit_share
        self.histograms = histograms
        self.metrics_status = metrics_status
        self.model_name = model_name
        self.in_flight = 0  # requests inside the handler: waiting for a slot or holding one
        self.max_waiting = 0
        self.prompt_words = 0
        self.reads: list[tuple[int, int]] = []  # (running, waiting) as each /metrics read saw them
        self.observed: list[Observed] = []
        self.frontend_ms = frontend_ms
        self.restart_after = restart_after
        self._front: asyncio.Lock | None = None
        self.draft_k = draft_k
        self.accept_share = accept_share
        self.spec = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0}  # the counters' truth
        self.registry: CollectorRegistry | None = None
        self._hist: dict[str, Histogram] = {}
        self._spec: dict[str, Counter] = {}
        if latency and dialect in HISTOGRAM_NAMES:
            self.restart_metrics()

    def restart_metrics(self) -> None:
        """New histograms and counters, from zero: what a restarted server publishes."""
        self.registry = CollectorRegistry()
        labels = ["engine", "model_name"] if self.dialect == "vllm" else ["model_name"]
        self._hist = {
            kind: Histogram(name, f"Histogram of {kind} in seconds.", labels, buckets=b, registry=self.registry)
            for kind, (name, b) in HISTOGRAM_NAMES[self.dialect].items()
        }
        self._spec = {}
        if self.dialect == "vllm" and self.draft_k:
            self._spec = {
                key: Counter(
                    f"vllm:spec_decode_num_{key}", f"Speculative decoding {key}.", labels, registry=self.registry
                )
                for key in self.spec
            }

    def _labels(self) -> dict[str, str]:
        return (
            {"engine": "0", "model_name": self.model_name}
            if self.dialect == "vllm"
            else {"model_name": self.model_name}
        )

    def finished(self, arrived: float, admitted: float, sent: list[float]) -> None:
        if not sent:
            return
        first, end = sent[0], sent[-1]
        gaps = tuple(b - a for a, b in pairwise(sent))
        o = Observed(first - arrived, admitted - arrived, first - admitted, end - first, end - arrived, gaps)
        if len(self.observed) == self.restart_after:
            self.restart_metrics()
        self.observed.append(o)
        if self._hist:
            lb = self._labels()
            for kind, h in self._hist.items():
                if kind == "itl" and self.dialect == "tgi":  # TGI: each request's mean time per token
                    if gaps:
                        h.labels(**lb).observe(sum(gaps) / len(gaps))
                elif kind == "itl":
                    for g in gaps:
                        h.labels(**lb).observe(g)
                else:
                    h.labels(**lb).observe(getattr(o, kind))
        if self._spec:
            drafts = len(sent) // 2
            drafted = drafts * self.draft_k
            accepted = round(drafted * self.accept_share)
            for key, v in (("drafts", drafts), ("draft_tokens", drafted), ("accepted_tokens", accepted)):
                self.spec[key] += v
                self._spec[key].labels(**self._labels()).inc(v)

    @property
    def waiting(self) -> int:
        return max(0, self.in_flight - self.active)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/metrics", self._metrics)
        return app

    async def setup(self) -> None:
        await super().setup()
        self._front = asyncio.Lock()  # bound to the server's loop

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.frontend_ms and self._front is not None:
            async with self._front:  # one request at a time, before the engine's clock starts
                await asyncio.sleep(self.frontend_ms / 1000)
        self.in_flight += 1
        self.max_waiting = max(self.max_waiting, self.waiting)
        try:
            resp = await super()._chat(request)
        finally:
            self.in_flight -= 1
        if self.prompts:
            self.prompt_words += len(self.prompts[-1].split())
        return resp

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics_status != 200:
            return web.Response(status=self.metrics_status, text="404: Not Found")
        self.reads.append((self.active, self.waiting))
        return web.Response(text=self.metrics_text(), content_type="text/plain")

    def metrics_text(self) -> str:
        running, waiting = self.active, self.waiting
        kv = min(1.0, running * self.kv_per_slot)
        queries = float(self.prompt_words)
        hits = round(queries * self.hit_share)
        m = f'{{model_name="{self.model_name}"}}'
        if self.dialect == "vllm":
            lines = [
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge",
                f'vllm:num_requests_running{{engine="0",model_name="{self.model_name}"}} {running}.0',
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge",
                f'vllm:num_requests_waiting{{engine="0",model_name="{self.model_name}"}} {waiting}.0',
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f'vllm:kv_cache_usage_perc{{engine="0",model_name="{self.model_name}"}} {kv}',
                "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.",
                "# TYPE vllm:prefix_cache_queries_total counter",
                f'vllm:prefix_cache_queries_total{{engine="0",model_name="{self.model_name}"}} {queries}',
                f'vllm:prefix_cache_queries_created{{engine="0",model_name="{self.model_name}"}} 1.7e9',
                "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.",
                "# TYPE vllm:prefix_cache_hits_total counter",
                f'vllm:prefix_cache_hits_total{{engine="0",model_name="{self.model_name}"}} {float(hits)}',
            ]
        elif self.dialect == "sglang":
            lines = [
                "# TYPE sglang:num_running_reqs gauge",
                f'sglang:num_running_reqs{{model_name="{self.model_name}",tp_rank="0"}} {running}.0',
                f'sglang:num_running_reqs{{model_name="{self.model_name}",tp_rank="1"}} {running}.0',
                "# TYPE sglang:num_queue_reqs gauge",
                f'sglang:num_queue_reqs{{model_name="{self.model_name}",tp_rank="0"}} {waiting}.0',
                f'sglang:num_queue_reqs{{model_name="{self.model_name}",tp_rank="1"}} {waiting}.0',
                "# TYPE sglang:token_usage gauge",
                f"sglang:token_usage{m} {kv}",
                "# TYPE sglang:cache_hit_rate gauge",
                f"sglang:cache_hit_rate{m} {self.hit_share}",
            ]
        elif self.dialect == "llama-server":
            lines = [
                "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens",
                "# TYPE llamacpp:prompt_tokens_total counter",
                f"llamacpp:prompt_tokens_total {queries - hits}",
                "# TYPE llamacpp:prompt_tokens_cached_total counter",
                f"llamacpp:prompt_tokens_cached_total {float(hits)}",
                "# TYPE llamacpp:tokens_predicted_total counter",
                f"llamacpp:tokens_predicted_total {float(self.served * self.default_tokens)}",
                "# TYPE llamacpp:requests_processing gauge",
                f"llamacpp:requests_processing {running}",
                "# TYPE llamacpp:requests_deferred gauge",
                f"llamacpp:requests_deferred {waiting}",
            ]
        elif self.dialect == "tgi":
            lines = [
                "# TYPE tgi_batch_current_size gauge",
                f"tgi_batch_current_size {running}",
                "# TYPE tgi_queue_size gauge",
                f"tgi_queue_size {waiting}",
            ]
        else:
            raise ValueError(f"no such dialect: {self.dialect}")
        for h in range(self.histograms):
            name = f"vllm:padding_latency_{h}_seconds"
            lines += [f"# HELP {name} A histogram of latency.", f"# TYPE {name} histogram"]
            label = f'model_name="{self.model_name}"'
            lines += [f'{name}_bucket{{le="{le}",{label}}} {i * 3}.0' for i, le in enumerate(BUCKETS)]
            lines += [f"{name}_sum{m} 12.5", f"{name}_count{m} 90.0", f"{name}_created{m} 1.7e9"]
        text = "\n".join(lines) + "\n"
        if self.registry is not None:
            text += generate_latest(self.registry).decode()
        return text


def main() -> None:
    import argparse
    import asyncio
    import contextlib

    p = argparse.ArgumentParser(description="TEST FIXTURE: the batching fake with a Prometheus /metrics")
    p.add_argument("--port", type=int, default=8124)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--token-ms", type=float, default=10.0)
    p.add_argument("--alpha", type=float, default=0.0)
    p.add_argument("--prefill-ms", type=float, default=20.0)
    p.add_argument("--dialect", default="vllm")
    p.add_argument("--histograms", type=int, default=0, help="vLLM-shaped histograms padding the text")
    a = p.parse_args()
    srv = GaugedServer(
        slots=a.slots, token_ms=a.token_ms, alpha=a.alpha, prefill_ms=a.prefill_ms, port=a.port,
        dialect=a.dialect, histograms=a.histograms,
    )  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(srv.serve_forever(lambda: print(f"gauged fake on {srv.base_url}", flush=True)))


if __name__ == "__main__":
    main()
