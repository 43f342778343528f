"""An incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules).

aiohttp serves SSE but has no client-side parser, and a line reader on the
response (``content.readline``) refuses lines over its buffer, which one large
event (a page's text) can pass; this parser takes the body's chunks as they
come and splits lines itself (LF, CRLF or CR, even across chunks).

A message is dispatched on a blank line; a message cut off by the end of the
stream is dropped, as a browser drops it, so a connection that breaks mid-event
never yields half an event.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from ._errors import ProtocolError

__all__ = ["SseMessage", "SseParser"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseMessage:
    """One dispatched message: its ``event`` type, ``data`` and ``id`` (``None``: none sent)."""

    event: str
    data: str
    id: str | None


class SseParser:
    """Feed it the body's bytes; it returns the messages each chunk completes.

    Args:
        max_message_bytes: a message (or a line) longer than this is a
            :class:`ProtocolError`, so a broken server cannot fill the client's memory.
    """

    def __init__(self, *, max_message_bytes: int = 32 * 1024 * 1024) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last line end
        self._started = False
        self._after_cr = False
        self._max = max_message_bytes
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._id: str | None = None
        self.retry_ms: int | None = None
        """The server's last ``retry:`` (its advice on the reconnection delay, in ms)."""

    def feed(self, chunk: bytes) -> list[SseMessage]:
        """The messages completed by ``chunk``.

        Raises:
            ProtocolError: a message or line over ``max_message_bytes``.
        """
        text = self._pending + self._decoder.decode(chunk)
        if not self._started and text:
            text = text.removeprefix("\ufeff")
            self._started = True
        if self._after_cr and text:
            # A CR that ended the last chunk may be the first half of a CRLF: its
            # line is complete, and an LF that starts this chunk belongs to it.
            text = text.removeprefix("\n")
            self._after_cr = False
        lines = _LINE_END.split(text)
        self._pending = lines.pop()
        self._after_cr = text.endswith("\r")
        if len(self._pending) > self._max:
            raise ProtocolError(f"an event-stream line is over {self._max} bytes")
        out: list[SseMessage] = []
        for line in lines:
            message = self._line(line)
            if message is not None:
                out.append(message)
        return out

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise ProtocolError(f"an event-stream message is over {self._max} bytes")
            self._data.append(value)
        elif name == "id":
            if "\x00" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseMessage | None:
        event, data, self._event, self._data, self._size = self._event, self._data, "", [], 0
        if not data:
            return None
        return SseMessage(event or "message", "\n".join(data), self._id)
