"""How every model prompt shows a passage: one header, one clip, one test for a stub.

The planner, the writer and the sufficiency judge show passages the same way, so a
model (and a scripted one in the benches) finds the chunk id in the same place:
``[n] [<id>] <title> (score 0.83; snippet from host)``, then the text.
"""

from __future__ import annotations

import re

from actors.text import url_host
from streams import EvidenceChunk

__all__ = ["clip_text", "is_stub", "is_web", "passage_header"]

_WORD = re.compile(r"\w+")


def is_web(chunk: EvidenceChunk) -> bool:
    """A web result (its page can be opened), not a passage of a local collection."""
    return chunk.url.lower().startswith(("http://", "https://"))


def is_stub(title: str, text: str) -> bool:
    """Empty text, or text with no word its title does not already hold."""
    words = set(_WORD.findall(text.casefold()))
    if not words:
        return True
    title_words = set(_WORD.findall(title.casefold()))
    return bool(title_words) and words <= title_words


def passage_header(number: int, chunk: EvidenceChunk) -> str:
    """``[n] [<id>] <title> (score 0.83; snippet from host)``: a passage's first line."""
    tags: list[str] = []
    if chunk.score is not None:
        tags.append(f"score {chunk.score:.2f}")
    if is_web(chunk):
        host = url_host(chunk.url)
        if chunk.snippet:
            tags.append(f"snippet from {host}" if host else "snippet")
        elif host:
            tags.append(host)
    title = f" {chunk.title}" if chunk.title else ""
    tag = f" ({'; '.join(tags)})" if tags else ""
    return f"[{number}] [{chunk.id}]{title}{tag}"


def clip_text(text: str, max_chars: int, more: str = "") -> str:
    """``text`` with whitespace collapsed, cut at a word boundary to ``max_chars``
    (``more`` is appended where it was cut)."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    return flat[:max_chars].rsplit(" ", 1)[0] + more
