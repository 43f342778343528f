"""Documents and the loaders that turn files into them.

A document is the unit of incremental re-indexing: its content hash decides
whether its chunks and vectors can be reused from the previous generation.
Loaders keep the source's structure (Markdown as written, an HTML page's body
as HTML without its scripts and page furniture); the indexer cleans every
document's markup the same way when it chunks it (``clean_markup``), whatever
loader made it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from actors.text import clean_markup

from ._decode import BINARY_SUFFIXES, SNIFF_BYTES, decode_text, looks_binary
from ._exceptions import DocumentLoadError

__all__ = ["SUPPORTED_SUFFIXES", "Document", "load_file"]

#: File suffixes ``load_file`` and ``load_folder`` read (``.pdf`` only when ``pypdf`` is installed).
SUPPORTED_SUFFIXES: tuple[str, ...] = (
    ".txt", ".md", ".markdown", ".rst", ".html", ".htm", ".pdf",
)


@dataclass(frozen=True, slots=True)
class Document:
    """One source text and the metadata filters can select on.

    Attributes:
        id: Stable identifier within the collection (a relative path, a URL, a corpus id).
        text: The full text: plain, Markdown, or an HTML page's body (cleaned when indexed).
        title: Shown with results and prepended to each chunk for matching.
        url: Where a reader can see the original (a file URI, a web URL).
        doc_type: Free-form kind ("md", "html", "pydoc"...), filterable.
        date: ISO date ``YYYY-MM-DD`` (or a longer ISO timestamp), filterable by range.
        tags: Labels, filterable (a chunk matches if its document has any requested tag).
        metadata: Extra JSON-serialisable values carried through to results.
    """

    id: str
    text: str
    title: str = ""
    url: str = ""
    doc_type: str = ""
    date: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, object] = field(default_factory=dict)

    def content_hash(self) -> str:
        """Hash of what chunks and vectors depend on (title and text, not the metadata)."""
        h = hashlib.sha256()
        h.update(self.title.encode())
        h.update(b"\x00")
        h.update(self.text.encode())
        return h.hexdigest()


_DOC_TYPES = {".htm": "html", ".markdown": "md"}
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise DocumentLoadError(f"cannot read {path}: {why}", detail=why) from exc


def _read_text(path: Path, data: bytes) -> tuple[str, str]:
    """``(text, encoding)``: binary content and undecodable bytes are refused with a reason."""
    if looks_binary(data[:SNIFF_BYTES]):
        raise DocumentLoadError(f"binary content in {path} (NUL or control bytes)",
                                reason="binary", detail="binary content (NUL or control bytes)")
    return decode_text(data, where=str(path))


def _html_to_text(html: str) -> tuple[str, str]:
    """``(title, body HTML)``: page furniture removed, the rest left for ``clean_markup``.

    The body stays HTML so the cleaner reads it with HTML's rules (source line
    breaks are spaces, tables are rows, ``<dt>`` and headings are labels); text
    pulled out node by node would break hard-wrapped sentences at every tag.
    """
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text(strip=True).split()) if title_node is not None else ""
    for tag in ("script", "style", "noscript", "nav", "header", "footer", "svg", "template"):
        for node in tree.css(tag):
            node.decompose()
    body = tree.body if tree.body is not None else tree.root
    text = body.html if body is not None else ""
    if not (body is not None and (body.text(deep=True) or "").strip()):
        text = ""  # nothing a reader would see
    return title, text or ""


def _pdf_to_text(path: Path) -> str:
    try:
        import pypdf  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        why = "PDF support needs the optional 'pypdf' package"
        raise DocumentLoadError(f"cannot read {path}: {why}", detail=why) from exc
    try:
        reader = pypdf.PdfReader(str(path))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except Exception as exc:  # pypdf raises many unrelated types on broken files
        raise DocumentLoadError(f"cannot parse PDF {path}: {exc}",
                                detail=f"not a readable PDF: {exc}") from exc


def load_file(path: str | Path, *, doc_id: str | None = None,
              max_bytes: int | None = None) -> Document:
    """Read one file (txt, md, rst, html, pdf) into a :class:`Document`.

    Text files are decoded as UTF-8, else with the best legacy-encoding guess
    (``metadata["encoding"]`` then names it); binary content is refused.

    Args:
        path: The file.
        doc_id: Its id in the collection (default: the file name).
        max_bytes: Refuse files larger than this (None: no cap).

    Raises:
        DocumentLoadError: its ``reason`` says why: ``unsupported_type``,
            ``binary``, ``undecodable``, ``too_large``, ``empty`` or ``unreadable``
            (missing, no permission, a broken PDF or one without ``pypdf``).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in BINARY_SUFFIXES:
        raise DocumentLoadError(f"binary file type {suffix}: {p}", reason="binary",
                                detail=f"binary file type {suffix}")
    if suffix not in SUPPORTED_SUFFIXES:
        raise DocumentLoadError(f"unsupported file type {suffix or '(none)'}: {p}",
                                reason="unsupported_type",
                                detail=f"no loader for {suffix or 'files without a suffix'}")
    try:
        st = p.stat()
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise DocumentLoadError(f"cannot read {p}: {why}", detail=why) from exc
    if max_bytes is not None and st.st_size > max_bytes:
        why = f"{_size(st.st_size)}, over the {_size(max_bytes)} cap per file"
        raise DocumentLoadError(f"{p} is {why}", reason="too_large", detail=why)
    title = ""
    encoding = "utf-8"
    if suffix == ".pdf":
        text = _pdf_to_text(p)
    else:
        text, encoding = _read_text(p, _read_bytes(p))
        if suffix in (".html", ".htm"):
            title, text = _html_to_text(text)
        elif suffix in (".md", ".markdown"):
            m = _MD_HEADING.search(text)
            title = " ".join(clean_markup(m.group(1)).split()) if m else ""
    if not text.strip():
        raise DocumentLoadError(f"no text in {p}", reason="empty", detail="no text")
    date = _dt.datetime.fromtimestamp(st.st_mtime, tz=_dt.UTC).date().isoformat()
    return Document(
        id=doc_id if doc_id is not None else p.name,
        text=text,
        title=title or p.stem,
        url=p.resolve().as_uri(),
        doc_type=_DOC_TYPES.get(suffix, suffix.lstrip(".")),
        date=date,
        metadata={"encoding": encoding} if encoding != "utf-8" else {},
    )


def _size(n: int) -> str:
    return f"{n / 1e6:.3g} MB" if n >= 100_000 else f"{n} bytes"
