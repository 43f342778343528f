"""A client of a remote reactive_rag server, with the in-process API's shape.

``await client.ask(question)`` returns the :class:`~reactive_rag.engine.RunResult` the
engine would (rebuilt from the run's events), ``async for event in client.stream(question)``
yields the same typed events as ``async for event in handle``, and
``client.events(run_id, after=N)`` follows a stored or live run, resuming by itself
when the connection drops. Errors are typed from the server's JSON problems.
"""

from ._client import RemoteClient, RemoteRun
from ._errors import (
    ClientError,
    Forbidden,
    InvalidRequest,
    NotFound,
    ProtocolError,
    RateLimited,
    RemoteError,
    ServerUnreachable,
    StreamGap,
    Unauthorized,
    Unavailable,
)
from ._models import CitedSource, RunSummary
from ._retry import RetryPolicy

__all__ = [
    "CitedSource",
    "ClientError",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "ProtocolError",
    "RateLimited",
    "RemoteClient",
    "RemoteError",
    "RemoteRun",
    "RetryPolicy",
    "RunSummary",
    "ServerUnreachable",
    "StreamGap",
    "Unauthorized",
    "Unavailable",
]
