"""``[retention]``: how long each tenant's ended runs are kept before the sweeper deletes them.

Its own module (no server imports) so that ``_config`` can hold it without a cycle::

    [retention]
    days = 30                 # every tenant: ended runs are kept 30 days (unset: forever)
    sweep_interval_s = 3600   # how often the sweeper looks
    batch = 500               # runs deleted per store call
    [retention.tenants]       # per tenant, in days, over ``days``
    acme = 7
    old-customer = 1          # also a tenant no longer configured: its runs are still stored
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DAY_S", "RetentionConfig"]

DAY_S = 86400.0

_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

Days = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class RetentionConfig(BaseModel):
    """How long ended runs are kept, per tenant; the sweeper deletes the older ones.

    A run's age is the time since it last changed (its ``updated`` time: for
    an ended run, when it ended). Running runs are never deleted, whatever
    their age.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    days: Days | None = None
    """Every tenant's period; ``None`` (default): runs are kept until deleted."""
    tenants: dict[str, Days] = Field(default_factory=dict)
    """Tenant name -> its own period in days (over ``days``); any stored tenant's name."""
    sweep_interval_s: float = Field(default=3600.0, gt=0, allow_inf_nan=False)
    """How often the sweeper runs (and once at start-up)."""
    batch: int = Field(default=500, ge=1, le=100_000)
    """Runs deleted per store call (each call is one short transaction)."""

    @field_validator("tenants")
    @classmethod
    def _names(cls, value: dict[str, float]) -> dict[str, float]:
        for name in value:
            if not _TENANT.match(name):
                raise ValueError(f"invalid tenant name {name!r}")
        return value

    def periods(self, tenants: Iterable[str]) -> dict[str, float]:
        """Tenant -> seconds its ended runs are kept, for those with a period.

        ``tenants``: the configured ones (they get ``days``); every tenant named
        in ``[retention.tenants]`` is in the answer too.
        """
        out = {} if self.days is None else dict.fromkeys(tenants, self.days * DAY_S)
        out.update({name: days * DAY_S for name, days in self.tenants.items()})
        return {name: s for name, s in out.items() if math.isfinite(s)}
