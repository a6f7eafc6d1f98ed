"""The fake LLM server over HTTPS, with a certificate made for the test, and chosen response headers.

``FakeServer`` (tests/fakes) speaks every API on a schedule; this one does the same behind
TLS on 127.0.0.1, so a client pays a real handshake on a new connection. The certificate
is self-signed for ``localhost`` and ``127.0.0.1``, made by the ``openssl`` command (the
``cryptography`` package is not installed here) into a temporary folder; clients trust it
through ``SSL_CERT_FILE``, as a user behind a corporate CA does::

    with TLSFakeServer(Schedule(headers_ms=150, first_token_ms=230)) as srv:
        monkeypatch.setenv("SSL_CERT_FILE", srv.ca_file)
        srv.response_headers["x-request-id"] = "req_123"
        ... srv.openai_base_url  # https://127.0.0.1:PORT/v1

``response_headers`` go on every response (request ids, ``openai-processing-ms``,
``x-ratelimit-*``), set before its headers are sent. ``connections`` counts the TCP
connections that carried a response, to tell a reused connection from a new one.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path

from aiohttp import web

from tests.fakes import FakeServer, Schedule


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key for localhost / 127.0.0.1; returns (cert, key)."""
    if shutil.which("openssl") is None:  # pragma: no cover - every CI image here has it
        raise RuntimeError("the openssl command is needed to make the test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:TRUE",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    return cert, key


class TLSFakeServer(FakeServer):
    thread_name = "fake-tls"

    def __init__(self, schedule: Schedule | None = None) -> None:
        super().__init__(schedule)
        self._dir = tempfile.TemporaryDirectory(prefix="ttft-tls-")
        self.cert_file, self.key_file = make_certificate(Path(self._dir.name))
        self.response_headers: dict[str, str] = {}
        self._transports: set[object] = set()  # one per TCP connection a response went out on

    @property
    def connections(self) -> int:
        """TCP connections that carried a response so far."""
        return len(self._transports)

    @property
    def ca_file(self) -> str:
        return str(self.cert_file)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def app(self) -> web.Application:
        async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
            if request.transport is not None:
                self._transports.add(request.transport)
            response.headers.update(self.response_headers)

        app = super().app()
        app.on_response_prepare.append(add_headers)
        return app

    def stop(self) -> None:
        super().stop()
        self._dir.cleanup()
