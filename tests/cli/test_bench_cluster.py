"""``ttft bench --cluster``: the load drivers on a real Ray cluster, inside a network namespace of loopback only.

Ray binds every interface, so every run here goes into a namespace the test makes (``unshare -n``,
``ip link set lo up``) with the fake server beside it, and a watch inside samples every socket during
the run. Where no namespace can be made the tests skip, saying why. Ray takes seconds per node to start
on 2 shared cores: one two-node cluster (``backends.load.cluster.local``) serves the module's runs, and
the test that kills one of its nodes comes last.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.merge import Part, union_level
from ttft.telemetry.bench.requests import measured, read_bench
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.support.netns import LoopbackNamespace, SocketWatch, why_not
from tests.support.paths import ROOT

# The fake's schedule: every token after the first comes TOKEN_MS * (1 + ALPHA * (active - 1)) later.
TOKEN_MS, ALPHA, PREFILL_MS, TOKENS, PORT = 10.0, 0.05, 20.0, 32, 8123
SCHEDULE = BatchingServer(slots=16, token_ms=TOKEN_MS, alpha=ALPHA, prefill_ms=PREFILL_MS)
URL = f"http://127.0.0.1:{PORT}/v1"
SCHEDULE_FLAGS = ["--token-ms", str(TOKEN_MS), "--alpha", str(ALPHA), "--prefill-ms", str(PREFILL_MS)]

HAS_RAY = importlib.util.find_spec("ray") is not None
WHY_NOT = why_not() if HAS_RAY else None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install 'ttft[cluster]')")
needs_namespace = pytest.mark.skipif(
    not HAS_RAY or WHY_NOT is not None,
    reason="Ray is not installed" if not HAS_RAY else f"no loopback-only network namespace: {WHY_NOT}",
)


@pytest.fixture(scope="module")
def ns() -> Iterator[LoopbackNamespace]:
    """The namespace, with the batching fake serving in it."""
    with LoopbackNamespace() as space:
        assert space.interfaces() == ["lo"], "the namespace holds loopback alone"
        fake = space.popen(
            [
                sys.executable,
                "-m",
                "tests.fakes.batching_server",
                "--port",
                str(PORT),
                "--slots",
                "16",
                *SCHEDULE_FLAGS,
            ],
            stdout=subprocess.PIPE,
        )
        assert fake.stdout is not None and "batching fake on" in fake.stdout.readline()
        yield space


@pytest.fixture(scope="module")
def cluster(ns: LoopbackNamespace) -> Iterator[dict[str, Any]]:
    """Two Ray nodes held for the module's runs: ``address`` and each node's process ``sessions``."""
    holder = ns.popen(
        [sys.executable, "-m", "ttft.backends.load.cluster.local", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    line = holder.stdout.readline()
    assert line, "the local cluster did not start"
    yield json.loads(line)
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=60)


def bench(ns: LoopbackNamespace, out: Path, *flags: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:batching-fake", "--base-url", URL]
    argv += ["--max-output-tokens", str(TOKENS), "--input-tokens", "16", "--out", str(out), *flags]
    env = {**os.environ, "TTFT_DATA_DIR": str(out.parent / "data"), "PYTHONPATH": str(ROOT)}
    return ns.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def records(out: Path) -> list[dict[str, Any]]:
    """The run's turns.jsonl as far as it is written (complete lines only)."""
    path = out / "turns.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(line) for line in lines if line]


