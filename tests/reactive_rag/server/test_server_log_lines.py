"""Access-log lines: a token never appears, and no request can forge a line."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from reactive_rag.server._redact import RedactingAccessLogger


def _line(path: str, caplog: pytest.LogCaptureFixture) -> str:
    logger = logging.getLogger("test.access")
    caplog.set_level(logging.INFO, logger="test.access")
    caplog.clear()
    RedactingAccessLogger(logger, "").log(make_mocked_request("GET", path),
                                          web.Response(status=200), 0.01)
    (record,) = caplog.records
    return record.getMessage()


def test_a_query_value_with_newlines_stays_on_one_escaped_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = _line("/v1/runs?limit=5%0A127.0.0.1%20%22GET%20/admin%22%20200", caplog)
    assert "\n" not in line and "\\n127.0.0.1" in line


def test_an_access_token_is_masked_and_plain_lines_are_unchanged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = _line("/v1/runs/abc/events?access_token=s3cr3t&after=4", caplog)
    assert "s3cr3t" not in line
    assert '"GET /v1/runs/abc/events?access_token=***&after=4" 200' in line
