"""Errors of the safe scraper: every refusal or cut is a typed error, never a hang.

Hierarchy::

    ScrapeError                                   root; carries the URL it concerns
    ├── BlockedAddress (PermissionError)          SSRF guard: a private/reserved/not-allowed address
    ├── BlockedScheme (PermissionError)           not http/https (file:, ftp:, gopher:, data:...)
    ├── TooManyRedirects                          redirect cap reached, or a redirect loop
    ├── BodyTooLarge                              byte cap reached (decompressed bytes count)
    ├── UnsupportedContentType                    content type (or encoding) not on the allowlist
    ├── FetchTimeout (TimeoutError)               the fetch's total deadline passed (slow drip too)
    ├── FetchFailed                               HTTP error status or a broken connection
    └── ExtractionFailed                          the page had no text we could extract

``retryable`` tells the planner whether asking again can help (timeouts, 5xx, 429).
"""

from __future__ import annotations

__all__ = [
    "BlockedAddress",
    "BlockedScheme",
    "BodyTooLarge",
    "ExtractionFailed",
    "FetchFailed",
    "FetchTimeout",
    "ScrapeError",
    "TooManyRedirects",
    "UnsupportedContentType",
]


class ScrapeError(Exception):
    """Root of every scraper error."""

    retryable: bool = False

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class BlockedAddress(ScrapeError, PermissionError):
    """The URL's host is (or resolves to) an address the SSRF guard refuses."""


class BlockedScheme(ScrapeError, PermissionError):
    """The URL's scheme is not http or https."""


class TooManyRedirects(ScrapeError):
    """More redirects than the cap allows, or a redirect loop."""


class BodyTooLarge(ScrapeError):
    """The body (after decompression) exceeded the byte cap; it was cut, not read."""


class UnsupportedContentType(ScrapeError):
    """The response's content type or content encoding is not on the allowlist."""


class FetchTimeout(ScrapeError, TimeoutError):
    """The fetch did not complete within its total deadline."""

    retryable = True


class FetchFailed(ScrapeError):
    """The server answered with an error status, or the connection broke.

    Attributes:
        status: the HTTP status, or ``None`` when no response arrived.
    """

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status
        self.retryable = status is None or status == 429 or status >= 500


class ExtractionFailed(ScrapeError):
    """The page was fetched but no main text could be extracted from it."""