def by_node(recs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    nodes: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        if not r["extra"]["bench"]["warmup"]:
            nodes.setdefault(r["extra"]["bench"]["node"], []).append(r)
    return nodes


def wait_for(what: Any, timeout: float, proc: subprocess.Popen[str], out: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, f"the bench ended first: {proc.communicate()}{seen(out)}"
        if time.monotonic() >= deadline:
            proc.send_signal(signal.SIGINT)
            raise AssertionError(f"timed out{seen(out)}\nthe bench said: {proc.communicate(timeout=60)}")
        time.sleep(0.2)


def seen(out: Path | None) -> str:
    """What the run's folder held: the records per node, and Ray's own log's end (for a failure's message)."""
    if out is None:
        return ""
    counts = {node: len(recs) for node, recs in by_node(records(out)).items()}
    log = out / "ray.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no ray.log)"
    return f"\nrecords per node: {counts}\nray.log ends:\n{tail}"


def ray_drivers(ns: LoopbackNamespace) -> list[str]:
    names = []
    for p in ns.processes():
        try:
            names.append(p.name())
        except psutil.Error:
            continue
    return [n for n in names if n.startswith("ray::Driver")]


@needs_namespace
def test_local_two_node_cluster_runs_40_of_40_on_loopback(ns: LoopbackNamespace, tmp_path: Path) -> None:
    """The issue's run: --cluster local:2 starts its own cluster, both nodes drive, TPOT on schedule, all loopback."""
    watch = SocketWatch(ns)
    out = tmp_path / "run"
    rc, stdout, stderr = finish(bench(ns, out, "--cluster", "local:2", "--concurrency", "8", "--requests", "40"))
    seen = watch.stop()
    assert rc == Exit.OK, stderr
    summary = json.loads((out / "summary.json").read_text())
    cluster = summary["cluster"]
    assert cluster["engine"] == "ray" and cluster["version"].startswith("2.")
    assert len(cluster["nodes"]) == 2 and all(n["workers"] >= 1 for n in cluster["nodes"])
    assert cluster["workers"] == 2 and cluster["lost"] == []
    level = summary["details"][0]
    assert (level["requests"], level["completed"], level["failed"]) == (40, 40, 0)
    assert sorted(n["received"] for n in level["nodes"]) == [20, 20]
    expected = SCHEDULE.expected(8, TOKENS).tpot_ms
    assert abs(level["tpot_ms"]["p50"] - expected) <= 0.3, (level["tpot_ms"], expected)
    # the drivers' streaming: every record is in turns.jsonl, tagged with the node that sent it
    recs = records(out)
    assert sorted(len(v) for v in by_node(recs).values()) == [20, 20]
    # the level table names the busiest node's client
    assert "busiest" in stdout and "on 2 nodes" in stderr
    # nothing left the namespace's loopback, and the watch saw Ray's own sockets
    assert seen.off_loopback == [], seen.off_loopback
    assert {"raylet", "gcs_server"} <= set(seen.processes), seen.processes
    assert seen.remotes > 10
    assert not ray_drivers(ns) and not [p for p in ns.processes() if _name(p) in ("raylet", "gcs_server")]


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


@needs_namespace
def test_merged_figures_are_the_union_of_the_nodes_records(
    ns: LoopbackNamespace, cluster: dict[str, Any], tmp_path: Path
) -> None:
    """Against the held cluster: counts and percentiles in summary.json equal those of every record in turns.jsonl,
    taken as report --merge takes them; TPOT and TTFT agree with a single-process run of the same load."""
    single = tmp_path / "single"
    rc, _, stderr = finish(bench(ns, single, "--concurrency", "8", "--requests", "40"))
    assert rc == Exit.OK, stderr
    out = tmp_path / "cluster"
    rc, _, stderr = finish(bench(ns, out, "--cluster", cluster["address"], "--concurrency", "8", "--requests", "40"))
    assert rc == Exit.OK, stderr
    level = json.loads((out / "summary.json").read_text())["details"][0]
    nodes = by_node(records(out))
    assert len(nodes) == 2
    parts = [Part(n, 4, measured(read_bench(rs).turns)) for n, rs in nodes.items()]
    union = union_level("concurrency", parts)
    again = aggregate_level(union.turns, level=union.level, mode="concurrency")
    assert level["level"] == 8 and union.level == 8
    for key in ("requests", "completed", "failed", "total_output_tokens", "duration_s", "output_throughput"):
        assert level[key] == again[key], key
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for p in ("p50", "p90", "p99", "min", "max"):
            assert level[metric][p] == again[metric][p], (metric, p)
    one = json.loads((single / "summary.json").read_text())["details"][0]
    assert abs(level["tpot_ms"]["p50"] - one["tpot_ms"]["p50"]) <= 0.3, (level["tpot_ms"], one["tpot_ms"])
    # TTFT is the fake's prefill plus loopback and a loaded scheduler: a sanity bound only (the benchmark,
    # tests/benchmarks/cluster_fidelity.py, measures the difference: a few ms on 2 busy cores)
    assert abs(level["ttft_ms"]["p50"] - one["ttft_ms"]["p50"]) <= max(30.0, 0.5 * one["ttft_ms"]["p50"])


@needs_namespace
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, Exit.INTERRUPTED), (signal.SIGTERM, Exit.TERMINATED)])
def test_ctrl_c_stops_every_driver_and_keeps_what_arrived(
    ns: LoopbackNamespace, cluster: dict[str, Any], tmp_path: Path, signum: int, code: int
) -> None:
    """Ctrl-C, and SIGTERM as tui.signals makes it (Ray's core worker puts its own handler there: put back)."""
    out = tmp_path / "run"
    # More requests than the wait can see done (the fake's schedule holds 8 streams to about 18 requests/s,
    # so 4,000 take over 200 s on any machine): the signal always comes mid-level, never after it.
    proc = bench(ns, out, "--cluster", cluster["address"], "--concurrency", "8", "--requests", "4000")
    # turns.jsonl grows while the level runs: batches from both nodes, well before the level's end
    wait_for(lambda: len(by_node(records(out))) == 2 and len(records(out)) >= 24, 180, proc, out)
    before = len(records(out))
    proc.send_signal(signum)
    rc, _, stderr = finish(proc, timeout=60)
    assert rc == code, stderr
    assert "Traceback" not in stderr
    kept = records(out)
    assert len(kept) >= before and len(by_node(kept)) == 2
    assert any(r["status"] == "cancelled" for r in kept), "the streams in flight come back as cancelled"
    assert len(kept) < 4000
    deadline = time.monotonic() + 30
    while ray_drivers(ns) and time.monotonic() < deadline:  # the drivers are ended with the run
        time.sleep(0.5)
    assert not ray_drivers(ns)


