"""backends.load.cluster.local's reaper: a throwaway cluster never outlives the bench that started it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
from ttft.backends.load.cluster.local import reap


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_nodes_of_a_bench_that_died_are_ended_and_their_files_removed(tmp_path: Path) -> None:
    temp = tmp_path / "ray"
    temp.mkdir()
    node = subprocess.Popen(["sleep", "600"], start_new_session=True)  # a node: a session of its own
    (temp / "sessions").write_text(str(node.pid))
    reap(_gone_pid(), temp)
    node.wait(timeout=10)  # it ended (the reaper may have collected its status first: no -9 to read here)
    assert not psutil.pid_exists(node.pid)
    assert not temp.exists()


def test_a_cluster_stopped_as_it_should_be_is_left_alone(tmp_path: Path) -> None:
    node = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        reap(_gone_pid(), tmp_path / "removed-by-stop")  # its folder is gone: the bench stopped it itself
        assert node.poll() is None
    finally:
        node.kill()
        node.wait()
