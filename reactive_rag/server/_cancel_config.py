"""``[cancels]``: how soon a cancel sent to another replica reaches this one.

Its own module (no server imports) so that ``_config`` can hold it without a cycle::

    [cancels]
    poll_s = 0.25   # while runs go on here, look for cancels other replicas recorded
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CancelConfig"]


class CancelConfig(BaseModel):
    """How this server takes the cancels that other replicas recorded for its runs.

    A cancel sent to a replica that is not running the run is recorded in the
    shared store; the owner looks for them every ``poll_s`` while it has runs
    going (an idle server asks the store nothing), so one acts within about
    ``poll_s`` plus one store round trip.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    poll_s: float = Field(default=0.25, gt=0, le=1.0, allow_inf_nan=False)
    """Seconds between looks while runs go on here (at most 1: cancels act within 1 s)."""
