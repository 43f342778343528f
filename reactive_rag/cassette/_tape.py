"""What the taped providers, fetchers and chat models need of a cassette (a protocol).

The wrappers record into, and replay from, a :class:`~reactive_rag.cassette.Cassette`;
typing them by this protocol keeps them below the cassette that builds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from actors.providers import HealthChange

from ._format import Interaction, InteractionKind

__all__ = ["Tape"]

_T = TypeVar("_T")


class Tape(Protocol):
    """A recording (``mode == "record"``) or a recording being replayed."""

    mode: Literal["record", "replay"]

    def add(self, kind: InteractionKind, key: Mapping[str, Any], *,
            response: Mapping[str, Any] | None = None, error: BaseException | None = None,
            cancelled: bool = False, health: Sequence[HealthChange] = (),
            deltas: Sequence[str] = (), elapsed_s: float = 0.0) -> Interaction: ...

    def recall(self, kind: InteractionKind, key: Mapping[str, Any]) -> Interaction | None: ...

    async def take(self, kind: InteractionKind, key: Mapping[str, Any], *,
                   provider: str = "") -> Interaction: ...

    async def tape(self, kind: InteractionKind, key: Mapping[str, Any], call: Awaitable[_T],
                   encode: Callable[[_T], Mapping[str, Any]], *,
                   deltas: Sequence[str] = ()) -> _T: ...

    async def outcome(self, interaction: Interaction,
                      error_root: type[Exception]) -> Mapping[str, Any]: ...
