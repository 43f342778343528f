"""HTML to clean main-content text.

Two extractors behind one small function, chosen by measurement
(``python bench/_web_scrape.py``): the default is a selectolax (lexbor) one
written for this project (boilerplate tags and classes removed, the
``<article>``/``<main>`` region preferred, else the densest paragraph
container, link-dense blocks such as menus dropped): 2 ms per 38 kB page
against trafilatura's 20 ms, at equal or better token F1 on the benchmark's
pages. trafilatura (an optional dependency) is used when asked for, and as the
fallback when the fast extractor finds too little text. Both return paragraphs
separated by blank lines so the chunker can keep paragraph boundaries; code
blocks keep their lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ._exceptions import ExtractionFailed

__all__ = ["Extracted", "ExtractorName", "better", "extract_html", "extract_selectolax",
           "extract_trafilatura", "extraction_order", "run_extractor", "trafilatura_available"]

ExtractorName = Literal["selectolax", "trafilatura", "auto"]

_JUNK_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "form", "button",
              "select", "textarea", "nav", "aside", "footer", "canvas", "object", "embed",
              "input", "dialog", "menu")
_JUNK_SELECTORS = ('[role="navigation"]', '[role="banner"]', '[role="contentinfo"]',
                   '[role="complementary"]', '[role="dialog"]', '[aria-hidden="true"]',
                   "[hidden]")
_BOILERPLATE = re.compile(
    r"(^|[\s_-])(nav|navbar|menu|footer|sidebar|side-bar|breadcrumbs?|cookie|consent|banner|"
    r"advert|ads?|ad-slot|promo|sponsor|share|sharing|social|related|recommend|newsletter|"
    r"subscribe|comments?|popup|modal|masthead|skip|toolbar|pagination|pager|tags|widget|"
    r"signup|login|disqus|outbrain|taboola)($|[\s_-])",
    re.IGNORECASE,
)
_KEEP_ROOTS = ("article", "main", "body", "html")
_BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "main", "header", "h1", "h2", "h3", "h4", "h5", "h6",
    "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "table", "tr", "td", "th",
    "figure", "figcaption", "br", "hr", "address", "details", "summary", "caption", "body",
})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Extracted:
    """The title and main text of a page (paragraphs separated by blank lines)."""

    title: str
    text: str
    extractor: str


@dataclass
class _Block:
    tag: str
    parts: list[str]
    link_chars: int = 0

    @property
    def text(self) -> str:
        raw = "".join(self.parts)
        if self.tag == "pre":  # code keeps its lines
            lines = [line.rstrip() for line in raw.strip("\n").splitlines()]
            return "\n".join(line for line in lines if line.strip()).strip()
        return _WS.sub(" ", raw).strip()


def _title(tree: LexborHTMLParser) -> str:
    for sel, attr in (('meta[property="og:title"]', "content"), ("title", None), ("h1", None)):
        node = tree.css_first(sel)
        if node is None:
            continue
        val = node.attributes.get(attr) if attr else node.text(deep=True)
        if val and val.strip():
            return _WS.sub(" ", val).strip()
    return ""


def _strip_boilerplate(root: LexborNode) -> None:
    for node in root.css(", ".join(_JUNK_TAGS + _JUNK_SELECTORS)):
        node.decompose()
    for node in root.css("[class], [id]"):
        if node.tag in _KEEP_ROOTS:
            continue
        attrs = node.attributes
        marker = f"{attrs.get('class') or ''} {attrs.get('id') or ''}"
        if _BOILERPLATE.search(marker):
            node.decompose()


def _blocks(root: LexborNode) -> list[_Block]:
    blocks: list[_Block] = []
    current = _Block("p", [])

    def flush(tag: str) -> None:
        nonlocal current
        if current.parts:
            blocks.append(current)
        current = _Block(tag, [])

    # iterative depth-first walk: hostile pages nest thousands of levels deep
    stack: list[tuple[LexborNode | None, bool]] = [(root, False)]
    first = True
    while stack:
        node, in_link = stack.pop()
        if node is None:  # end of a block element
            flush("p")
            continue
        if not first:
            tag = node.tag
            if tag == "-text":
                t = node.text_content or ""
                current.parts.append(t)
                if in_link:
                    current.link_chars += len(t.strip())
                continue
            if tag is None or tag.startswith("-"):
                continue
            if tag in _BLOCK_TAGS:
                flush(tag)
                stack.append((None, in_link))
            else:
                in_link = in_link or tag == "a"
        first = False
        children = list(node.iter(include_text=True))
        stack.extend((c, in_link) for c in reversed(children))
    flush("p")
    return blocks


def _main_region(tree: LexborHTMLParser) -> LexborNode | None:
    body = tree.body or tree.root
    if body is None:
        return None
    total = len(body.text(deep=True, strip=True))
    best: LexborNode | None = None
    best_len = 0
    for node in tree.css('article, main, [role="main"], [itemprop="articleBody"]'):
        n = len(node.text(deep=True, strip=True))
        if n > best_len:
            best, best_len = node, n
    if best is not None and best_len >= max(200, 0.25 * total):
        return best
    return _densest_region(body)


def _densest_region(body: LexborNode, cover: float = 0.7) -> LexborNode:
    """The container of most paragraph text, for pages without semantic tags.

    Readability's idea: each paragraph scores its parent fully and its
    grandparent by half; the best-scoring node is the content container. It is
    widened to its ancestors until it holds ``cover`` of all paragraph text, so
    an article split over sibling sections is not cut in half.
    """
    score: dict[int, float] = {}
    inside: dict[int, int] = {}
    nodes: dict[int, LexborNode] = {}
    body_id = body.mem_id
    total = 0
    for p in body.css("p, pre"):
        n = len(p.text(deep=True, strip=True))
        if n < 25:
            continue
        total += n
        anc = p.parent
        depth = 0
        while anc is not None and anc.mem_id != body_id:
            key = anc.mem_id
            nodes[key] = anc
            inside[key] = inside.get(key, 0) + n
            if depth < 2:
                score[key] = score.get(key, 0.0) + n / (1 + depth)
            anc = anc.parent
            depth += 1
    if not score:
        return body
    best = nodes[max(score, key=score.__getitem__)]
    while inside.get(best.mem_id, 0) < cover * total:
        parent = best.parent
        if parent is None or parent.mem_id == body_id or parent.mem_id not in nodes:
            return body
        best = parent
    return best


def extract_selectolax(html: str) -> Extracted:
    """Fast extraction with selectolax (lexbor): ~1-2 ms per typical article page."""
    tree = LexborHTMLParser(html)
    title = _title(tree)
    root = _main_region(tree)
    if root is None:
        return Extracted(title, "", "selectolax")
    _strip_boilerplate(root)
    paragraphs: list[str] = []
    tags: list[str] = []
    for block in _blocks(root):
        text = block.text
        if not text:
            continue
        n = len(text)
        if block.tag in _HEADINGS:
            paragraphs.append(text)
            tags.append(block.tag)
            continue
        if block.link_chars > 0.5 * n:  # menus, link lists, tag clouds
            continue
        if n < 20 and block.tag in ("li", "td", "th", "dt", "dd"):
            continue
        if paragraphs and paragraphs[-1] == text:
            continue
        paragraphs.append(text)
        tags.append(block.tag)
    # drop trailing headings left without content (e.g. an emptied "Related" section)
    while len(paragraphs) > 1 and tags[-1] in _HEADINGS:
        paragraphs.pop()
        tags.pop()
    return Extracted(title, "\n\n".join(paragraphs), "selectolax")


def trafilatura_available() -> bool:
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        return False
    return True


def extract_trafilatura(html: str, url: str | None = None) -> Extracted:
    """Extraction with trafilatura (optional dependency): slower, stronger on odd layouts."""
    try:
        import trafilatura
    except ImportError as exc:
        raise ExtractionFailed("trafilatura is not installed", url=url or "") from exc
    text = trafilatura.extract(
        html, url=url, include_comments=False, include_tables=True, favor_precision=False,
        deduplicate=False, with_metadata=False,
    ) or ""
    paragraphs = [p.strip() for p in text.splitlines() if p.strip()]
    tree = LexborHTMLParser(html)
    return Extracted(_title(tree), "\n\n".join(paragraphs), "trafilatura")


_EXTRACTORS: dict[str, Callable[[str, str | None], Extracted]] = {
    "selectolax": lambda html, url: extract_selectolax(html),
    "trafilatura": extract_trafilatura,
}


def extraction_order(extractor: ExtractorName = "selectolax", fallback: bool = True) -> list[str]:
    """The extractors to try, in order (trafilatura only when installed)."""
    primary: str = extractor
    if extractor == "auto":
        primary = "trafilatura" if trafilatura_available() else "selectolax"
    order: list[str] = [primary]
    if fallback:
        other = "selectolax" if primary == "trafilatura" else "trafilatura"
        if other == "selectolax" or trafilatura_available():
            order.append(other)
    return order


def run_extractor(name: str, html: str, url: str | None = None) -> Extracted:
    """Run one extractor; any parser error becomes :class:`ExtractionFailed`."""
    try:
        return _EXTRACTORS[name](html, url)
    except ExtractionFailed:
        raise
    except Exception as exc:  # a parser bug on hostile HTML must not kill the scrape
        raise ExtractionFailed(f"{name} failed: {type(exc).__name__}: {exc}",
                               url=url or "") from exc


def better(best: Extracted | None, got: Extracted) -> Extracted:
    """``got`` if it found clearly more words than ``best`` (kept otherwise), with a title."""
    if best is None:
        return got
    if len(got.text.split()) > 1.2 * len(best.text.split()) + 5:
        return Extracted(got.title or best.title, got.text, got.extractor)
    return best


def extract_html(
    html: str, url: str | None = None, *, extractor: ExtractorName = "selectolax",
    fallback: bool = True, min_chars: int = 200,
) -> Extracted:
    """Extract ``html``'s main text; if it is shorter than ``min_chars``, try the other extractor.

    Raises:
        ExtractionFailed: no extractor found any text.
    """
    best: Extracted | None = None
    error: ExtractionFailed | None = None
    for name in extraction_order(extractor, fallback):
        try:
            best = better(best, run_extractor(name, html, url))
        except ExtractionFailed as exc:
            error = exc
            continue
        if len(best.text) >= min_chars:
            break
    if best is None or not best.text.strip():
        raise ExtractionFailed("no text could be extracted", url=url or "") from error
    return best
