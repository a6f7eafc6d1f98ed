"""backends.load.cluster.address: --cluster's value, and the bounded check that something answers there."""

from __future__ import annotations

import socket

import pytest
from ttft.backends.load.cluster.address import (
    ClusterAddress,
    endpoint,
    is_loopback,
    loopback_elsewhere,
    parse,
    unreachable,
)


@pytest.mark.parametrize(
    ("text", "local"),
    [("local:1", 1), ("local:2", 2), ("auto", None), ("10.0.0.5:6379", None), ("ray://head.svc:10001", None)],
)
def test_addresses_that_read(text: str, local: int | None) -> None:
    address = parse(text)
    assert address.text == text and address.local_nodes == local and address.local == (local is not None)


@pytest.mark.parametrize("text", ["local:0", "local:", "local:x", "local:99", "head", "http://h:1", "h:port", ""])
def test_addresses_that_do_not_read_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"local:N|expected auto"):
        parse(text)


def test_auto_honours_ray_address_and_nothing_else_does() -> None:
    assert ClusterAddress("auto").resolve({"RAY_ADDRESS": "10.0.0.5:6379"}) == "10.0.0.5:6379"
    assert ClusterAddress("auto").resolve({}) == "auto"
    assert ClusterAddress("h:1").resolve({"RAY_ADDRESS": "10.0.0.5:6379"}) == "h:1"


def test_endpoints() -> None:
    assert endpoint("ray://user:pw@head:10001") == ("head", 10001)
    assert endpoint("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert endpoint("[::1]:6379") == ("::1", 6379)
    assert endpoint("auto") is None and endpoint("h:99999") is None


def test_a_closed_port_is_unreachable_at_once_and_an_open_one_is_not() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert unreachable(f"127.0.0.1:{port}") is None
    why = unreachable(f"127.0.0.1:{port}", timeout_s=2)
    assert why is not None and "refused" in why.lower()
    assert unreachable("auto") is None  # no endpoint to try: Ray's own look-up says


@pytest.mark.parametrize(
    ("host", "loop"),
    [
        *[("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("::ffff:127.0.0.1", True), ("localhost", True)],
        *[("10.0.0.1", False), ("::ffff:10.0.0.1", False), ("vllm.svc", False), (None, False)],
    ],
)
def test_loopback(host: str | None, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_a_loopback_server_is_said_once_drivers_run_on_other_hosts() -> None:
    """``--cluster auto`` names no address before Ray connects: the check is on the drivers' hosts, once placed."""
    said = loopback_elsewhere("http://127.0.0.1:8000/v1", ["head", "gpu-1", "gpu-2", "gpu-3", "gpu-4"], "head")
    assert said is not None
    assert said.startswith("the server is at 127.0.0.1, but drivers run on gpu-1, gpu-2, gpu-3 and 1 more")
    assert loopback_elsewhere("http://localhost:8000/v1", ["head", "head"], "head") is None  # all here: local:N
    assert loopback_elsewhere("http://10.0.0.5:8000/v1", ["gpu-1"], "head") is None  # an address nodes share
    assert loopback_elsewhere(None, ["gpu-1"], "head") is None
