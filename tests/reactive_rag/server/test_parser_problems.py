"""Requests aiohttp's HTTP parser rejects are answered as JSON problems, not text/plain.

Raw bytes over real sockets to a real ``python -m reactive_rag serve``: a bad
request line, a request line or header over the size limit (with a token in
it), too many headers, a header with invalid bytes. Each gets an
``application/problem+json`` body ``{type, title, status, code, detail}``
that does not echo the request, the connection is closed, and the server goes
on serving; no token reaches its log.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadHttpMethod,
    BadStatusLine,
    InvalidHeader,
    LineTooLong,
)

from reactive_rag.server import PROBLEM_CODES
from reactive_rag.server._problems import parser_problem

from .test_openapi_conformance import serve_process

SECRET = "s3cr3t-parser-token"


def _exchange(port: int, data: bytes) -> tuple[bytes, bool]:
    """Send ``data`` on a new connection; everything read back, and whether the server closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
    return received, True


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes, bytes]:
    """Status, headers (lower-case names), body of the first response, and what follows it."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers["content-length"])
    return int(status_line.split()[1]), headers, rest[:length], rest[length:]


def _problem(raw: bytes, status: int, code: str) -> dict[str, Any]:
    got, headers, body, _ = _parse(raw)
    assert got == status, raw
    assert headers["content-type"].startswith("application/problem+json"), raw
    problem: dict[str, Any] = json.loads(body)
    assert set(problem) == {"type", "title", "status", "code", "detail"}, problem
    assert (problem["status"], problem["code"]) == (status, code)
    assert problem["title"] == PROBLEM_CODES[code]
    assert problem["type"] == f"urn:reactive-rag:problem:{code}"
    assert SECRET not in body.decode(), body
    return problem


REJECTS = {
    "a bad request line": (b"GARBAGE\r\n\r\n", 400, "bad_request"),
    "an invalid HTTP version": (b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 400, "bad_request"),
    "a header with invalid bytes": (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n",
                                    400, "bad_request"),
    "an invalid header name": (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX B@d: v\r\n\r\n",
                               400, "bad_request"),
    "an oversized Authorization header": (
        b"GET /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + SECRET.encode() * 600 + b"\r\n\r\n", 431, "headers_too_large"),
    "an oversized request line with a query token": (
        b"GET /v1/runs?access_token=" + SECRET.encode() * 600 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        431, "headers_too_large"),
    "too many headers": (b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                         + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) + b"\r\n",
                         431, "headers_too_large"),
    "TLS on the plain port": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400,
                              "bad_request"),
}


def test_parser_rejects_are_json_problems_and_the_server_goes_on(tmp_path: Path) -> None:
    config = "build_default_corpus = false\n"
    with serve_process(tmp_path, config) as served:
        for why, (data, status, code) in REJECTS.items():
            raw, closed = _exchange(served.port, data)
            assert raw, why
            problem = _problem(raw, status, code)
            assert closed, f"{why}: the connection stays open after a parse error"
            assert problem["detail"], why
            healthy, _ = _exchange(served.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                                 b"Connection: close\r\n\r\n")
            assert _parse(healthy)[0] == 200, f"not serving after {why}"
        # a good request, then a bad one on the same keep-alive connection: each answered
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            first = b""
            while b"\r\n\r\n" not in first or len(_parse(first)[2]) < int(
                    _parse(first)[1]["content-length"]):
                first += sock.recv(65536)
            assert _parse(first)[0] == 200
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\x7fb\r\n\r\n")
            second = b""
            while chunk := sock.recv(65536):
                second += chunk
        _problem(second, 400, "bad_request")
    log = served.log()
    assert "Error handling request" in log  # aiohttp still logs each reject...
    assert SECRET not in log  # ...without the token it carried


@pytest.mark.parametrize(("exc", "status", "code"), [
    (LineTooLong(b"Bearer " + SECRET.encode(), 8190), 431, "headers_too_large"),
    (BadHttpMessage("Too many headers received"), 431, "headers_too_large"),
    (BadHttpMethod("\x16\x03\x01"), 400, "bad_request"),
    (BadStatusLine(f"GET /?access_token={SECRET} HTTP/9"), 400, "bad_request"),
    (InvalidHeader(f"Authorization: Bearer {SECRET}\x01".encode()), 400, "bad_request"),
    (BadHttpMessage(f"Invalid header value char:\n\n  b'X: {SECRET}\\x01'\n      ^"), 400,
     "bad_request"),
])
def test_parser_problem_codes_and_details_never_echo_the_request(
        exc: Exception, status: int, code: str) -> None:
    problem = parser_problem(400, exc)
    assert (problem.status, problem.code, problem.title) == (status, code, PROBLEM_CODES[code])
    assert problem.detail and SECRET not in problem.detail


def test_an_error_past_every_middleware_is_an_internal_problem() -> None:
    problem = parser_problem(500, RuntimeError("boom"))
    assert (problem.status, problem.code) == (500, "internal")
    assert "boom" not in problem.detail
