"""``[observability]`` in the server: every run's spans exported over OTLP/HTTP.

:func:`configure_traces` runs in ``create_app`` (a header variable that is not set
stops ``serve`` before anything opens); :func:`open_traces` starts the export when the
app starts and gives the tracer the run manager attaches to each run, with the run's
tenant on its root span; :func:`close_traces` sends what is queued once the runs ended.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from reactive_rag.observability import RunTracer, TraceExport

from ._config import ServerConfig
from ._exceptions import ConfigError
from ._requests import MANAGER_KEY

__all__ = ["TRACES_KEY", "close_traces", "configure_traces", "open_traces"]

TRACES_KEY = web.AppKey("traces", TraceExport)
TENANT_ATTRIBUTE = "reactive_rag.tenant"


def configure_traces(app: web.Application, config: ServerConfig,
                     env: Mapping[str, str] | None = None) -> None:
    """Build the export ``[observability]`` asks for (nothing without the table).

    Raises:
        ConfigError: a variable named in ``headers_env`` is not set in ``env``.
    """
    if config.observability is None:
        return
    try:
        app[TRACES_KEY] = TraceExport.from_config(config.observability,
                                                  os.environ if env is None else env)
    except ValueError as exc:
        raise ConfigError(f"[observability] {exc}") from exc


def open_traces(app: web.Application) -> list[RunTracer]:
    """Start exporting; the run observers to add (none without ``[observability]``)."""
    export = app.get(TRACES_KEY)
    if export is None:
        return []

    def tenant(run_id: str) -> Mapping[str, Any]:
        manager = app.get(MANAGER_KEY)  # it attaches observers once the run is in .active
        active = manager.active.get(run_id) if manager is not None else None
        return {TENANT_ATTRIBUTE: active.tenant} if active is not None else {}

    return [export.open(tenant)]


async def close_traces(app: web.Application) -> None:
    """Send the spans still queued (the runs' last ones) and stop exporting."""
    export = app.get(TRACES_KEY)
    if export is not None:
        await export.aclose()
