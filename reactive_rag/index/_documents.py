"""Documents and the loaders that turn files into them.

A document is the unit of incremental re-indexing: its content hash decides
whether its chunks and vectors can be reused from the previous generation.
Loaders keep the source's structure (Markdown as written, HTML headings and
``<pre>`` blocks as Markdown); the indexer cleans every document's markup the
same way when it chunks it (``clean_markup``), whatever loader made it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors.text import clean_markup

from ._exceptions import DocumentLoadError

__all__ = ["SUPPORTED_SUFFIXES", "Document", "load_file", "load_folder"]

#: File suffixes ``load_folder`` reads (``.pdf`` only when ``pypdf`` is installed).
SUPPORTED_SUFFIXES: tuple[str, ...] = (
    ".txt", ".md", ".markdown", ".rst", ".html", ".htm", ".pdf",
)


@dataclass(frozen=True, slots=True)
class Document:
    """One source text and the metadata filters can select on.

    Attributes:
        id: Stable identifier within the collection (a relative path, a URL, a corpus id).
        text: The full plain text.
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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DocumentLoadError(f"cannot read {path}: {exc}") from exc


def _html_to_text(html: str) -> tuple[str, str]:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = title_node.text(strip=True) if title_node is not None else ""
    for tag in ("script", "style", "noscript", "nav", "header", "footer", "svg"):
        for node in tree.css(tag):
            node.decompose()
    # Keep the structure the text loses in Markdown form, which the indexer's
    # cleaner turns into plain text: code blocks stay code, headings stay labels.
    for node in tree.css("pre"):
        node.replace_with(f"\n```\n{node.text(deep=True)}\n```\n")
    for level in range(1, 7):
        for node in tree.css(f"h{level}"):
            heading = " ".join(node.text(deep=True).split())
            node.replace_with(f"\n{'#' * level} {heading}\n" if heading else "\n")
    body = tree.body if tree.body is not None else tree.root
    text = body.text(separator="\n", strip=True) if body is not None else ""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return title, text


def _pdf_to_text(path: Path) -> str:
    try:
        import pypdf  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise DocumentLoadError(
            f"cannot read {path}: PDF support needs the optional 'pypdf' package"
        ) from exc
    try:
        reader = pypdf.PdfReader(str(path))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except Exception as exc:  # pypdf raises many unrelated types on broken files
        raise DocumentLoadError(f"cannot parse PDF {path}: {exc}") from exc


def load_file(path: str | Path, *, doc_id: str | None = None) -> Document:
    """Read one file (txt, md, rst, html, pdf) into a :class:`Document`.

    Raises:
        DocumentLoadError: unreadable file, unsupported suffix, or PDF without ``pypdf``.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise DocumentLoadError(f"unsupported file type {suffix or '(none)'}: {p}")
    title = ""
    if suffix in (".html", ".htm"):
        title, text = _html_to_text(_read_text(p))
    elif suffix == ".pdf":
        text = _pdf_to_text(p)
    else:
        text = _read_text(p)
        if suffix in (".md", ".markdown"):
            m = _MD_HEADING.search(text)
            title = " ".join(clean_markup(m.group(1)).split()) if m else ""
    try:
        mtime = p.stat().st_mtime
    except OSError as exc:
        raise DocumentLoadError(f"cannot stat {p}: {exc}") from exc
    date = _dt.datetime.fromtimestamp(mtime, tz=_dt.UTC).date().isoformat()
    return Document(
        id=doc_id if doc_id is not None else p.name,
        text=text,
        title=title or p.stem,
        url=p.resolve().as_uri(),
        doc_type=_DOC_TYPES.get(suffix, suffix.lstrip(".")),
        date=date,
    )


def load_folder(
    root: str | Path,
    *,
    suffixes: Sequence[str] = SUPPORTED_SUFFIXES,
    skipped: list[Path] | None = None,
) -> Iterator[Document]:
    """Yield a document per supported file under ``root`` (recursively, in sorted order).

    Document ids are paths relative to ``root``, so re-indexing the same folder
    recognises unchanged files. Files that cannot be read are appended to
    ``skipped`` (when given) rather than aborting the whole folder. A single
    file path is accepted too.
    """
    base = Path(root)
    if not base.exists():
        raise DocumentLoadError(f"no such file or folder: {base}")
    if base.is_file():
        yield load_file(base, doc_id=base.name)
        return
    wanted = {s.lower() for s in suffixes}
    for path in sorted(base.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in wanted:
            continue
        if any(part.startswith(".") for part in path.relative_to(base).parts):
            continue
        try:
            yield load_file(path, doc_id=path.relative_to(base).as_posix())
        except DocumentLoadError:
            if skipped is None:
                raise
            skipped.append(path)
