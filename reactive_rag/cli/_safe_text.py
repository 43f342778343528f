"""Stored text shown on an operator's terminal, with its control characters made visible.

A tenant's question, a page's text or a model's answer is stored as sent; shown raw, an
``ESC ]`` (OSC) or ``ESC [`` (CSI) sequence in it would retitle the operator's terminal,
rewrite its clipboard or move its cursor. Every CLI view prints through
:class:`SafeConsole` (or :func:`visible` / :func:`safe_json` for plain ``print``), so a C0
control other than newline and tab, DEL, or a C1 control is shown as ``\\xNN`` (``\\x1b``
for ESC) instead of being sent. rich's own styling is unaffected: it lives in segment
styles, not in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RichCast
from rich.segment import Segment
from rich.text import Text

__all__ = ["SafeConsole", "safe_json", "visible"]

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but tab and newline, DEL, and the C1 controls."""

_JSON_RAW = re.compile(r"[\x7f-\x9f]")
"""What a JSON encoder leaves raw though a terminal acts on it (C0 is always escaped)."""


def visible(text: str) -> str:
    """``text`` with each terminal control character written as ``\\xNN``."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def safe_json(document: str) -> str:
    """A JSON document with DEL and C1 controls written as ``\\u00NN``: the same value to a
    parser, nothing a terminal acts on (JSON escapes C0 itself)."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


class SafeConsole(Console):
    """A rich console whose printed text has its control characters made :func:`visible`.

    Strings (``print``'s arguments, table cells) are made visible before layout, so
    columns are measured on what is shown. Every ``print`` then renders through
    :meth:`render`, nested tables and panels included, which makes visible what a view
    built as a :class:`~rich.text.Text` itself; rich's control segments (cursor moves of
    a live display) are its own and pass as they are.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable: ConsoleRenderable | RichCast | str,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not _CONTROLS.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style, segment.control)
