"""Markup to plain text (``clean_markup``) and telling code from prose (``looks_like_code``).

Documents arrive as Markdown, reStructuredText-flavoured docstrings, HTML (or
text extracted from it) and plain text. What gets chunked, embedded and quoted
should be the prose a reader sees, not the markup around it, and code must stay
recognisable as code so nothing downstream mistakes a flattened code block for
a sentence. The convention :func:`clean_markup` produces, and
:func:`~actors.text.split_sentences` and the writers rely on:

* paragraphs are separated by blank lines;
* a code block is a paragraph of its own whose every line is indented by at
  least four spaces (relative indentation inside it kept);
* a prose paragraph is one line (its line breaks were soft wraps);
* a heading is a one-line paragraph ending with ``:`` (or with the ``?``/``.``
  it already had), so it reads as the label of what follows.

A whole HTML document (or fragment that starts with a tag and has no Markdown
structure) is read as HTML, where source line breaks are only whitespace: a
hard-wrapped ``<p>`` is one paragraph, a data table's rows become
``cell | cell`` paragraphs, a ``<dt>`` (like a heading, or a short paragraph that
is all bold) becomes a label, and lists of nothing but links (menus, tables of
contents) are dropped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._keywords import STOPWORDS

if TYPE_CHECKING:
    from selectolax.lexbor import LexborNode

__all__ = ["CLEAN_MARKUP_VERSION", "clean_markup", "looks_like_code"]

#: Changes whenever :func:`clean_markup` produces different text for the same
#: input; indexes fold it into each document's reuse key, so text indexed with
#: an older cleaner is re-chunked instead of silently kept.
CLEAN_MARKUP_VERSION = "markup-4"

_CODE_INDENT = "    "

# --- blocks -------------------------------------------------------------------------
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^`]*$")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_DROP_ELEMENT = re.compile(r"<(script|style|noscript|svg)\b[^>]*>.*?</\1\s*>",
                           re.DOTALL | re.IGNORECASE)
_PRE = re.compile(r"<pre\b[^>]*>(.*?)</pre\s*>", re.DOTALL | re.IGNORECASE)
_HTML_HEADING = re.compile(r"<h([1-6])\b[^>]*>(.*?)</h\1\s*>", re.DOTALL | re.IGNORECASE)
_BLOCK_TAGS = (
    "address article aside blockquote body caption dd details dialog div dl dt fieldset "
    "figcaption figure footer form head header hr html li main nav ol p section summary "
    "table tbody td tfoot th thead title tr ul"
)
_INLINE_TAGS = (
    "a abbr b bdi bdo big center cite code data del dfn em font i img input ins kbd label "
    "mark meta picture q s samp small source span strike strong sub sup time tt u var wbr "
    "link button audio video iframe track"
)
_BLOCK_TAG = re.compile(
    rf"</?(?:{'|'.join(_BLOCK_TAGS.split())})\b(?:\s[^<>]*)?/?>", re.IGNORECASE
)
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_INLINE_TAG = re.compile(
    rf"</?(?:{'|'.join(_INLINE_TAGS.split())})\b(?:\s[^<>]*)?/?>", re.IGNORECASE
)
_ATX = re.compile(r"^ {0,3}#{1,6}(?:\s+(.*?))?\s*#*\s*$")
_UNDERLINE = re.compile(r"^(=+|-+|~+|\^+|\*+|\++|_+)\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*\S+.*$")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+([\w:-]+)::(.*)$")
_REST_COMMENT = re.compile(r"^\s*\.\.(?:\s|$)")
_CODE_DIRECTIVES = frozenset({"code", "code-block", "sourcecode", "doctest", "literalinclude"})
_QUOTE_MARK = re.compile(r"^\s*(?:>(?!>>)\s?)+")
# A list item: bullets are markup and go; a number is kept ("1. FC ..." may be a name).
_ITEM = re.compile(r"^\s*(?:[-*+\u2022]\s+|(?=\d{1,3}[.)]\s+))(\S.*)$")
# "name    what it is" / "name -- what it is" / "name: what it is" rows of a docstring table.
_TERM_ROW = re.compile(r"^\s+(?:\S+(?:\s{2,}|\s+--?\s+)|[\w.*%()\[\]\"'-]+:\s+)\S")
_GAP_ROW = re.compile(
    r"^\s*(?:[^\s.,;]+(?:\s{2,}|\s+--\s+)|(?:[\w.]*[(_][\w.()]*|[A-Z][A-Z0-9_]+):\s+)\S"
)
_PROMPT = re.compile(r"^\s*(?:>>>|\$|%)\s")

# --- inline -------------------------------------------------------------------------
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)(_{0,2})")
_ROLE = re.compile(r":[\w.+-]+(?::[\w.+-]+)*:`([^`]+)`")
_IMAGE = re.compile(r"!\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^<>\s]+)>")
_REST_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]+>`_{1,2}")
_STRONG = re.compile(r"(?<![\w*])\*\*(?=[^\s*])(.+?)(?<=[^\s*])\*\*(?![\w*])")
_EMPH = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
# Underscores only around several words: ``_x_`` and ``__init__`` are names, not emphasis.
_USTRONG = re.compile(r"(?<![\w])__(?=\S)([^_\n]*?\s[^_\n]*?)(?<=\S)__(?!\w)")
_UEMPH = re.compile(r"(?<![\w])_(?=\S)([^_\n]*?\s[^_\n]*?)(?<=\S)_(?!\w)")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_ESCAPE = re.compile(r"\\([*_`#|\[\]])")
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _detab(line: str) -> str:
    stripped = line.lstrip(" \t")
    lead = line[: len(line) - len(stripped)]
    return lead.replace("\t", _CODE_INDENT) + stripped


def _code_paragraphs(lines: list[str]) -> list[str]:
    """Code lines as indented paragraphs (one per run without blank lines)."""
    lines = [_detab(x).rstrip() for x in lines]
    body = [x for x in lines if x.strip()]
    if not body:
        return []
    common = min(_indent(x) for x in body)
    out: list[str] = []
    current: list[str] = []
    for x in lines:
        if x.strip():
            current.append(_CODE_INDENT + x[common:])
        elif current:
            out.append("\n".join(current))
            current = []
    if current:
        out.append("\n".join(current))
    return out


def _inline(text: str) -> str:
    """Inline markup of one prose paragraph -> its text (code spans keep their content)."""
    spans: list[str] = []

    def keep(value: str) -> str:
        spans.append(value)
        return f"\x00{len(spans) - 1}\x00"

    text = _ROLE.sub(lambda m: keep(_role_text(m.group(1))), text)
    text = _REST_LINK.sub(lambda m: m.group(1), text)
    text = _CODE_SPAN.sub(lambda m: keep(m.group(2).strip()), text)
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REF_LINK.sub(lambda m: m.group(1), text)
    text = _AUTOLINK.sub(lambda m: m.group(1), text)
    for pattern in (_STRONG, _EMPH, _USTRONG, _UEMPH, _STRIKE):
        text = pattern.sub(lambda m: m.group(1), text)
    text = _ESCAPE.sub(lambda m: m.group(1), text)
    text = _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
    text = _PLACEHOLDER.sub(lambda m: spans[int(m.group(1))], text)
    return " ".join(text.split())  # a paragraph's line breaks are soft wraps


def _role_text(inner: str) -> str:
    """``:func:`title <target>``` -> title; ``:meth:`~a.b``` -> a.b."""
    m = re.match(r"^(.*?)\s*<[^<>]+>$", inner)
    if m and m.group(1):
        return m.group(1)
    return inner.lstrip("~!")


def _heading(text: str) -> str:
    text = _inline(text).replace("\n", " ").strip()
    if not text:
        return ""
    return text if text[-1] in ".:?!" else text + ":"


class _Blocks:
    """Line-by-line block parser of one prose segment (no fences left in it)."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str]] = []  # ("prose" | "code", text)
        self.para: list[str] = []
        self.in_list = False
        self.item_indent = 0  # indentation of the line that began the paragraph
        self.skip = 0  # lines a construct consumed beyond its own
        self.directive: str | None = None  # what a reST directive makes its indented body

    def flush(self) -> None:
        if self.para:
            text = _inline("\n".join(self.para))
            if text:
                self.out.append(("prose", text))
            self.para = []

    def emit(self, kind: str, text: str) -> None:
        self.flush()
        if text:
            self.out.append((kind, text))

    def code(self, lines: list[str]) -> None:
        self.flush()
        for p in _code_paragraphs(lines):
            self.out.append(("code", p))

    def run(self, segment: str) -> list[tuple[str, str]]:
        lines = [_detab(x).rstrip() for x in segment.split("\n")]
        i = 0
        after_blank = True  # at a block boundary: an indented line here starts code
        indented_is: str | None = None  # set by a directive: "code" or "prose"
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                self.flush()
                after_blank = True
                i += 1
                continue
            ind = _indent(line)
            if stripped.startswith(">>>"):
                j = i
                while j < len(lines) and lines[j].strip():
                    j += 1
                self.code(lines[i:j])
                i, after_blank = j, True
                continue
            if ind >= 4 and not self.para and after_blank:
                j = i
                block: list[str] = []
                while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) >= 4):
                    block.append(lines[j])
                    j += 1
                if indented_is == "prose" or (self.in_list and indented_is is None):
                    self.prose_lines(block)
                else:
                    self.code(block)
                i, after_blank = j, True
                continue
            if ind < 4:
                indented_is = None
            i += 1
            if self.block_line(line, stripped, lines, i):
                after_blank = True
                if self.skip:
                    i += self.skip
                    self.skip = 0
                if self.directive is not None:
                    indented_is, self.directive = self.directive, None
                continue
            self.prose_line(line, ind, after_blank)
            after_blank = False
        self.flush()
        return self.out

    def block_line(self, line: str, stripped: str, lines: list[str], nxt: int) -> bool:
        """Handle a line that is markup of its own (heading, rule, table, directive...)."""
        m = _DIRECTIVE.match(line)
        if m:
            self.flush()
            name = m.group(1).lower()
            self.directive = "code" if name in _CODE_DIRECTIVES else "prose"
            rest = m.group(2).strip()
            if rest and self.directive == "prose" and name not in ("image", "figure", "include"):
                self.para.append(rest)
            return True
        if _REST_COMMENT.match(line):
            self.flush()
            return True
        m = _ATX.match(line)
        if m and (m.group(1) or "").strip():
            self.emit("prose", _heading(m.group(1)))
            self.in_list = False
            return True
        if _UNDERLINE.match(stripped) and len(stripped) >= 3:
            if self.para and len(self.para) <= 2 and not self.in_list:
                title = " ".join(self.para)
                self.para = []
                self.emit("prose", _heading(title))
            elif (not self.para and nxt + 1 < len(lines) and lines[nxt].strip()
                  and lines[nxt + 1].strip() == stripped):
                self.emit("prose", _heading(lines[nxt].strip()))  # over- and underlined
                self.skip = 2
            else:
                self.flush()  # a horizontal rule
            self.in_list = False
            return True
        if _RULE.match(line) or _TABLE_SEP.match(line) or _REF_DEF.match(line):
            self.flush()
            return True
        if _TABLE_ROW.match(line):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            self.emit("prose", _inline(" | ".join(c for c in cells if c)))
            return True
        return False

    def prose_line(self, line: str, ind: int, after_blank: bool) -> None:
        line = _QUOTE_MARK.sub("", line)
        m = _ITEM.match(line)
        if m:
            self.flush()
            self.para.append(m.group(1).strip())
            self.in_list = True
            return
        text = line.strip()
        if text.endswith("::"):  # reST: a literal block follows
            head = text[:-2]
            text = head.rstrip() if head.endswith((" ", "\t")) or not head else head + ":"
        if after_blank and ind == 0 and not self.para:
            self.in_list = False
        if self.para and (_GAP_ROW.match(line) or (ind > 0 and (
            self.para[-1].endswith(":") or ind == self.item_indent or _TERM_ROW.match(line)
        ))):
            # A hanging list under a label, or a row of a "term  description" table:
            # each entry is a paragraph of its own, not a run-on with its neighbours.
            self.flush()
            self.item_indent = ind
        elif not self.para:
            self.item_indent = ind
        if text:
            self.para.append(text)

    def prose_lines(self, block: list[str]) -> None:
        """An indented block that is prose (list continuation, directive body): dedented."""
        for x in block:
            if not x.strip():
                self.flush()
                continue
            m = _ITEM.match(x)
            if m:
                self.flush()
                self.para.append(m.group(1).strip())
            else:
                self.para.append(x.strip())
        self.flush()


