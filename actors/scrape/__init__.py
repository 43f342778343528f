"""The safe scraper: SSRF-guarded fetching, HTML to text, chunks as evidence."""

from ._exceptions import (
    BlockedAddress,
    BlockedScheme,
    BodyTooLarge,
    ExtractionFailed,
    FetchFailed,
    FetchTimeout,
    ScrapeError,
    TooManyRedirects,
    UnsupportedContentType,
)
from ._extract import Extracted, ExtractorName, extract_html
from ._fetch import FetchConfig, FetchedPage, Fetcher
from ._guard import GuardedResolver, UrlGuard, is_public_address
from ._page import ScrapedPage, page_chunks, page_doc_id
from ._scraper_actor import ScrapeConfig, Scraper, ScraperActor

__all__ = [
    "BlockedAddress",
    "BlockedScheme",
    "BodyTooLarge",
    "Extracted",
    "ExtractionFailed",
    "ExtractorName",
    "FetchConfig",
    "FetchFailed",
    "FetchTimeout",
    "FetchedPage",
    "Fetcher",
    "GuardedResolver",
    "ScrapeConfig",
    "ScrapeError",
    "ScrapedPage",
    "Scraper",
    "ScraperActor",
    "TooManyRedirects",
    "UnsupportedContentType",
    "UrlGuard",
    "extract_html",
    "is_public_address",
    "page_chunks",
    "page_doc_id",
]
