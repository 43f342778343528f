"""A scraped page as citable evidence: stable chunk ids, neighbours, fingerprints."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

from streams import EvidenceChunk

from ..text import chunk_text, simhash64, url_key

__all__ = ["ScrapedPage", "page_chunks", "page_doc_id", "text_fingerprint"]


@dataclass(frozen=True)
class ScrapedPage:
    """A fetched and extracted page.

    Attributes:
        url: the URL asked for; ``final_url``: where redirects ended.
        doc_id: stable id derived from the normalised URL (same page, same id, every run).
        chunks: overlapping passages with ``prev_id``/``next_id`` neighbours.

    ``fingerprints`` (64-bit SimHash per chunk) and ``fingerprint`` (of the whole
    text: mirrors and syndicated copies collide) are computed on first use; the
    scrape path does not pay for them when nobody asks.
    """

    url: str
    final_url: str
    title: str
    text: str
    doc_id: str
    chunks: tuple[EvidenceChunk, ...]
    extractor: str

    @cached_property
    def fingerprints(self) -> tuple[int, ...]:
        """64-bit SimHash of each chunk, in chunk order."""
        return tuple(int(x) for x in simhash64([c.text for c in self.chunks]))

    @cached_property
    def fingerprint(self) -> int:
        """64-bit SimHash of the whole extracted text."""
        return text_fingerprint(self.text)


def page_doc_id(url: str) -> str:
    """``web:`` + a hash of the normalised URL, so ids are stable across runs."""
    digest = hashlib.blake2b(url_key(url).encode("utf-8"), digest_size=8).hexdigest()
    return f"web:{digest}"


def page_chunks(
    url: str,
    title: str,
    text: str,
    *,
    target_words: int = 220,
    overlap_ratio: float = 0.1,
    max_chunks: int = 200,
    source: str = "scraper",
) -> tuple[EvidenceChunk, ...]:
    """Split ``text`` into overlapping evidence chunks linked to their neighbours.

    Chunk ids are ``{doc_id}#{position}``: derived from the normalised URL and
    the position, so the same page yields the same ids in every run.
    """
    doc_id = page_doc_id(url)
    pieces = chunk_text(text, target_words=target_words, overlap_ratio=overlap_ratio)
    pieces = pieces[:max_chunks]
    ids = [f"{doc_id}#{i}" for i in range(len(pieces))]
    return tuple(
        EvidenceChunk(
            id=ids[i],
            text=piece.text,
            doc_id=doc_id,
            url=url,
            title=title,
            position=i,
            prev_id=ids[i - 1] if i > 0 else None,
            next_id=ids[i + 1] if i + 1 < len(ids) else None,
            source=source,
        )
        for i, piece in enumerate(pieces)
    )


def text_fingerprint(text: str) -> int:
    """64-bit SimHash of a text (near-duplicate pages have close fingerprints)."""
    return int(simhash64([text])[0])