def _segments(text: str) -> list[tuple[str, str]]:
    """Split at fenced code blocks: ("prose", text) and ("code", text) in order."""
    out: list[tuple[str, str]] = []
    prose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        body: list[str] = []
        while j < len(lines):
            close = lines[j].strip()
            if close.startswith(fence[0] * len(fence)) and not close.strip(fence[0]):
                break
            body.append(lines[j])
            j += 1
        if prose:
            out.append(("prose", "\n".join(prose)))
            prose = []
        out.append(("code", "\n".join(body)))
        i = j + 1
    if prose:
        out.append(("prose", "\n".join(prose)))
    return out


def _html_blocks(prose: str) -> list[tuple[str, str]]:
    """HTML inside a prose segment: comments and scripts go, ``<pre>`` is code, tags go."""
    while True:  # removing one comment may join the pieces of another
        stripped = _DROP_ELEMENT.sub("", _COMMENT.sub("", prose))
        if stripped == prose:
            break
        prose = stripped
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _PRE.finditer(prose):
        out.append(("prose", prose[pos : m.start()]))
        inner = _INLINE_TAG.sub("", _BR.sub("\n", m.group(1)))
        out.append(("code", _ENTITY.sub(lambda e: html.unescape(e.group(0)), inner)))
        pos = m.end()
    out.append(("prose", prose[pos:]))
    return [(kind, _outside_code_spans(part, _strip_tags) if kind == "prose" else part)
            for kind, part in out]


