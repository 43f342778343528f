"""Secrets never reach a log line: access logs and aiohttp's own parser errors.

Browsers pass the bearer token as ``?access_token=`` in SSE/WebSocket URLs, and
a client may send an oversized ``Authorization`` header. When aiohttp's HTTP
parser rejects such a request it logs the offending bytes (in the exception
message and its traceback); :class:`SecretRedactingFilter` rewrites those
records to the error's class and a redacted message, without the traceback.
"""

from __future__ import annotations

import logging
import re

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

__all__ = ["RedactingAccessLogger", "SecretRedactingFilter", "redact_secrets"]

_SECRETS = re.compile(
    r"(access_token=)[^&\s'\"\\]+"
    r"|((?:authorization|x-api-key)\s*[:=]\s*)[^\r\n'\"\\]+"
    r"|(bearer\s+)[^\s'\"\\]+",
    re.IGNORECASE,
)


def redact_secrets(text: str) -> str:
    """``text`` with token values (query, header, bearer) replaced by ``***``."""
    return _SECRETS.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)) + "***", text)


class SecretRedactingFilter(logging.Filter):
    """Rewrites aiohttp's "Error handling request" records so no secret survives."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: " \
                         f"{redact_secrets(str(exc))}".replace("%", "%%")
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        elif isinstance(record.msg, str):
            record.msg = redact_secrets(record.getMessage()).replace("%", "%%")
            record.args = ()
        return True


def install_log_redaction() -> None:
    """Put the filter on aiohttp's server and web loggers (once)."""
    for name in ("aiohttp.server", "aiohttp.web", "aiohttp.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretRedactingFilter) for f in logger.filters):
            logger.addFilter(SecretRedactingFilter())


class RedactingAccessLogger(AbstractAccessLogger):
    """Access log lines with any ``access_token`` query value replaced by ``***``.

    Browsers pass the bearer token in the query of SSE/WebSocket URLs; it
    must never end up in a log file.
    """

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        query = "&".join(f"{k}=***" if k == "access_token" else f"{k}={v}"
                         for k, v in request.query.items())
        # Decoded values may hold newlines: escaped, so no request forges a log line.
        target = _printable(request.path + (f"?{query}" if query else ""))
        self.logger.info('%s "%s %s" %s %s %.3fs', request.remote, request.method, target,
                         response.status, response.body_length, time)


def _printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``...), on one line."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
