"""The cluster driver's hand-over of batches: matched by level, whatever order Ray runs the calls in."""

from __future__ import annotations

import threading
import time

from ttft.backends.load.cluster.driver import Batch, Driver


def bare_driver(held: list[Batch]) -> Driver:
    """A driver with only its hand-over state (no Ray, no loop): ``take`` and ``_publish`` use nothing else."""
    d = Driver.__new__(Driver)
    d._cond = threading.Condition()
    d._batches = list(held)
    d._seq = max((b.seq for b in held), default=0)
    d._progress = None
    return d


def test_a_take_before_its_levels_start_never_gets_the_previous_levels_last_batch() -> None:
    # The warm-up's last batch is still held (the head stopped polling when it saw it); a threaded actor
    # may run the next level's first take before that level's start clears it.
    d = bare_driver([Batch(7, [{"n": 1}], key="run-0", last=True)])
    assert d.take("run-1", 0, 0.05) == []  # waited, and found nothing of its level
    d._publish("run-1", [{"n": 2}])
    got = d.take("run-1", 0, 0.05)
    assert [(b.seq, b.key, b.records, b.last) for b in got] == [(8, "run-1", [{"n": 2}], False)]


def test_a_waiting_take_wakes_on_its_levels_first_batch() -> None:
    d = bare_driver([Batch(3, [], key="run-0", last=True)])
    threading.Timer(0.2, lambda: d._publish("run-1", [{"n": 1}], last=True)).start()
    t0 = time.monotonic()
    got = d.take("run-1", 0, 30.0)
    assert [b.key for b in got] == ["run-1"] and got[0].last
    assert time.monotonic() - t0 < 20.0  # woken by the batch, not by the wait's end


def test_acknowledged_batches_are_dropped_and_the_rest_come_again() -> None:
    d = bare_driver([])
    for i in range(3):
        d._publish("run-1", [{"n": i}])
    assert [b.seq for b in d.take("run-1", 0, 0.0)] == [1, 2, 3]
    assert [b.seq for b in d.take("run-1", 2, 0.0)] == [3]  # a reply lost after 2: 3 is sent again
    assert [b.seq for b in d._batches] == [3]