def _strip_tags(part: str) -> str:
    part = _HTML_HEADING.sub(
        lambda h: f"\n\n{'#' * int(h.group(1))} {' '.join(h.group(2).split())}\n\n", part
    )
    part = _BR.sub("\n", part)
    part = _BLOCK_TAG.sub("\n\n", part)
    return _INLINE_TAG.sub("", part)


_LINE_CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1")


def _outside_code_spans(text: str, fn: Callable[[str], str]) -> str:
    """Apply ``fn`` to the text between inline code spans (``<b>`` in backticks is code)."""
    out: list[str] = []
    pos = 0
    for m in _LINE_CODE_SPAN.finditer(text):
        out.append(fn(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(fn(text[pos:]))
    return "".join(out)


# --- whole HTML documents ------------------------------------------------------------
# Read with a real parser: implicit closes (``<p>`` without ``</p>``, ``<li>``,
# ``<dt>``/``<dd>``) and entities are the parser's business, not ours.

_HTML_START = re.compile(
    r"\A\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL
)
_FIRST_TAG = re.compile(r"\A\s*<([A-Za-z][A-Za-z0-9]*)\b")
_MARKDOWN_STRUCTURE = re.compile(
    r"^(?: {0,3}(?:#{1,6}\s|```|~~~|[-*+]\s+\S)|(?:=+|-+)\s*$)", re.MULTILINE
)
_HTML_KNOWN = frozenset(
    (_BLOCK_TAGS + " " + _INLINE_TAGS + " h1 h2 h3 h4 h5 h6 pre hr br").split()
)
_HTML_DROP = frozenset({
    "script", "style", "noscript", "template", "svg", "head", "title", "nav", "iframe",
    "object", "embed", "canvas", "button", "select", "textarea", "img", "picture", "audio",
    "video",
})
# <h>: XHTML 2's heading without a level (manuals still use it)
_HTML_HEADINGS = frozenset({"h", "h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_BLOCKS = frozenset(
    (_BLOCK_TAGS + " h h1 h2 h3 h4 h5 h6 hr pre center").split()
) - {"td", "th", "tr", "tbody", "thead", "tfoot"}
# A table whose cells hold blocks lays out a page; its cells are read as paragraphs, not rows.
_HTML_CELL_BLOCKS = ", ".join(
    f"{cell} {block}" for cell in ("td", "th")
    for block in ("p", "div", "table", "ul", "ol", "dl", "pre", "blockquote",
                  "h1", "h2", "h3", "h4", "h5", "h6")
)
_LABEL_MAX_WORDS = 12


def _is_html_document(text: str) -> bool:
    """A page (doctype/html/body) or a fragment that opens with a tag and has no Markdown."""
    if _HTML_START.match(text):
        return True
    m = _FIRST_TAG.match(text)
    return bool(m and m.group(1).lower() in _HTML_KNOWN and not _MARKDOWN_STRUCTURE.search(text))


def _label(text: str) -> str:
    return text if not text or text[-1] in ".:?!" else text + ":"


class _HtmlText:
    """Walks a parsed page once, collecting ``("prose" | "code", text)`` paragraphs."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str]] = []
        self.parts: list[str] = []
        self.bold = 0  # depth of <b>/<strong> around the text being read
        self.bold_chars = 0
        self.chars = 0
        self.label = False  # the paragraph being read is a heading or a <dt>
        self.prefix = ""  # an ordered list item's number, put before its first text
        self.lists: list[list[int]] = []  # per open list: [ordered?, items so far]
        self.tables: list[bool] = []  # per open table: a data table (rows) or layout
        self.cells: list[list[str]] = []  # per open data-table row: its cells' texts

    def text(self, value: str) -> None:
        if not value:
            return
        self.parts.append(value)
        n = len(value) - value.count(" ") - value.count("\n") - value.count("\t")
        self.chars += n
        if self.bold:
            self.bold_chars += n

    def take(self) -> str:
        text = " ".join("".join(self.parts).split())
        self.parts = []
        return text

    def flush(self) -> None:
        bold = self.chars and self.bold_chars >= 0.9 * self.chars
        text = self.take()
        label, self.label = self.label, False
        self.bold_chars = self.chars = 0
        if not text:
            return
        text, self.prefix = (self.prefix + text, "") if self.prefix else (text, "")
        if label or (bold and len(text.split()) <= _LABEL_MAX_WORDS
                     and text[-1] not in ".;:!?,"):
            text = _label(text)
        self.out.append(("prose", text))

    def in_data_cell(self) -> bool:
        return bool(self.tables and self.tables[-1] and self.cells)

    def enter(self, node: LexborNode) -> bool:
        """Handle an opening tag; False when its children are not to be read."""
        tag = node.tag or ""
        if tag in _HTML_DROP or "hidden" in node.attributes:
            return False
        if tag == "pre":
            self.flush()
            raw = (node.text(deep=True) or "").replace("\r\n", "\n")
            self.out.extend(("code", p) for p in _code_paragraphs(raw.split("\n")))
            return False
        if tag in ("ul", "ol", "menu") and _only_links(node):
            return False
        if tag == "br":
            if self.in_data_cell():
                self.text(" ")
            else:
                self.flush()
            return False
        if tag == "table":
            self.flush()
            self.tables.append(node.css_first(_HTML_CELL_BLOCKS) is None)
            return True
        if self.tables and self.tables[-1] and tag in ("tr", "td", "th"):
            if tag == "tr":
                self.flush()
                self.cells.append([])
            else:
                self.parts, self.chars, self.bold_chars = [], 0, 0
            return True
        if tag in ("b", "strong"):
            self.bold += 1
            return True
        if tag in _HTML_BLOCKS or tag in ("td", "th", "tr"):
            self.flush()
            if tag in ("ul", "ol", "menu"):
                self.lists.append([tag == "ol", 0])
            elif tag == "li" and self.lists:
                self.lists[-1][1] += 1
                if self.lists[-1][0]:
                    self.prefix = f"{self.lists[-1][1]}. "
            self.label = tag in _HTML_HEADINGS or tag == "dt"
        return True

    def leave(self, node: LexborNode) -> None:
        tag = node.tag or ""
        if tag in ("b", "strong"):
            self.bold = max(0, self.bold - 1)
        elif tag == "table":
            self.flush()
            if self.tables:
                self.tables.pop()
        elif self.tables and self.tables[-1] and tag in ("td", "th") and self.cells:
            self.cells[-1].append(self.take())
            self.chars = self.bold_chars = 0
        elif self.tables and self.tables[-1] and tag == "tr" and self.cells:
            row = [c for c in self.cells.pop() if c]
            if row:
                self.out.append(("prose", " | ".join(row)))
        elif tag in _HTML_BLOCKS or tag in ("td", "th", "tr"):
            if tag in _HTML_HEADINGS or tag == "dt":
                self.label = True
            self.flush()
            if tag == "li":
                self.prefix = ""
            if tag in ("ul", "ol", "menu") and self.lists:
                self.lists.pop()


def _only_links(node: LexborNode) -> bool:
    """A list whose every item is nothing but a link: a menu or a table of contents."""
    items = node.css("li")
    if not items:
        return False
    for item in items:
        text = "".join((item.text(deep=True) or "").split())
        linked = "".join("".join((a.text(deep=True) or "").split()) for a in item.css("a"))
        if not text or len(linked) < len(text):
            return False
    return True


def _html_paragraphs(text: str) -> list[tuple[str, str]]:
    """``("prose" | "code", text)`` paragraphs of an HTML page, in reading order."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    root = tree.body if tree.body is not None else tree.root
    walker = _HtmlText()
    if root is None:
        return []
    # Iterative depth-first walk (pages can nest deeper than Python's recursion limit).
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            walker.leave(node)
            continue
        tag = node.tag or ""
        if tag == "-text":
            walker.text(node.text_content or "")
            continue
        if tag.startswith("-") or tag.startswith("_"):
            continue
        if walker.enter(node):
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(list(node.iter(include_text=True))))
    walker.flush()
    return walker.out


def clean_markup(text: str) -> str:
    """Plain text of Markdown/reST/HTML-flavoured ``text``, code blocks kept as code.

    Removes HTML and Markdown comments, ``<script>``/``<style>`` elements, HTML
    tags, heading markers (``#``, setext and reST underlines), emphasis,
    strike-through, code-span backticks and reST roles (keeping their text),
    link and image syntax (keeping the link text / alt text), reference-link
    definitions, horizontal rules, table separator rows, blockquote markers,
    list bullets (each item becomes a paragraph), reST directives and comments,
    and code-fence markers. Entities are decoded.

    Fenced blocks, ``<pre>`` blocks, indented blocks after a blank line,
    literal blocks after ``::`` and doctest (``>>>``) runs are kept verbatim as
    code paragraphs indented by four spaces; see the module docstring for the
    full output convention. Plain prose passes through unchanged except for
    whitespace (each paragraph on one line with single spaces, one blank line
    between paragraphs).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    paragraphs: list[str] = []
    if _is_html_document(text):
        paragraphs = [part for _, part in _html_paragraphs(text)]
        return "\n\n".join(p for p in paragraphs if p.strip())
    for kind, segment in _segments(text):
        if kind == "code":
            paragraphs.extend(_code_paragraphs(segment.split("\n")))
            continue
        for sub_kind, part in _html_blocks(segment):
            if sub_kind == "code":
                paragraphs.extend(_code_paragraphs(part.split("\n")))
            else:
                paragraphs.extend(t for _, t in _Blocks().run(part))
    return "\n\n".join(p for p in paragraphs if p.strip())


# --- code or prose? -----------------------------------------------------------------

_STATEMENT = re.compile(
    r"^\s*(?:def|class|import|from\s+\S+\s+import|return|yield|raise|assert|async\s+def|await|"
    r"for\s+\S+\s+in|while|if|elif|else|try|except|finally|with|lambda|print\(|const|let|var|"
    r"function|public|private|#include|SELECT|INSERT|UPDATE|CREATE)\b"
)
_OPERATOR = re.compile(
    r"(?:^|\s)(?:=|==|!=|\+=|-=|\*=|/=|:=|=>|->|&&|\|\||<<|>>)(?:\s|$)|[;{}]\s*$"
)
_SIGNATURE = re.compile(
    r"^(?:(?:async\s+)?def\s+|class\s+)?[A-Za-z_][\w.]*\s*"
    r"\((?:[^()]|\([^()]*\))*\)\s*(?:->\s*[^\s.][^.]*)?[.:]?$"
)
_CODE_TOKEN = re.compile(
    r"[\w.]*[A-Za-z_]\w*\([^\s]*\)?|"  # a call: f(), obj.method(x
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w+)+|"  # a dotted name with a real segment: a.bc
    r"\w*_\w+|"  # snake_case or _private
    r"[a-z]+[A-Z]\w*|"  # camelCase
    r"(?:https?|ftp)://\S+|"  # a URL
    r"[^\w\s]*[=<>{}\[\]|\\^~`$@#][^\w\s]*"  # operator/bracket soup
)


def looks_like_code(text: str) -> bool:
    """Whether ``text`` (a sentence or a block) is code or an identifier, not prose.

    True for multi-line text whose later lines are indented (a code block in
    the :func:`clean_markup` convention), doctest/shell prompts, statements
    (``def``, ``import``, ``for x in``...), assignments and operators, bare
    call signatures (``name(arg, *, kw=...)``, ``f(x) -> value``), and
    sentences made mostly of identifiers, calls and URLs. Prose that merely
    mentions ``f(x)`` or ``None`` is not code.
    """
    lines = [x for x in text.split("\n") if x.strip()]
    if not lines:
        return False
    if len(lines) > 1 and any(_indent(_detab(x)) >= 4 for x in lines[1:]):
        return True
    flat = " ".join(x.strip() for x in lines)
    if _PROMPT.match(flat) or flat.startswith("... "):
        return True
    if _SIGNATURE.match(flat):
        return True
    if _STATEMENT.match(flat) and not _reads_as_prose(flat):
        return True
    if _OPERATOR.search(flat) and not _reads_as_prose(flat, strict=True):
        return True
    tokens = flat.split()
    code = sum(1 for t in tokens if _is_code_token(t))
    if not tokens:
        return False
    if code and code / len(tokens) >= 0.5:
        return True
    return code > 0 and len(tokens) <= 12 and not _reads_as_prose(flat)


def _is_code_token(token: str) -> bool:
    t = token.strip(".,;:!?\"'()[]")
    if not t or t.isalpha() or t.isdigit():
        return False
    if re.fullmatch(r"(?:[A-Za-z]\.){1,3}[A-Za-z]?\.?", t):  # e.g., i.e., U.S.
        return False
    if re.fullmatch(r"[A-Za-z]+(?:[-'\u2019][A-Za-z]+)+", t):  # well-known, don't
        return False
    return bool(_CODE_TOKEN.fullmatch(token.strip(",;:!?\"'")) or _CODE_TOKEN.fullmatch(t))


def _reads_as_prose(text: str, *, strict: bool = False) -> bool:
    """Enough lower-case function words to be an English sentence."""
    words = re.findall(r"[A-Za-z']+", text)
    func = sum(1 for w in words if w.lower() in STOPWORDS)
    need = 3 if strict else 1
    return func >= need and func / max(1, len(text.split())) >= (0.2 if strict else 0.1)