@needs_namespace
def test_a_node_killed_mid_level_leaves_the_level_partial_and_the_other_node_whole(
    ns: LoopbackNamespace, cluster: dict[str, Any], tmp_path: Path
) -> None:
    """Runs last in the module: it kills the held cluster's second node."""
    out = tmp_path / "run"
    proc = bench(ns, out, "--cluster", cluster["address"], "--concurrency", "8", "--requests", "240")
    both = lambda: len(by_node(records(out))) == 2 and min(map(len, by_node(records(out)).values())) >= 16  # noqa: E731
    wait_for(both, 180, proc, out)
    for p in psutil.process_iter():  # every process of the second node: its raylet, its workers, its agents
        try:
            if os.getsid(p.pid) == cluster["sessions"][1]:
                p.kill()
        except (OSError, psutil.Error):
            continue
    rc, stdout, stderr = finish(proc)
    assert rc == Exit.PARTIAL, stderr
    summary = json.loads((out / "summary.json").read_text())
    level = summary["details"][0]
    lost = [n for n in level["nodes"] if n["lost"]]
    whole = [n for n in level["nodes"] if not n["lost"]]
    assert len(lost) == 1 and len(whole) == 1
    assert level["partial"]["lost_nodes"] == [f"{lost[0]['host']} ({lost[0]['node_id'][:8]})"]
    assert whole[0]["received"] == whole[0]["requests"] == 120, "the other node loses nothing"
    assert 16 <= lost[0]["received"] < 120
    assert level["requests"] == whole[0]["received"] + lost[0]["received"]
    assert summary["cluster"]["lost"][0]["node_id"] == lost[0]["node_id"]
    assert "PARTIAL" in stdout and "lost" in stderr
    nodes = by_node(records(out))
    assert len(nodes[whole[0]["node_id"]]) == 120 and len(nodes[lost[0]["node_id"]]) == lost[0]["received"]


@needs_ray
def test_an_unreachable_cluster_is_one_sentence_and_exit_1(tmp_path: Path) -> None:
    with BatchingServer() as srv:
        from ttft.backends.load.cluster.local import free_port

        port = free_port()  # nothing listens there
        argv = [sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:f", "--base-url", srv.base_url]
        argv += ["--cluster", f"127.0.0.1:{port}", "--out", str(tmp_path / "o"), "--requests", "2"]
        env = {**os.environ, "TTFT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == Exit.FAILED
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - t0 < 60


def test_plain_bench_never_imports_ray(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from tests.fakes.batching_server import BatchingServer\n"
        "from ttft.tui.cli import main\n"
        "with BatchingServer(token_ms=1, prefill_ms=1) as srv:\n"
        "    rc = main(['bench', '-m', 'compat:f', '--base-url', srv.base_url, '--concurrency', '2',"
        f" '--requests', '2', '--max-output-tokens', '2', '--quiet', '--out', {str(tmp_path / 'o')!r}])\n"
        "print(rc, sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    env = {**os.environ, "TTFT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr


@pytest.mark.parametrize("value", ["local:0", "local:x", "nowhere"])
def test_a_cluster_address_that_does_not_read_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ttft.tui.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "-m", "compat:f", "--base-url", "http://127.0.0.1:9/v1", "--cluster", value])
    assert exc.value.code == Exit.USAGE
    assert "--cluster" in capsys.readouterr().err


def test_cluster_and_start_at_do_not_go_together(tmp_path: Path) -> None:
    # In a process of its own: another test of the run may have imported Ray into this one.
    argv = ["bench", "-m", "compat:f", "--base-url", "http://127.0.0.1:9/v1", "--cluster", "local:2"]
    argv += ["--start-at", str(int(time.time()) + 60), "--out", str(tmp_path / "o")]
    code = f"import sys; from ttft.tui.cli import main; rc = main({argv!r}); print(rc, 'ray' in sys.modules)"
    env = {**os.environ, "TTFT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == [str(int(Exit.USAGE)), "False"], done  # refused before anything reached for Ray
    assert "leave out --start-at" in done.stderr


def test_the_table_names_the_busiest_node_and_the_progress_line_the_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    from ttft.backends.load.outcome import Progress
    from ttft.telemetry.bench.cluster import Node, Share, level_figures
    from ttft.tui.commands.bench.output import ProgressLine, level_row

    health = {"cpu_percent": 41.0, "loop_lag_ms": {"p99": 2.5}}
    figures, _ = level_figures("concurrency", [Share(Node("c" * 56, "gpu-7\x1b[2J"), 1, 4, 4, [], health)])
    row = level_row(figures)
    assert row.endswith("lag 2.5ms cpu 41% busiest gpu-7\u241b[2J (cccccccc)")  # a node's name is shown, never run
    assert "\x1b" not in row
    ProgressLine(quiet=False)(Progress("concurrency", 8, 0, 1, 8, 8, 0, 0, 1.0, nodes=2))
    assert "0 in flight on 2 nodes" in capsys.readouterr().err
