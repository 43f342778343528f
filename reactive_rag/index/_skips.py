"""Why a file under an indexed folder was not indexed: typed reasons, never prose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["SKIP_REASONS", "SkipReason", "SkippedFile"]

SkipReason = Literal[
    "unsupported_type",  # a suffix no loader reads (.py, .docx, no suffix...)
    "binary",            # a known binary suffix, or NUL / control bytes in the first block
    "undecodable",       # not UTF-8 and no legacy encoding fits with enough confidence
    "too_large",         # over the per-file size cap
    "dangling_link",     # a symbolic link whose target does not exist
    "empty",             # no text at all once read
    "unreadable",        # the file could not be read or parsed (permissions, a broken PDF...)
]
SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """One file that was left out of an index, and why.

    Attributes:
        path: The file as found under the indexed path (joined to it as given).
        reason: What kept it out; a program branches on this.
        detail: A human sentence for the same reason (sizes, the error seen).
    """

    path: str
    reason: SkipReason
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        """``{"path", "reason", "detail"}``, as ``reactive-rag index --json`` prints it."""
        return {"path": self.path, "reason": self.reason, "detail": self.detail}
